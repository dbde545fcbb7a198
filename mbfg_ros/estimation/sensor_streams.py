"""One input stream of the estimator: counts, duplicate stamps, innovation scale."""
from __future__ import annotations

import math
from collections import deque

import numpy as np

from mbfg_ros.estimation.model_uncertainty import InnovationSum
from mbfg_ros.estimation.outputs import SensorCounts
from mbfg_ros.estimation.stamp_jitter import StampJitter

GAUSSIAN_MEAN_ABS = math.sqrt(2.0 / math.pi)      # E|r| of a unit Gaussian: 0.7979
INNOVATION_RATE = 0.02       # weight of a new |innovation| in the running mean (about 50 count)
INNOVATION_CLIP = 10.0       # |innovations| are clipped here, so a lone outlier barely moves it


class SensorStream:
    """One input stream (``kind``: a sensor kind or command): its counts, its recent
    stamps (duplicates), its newest stamp of the run, its running innovation scale and its
    stamps' timing error (``jitter``, s: ``stated`` if given, else measured from its stamps).
    ``nominal_period`` (s): 1 / the config's rate (0: unknown); ``lead`` (s): how close before a
    keyframe its newest stamp may be for it to be due no more readings there
    (:func:`~mbfg_ros.estimation.schedule.stream_lead`).

    ``index`` is the sensor's index in the mechanism's list of its kind (the joint index for
    known-input commands); ``dim`` the number of values per reading (3 for a gyro or an
    accelerometer, else 1). The readings themselves wait in the
    :class:`~mbfg_ros.estimation.schedule.StepInbox`.
    """

    def __init__(self, name: str, kind: str, index: int, dim: int, stated_jitter: float | None = None,
                 nominal_period: float = 0.0) -> None:
        self.name, self.kind, self.index, self.dim = name, kind, index, dim
        self.nominal_period = nominal_period
        self.lead = 0.0
        self.stated_jitter = stated_jitter
        self.stamps = StampJitter()
        self.innovations = InnovationSum()    # scored innovations (model_uncertainty.py)
        self.counts = SensorCounts()
        self.run_last = -math.inf            # newest stamp since the current run started
        self.mean_abs = GAUSSIAN_MEAN_ABS    # running mean of |whitened innovation|
        self.scale = 1.0                     # recent innovation scale in sigmas (>= 1)
        self.taken = 0                       # readings the last step placed in its slots
        self.slot = -1                       # its block in the step parameters (measuring streams)
        self._recent: deque[float] = deque()
        self._recent_set: set[float] = set()

    def is_duplicate(self, stamp: float) -> bool:
        """Whether ``stamp`` repeats one of the sensor's last 64 stamps (then it is not
        remembered again); otherwise it is remembered."""
        seen = self._recent_set
        if stamp in seen:
            return True
        recent = self._recent
        recent.append(stamp)
        seen.add(stamp)
        if len(recent) > 64:
            seen.discard(recent.popleft())
        return False

    @property
    def jitter(self) -> float:
        """s, the standard deviation of its stamps' timing error: as stated, or as measured."""
        return self.stamps.sigma if self.stated_jitter is None else self.stated_jitter

    def forget_recent(self) -> None:
        self.stamps.restart()
        self._recent.clear()
        self._recent_set.clear()
        self.mean_abs, self.scale = GAUSSIAN_MEAN_ABS, 1.0

    def add_innovations(self, abs_whitened: np.ndarray) -> None:
        """Update the running innovation scale with the |whitened residuals| of used readings
        (each clipped at INNOVATION_CLIP; about the last 50 count). The step function does the
        same inside (its ``stats`` output), see :meth:`set_mean_abs`."""
        m = self.mean_abs
        for r in abs_whitened:
            m += INNOVATION_RATE * (min(float(r), INNOVATION_CLIP) - m)
        self.set_mean_abs(m)

    def set_mean_abs(self, m: float) -> None:
        self.mean_abs = m
        scale = m / GAUSSIAN_MEAN_ABS
        self.scale = scale if scale > 1.0 else 1.0           # (as max(1.0, scale))


def count_step(streams: list[SensorStream], stats) -> list[int]:
    """Counts and innovation scales of the readings in the step just linearised (``stats``: the
    step function's per-sensor outputs, mean |innovation| and down-weighted count); returns how
    many readings of each stream it took."""
    taken = [s.taken for s in streams]
    if any(taken):
        values = stats.tolist()                  # (Python floats, as float() of each)
        for i, s in enumerate(streams):
            c = taken[i]
            if c:
                s.counts.used += c
                s.set_mean_abs(values[2 * i])
                d = values[2 * i + 1]
                if d:
                    s.counts.downweighted += int(d)
    return taken
