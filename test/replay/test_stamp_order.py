"""StampOrder: receive order in, header-stamp order out over a bounded horizon."""
from __future__ import annotations

import numpy as np

from mbfg_ros.io.sensor_inputs import Reading
from mbfg_ros.replay.stamp_order import StampOrder

MS = 1_000_000


def reading(ms: float, sensor: str = "s") -> Reading:
    return Reading(sensor, int(round(ms * MS)), np.array([ms]))


def stamps(pairs) -> list[float]:
    return [r.stamp_ns / MS for _, r in pairs]


def test_interleaved_topics_come_out_in_stamp_order():
    order = StampOrder(horizon=0.010)
    out = []
    # the load cell's messages arrive 4 ms late: receive order is not stamp order
    for ms in range(0, 50):
        out += order.push("/enc", reading(ms, "enc"))
        if ms >= 4 and (ms - 4) % 5 == 0:
            out += order.push("/cell", reading(ms - 4, "cell"))
    out += order.drain()
    got = stamps(out)
    assert got == sorted(got)
    assert len(got) == 50 + 10
    assert not order.out_of_order


def test_held_back_only_for_the_horizon():
    order = StampOrder(horizon=0.010)
    assert order.push("/a", reading(0.0)) == []
    assert order.push("/a", reading(5.0)) == []
    assert stamps(order.push("/a", reading(10.0))) == [0.0]
    assert stamps(order.push("/a", reading(20.0))) == [5.0, 10.0]
    assert len(order) == 1


def test_a_reading_older_than_the_released_ones_goes_through_and_is_counted():
    order = StampOrder(horizon=0.010)
    for ms in range(0, 40):
        order.push("/a", reading(ms))
    late = order.push("/b", reading(3.0))        # 36 ms older than the newest
    assert stamps(late) == [3.0]
    assert order.out_of_order == {"/b": 1}


def test_restart_after_a_drain_starts_a_new_time_base():
    order = StampOrder(horizon=0.010)
    for ms in range(0, 2000, 10):
        order.push("/a", reading(ms))
    held = order.drain()
    assert stamps(held) == [1990.0]
    order.restart()
    out = order.push("/a", reading(0.0)) + order.push("/a", reading(10.0)) + order.push("/a", reading(20.0))
    assert stamps(out) == [0.0, 10.0]
    assert order.out_of_order == {}              # not out of order: a new time base
