"""Fluid relinearization: which step factors to linearize again, and the records that allow it.

ISAM2 itself never relinearizes here (its factors are linear). Every step of the window keeps, in
:class:`StepRecords` (numeric rings, row k % capacity), its parameters, where its factor was
linearized and the factor's index in ISAM2. After each update :func:`select_steps` picks the
steps whose keyframes moved by more than ``relinearize_threshold`` (positions; velocities by
``relinearize_velocity_factor`` times it) since they were linearized, the most-moved first, at most
``relinearize_budget`` per keyframe, among the newest ``relinearize_horizon`` steps; the estimator
evaluates them again at the current estimate and swaps their factors. Tracking needs almost none;
a wrong initial pose converges through them. The horizon bounds the worst update: swapping step
j's factor makes ISAM2 re-eliminate every keyframe from j to the newest (about 25 us each on the
four-bar), so a step deep in the window costs milliseconds.
"""
from __future__ import annotations

import math

import numpy as np

from mbfg_ros.model.assembly import RANK_TOLERANCE


class StepRecords:
    """Per step k of the window: parameters p, linearization points (x0, x1), ISAM2 factor index
    (-1: none), whether it is a run's first (unary) step."""

    def __init__(self, capacity: int, dim: int, params: int) -> None:
        self.capacity = capacity
        self.p = np.zeros((capacity, params))
        self.lin0 = np.zeros((capacity, dim))
        self.lin1 = np.zeros((capacity, dim))
        self.index = np.full(capacity, -1, dtype=np.int64)
        self.unary = np.zeros(capacity, dtype=bool)

    def store(self, k: int, p: np.ndarray, x0: np.ndarray | None, x1: np.ndarray, index: int,
              unary: bool) -> None:
        i = k % self.capacity
        self.p[i] = p
        if x0 is not None:
            self.lin0[i] = x0
        self.lin1[i] = x1
        self.index[i] = index
        self.unary[i] = unary

    def set_index(self, k: int, index: int) -> None:
        self.index[k % self.capacity] = index

    def relinearized(self, k: int, x0: np.ndarray | None, x1: np.ndarray, index: int) -> None:
        i = k % self.capacity
        if x0 is not None:
            self.lin0[i] = x0
        self.lin1[i] = x1
        self.index[i] = index

    def drop(self, k: int) -> None:
        """Step k's factor left ISAM2 (marginalised)."""
        self.index[k % self.capacity] = -1

    def parameters(self, k: int) -> np.ndarray:
        return self.p[k % self.capacity]

    def factor_index(self, k: int) -> int:
        return int(self.index[k % self.capacity])

    def is_unary(self, k: int) -> bool:
        return bool(self.unary[k % self.capacity])

    def moved(self, k: int, x0: np.ndarray | None, x1: np.ndarray, n: int, th: float, vth: float) -> bool:
        """Whether step k's keyframes (x0 may be None: not checked) moved beyond the thresholds."""
        i = k % self.capacity
        d1 = np.abs(x1[:2 * n] - self.lin1[i, :2 * n])
        if d1[:n].max() > th or d1[n:].max() > vth:
            return True
        if x0 is None:
            return False
        d0 = np.abs(x0[:2 * n] - self.lin0[i, :2 * n])
        return bool(d0[:n].max() > th or d0[n:].max() > vth)


def select_steps(rec: StepRecords, keys: list[int], X: np.ndarray, n: int, th: float, vth: float,
                 budget: int, horizon: int, deep_factor: float = 1.0, deep_after: int = 0) -> list[int]:
    """The steps (keyframe indices) to relinearize, at most ``budget``: those among the newest
    ``horizon`` (0: the whole window) whose keyframes (estimates ``X``, rows in ``keys`` order)
    moved beyond the thresholds (times ``deep_factor`` for steps more than ``deep_after``
    keyframes deep); the newest step first, then the most-moved."""
    first, last = keys[0], keys[-1]
    lo = first if horizon <= 0 else max(first, last - horizon + 1)
    ks = np.arange(lo, last + 1)
    rows = ks % rec.capacity
    valid = rec.index[rows] >= 0
    unary = rec.unary[rows]
    # a binary step needs its previous keyframe in the window
    valid &= unary | (ks > first)
    if not valid.any():
        return []
    i = ks - first
    d = np.abs(X[i, :2 * n] - rec.lin1[rows, :2 * n])
    prev = np.where(unary, i, i - 1)
    d0 = np.abs(X[prev, :2 * n] - rec.lin0[rows, :2 * n])
    d0[unary] = 0.0
    d = np.maximum(d, d0)
    moved = np.maximum(d[:, :n].max(axis=1) / th, d[:, n:].max(axis=1) / vth)
    moved[~valid] = 0.0
    if deep_factor != 1.0:
        moved[ks < last - deep_after] /= deep_factor
    cand = np.flatnonzero(moved > 1.0)
    if not cand.size:
        return []
    cand = cand[np.argsort(-moved[cand])]
    if cand[0] != ks.size - 1 and moved[-1] > 1.0:
        # the newest step first: its linearization is what the published estimate rests on
        cand = np.concatenate(([ks.size - 1], cand[cand != ks.size - 1]))
    return [int(k) for k in ks[cand[:budget]]]


