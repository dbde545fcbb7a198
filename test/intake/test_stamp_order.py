"""StampOrder: readings of several topics in arrival order in, header-stamp order out (the node's
per-topic watermark, shared with replay)."""
from __future__ import annotations

from mbfg_ros.intake.stamp_order import DEFAULT_PERIOD_NS, StampOrder, topic_periods_ns

MS = 1_000_000
PERIODS = {"/enc": 1 * MS, "/cell": 5 * MS}


def push(order: StampOrder, topic: str, stamp_ms: float, now_ms: float) -> list[float]:
    """Push one reading (its item: its stamp in ms) and release what is due."""
    order.push(topic, int(round(stamp_ms * MS)), stamp_ms, int(round(now_ms * MS)))
    return order.release(int(round(now_ms * MS)))


def test_interleaved_topics_come_out_in_stamp_order():
    """The load cell's messages arrive 4 ms after their stamp, the encoder's at once: every
    encoder reading waits for the cell's next one, none goes out of order."""
    order = StampOrder(PERIODS, window=0.5)
    out = push(order, "/cell", 5.0, 9.0)                   # the cell is active from the start
    for ms in range(10, 60):
        out += push(order, "/enc", ms, ms)
        if ms % 5 == 4:
            out += push(order, "/cell", ms - 4, ms)
    out += order.drain()
    assert out == sorted(out) and len(out) == 1 + 50 + 10
    assert not order.out_of_order and len(order) == 0


def test_a_reading_waits_for_an_active_topic_at_most_the_window():
    order = StampOrder(PERIODS, window=0.010, silence_timeout=0.5)
    assert push(order, "/enc", 0.0, 0.0) == []              # at the start the cell is waited for too
    assert push(order, "/cell", 0.0, 0.0) == [0.0, 0.0]
    assert push(order, "/enc", 7.0, 7.0) == []              # the cell may still send 1..6 ms
    assert order.release(16 * MS) == []
    assert order.release(17 * MS) == [7.0]                 # 10 ms after it arrived
    assert push(order, "/enc", 400.0, 400.0) == []          # the cell is still active (0.5 s)
    assert order.release(410 * MS) == [400.0]
    assert push(order, "/enc", 600.0, 600.0) == [600.0]     # silent for 0.5 s: not waited for


def test_a_reading_older_than_the_released_ones_goes_out_and_is_counted():
    order = StampOrder(PERIODS, window=0.010)
    out = []
    for ms in range(0, 40):
        out += push(order, "/enc", ms, ms)
    out += order.release(100 * MS)                          # (the cell, never heard of: the window)
    assert out == list(range(0, 40))
    assert push(order, "/cell", 3.0, 40.0) == [3.0]        # 36 ms older than the newest released
    assert order.out_of_order == {"/cell": 1}


def test_a_topic_that_starts_late_is_waited_for_at_most_the_window():
    """The cell's first message comes 4 ms after the encoder's first: nothing goes out of order;
    a topic that never sends holds the others back by the window, until it counts as silent."""
    order = StampOrder(PERIODS, window=0.010)
    out = []
    for ms in range(0, 20):
        out += push(order, "/enc", ms, ms)
        if ms % 5 == 4:
            out += push(order, "/cell", ms - 4, ms)
    assert out == sorted(out) and not order.out_of_order
    order = StampOrder(PERIODS, window=0.010, silence_timeout=0.5)
    assert push(order, "/enc", 0.0, 0.0) == [] and order.release(10 * MS) == [0.0]
    assert push(order, "/enc", 499.0, 499.0) == [] and push(order, "/enc", 500.0, 500.0) == [499.0, 500.0]


def test_after_a_jump_back_the_new_time_is_reordered_again():
    """Without a restart the topics' newest stamps stay in the old time: the watermark is far
    ahead and readings of the new time go out as they arrive (out of order, and counted so)."""
    def run(restart: bool) -> tuple[list[float], dict]:
        order = StampOrder(PERIODS, window=0.5)
        for ms in range(0, 1000):
            push(order, "/enc", ms, ms)
            if ms % 5 == 4:
                push(order, "/cell", ms - 4, ms)
        order.drain()
        order.out_of_order.clear()                    # (the cell's first reading, before it was seen)
        if restart:
            order.restart()
        out = []
        for k, ms in enumerate(range(0, 50)):         # the loop again: the cell 4 ms late
            out += push(order, "/enc", ms, 1000 + k)
            if ms % 5 == 4:
                out += push(order, "/cell", ms - 4, 1000 + k)
        return out + order.drain(), dict(order.out_of_order)
    out, late = run(restart=True)
    assert out == sorted(out) and not late
    out, late = run(restart=False)
    assert out != sorted(out) and late["/cell"] == 10      # every one of the new time


def test_topic_periods_follow_the_fastest_channel(four_bar):
    assert topic_periods_ns(four_bar, {"/encoders": ["crank_encoder"], "/rocker_pin/wrench": ["rocker_pin_load"],
                                       "/commands": ["command:crank_joint"], "/other": []}) == {
        "/encoders": 1 * MS, "/rocker_pin/wrench": 5 * MS, "/commands": 1 * MS, "/other": DEFAULT_PERIOD_NS}


def test_a_new_silence_timeout_changes_how_long_a_quiet_topic_is_waited_for():
    order = StampOrder(PERIODS, window=0.010, silence_timeout=0.5)
    assert push(order, "/enc", 0.0, 0.0) == []
    assert push(order, "/cell", 0.0, 0.0) == [0.0, 0.0]
    order.set_silence_timeout(0.1)                          # (run time: silence_timeout)
    assert push(order, "/enc", 150.0, 150.0) == [150.0]     # the cell is silent after 0.1 s now


def test_after_start_over_every_topic_is_waited_for_as_at_the_start():
    """After a pause of every topic (the managed node inactive) the topics are silent, so a
    plain restart lets the first reading through at once; start_over waits for the others."""
    order = StampOrder(PERIODS, window=0.010, silence_timeout=0.5)
    assert push(order, "/enc", 0.0, 0.0) == [] and push(order, "/cell", 0.0, 0.0) == [0.0, 0.0]
    order.restart()
    assert push(order, "/cell", 5000.0, 5000.0) == [5000.0]   # silent for 5 s: not waited for
    order.start_over()
    assert push(order, "/cell", 9000.0, 9000.0) == []          # the encoder is waited for again
    assert push(order, "/enc", 8999.0, 9001.0) == [8999.0]      # older than the cell's: first
    assert order.release(9010 * MS) == [9000.0]
