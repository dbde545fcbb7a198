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
    """Every sensor name of the config and ``command:<joint>`` for every known-input joint."""
    return ([e.config.name for e in mech.encoders] + [g.config.name for g in mech.gyros]
            + [c.config.name for c in mech.load_cells] + [command_channel(j) for j in mech.known_input_joints])


def load_cell_frame(mech: Mechanism, k: int) -> str:
    """Frame name of load cell k's axis (the frame_id of its messages, a TF frame; the frame of
    its estimated reading on ``~/forces/<cell>``): its ``frame``, else the closure's frame_b,
    else the joint's child link (joint and actuator cells); a joint named as the frame is its
    child link. Never a joint name."""
    cell = mech.load_cells[k]
    if cell.config.frame:
        return mech.tf_frame(cell.config.frame)
    if cell.config.measures == "closure":
        return mech.closure_configs[cell.closure].frame_b
    child = {j.name: j.child for j in mech.urdf.joints}
    return child[cell.config.joint]
