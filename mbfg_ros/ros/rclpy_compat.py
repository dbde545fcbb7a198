"""What differs between the ROS 2 distributions' rclpy that mbfg_ros uses, in one place.

Tested: Kilted (rclpy 9.1) and Jazzy (rclpy 7.1) from PyPI (``make test ROS_DISTRO=jazzy``), and
Humble (rclpy 3.3) through its import fallback in a real process (test/ros/test_rclpy_compat.py).

- The subscription event classes (``SubscriptionEventCallbacks``, ``UnsupportedEventTypeError``)
  are in ``rclpy.event_handler`` since Iron; Humble has them in ``rclpy.qos_event``, which Jazzy
  and Kilted keep only as an alias that warns on import, so it is the fallback, not the first try.

The same in all three, so nothing here: the QoS policy enums (``ReliabilityPolicy``,
``DurabilityPolicy``, ``HistoryPolicy``; their ``QoS*Policy`` aliases are the deprecated ones),
publishing serialized bytes, ``rclpy.init(domain_id=...)``, ``rclpy.try_shutdown`` and the
executor's ``sub.handle.take_message``.

- The events executor (``rclpy.experimental.EventsExecutor``, Kilted and Jazzy's late patch
  releases) is not used: under Kilted's the estimator node, which paces its intake through a
  callback group and a timer (:mod:`~mbfg_ros.ros.paced_intake`), published nothing (measured),
  Jazzy's delivered 17 of 50 messages and 19 of 100 timer ticks of a raw subscription and a
  steady-clock timer in a second, and Kilted's ``spin()`` does not give the GIL up while it waits.
  :func:`node_executor` gives ``SingleThreadedExecutor``, whose ``spin_once`` :func:`spin` loops on.
"""
from __future__ import annotations

import math

try:
    from rclpy.event_handler import SubscriptionEventCallbacks, UnsupportedEventTypeError
except ImportError:           # Humble: the same classes in rclpy.qos_event (renamed in Iron)
    from rclpy.qos_event import SubscriptionEventCallbacks, UnsupportedEventTypeError


def node_executor():
    """A new executor for one node's thread: rclpy's ``SingleThreadedExecutor`` (module docstring)."""
    from rclpy.executors import SingleThreadedExecutor
    return SingleThreadedExecutor()


def spin(executor, context=None) -> None:
    """Spin ``executor`` until ``context`` (rclpy's default) shuts down, as ``executor.spin()``
    does, through ``spin_once`` with a timeout (it sees a shutdown within :data:`SPIN_TIMEOUT`)."""
    import rclpy
    while rclpy.ok(context=context):
        executor.spin_once(timeout_sec=SPIN_TIMEOUT)


SPIN_TIMEOUT = 0.1
"""s: longest :func:`spin` waits in one ``spin_once`` (how soon it sees a shutdown)."""


__all__ = ["SubscriptionEventCallbacks", "UnsupportedEventTypeError", "node_executor", "spin",
           "take_waiting", "take_all"]


def take_waiting(sub):
    """The next message waiting on subscription ``sub`` (CDR bytes on a raw one), or None when
    none waits or ``sub`` was destroyed (a type switch)."""
    raws, _ = take_all(sub, 1)
    return raws[0] if raws else None


def take_all(sub, most: float = math.inf) -> tuple[list, list[int]]:
    """Up to ``most`` messages waiting on subscription ``sub`` (CDR bytes on a raw one), with the
    time each was received (ns, system clock, set by the middleware; 0 where it does not say).
    Nothing once ``sub`` is destroyed (a type switch). Same call as the executor's
    (``sub.handle.take_message``), under one hold of the handle."""
    raws: list = []
    received: list[int] = []
    try:
        with sub.handle:
            take = sub.handle.take_message
            msg_type, raw = sub.msg_type, sub.raw
            while len(raws) < most:
                taken = take(msg_type, raw)
                if taken is None:
                    break
                raws.append(taken[0])
                received.append(int(taken[1].get("received_timestamp", 0) or 0))
    except Exception:                                    # noqa: BLE001 (destroyed)
        pass
    return raws, received
