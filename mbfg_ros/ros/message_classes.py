"""rclpy message classes by ROS type name ("sensor_msgs/msg/JointState" -> the class)."""
from __future__ import annotations

import importlib
from functools import lru_cache


@lru_cache(maxsize=None)
def message_class(msgtype: str):
    """The rclpy (rosidl) class of ``msgtype``, e.g. ``geometry_msgs/msg/WrenchStamped``.

    Raises LookupError naming the type when its package is not installed."""
    try:
        package, kind, name = msgtype.split("/")
    except ValueError:
        raise LookupError(f"not a ROS type name: {msgtype!r} (expected package/msg/Name)") from None
    try:
        module = importlib.import_module(f"{package}.{kind}")
        return getattr(module, name)
    except (ImportError, AttributeError):
        raise LookupError(f"the message type {msgtype} is not installed (python package "
                          f"{package})") from None
