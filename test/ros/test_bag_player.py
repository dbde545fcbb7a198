"""The pip environment's bag player: its read-ahead keeps the order, hands on the reader's error
and stops its thread when playing stops early (the players themselves run in the node tests)."""
from __future__ import annotations

import threading
import time

import pytest

from mbfg_ros.ros.bag_player import read_ahead


def test_read_ahead_keeps_the_order_and_reads_ahead():
    read = []

    def items():
        for i in range(50):
            read.append(i)
            yield i

    got = read_ahead(items(), size=10)
    assert next(got) == 0 and len(read) >= 10                 # the first comes once the queue is full
    deadline = time.monotonic() + 5.0
    while len(read) < 11 and time.monotonic() < deadline:    # the thread refills it meanwhile
        time.sleep(0.01)
    assert 11 <= len(read) <= 12                              # (10 queued, one taken, one waiting)
    assert [0, *got] == list(range(50))
    assert list(read_ahead(iter([]))) == []                   # an empty bag


def test_the_readers_error_comes_through_in_order():
    def items():
        yield 1
        yield 2
        raise OSError("chunk 3 is damaged")

    got = read_ahead(items())
    assert next(got) == 1 and next(got) == 2
    with pytest.raises(OSError, match="chunk 3"):
        next(got)


def test_stopping_early_ends_the_reading_thread():
    def items():
        i = 0
        while True:
            yield i
            i += 1

    before = threading.active_count()
    for i in read_ahead(items(), size=5):
        if i == 3:
            break
    deadline = time.monotonic() + 5.0
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert threading.active_count() == before
