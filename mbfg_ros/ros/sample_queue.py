"""The estimator node's input queue: the readings of the messages it took, until the intake takes them.

The node decodes the messages waiting on a topic into readings and puts them here; its
estimation step takes everything queued at once, in header-stamp order (the node does both in
one thread, so the queue holds at most one wake-up's readings; it is thread-safe all the same).
Every reading is accounted for per topic: queued, processed, or dropped because the queue was
full (``max_size``; the node reports drops as an ERROR on /diagnostics, never silently).
"""
from __future__ import annotations

import threading
from collections import Counter
from typing import NamedTuple

import numpy as np


class QueuedReading(NamedTuple):
    """One reading waiting for the estimator: its topic, sensor name, header stamp (ns since the
    Unix epoch, or the clock's time base), value, and when the node received it (ns, node clock).
    (A named tuple: one is built per reading, thousands a second.)"""
    topic: str
    sensor: str
    stamp_ns: int
    value: np.ndarray
    receive_ns: int


def _stamp(r: QueuedReading) -> int:
    return r[2]


class SampleQueue:
    """Thread-safe FIFO of readings with per-topic counters (messages, readings, drops)."""

    def __init__(self, max_size: int = 100_000) -> None:
        if max_size < 1:
            raise ValueError(f"max_size must be >= 1 (value: {max_size})")
        self.max_size = int(max_size)
        self._items: list[QueuedReading] = []
        self._cond = threading.Condition()
        self.messages: Counter = Counter()      # messages received per topic
        self.queued: Counter = Counter()        # readings queued per topic
        self.processed: Counter = Counter()     # readings the worker took (into the intake) per topic
        self.dropped: Counter = Counter()       # readings dropped because the queue was full
        self.peak = 0                           # the largest queue length seen
        self._closed = False

    def __len__(self) -> int:
        with self._cond:
            return len(self._items)

    def put(self, topic: str, readings: list[QueuedReading], messages: int = 1) -> int:
        """Queue the readings of ``messages`` messages of ``topic``; returns how many were dropped."""
        with self._cond:
            self.messages[topic] += messages
            room = self.max_size - len(self._items)
            take = readings[:max(room, 0)]
            drop = len(readings) - len(take)
            self._items.extend(take)
            self.queued[topic] += len(take)
            if drop:
                self.dropped[topic] += drop
            self.peak = max(self.peak, len(self._items))
            if take:
                self._cond.notify()
            return drop

    def take_all(self, timeout: float | None = None) -> list[QueuedReading]:
        """Everything queued, sorted by stamp (stable: equal stamps keep arrival order); waits up
        to ``timeout`` s for the first reading (an empty list when none came or after close)."""
        with self._cond:
            if not self._items and not self._closed:
                self._cond.wait(timeout)
            items, self._items = self._items, []
        items.sort(key=_stamp)
        return items

    def mark_processed(self, items: list[QueuedReading]) -> None:
        counts = Counter(r[0] for r in items)
        with self._cond:
            self.processed.update(counts)

    def close(self) -> None:
        """Wake the worker for good (shutdown)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed

    def figures(self) -> dict[str, int]:
        """Totals for diagnostics: messages, queued, processed, dropped, waiting, peak."""
        with self._cond:
            return {"messages": sum(self.messages.values()), "queued": sum(self.queued.values()),
                    "processed": sum(self.processed.values()), "dropped": sum(self.dropped.values()),
                    "waiting": len(self._items), "peak": self.peak}
