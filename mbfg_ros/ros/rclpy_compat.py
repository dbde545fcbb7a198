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

- The events executor (``rclpy.experimental.EventsExecutor``) is in Kilted and in Jazzy's late
  patch releases (7.1.5 and 7.1.6 have it, 7.1.3 not), absent in Humble: :func:`node_executor` gives it
  where it exists (the ``estimator`` node spins it), ``SingleThreadedExecutor`` elsewhere or
  when the environment variable ``MBFG_EXECUTOR`` is ``single``. Its ``spin()`` (Kilted's rclpy
  9.1) does not give the GIL up while it waits: another thread of the process never runs again
  and SIGINT goes unanswered (measured: a process at 37 % CPU with an idle node that ignored
  SIGINT and SIGTERM); ``spin_once`` with a timeout does, so :func:`spin` loops on that.
"""
from __future__ import annotations

import os

try:
    from rclpy.event_handler import SubscriptionEventCallbacks, UnsupportedEventTypeError
except ImportError:           # Humble: the same classes in rclpy.qos_event (renamed in Iron)
    from rclpy.qos_event import SubscriptionEventCallbacks, UnsupportedEventTypeError

try:
    from rclpy.experimental import EventsExecutor
except ImportError:           # Humble, early Jazzy
    EventsExecutor = None

EXECUTOR_ENV = "MBFG_EXECUTOR"
"""Environment variable: ``events`` (the default where rclpy has it) or ``single``."""


def node_executor():
    """A new executor for one node's thread: the events executor where this rclpy has one
    (unless ``MBFG_EXECUTOR=single``), else ``SingleThreadedExecutor``."""
    from rclpy.executors import SingleThreadedExecutor
    want = os.environ.get(EXECUTOR_ENV, "events").strip().lower()
    if want not in ("events", "single"):
        raise ValueError(f"{EXECUTOR_ENV}={want!r}: expected events or single")
    if want == "events" and EventsExecutor is not None:
        return EventsExecutor()
    return SingleThreadedExecutor()


def spin(executor, context=None) -> None:
    """Spin ``executor`` until ``context`` (rclpy's default) shuts down, as ``executor.spin()``
    does, through ``spin_once`` (see the module docstring)."""
    import rclpy
    while rclpy.ok(context=context):
        executor.spin_once(timeout_sec=SPIN_TIMEOUT)


SPIN_TIMEOUT = 0.1
"""s: longest :func:`spin` waits in one ``spin_once`` (how soon it sees a shutdown)."""


__all__ = ["SubscriptionEventCallbacks", "UnsupportedEventTypeError", "EventsExecutor", "node_executor", "spin"]
