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
  patch releases (7.1.5 and 7.1.6 have it, 7.1.3 not), absent in Humble. Jazzy's is not usable
  here: with a raw subscription and a steady-clock timer it delivered 17 of 50 messages and 19 of
  100 timer ticks in a second, and the estimator node under it took nothing. :func:`node_executor`
  gives ``SingleThreadedExecutor``, or the events executor with the environment variable
  ``MBFG_EXECUTOR=events`` from rclpy 9 (Kilted) on: it took 40 % off the estimator node's CPU
  on a quiet machine, but a live test failed under it on a loaded one (README "The live node").
  Its ``spin()`` (Kilted's rclpy 9.1) does not give the GIL up while it waits: another thread of the process never runs again
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
"""Environment variable: ``single`` (the default) or ``events`` (from rclpy 9 on)."""


EVENTS_EXECUTOR_FROM = 9
"""rclpy major version (Kilted) from which :func:`node_executor` uses the events executor."""


def _rclpy_major() -> int:
    """rclpy's major version from its package metadata (0 when unknown, e.g. a source build)."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return int(version("rclpy").split(".")[0])
    except (PackageNotFoundError, ValueError):
        return 0


def node_executor():
    """A new executor for one node's thread: ``SingleThreadedExecutor``, or the events executor
    with ``MBFG_EXECUTOR=events`` from rclpy 9 on (see the module docstring)."""
    from rclpy.executors import SingleThreadedExecutor
    want = os.environ.get(EXECUTOR_ENV, "single").strip().lower()
    if want not in ("events", "single"):
        raise ValueError(f"{EXECUTOR_ENV}={want!r}: expected events or single")
    if want == "events" and EventsExecutor is not None and _rclpy_major() >= EVENTS_EXECUTOR_FROM:
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


__all__ = ["SubscriptionEventCallbacks", "UnsupportedEventTypeError", "EventsExecutor", "node_executor", "spin",
           "take_waiting", "take_waiting_with_info"]


def take_waiting(sub):
    """The next message waiting on subscription ``sub`` (CDR bytes on a raw one), or None when
    none waits or ``sub`` was destroyed (a type switch). Same call as the executor's
    (``sub.handle.take_message``)."""
    taken = take_waiting_with_info(sub)
    return None if taken is None else taken[0]


def take_waiting_with_info(sub):
    """(message, message info) of the next message waiting on ``sub``, or None (as
    :func:`take_waiting`); the info is rclpy's dict with ``source_timestamp`` and
    ``received_timestamp`` (ns, set by the middleware)."""
    try:
        with sub.handle:
            return sub.handle.take_message(sub.msg_type, sub.raw)
    except Exception:                                    # noqa: BLE001 (destroyed)
        return None
