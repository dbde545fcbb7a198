"""Joint encoder: the position of one joint, sensor_msgs/JointState ``position`` by joint name.

Config section ``encoders`` (:class:`EncoderConfig`). Reading (1,): rad or m. Model y = q_j +
offset (the calibration ``offset``: an encoder whose zero is not the URDF's); residual (y - q_j(t)
- offset) / sigma, taken modulo 2 pi only for a single-turn angle encoder
(``multi_turn: false``): a multi-turn count is compared as it is, so a whole-turn slip of the
estimate shows as a 2 pi residual. The simulator adds the noise, quantises to ``resolution`` and
wraps a single-turn reading into [-pi, pi); encoders of one topic and rate are sampled together
(one JointState listing every joint).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import casadi as ca
import numpy as np

from mbfg_ros.model.config_fields import noise_field, rate_field, time_offset_field, topic_field
from mbfg_ros.model.yaml_reader import YamlNode, check_name
from mbfg_ros.sensors.base import Calibration, SensorKind, SensorModel
from mbfg_ros.sensors.joint_state import JOINT_STATE, JointStateInput


@dataclass(frozen=True)
class EncoderConfig:
    """Joint encoder: sensor_msgs/JointState on ``topic``, position of ``joint`` (rad or m).

    ``multi_turn`` (default true): the reading is a continuous count (rad since the zero, any
    number of turns: a counter or a motor drive's position), compared with the joint angle as
    it is, so a whole-turn slip of the estimate is a 2 pi residual, never hidden. False: a
    single-turn (absolute) encoder whose reading wraps into [-pi, pi); the residual is then
    taken modulo 2 pi. Prismatic joints ignore it. ``offset`` (rad or m): the reading is the
    joint position + offset (an encoder whose zero is not the URDF's; ``mbfg identify``
    estimates it). ``time_offset`` (s): the reading stamped t was taken at t - time_offset
    (:func:`~mbfg_ros.model.config_fields.time_offset_field`)."""
    name: str
    joint: str
    noise: float
    topic: str
    rate: float = 1000.0
    resolution: float = 0.0
    multi_turn: bool = True
    offset: float = 0.0
    time_offset: float = 0.0


def wrap_angle(e):
    """e wrapped to [-pi, pi) (symbolic; the derivative of the wrap is 1)."""
    return e - 2.0 * math.pi * ca.floor((e + math.pi) / (2.0 * math.pi))


@dataclass(frozen=True)
class EncoderModel(SensorModel):
    """y = q[index] + offset (+ noise); single-turn angular encoders (``multi_turn: false``) compare
    angles modulo 2 pi, multi-turn ones (the default) as they are."""
    config: EncoderConfig
    index: int                 # the joint's coordinate
    angular: bool

    kind = "encoder"
    dim = 1
    level = 0
    observes = True
    message_type = JOINT_STATE
    message_group = "encoder"
    input_type = JointStateInput
    joint_state_field = "position"

    @property
    def joint(self) -> str:
        return self.config.joint

    @property
    def wraps(self) -> bool:
        """Whether readings and residuals are taken modulo 2 pi (a single-turn angle encoder)."""
        return self.angular and not self.config.multi_turn

    def unit(self, mech) -> str:
        return "rad" if self.angular else "m"

    def axes(self) -> list[str]:
        return [self.config.joint]

    def value(self, mech, data, q, v=None, a=None, lam=None, u=None, tau=None, gravity_scale=1.0):
        return np.array([q[self.index] + self.config.offset], float)

    def values(self, mech, q, v=None, a=None, lam=None, u=None, tau=None):
        return q[:, self.index:self.index + 1] + self.config.offset

    def difference(self, r):
        return (r + np.pi) % (2 * np.pi) - np.pi if self.wraps else r

    def residual(self, sym, z, y, tau, bias):
        e = y[0] - z.q[self.index] - sym.constant(self.name, "offset", self.config.offset)
        if self.wraps:
            e = wrap_angle(e)
        return e / self.config.noise

    def calibration(self, mech):
        return [Calibration("offset", self.config.offset, self.unit(mech))]

    def sample_group(self, mech, rate: float) -> str:
        return f"encoder|{self.config.topic}|{rate!r}"

    def finish_sample(self, value, options):
        res = self.config.resolution
        if options.quantize and res > 0:
            value = np.round(value / res) * res
        if self.wraps:
            value = (value + np.pi) % (2 * np.pi) - np.pi
        return value

    def message_part(self, value):
        return {"name": self.config.joint, "position": float(value[0])}

    def facts(self, mech):
        c = self.config
        return {"name": c.name, "kind": self.kind, "joint": c.joint, "topic": c.topic,
                "rate": c.rate, "noise": c.noise, "resolution": c.resolution,
                "unit": self.unit(mech), "message": self.message_type}

    @staticmethod
    def describe(facts):
        return f"joint {facts['joint']}"


class EncoderKind(SensorKind):
    name = "encoder"
    section = "encoders"
    default_rate = 1000.0
    model = EncoderModel

    def parse(self, n: YamlNode) -> EncoderConfig:
        return EncoderConfig(name=n.str("name"), joint=n.str("joint"), noise=noise_field(n),
                             topic=topic_field(n), rate=rate_field(n, self.default_rate),
                             resolution=n.float("resolution", 0.0, nonnegative=True),
                             multi_turn=n.bool("multi_turn", True),
                             offset=n.float("offset", 0.0, unit="rad or m"),
                             time_offset=time_offset_field(n))

    def compile(self, mech, config: EncoderConfig, root: YamlNode, field: str) -> EncoderModel:
        check_name(root, f"{field}.joint", config.joint, mech.joint_names, "joint")
        j = mech.index[config.joint]
        return EncoderModel(config, j, bool(mech.angular[j]))


KIND = EncoderKind()