NEAR_SINGULAR_MARGIN = 2.0
"""The relinearization threshold is lowered where the closures' Jacobian block on the dependent
coordinates is worse conditioned than this many times the best conditioning the run has seen."""
NEAR_SINGULAR_FLOOR = 1e-4
"""rad or m: ... but not below this (what the branch five-bar needed everywhere; a configured
threshold below it is kept)."""


class SingularityThreshold:
    """The relinearization threshold near singular poses.

    The closure rows are held to micrometres (``noise.closure_*``), so their linearisation error
    is several sigmas whenever a keyframe has moved a millirad from where its step was linearised;
    far from a singular pose the dependent coordinates absorb it for nothing. Near one (two
    links in line, where two assembly branches meet) the Jacobian block of the dependent
    coordinates loses rank, the error lands on the DOF instead, and the covariance (from the
    stale linearisation) claims too much: on a five-bar whose motion passes its branch changes
    (config/five_bar_branch.yaml) the DOF position errors were 1.2-1.3 times their published
    sigmas RMS, 1.6-2.2 within |sin| < 0.4 of the couplers' alignment. So the threshold is divided
    by the square of how much worse conditioned the newest keyframe's block is than
    NEAR_SINGULAR_MARGIN times the best seen in the run (a ratio: the block's columns mix rad and
    m, so no absolute condition number means the same on every rig), down to
    NEAR_SINGULAR_FLOOR. Measured there (10 s): 0.95 / 0.83 and 2.9 / 2.8 mrad to 2.5 / 2.2 (as
    with 1e-4 everywhere) at 7 times the relinearisations of 3e-3 instead of 44 times; a rig that
    stays well conditioned is unchanged (the condition number costs one SVD of the block per
    keyframe)."""

    def __init__(self, threshold: float, dependent: np.ndarray) -> None:
        """``threshold``: the configured ``relinearize_threshold``; ``dependent``: the columns
        of the coordinates the DOF do not list (``Mechanism.dependent``)."""
        self.threshold = threshold
        self.dependent = np.asarray(dependent, int)
        self.rank: int | None = None         # the block's largest rank seen (its generic rank)
        self.best = math.inf                 # the best condition number seen
        self.condition = 1.0                 # the newest keyframe's

    def observe(self, phi_q: np.ndarray) -> None:
        """The closure rows' Jacobian with respect to q (m, n; any row scale) at the newest
        keyframe."""
        s = np.linalg.svd(phi_q[:, self.dependent], compute_uv=False)
        if not (s.size and np.all(np.isfinite(s)) and s[0] > 0.0):
            return
        r = int(np.sum(s > RANK_TOLERANCE * s[0]))
        if self.rank is None or r > self.rank:   # (a run that starts near a singular pose)
            self.rank, self.best = r, math.inf
        self.condition = float(s[0] / s[self.rank - 1]) if s[self.rank - 1] > 0.0 else math.inf
        if self.condition < self.best:
            self.best = self.condition

    @property
    def value(self) -> float:
        """The relinearization threshold for the newest keyframe (rad or m)."""
        ratio = self.condition / (NEAR_SINGULAR_MARGIN * self.best)
        if not ratio > 1.0:
            return self.threshold
        return max(min(self.threshold, NEAR_SINGULAR_FLOOR), self.threshold / (ratio * ratio))
