"""sensor_msgs/msg/Imu as sensor input, and what its sensors share: a mount on a link or frame.

An Imu message carries a gyro's ``angular_velocity`` and an accelerometer's
``linear_acceleration`` (x, y, z in the sensor frame, each with its 3x3 covariance). A topic may
feed one gyro and one accelerometer, as a real IMU publishes both in one message: each message
then gives a reading of each (the gyro's first), so both must have the same ``rate`` and the same
``frame_id`` (one header). The frame and the noises come from the config; a message whose
header.frame_id, or whose covariance on a sensor's measured axes (more than 5 % off; all zeros
means unknown, REP 145, and is fine), disagrees is used all the same and counted per topic and
reason (the node warns once per topic and reason).

:class:`ImuModel` is the compiled part both kinds share: the mount (``frame``, ``rotation_rpy``,
the measured ``axes``), the header frame_id, an optional bias per measured axis (estimated as a
random walk of ``bias_instability`` from a prior of ``bias_sigma``), its tuning hook.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import casadi as ca
import numpy as np
import pinocchio as pin

from mbfg_ros.model.config_fields import AXES, axes_field, noise_field, rate_field, time_offset_field, topic_field
from mbfg_ros.model.yaml_reader import YamlNode
from mbfg_ros.sensors.base import InputReport, Reading, ReadingRows, SensorModel, TopicInput, stamp_ns

IMU = "sensor_msgs/msg/Imu"
AXIS_INDEX = {"x": 0, "y": 1, "z": 2}

NOISE_TOLERANCE = 0.05
"""Relative difference between an Imu's standard deviation and the config's noise that is
reported (the message's covariance rounded, a unit slip, a different sensor)."""


@dataclass(frozen=True)
class ImuSensorConfig:
    """The fields of an Imu sensor (a gyro's, an accelerometer's): mounted on ``frame`` turned by
    ``rotation_rpy`` (roll, pitch, yaw in rad, URDF convention), measuring ``axes`` of its frame
    with ``noise``; a bias random walk of ``bias_instability`` per sqrt(s) from a prior of
    ``bias_sigma`` (both 0: no bias estimated); its messages' header ``frame_id``; ``time_offset``
    (s): its reading stamped t was taken at t - time_offset."""
    name: str
    frame: str
    noise: float
    topic: str
    rate: float = 400.0
    rotation_rpy: tuple[float, float, float] = (0.0, 0.0, 0.0)
    axes: tuple[str, ...] = AXES
    bias_instability: float = 0.0
    bias_sigma: float = 0.0
    frame_id: str = ""
    time_offset: float = 0.0


def parse_imu_sensor(n: YamlNode, config_type: type, default_rate: float, **fields):
    """One item of an Imu sensor section (``gyros``, ``accelerometers``): every field of the
    mount, the noise and the bias; ``frame_id`` defaults to the sensor's name; ``fields``: the
    kind's own (read by the caller)."""
    name = n.str("name")
    axes = axes_field(n)
    return config_type(name=name, frame=n.str("frame"), noise=noise_field(n),
                       topic=topic_field(n), rate=rate_field(n, default_rate),
                       rotation_rpy=n.vector("rotation_rpy", 3, (0.0, 0.0, 0.0)),
                       axes=axes,
                       bias_instability=n.float("bias_instability", 0.0, nonnegative=True),
                       bias_sigma=n.float("bias_sigma", 0.0, nonnegative=True),
                       frame_id=n.str("frame_id", name), time_offset=time_offset_field(n), **fields)


def compile_mount(mech, config, root: YamlNode, field: str) -> tuple[int, np.ndarray, np.ndarray]:
    """(pinocchio frame id, mounting rotation R_mount (sensor axes in the frame), measured rows)."""
    fid = mech.frame_id(config.frame, root, f"{field}.frame")
    return fid, pin.rpy.rpyToMatrix(*config.rotation_rpy), np.array([AXIS_INDEX[a] for a in config.axes], dtype=int)


@dataclass(frozen=True)
class ImuModel(SensorModel):
    """A sensor of an Imu message mounted on ``frame_id`` (a pinocchio frame) turned by
    ``R_mount``, measuring the axes ``rows`` of its frame; a subclass says which field
    (``imu_field``) and how it is predicted."""
    config: ImuSensorConfig
    frame_id: int
    R_mount: np.ndarray
    rows: np.ndarray          # selected axes (indices 0..2)

    dim = 3
    message_type = IMU
    message_group = "imu"
    input_type: ClassVar[type] = None          # ImuInput, set below
    imu_field: ClassVar[str] = ""              # angular_velocity | linear_acceleration
    imu_label: ClassVar[str] = ""              # angular velocity | linear acceleration

    @property
    def residual_rows(self) -> int:
        return len(self.rows)

    def measured(self, y):
        return y[..., self.rows]

    def axes(self) -> list[str]:
        return ["xyz"[a] for a in self.rows]

    @property
    def bias_dim(self) -> int:
        c = self.config
        return len(self.rows) if (c.bias_sigma > 0 or c.bias_instability > 0) else 0

    @property
    def bias_sigma(self) -> float:
        return self.config.bias_sigma

    @property
    def bias_instability(self) -> float:
        return self.config.bias_instability

    def predicted(self, sym, z):
        """The measured axes' prediction at the state ``z`` (SX, without the bias)."""
        raise NotImplementedError

    def residual(self, sym, z, y, tau, bias):
        e = ca.vertcat(*[y[int(i)] for i in self.rows]) - self.predicted(sym, z)
        if bias is not None:
            e = e - bias
        return e / self.config.noise

    def header_frame(self, mech) -> str:
        return self.config.frame_id or self.config.name

    def sample_group(self, mech, rate: float) -> str:
        """An Imu topic's sensors are sampled together, in the group of its gyro (or its own)."""
        first = next(s for s in mech.sensors if isinstance(s, ImuModel) and s.config.topic == self.config.topic)
        return f"{first.kind}|{first.name}"

    def message_part(self, value):
        return {self.imu_field: np.asarray(value, float), self.imu_field + "_noise": float(self.config.noise)}

    def tuned_fields(self) -> tuple[str, ...]:
        return ("bias_instability",) if self.config.bias_instability > 0 else ()

    def facts(self, mech):
        c = self.config
        return {"name": c.name, "kind": self.kind, "frame": c.frame, "axes": list(c.axes),
                "topic": c.topic, "rate": c.rate, "noise": c.noise, "unit": self.unit(mech),
                "bias_instability": c.bias_instability, "message": self.message_type}

    @staticmethod
    def describe(facts):
        return f"frame {facts['frame']} axes {''.join(facts['axes'])}"

    def mount(self, mech):
        c = self.config
        return c.frame, c.frame_id or c.name, tuple(c.rotation_rpy)


class ImuInput(TopicInput):
    """An Imu topic: at most one sensor per field (a gyro, an accelerometer), one frame_id."""

    types = (IMU,)

    def __init__(self, topic: str) -> None:
        super().__init__(topic)
        self.models: list[ImuModel] = []

    @property
    def sensors(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.models)

    def add(self, model: ImuModel) -> None:
        for other in self.models:
            if other.imu_field == model.imu_field:
                raise ValueError(f"two {model.kind}s publish on {self.topic}")
            if (other.config.frame_id or other.name) != (model.config.frame_id or model.name):
                raise ValueError(f"{other.kind} {other.name} and {model.kind} {model.name} share the Imu "
                                 f"topic {self.topic}: one message has one header, so give them the same frame_id")
            if other.rate != model.rate:
                raise ValueError(f"{other.kind} {other.name} and {model.kind} {model.name} share the Imu "
                                 f"topic {self.topic}: every message carries both, so give them the same rate")
        self.models.append(model)
        self.models.sort(key=lambda m: m.imu_field)     # angular_velocity before linear_acceleration

    @property
    def frame_id(self) -> str:
        m = self.models[0]
        return m.config.frame_id or m.name

    def decode(self, msgtype: str, msg, receive_ns: int | None, report: InputReport) -> list[Reading]:
        ns = stamp_ns(msg)
        out = []
        for m in self.models:
            w = getattr(msg, m.imu_field)
            out.append(Reading(m.name, ns, np.array([w.x, w.y, w.z], float)))
        self._check_frame(msg.header.frame_id, 1, report)
        for m in self.models:
            cov = np.asarray(getattr(msg, m.imu_field + "_covariance"), float)
            self._check_covariance(m, cov.reshape(1, 9) if cov.size == 9 else None, 1, report)
        return out

    def decode_rows(self, msgtype: str, rows, receive_ns: np.ndarray, report: InputReport) -> list[ReadingRows]:
        stamps = rows.stamps_ns()
        out = [ReadingRows(m.name, stamps, rows.values(m.imu_field), i) for i, m in enumerate(self.models)]
        N = len(rows)
        self._check_frame(rows.template.header.frame_id, N, report)
        for m in self.models:
            key = m.imu_field + "_covariance"
            cov = rows.values(key) if len(getattr(rows.template, key)) == 9 else None
            self._check_covariance(m, cov, N, report)
        return out

    def _check_frame(self, frame: str, n: int, report: InputReport) -> None:
        if frame != self.frame_id:
            report.disagree(f"header.frame_id {frame!r} differs from the config's frame_id "
                            f"{self.frame_id!r} (the config's frame is used)", n)

    @staticmethod
    def _check_covariance(m: ImuModel, cov: np.ndarray | None, n: int, report: InputReport) -> None:
        """Count the messages whose covariance of ``m``'s field (n, 9; None: not 9 numbers)
        marks it not provided (-1 first) or gives another noise on its measured axes."""
        if cov is None:
            return
        field = m.imu_field + "_covariance"
        given = np.any(cov != 0.0, axis=1)
        missing = given & (cov[:, 0] == -1.0)
        if missing.any():
            report.disagree(f"{field}[0] = -1 marks the {m.imu_label} as not provided (it is used)",
                            int(missing.sum()))
        rest = given & ~missing
        if not rest.any():
            return
        noise = float(m.config.noise)
        std = np.sqrt(np.maximum(cov[rest][:, [4 * int(i) for i in m.rows]], 0.0))
        off = np.any(np.abs(std - noise) > NOISE_TOLERANCE * noise, axis=1)
        if not off.any():
            return
        axes = "".join("xyz"[int(i)] for i in m.rows)
        unit = m.unit(None)
        values, counts = np.unique(std[off], axis=0, return_counts=True)
        for row, k in zip(values, counts):
            report.disagree(f"{field} gives a noise of {', '.join(f'{x:.3g}' for x in row)} {unit} on "
                            f"{axes}, the config {noise:.3g} {unit} (the config's noise is used)", int(k))


ImuModel.input_type = ImuInput

__all__ = ["IMU", "ImuInput", "ImuModel", "ImuSensorConfig", "compile_mount", "parse_imu_sensor"]
