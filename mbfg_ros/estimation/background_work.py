"""How much background work (the model uncertainty's search in a live node) may run now.

Two limits, both on the monotonic clock (s):

- :class:`WorkShare`: a share of one core. Work may use ``share`` of the wall time on average: a
  token bucket whose credit grows by ``share`` s per s (at most ``share`` x :data:`WorkShare.WINDOW`
  saved up) and shrinks by the wall time the work took (an overrun is paid back later). Wall time,
  not CPU time: on a loaded machine the work is charged for the time it kept the caller's
  thread, which is what the caller's next tick waits for.
- :class:`PieceCost`: the work comes in indivisible pieces of very different cost (a reading a
  candidate estimator merely queues: microseconds; one that closes a keyframe and runs an ISAM2
  update: about a millisecond, more with a relinearisation; building a candidate: 1-2 ms). A
  costly piece starts only if its recent cost (a high quantile of its thread's CPU time: on a
  loaded machine the wall time of a piece holds whatever else ran meanwhile, and a history of
  those would refuse every slot) fits in the time left, so it does not run past the caller's
  deadline. After :data:`PieceCost.PATIENCE` refusals in a row it starts anyway (the work must
  end, also when no slot is ever long enough).

No ROS.
"""
from __future__ import annotations

import math
from collections import deque

import numpy as np


class WorkShare:
    """A token bucket of work time: at most ``share`` of one core on average (module docstring);
    ``share`` >= 1: no limit."""

    WINDOW = 0.5
    """s: the credit saved while no work ran (the caller had no time spare) is at most that many
    seconds' share, so a burst after a busy spell takes at most ``share`` x WINDOW s."""

    def __init__(self, share: float) -> None:
        self.share = share
        self.credit = 0.0                  # s of work allowed now (negative: an overrun to pay back)
        self._at: float | None = None      # monotonic s of the last accrual

    def until(self, now: float) -> float:
        """Monotonic s until which work may run from ``now`` (``now`` or earlier: none now)."""
        if self.share >= 1.0:
            return math.inf
        if self._at is not None:
            self.credit = min(self.credit + self.share * (now - self._at), self.share * self.WINDOW)
        self._at = now
        return now + self.credit

    def spent(self, seconds: float) -> None:
        """Work took ``seconds`` (wall)."""
        if self.share < 1.0:
            self.credit -= seconds


class PieceCost:
    """The recent cost of one kind of costly piece of work (module docstring), s."""

    HISTORY = 32
    """Pieces whose cost is kept."""

    QUANTILE = 90.0
    """Percentile of those costs taken as the next piece's (a rare spike, a relinearisation or a
    garbage collection, does not block the work)."""

    PATIENCE = 200
    """Refusals in a row after which a piece starts however little time is left."""

    def __init__(self, first_guess: float) -> None:
        self.costs: deque[float] = deque([first_guess], maxlen=self.HISTORY)
        self.estimate = first_guess        # s: the QUANTILE of ``costs``
        self.refused = 0

    def fits(self, left: float) -> bool:
        """Whether a piece may start with ``left`` s to go (counted as a refusal if not)."""
        if left > 0 and (left >= self.estimate or self.refused >= self.PATIENCE):
            return True
        self.refused += 1
        return False

    def took(self, seconds: float) -> None:
        """A piece took ``seconds`` (CPU)."""
        self.costs.append(seconds)
        self.estimate = float(np.percentile(self.costs, self.QUANTILE))
        self.refused = 0
