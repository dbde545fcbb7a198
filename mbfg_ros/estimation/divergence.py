"""Divergence test: a rolling innovation test per sensor.

After each solve the estimator evaluates, at the new estimate, the whitened residual of every
reading of the newest step (|r| / sigma, the RMS over a reading's rows) and hands them here. Per
sensor, the RMS of those residuals over the last ``window`` seconds (default 0.5 s) is the
figure; above ``limit`` sigmas (default 5) with at least ``min_readings`` readings in the window,
the sensor is **diverged**: the estimate no longer explains its readings (a whole-turn slip
against a multi-turn encoder, an integration model that cannot follow the motion, a wrong
model). A healthy estimate has an RMS near 1. Periods are kept for the replay's summary and
JSON (``start``, ``end`` in the estimator's time, s; ``peak`` sigmas); the node's /diagnostics
turns a diverged sensor ERROR (:func:`mbfg_ros.io.sensor_health.divergence_verdicts`).
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

WINDOW = 0.5          # s
LIMIT = 5.0           # sigmas
MIN_READINGS = 5
KEPT_PERIODS = 10_000
"""The newest periods kept (a node that runs for months stays bounded; ``period_count`` counts all)."""


@dataclass
class DivergencePeriod:
    """A span in which a sensor's rolling residual RMS exceeded the limit (times in s of the
    estimator's time; ``end`` None while open; ``peak`` the largest RMS, sigmas)."""
    sensor: str
    start: float
    end: float | None
    peak: float

    def as_dict(self) -> dict:
        return {"sensor": self.sensor, "start": self.start, "end": self.end, "peak_sigma": self.peak}


class _Window:
    __slots__ = ("entries", "sq", "count")

    def __init__(self) -> None:
        self.entries: deque[tuple[float, float, int]] = deque()
        self.sq = 0.0
        self.count = 0


class DivergenceMonitor:
    """Rolling whitened-residual RMS per sensor and the diverged periods (module docstring)."""

    def __init__(self, window: float = WINDOW, limit: float = LIMIT, min_readings: int = MIN_READINGS) -> None:
        self.window, self.limit, self.min_readings = float(window), float(limit), int(min_readings)
        self._w: dict[str, _Window] = {}
        self.rms: dict[str, float] = {}                 # newest rolling RMS per sensor (sigmas)
        self.open: dict[str, DivergencePeriod] = {}     # sensors diverged now
        self.periods: deque[DivergencePeriod] = deque(maxlen=KEPT_PERIODS)   # newest, open ones included
        self.period_count = 0                           # every period since the start

    def add(self, sensor: str, stamp: float, residuals) -> None:
        """Whitened residuals (sigmas, one per reading) of ``sensor``'s readings near ``stamp``."""
        n = len(residuals)
        if n == 0:
            return
        sq = float(sum(float(r) * float(r) for r in residuals))
        if not math.isfinite(sq):
            sq = 1e300
        w = self._w.get(sensor)
        if w is None:
            w = self._w[sensor] = _Window()
        w.entries.append((stamp, sq, n))
        w.sq += sq
        w.count += n
        while w.entries and w.entries[0][0] <= stamp - self.window:
            _, s0, n0 = w.entries.popleft()
            w.sq -= s0
            w.count -= n0
        if not w.entries:
            w.sq, w.count = 0.0, 0
        rms = math.sqrt(max(w.sq, 0.0) / w.count) if w.count else 0.0
        self.rms[sensor] = rms
        p = self.open.get(sensor)
        if w.count >= self.min_readings and rms > self.limit:
            if p is None:
                p = self.open[sensor] = DivergencePeriod(sensor, stamp, None, rms)
                self.periods.append(p)
                self.period_count += 1
            p.peak = max(p.peak, rms)
        elif p is not None and rms <= self.limit:
            p.end = stamp
            del self.open[sensor]

    @property
    def diverged(self) -> dict[str, float]:
        """{sensor: rolling RMS (sigmas)} of the sensors diverged now."""
        return {s: self.rms.get(s, 0.0) for s in self.open}

    def restart(self, stamp: float | None = None) -> None:
        """Close the open periods (at ``stamp``, or their last figure's time) and forget the
        windows: after a reset the estimator starts over."""
        for s, p in self.open.items():
            last = self._w[s].entries[-1][0] if s in self._w and self._w[s].entries else p.start
            p.end = stamp if stamp is not None else last
        self.open.clear()
        self._w.clear()
        self.rms.clear()

    def diverged_at(self, t) -> np.ndarray:
        """Whether any sensor was diverged at each time of ``t`` (closed periods [start, end],
        open ones from their start on)."""
        t = np.asarray(t, float)
        out = np.zeros(t.shape, bool)
        for p in self.periods:
            end = math.inf if p.end is None else p.end
            out |= (t >= p.start) & (t <= end)
        return out
