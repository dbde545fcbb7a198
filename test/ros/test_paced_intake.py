"""mbfg_ros.ros.paced_intake: the sensor subscriptions out of the executor's wait set while data
flows (taken in bulk with their receive times instead), back in it when idle; the intake's
burst schedule. The subscriptions are real (rclpy, Fast DDS) in a process of their own."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from mbfg_ros.ros.paced_intake import BURST, ArrivalClock, IntakeSchedule, receive_times, topic_leads_ns
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


def test_a_tick_is_aimed_at_most_a_period_ahead_and_retried_soon_when_late():
    schedule = IntakeSchedule(0.004)
    schedule.next = 10.004
    schedule.aim(None, 10.0)                          # nothing known: the period's tick stays
    assert schedule.next == 10.004
    schedule.aim(10.001, 10.0)
    assert schedule.next == 10.001
    schedule.aim(10.1, 10.0)                          # never more than a period ahead
    assert schedule.next == pytest.approx(10.004)
    schedule.aim(9.99, 10.0)                          # due already (the readings are late)
    assert schedule.next == pytest.approx(10.0 + IntakeSchedule.RETRY * 0.004)


def test_the_arrival_clock_waits_for_every_live_topics_next_stamp():
    import time
    ms = 1_000_000
    clock = ArrivalClock({"/enc": 1 * ms, "/cell": 5 * ms})
    now = 100.0
    assert clock.arrival(10_000 * ms, now) is None    # nothing heard yet
    received = time.time_ns() - 1 * ms                # both delivered 1 ms ago, stamped s0
    s0 = 10_000 * ms
    clock.note("/enc", s0, received, now)
    clock.note("/cell", s0, received, now)
    # stamp s0 + 2.5 ms: the encoder's s0 + 3 ms (2 ms from now), the load cell's s0 + 5 ms (4 ms)
    assert clock.arrival(s0 + 5 * ms // 2, now) == pytest.approx(now + 0.004, abs=0.002)
    assert clock.arrival(s0, now) < now               # delivered already
    clock.note("/cell", s0 + 5 * ms, received + 5 * ms - ms // 2, now)   # a faster delivery
    assert clock.arrival(s0 + 9 * ms, now) == pytest.approx(now + 0.0075 + 0.001, abs=0.002)
    later = now + 2 * ArrivalClock.LIVE               # only the encoder still heard: the load
    clock.note("/enc", s0 + 10 * ms, received + 10 * ms, later)      # cell is not waited for
    assert clock.arrival(s0 + 12 * ms, later) == pytest.approx(later + 0.011, abs=0.002)
    clock.restart()                                   # a time jump: nothing known
    assert clock.arrival(s0, now) is None


def test_the_arrival_clock_waits_only_for_the_messages_due_in_the_keyframe():
    """With the estimator's leads (:func:`topic_leads_ns`), a 200 Hz load cell's next message is
    not waited for by a stamp it does not fall before (its newest stamp plus 3/4 of its period is
    past it); a command topic is waited for until it reports past the stamp."""
    import time
    ms = 1_000_000
    periods = {"/enc": 1 * ms, "/cell": 5 * ms, "/cmd": 1 * ms}
    leads = topic_leads_ns(periods, {"/enc": ("enc",), "/cell": ("cell",), "/cmd": ("command:j",)})
    assert leads == {"/enc": 750_000, "/cell": 3_750_000, "/cmd": 0}
    clock = ArrivalClock({"/enc": 1 * ms, "/cell": 5 * ms}, leads)
    now, s0 = 100.0, 10_000 * ms
    received = time.time_ns() - 1 * ms                # both delivered 1 ms ago, stamped s0
    clock.note("/enc", s0, received, now)
    clock.note("/cell", s0, received, now)
    # stamp s0 + 2.5 ms: the encoder's s0 + 2 ms (1 ms from now); the load cell's s0 + 5 ms falls
    # in a later keyframe (without leads: 4 ms from now)
    assert clock.arrival(s0 + 5 * ms // 2, now) == pytest.approx(now + 0.001, abs=0.0005)
    # stamp s0 + 5 ms: the load cell's s0 + 5 ms is due in it
    assert clock.arrival(s0 + 5 * ms, now) == pytest.approx(now + 0.004, abs=0.0005)
