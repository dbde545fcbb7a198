"""Names of the estimator's input channels, and the frame a load cell's readings are in.

A channel is a config sensor (its ``name``) or a known input effort. A known input effort (a joint with ``actuation: known`` in the config's ``joints``) reaches the
estimator, the simulator's sensor synthesis and the counts as readings of the channel
``command:<joint>``: one value, the effort in N m (revolute) or N (prismatic), read from the
JointState on the joint's ``topic``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mbfg_ros.model.mechanism import Mechanism

COMMAND_PREFIX = "command:"
"""The prefix of a known input effort's channel name."""


def command_channel(joint: str) -> str:
    """The channel name of ``joint``'s known input effort."""
    return COMMAND_PREFIX + joint


def command_joint(channel: str) -> str | None:
    """The joint of a known-input channel; None for a sensor name."""
    return channel[len(COMMAND_PREFIX):] if channel.startswith(COMMAND_PREFIX) else None


def channel_names(mech: Mechanism) -> list[str]:
    """Every sensor name of the config (in the sensor kinds' order) and ``command:<joint>`` for
    every known-input joint."""
    return [s.name for s in mech.sensors] + [command_channel(j) for j in mech.known_input_joints]


def load_cell_frame(mech: Mechanism, k: int) -> str:
    """Frame name of load cell k's axis (the frame_id of its messages, a TF frame; the frame of
    its estimated reading on ``~/forces/<cell>``; the kind's rule,
    :meth:`~mbfg_ros.sensors.load_cell.LoadCellModel.header_frame`). Never a joint name."""
    return mech.load_cells[k].header_frame(mech)
