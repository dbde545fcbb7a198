"""Known input effort (a command): the effort a controller applies to a joint whose actuation is
``known``, sensor_msgs/JointState ``effort`` by joint name.

No section of its own: the config's ``joints`` section says which joints are known inputs and on
which ``topic`` (default ``joint_commands``). It reaches the estimator, the simulator and the counts
as the channel ``command:<joint>`` (:mod:`mbfg_ros.model.channels`): one value, N m (revolute)
or N (prismatic), taken as exact (no noise, no residual: the equations of motion read it). The
simulator samples it at :data:`DEFAULT_RATE` (``--rate command=HZ``), the known inputs of one
topic and rate together (one JointState).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mbfg_ros.model.channels import command_channel
from mbfg_ros.sensors.base import SensorModel
from mbfg_ros.sensors.joint_state import JOINT_STATE, JointStateInput

KIND = "command"
DEFAULT_RATE = 1000.0
"""Hz, the rate of the known-input (command) channels unless the simulator is told otherwise."""


@dataclass(frozen=True)
class KnownInput(SensorModel):
    """The known input effort of ``joint`` (coordinate ``index``), read from ``input_topic``."""
    input_joint: str
    index: int
    input_topic: str

    kind = KIND
    dim = 1
    measuring = False
    message_type = JOINT_STATE
    message_group = "command"
    input_type = JointStateInput
    joint_state_field = "effort"

    @property
    def name(self) -> str:
        return command_channel(self.input_joint)

    @property
    def topic(self) -> str:
        return self.input_topic

    @property
    def rate(self) -> float:
        return DEFAULT_RATE

    @property
    def noise(self) -> float:
        return 0.0

    @property
    def joint(self) -> str:
        return self.input_joint

    def unit(self, mech) -> str:
        return "N m" if mech.angular[self.index] else "N"

    def true_values(self, mech, trajectory, stamp: np.ndarray) -> np.ndarray:
        tau, _ = trajectory.input_efforts(stamp)
        return tau[:, self.index:self.index + 1].copy()

    def sample_group(self, mech, rate: float) -> str:
        return f"command|{self.input_topic}|{rate!r}"

    def message_part(self, value):
        return {"name": self.input_joint, "effort": float(value[0])}


def known_inputs(mech) -> list[KnownInput]:
    """The known-input channels of ``mech``, in the order of its known-input joints."""
    return [KnownInput(j, mech.index[j], mech.config.joint(j).topic) for j in mech.known_input_joints]
