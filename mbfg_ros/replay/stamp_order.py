"""Header-stamp order from a bag's receive order, over a bounded horizon.

A bag stores messages in receive (log-time) order; sensors with different transport delays
interleave out of stamp order. :class:`StampOrder` holds readings for ``horizon`` seconds of
stamp time and releases them in stamp order, like the estimator would see them on a rig whose
slowest sensor is that much late. A reading whose stamp is older than one already released is
still out of order: it is released at once (the estimator counts it late or too old) and
counted here per topic. Time jumps are found before this buffer
(:mod:`mbfg_ros.io.time_jumps`): on one, the caller drains the buffer and ``restart``s it.
"""
from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass, field
from itertools import count

from mbfg_ros.io.sensor_inputs import Reading


@dataclass
class StampOrder:
    """Reorder buffer: ``push`` readings in receive order, get them back in stamp order."""
    horizon: float                        # s of stamp time held back
    out_of_order: Counter = field(default_factory=Counter)   # topic -> readings released late

    def __post_init__(self) -> None:
        self._heap: list[tuple[int, int, str, Reading]] = []
        self._seq = count()
        self._newest: int | None = None      # ns, newest stamp pushed since the last restart
        self._released: int | None = None    # ns, newest stamp released
        self._horizon_ns = int(round(self.horizon * 1e9))

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, topic: str, reading: Reading) -> list[tuple[str, Reading]]:
        """Add one reading; return the (topic, reading) pairs now due, oldest stamp first."""
        ns = reading.stamp_ns
        if self._released is not None and ns < self._released:
            self.out_of_order[topic] += 1
            return [(topic, reading)]
        out: list[tuple[str, Reading]] = []
        heapq.heappush(self._heap, (ns, next(self._seq), topic, reading))
        if self._newest is None or ns > self._newest:
            self._newest = ns
        limit = self._newest - self._horizon_ns
        heap = self._heap
        while heap and heap[0][0] <= limit:
            ns0, _, t0, r0 = heapq.heappop(heap)
            self._released = ns0
            out.append((t0, r0))
        return out

    def restart(self) -> None:
        """A new time base (after a time jump): forget the stamps seen (call after ``drain``)."""
        self._newest = self._released = None

    def drain(self) -> list[tuple[str, Reading]]:
        """Everything held, oldest stamp first (end of the bag, or before a time jump)."""
        out = []
        while self._heap:
            ns0, _, t0, r0 = heapq.heappop(self._heap)
            self._released = ns0
            out.append((t0, r0))
        return out
