"""The estimator node's input queue: stamp order, accounting, drops, wake-up on close."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from mbfg_ros.ros.sample_queue import QueuedReading, SampleQueue


def _r(topic: str, stamp: int) -> QueuedReading:
    return QueuedReading(topic, "s", stamp, np.array([0.0]), 0)


def test_take_all_returns_every_reading_in_stamp_order():
    q = SampleQueue()
    q.put("/a", [_r("/a", 30), _r("/a", 10)])
    q.put("/b", [_r("/b", 20)])
    q.put("/b", [])                                   # a message without readings is counted
    items = q.take_all(timeout=0)
    assert [r.stamp_ns for r in items] == [10, 20, 30]
    q.mark_processed(items)
    f = q.figures()
    assert f == {"messages": 3, "queued": 3, "processed": 3, "dropped": 0, "waiting": 0, "peak": 3}


def test_a_full_queue_counts_what_it_drops():
    q = SampleQueue(max_size=2)
    assert q.put("/a", [_r("/a", 1), _r("/a", 2), _r("/a", 3)]) == 1
    assert q.dropped["/a"] == 1 and q.queued["/a"] == 2 and len(q) == 2


def test_close_wakes_a_waiting_worker():
    q = SampleQueue()
    got = []
    t = threading.Thread(target=lambda: got.append(q.take_all(timeout=10)))
    t.start()
    q.close()
    t.join(timeout=2)
    assert not t.is_alive() and got == [[]] and q.closed


def test_max_size_must_be_positive():
    with pytest.raises(ValueError, match="max_size"):
        SampleQueue(0)
