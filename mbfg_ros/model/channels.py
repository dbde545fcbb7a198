"""Names of the estimator's input channels that are not a config sensor.

A known input effort (a joint with ``actuation: known`` in the config's ``joints``) reaches the
estimator, the simulator's sensor synthesis and the counts as readings of the channel
``command:<joint>``: one value, the effort in N m (revolute) or N (prismatic), read from the
JointState on the joint's ``topic``.
"""
from __future__ import annotations

COMMAND_PREFIX = "command:"
"""The prefix of a known input effort's channel name."""


def command_channel(joint: str) -> str:
    """The channel name of ``joint``'s known input effort."""
    return COMMAND_PREFIX + joint


def command_joint(channel: str) -> str | None:
    """The joint of a known-input channel; None for a sensor name."""
    return channel[len(COMMAND_PREFIX):] if channel.startswith(COMMAND_PREFIX) else None
