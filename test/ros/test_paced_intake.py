"""mbfg_ros.ros.paced_intake: the sensor subscriptions out of the executor's wait set while data
flows (taken in bulk with their receive times instead), back in it when idle; the intake's
burst schedule. The subscriptions are real (rclpy, Fast DDS) in a process of their own."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from mbfg_ros.ros.paced_intake import BURST, IntakeSchedule, receive_times
from mbfg_ros.ros.processes import ros_environment

PROBE = textwrap.dedent("""
    import time
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from std_msgs.msg import Float64
    from mbfg_ros.ros.paced_intake import PacedGroup
    from mbfg_ros.ros.rclpy_compat import take_all
    rclpy.init()
    node = rclpy.create_node("paced_probe")
    group = PacedGroup()
    called = []
    sub = node.create_subscription(Float64, "/x", lambda raw: called.append(raw), 100, raw=True,
                                   callback_group=group)
    pub = node.create_publisher(Float64, "/x", 100)
    ex = SingleThreadedExecutor()
    ex.add_node(node)
    deadline = time.monotonic() + 20
    while pub.get_subscription_count() < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    group.idle = False
    for k in range(5):
        pub.publish(Float64(data=float(k)))
    time.sleep(0.5)
    ex.spin_once(timeout_sec=0.2)                    # paced: the executor leaves them waiting
    assert not called, called
    t0 = time.time_ns()
    raws, received = take_all(sub, 3)
    assert len(raws) == 3 and all(0 < r <= t0 for r in received), received
    raws2, _ = take_all(sub, 100)
    assert len(raws2) == 2 and take_all(sub, 100) == ([], [])
    group.idle = True                                 # idle: the executor wakes on a message
    pub.publish(Float64(data=7.0))
    while not called and time.monotonic() < deadline:
        ex.spin_once(timeout_sec=0.1)
    assert len(called) == 1, called
    node.destroy_subscription(sub)
    assert take_all(sub, 10) == ([], [])              # destroyed: nothing, no error
    print("ok")
    node.destroy_node()
    rclpy.try_shutdown()
""")


@pytest.mark.ros
def test_paced_subscriptions_wait_for_the_intake(tmp_path):
    out = subprocess.run([sys.executable, "-c", PROBE], env=ros_environment(tmp_path),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "ok" in out.stdout, out.stdout + out.stderr


def test_a_burst_ticks_once_per_period_and_ends():
    schedule = IntakeSchedule(BURST / 5)
    ticks = list(schedule.ticks())
    assert 1 <= len(ticks) <= 6                      # a loaded machine sleeps longer, never shorter
    if len(ticks) > 1:                                # never faster than the period on average
        assert (ticks[-1] - ticks[0]) / (len(ticks) - 1) >= schedule.period * 0.5
    again = list(schedule.ticks())                    # the next burst goes on from the schedule
    assert again and again[0] > ticks[-1]


def test_a_late_schedule_ticks_at_once_without_catching_up():
    schedule = IntakeSchedule(0.001)
    schedule.next = -1e9                              # long overdue (the node was idle)
    ticks = list(schedule.ticks())
    assert len(ticks) <= BURST / 0.001 + 1            # no storm of missed ticks


def test_receive_times_move_each_message_back_by_its_age():
    import time
    now_sys = time.time_ns()
    got = receive_times([now_sys - 5_000_000, 0], 1_000_000_000)
    assert 1_000_000_000 - 6_000_000 < got[0] <= 1_000_000_000 - 5_000_000
    assert got[1] == 1_000_000_000                    # unknown: now
