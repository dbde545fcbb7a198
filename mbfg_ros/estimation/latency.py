"""Per-keyframe update times in constant memory: a rolling window of seconds and a whole-run
histogram.

The rolling window (default the last 10 s of wall clock) is what diagnostics report, so a warning
raised by a burst clears once the burst is over; the histogram (log-spaced bins, 1.2 % wide)
gives whole-run percentiles without keeping one number per keyframe.
"""
from __future__ import annotations

import math
import time

import numpy as np

_LO_MS = 1e-3              # histogram range: 1 us .. 100 s
_BINS_PER_DECADE = 200
_DECADES = 8


class LatencyHistogram:
    """Counts of values (ms) in log-spaced bins; percentiles to within one bin (1.2 %)."""

    def __init__(self) -> None:
        self.counts = np.zeros(_BINS_PER_DECADE * _DECADES + 2, dtype=np.int64)
        self.n = 0
        self.total = 0.0
        self.max = 0.0

    def add(self, ms: float) -> None:
        if ms <= _LO_MS:
            i = 0
        else:
            i = min(int(math.log10(ms / _LO_MS) * _BINS_PER_DECADE) + 1, self.counts.size - 1)
        self.counts[i] += 1
        self.n += 1
        self.total += ms
        if ms > self.max:
            self.max = ms

    def mean(self) -> float:
        return self.total / self.n if self.n else 0.0

    def percentile(self, q: float) -> float:
        """The q-th percentile (0..100): the upper edge of the bin holding it (at most the max)."""
        if not self.n:
            return 0.0
        i = int(np.searchsorted(np.cumsum(self.counts), math.ceil(q / 100.0 * self.n)))
        edge = _LO_MS * 10.0 ** (i / _BINS_PER_DECADE)
        return min(edge, self.max)

    def reset(self) -> None:
        self.counts[:] = 0
        self.n, self.total, self.max = 0, 0.0, 0.0


class LatencyRecorder:
    """Wall and thread-CPU time per keyframe: a rolling window of ``window_s`` seconds (at most
    ``capacity`` keyframes) and whole-run histograms."""

    def __init__(self, window_s: float = 10.0, capacity: int = 32768) -> None:
        self.window_s = window_s
        # written through now: np.zeros' pages would be touched (and grow RSS) as the ring fills
        self._t = np.full(capacity, -math.inf)
        self._wall = np.full(capacity, 0.0)
        self._cpu = np.full(capacity, 0.0)
        self._i = 0
        self.wall = LatencyHistogram()
        self.cpu = LatencyHistogram()

    def add(self, wall_ms: float, cpu_ms: float, now: float | None = None) -> None:
        i = self._i % self._t.size
        self._t[i] = time.monotonic() if now is None else now
        self._wall[i] = wall_ms
        self._cpu[i] = cpu_ms
        self._i += 1
        self.wall.add(wall_ms)
        self.cpu.add(cpu_ms)

    def __len__(self) -> int:
        return self.wall.n

    def recent(self, cpu: bool = False, now: float | None = None) -> np.ndarray:
        """The times (ms) recorded within the window."""
        now = time.monotonic() if now is None else now
        sel = self._t >= now - self.window_s
        return (self._cpu if cpu else self._wall)[sel]

    def summary(self, cpu: bool = False, whole_run: bool = False,
                now: float | None = None) -> tuple[float, float, float]:
        """(mean, p99, max) in ms over the rolling window ending ``now`` (default: the monotonic
        clock, as ``add`` stamps), or over the whole run."""
        if whole_run:
            h = self.cpu if cpu else self.wall
            return h.mean(), h.percentile(99.0), h.max
        t = self.recent(cpu, now)
        if not t.size:
            return 0.0, 0.0, 0.0
        return float(t.mean()), float(np.percentile(t, 99)), float(t.max())
