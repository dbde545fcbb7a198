"""What differs between the ROS 2 distributions' rclpy that mbfg_ros uses, in one place.

Tested: Kilted (rclpy 9.1) and Jazzy (rclpy 7.1) from PyPI (``make test ROS_DISTRO=jazzy``), and
Humble (rclpy 3.3) through its import fallback in a real process (test/ros/test_rclpy_compat.py).

- The subscription event classes (``SubscriptionEventCallbacks``, ``UnsupportedEventTypeError``)
  are in ``rclpy.event_handler`` since Iron; Humble has them in ``rclpy.qos_event``, which Jazzy
  and Kilted keep only as an alias that warns on import, so it is the fallback, not the first try.

The same in all three, so nothing here: the QoS policy enums (``ReliabilityPolicy``,
``DurabilityPolicy``, ``HistoryPolicy``; their ``QoS*Policy`` aliases are the deprecated ones),
publishing serialized bytes, ``rclpy.init(domain_id=...)``, ``rclpy.try_shutdown`` and the
executor's ``sub.handle.take_message``. The events executor (``rclpy.experimental.EventsExecutor``:
in Kilted, in Jazzy's late patch releases (7.1.6 has it, 7.1.3 not), absent in Humble) is not
used: every node spins a SingleThreadedExecutor.
"""
from __future__ import annotations

try:
    from rclpy.event_handler import SubscriptionEventCallbacks, UnsupportedEventTypeError
except ImportError:           # Humble: the same classes in rclpy.qos_event (renamed in Iron)
    from rclpy.qos_event import SubscriptionEventCallbacks, UnsupportedEventTypeError

__all__ = ["SubscriptionEventCallbacks", "UnsupportedEventTypeError"]
