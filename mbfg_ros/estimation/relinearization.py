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
        self.observe_block(phi_q[:, self.dependent])

    def observe_block(self, block: np.ndarray) -> None:
        """The same from its dependent columns alone (m, len(dependent)): the estimator takes
        them out of the step's Jacobian in one index. Called per keyframe: the singular values'
        checks on a list (numpy's per-call dispatch cost more than the SVD of a 2 x 2 block)."""
        s = np.linalg.svd(block, compute_uv=False).tolist()
        if not s:
            return
        s0 = s[0]
        if not (s0 > 0.0 and s0 < math.inf):      # (also NaN; the rest are <= s0 or NaN)
            return
        tol = RANK_TOLERANCE * s0
        r = 0
        for x in s:
            if x != x:                            # NaN
                return
            if x > tol:
                r += 1
        if self.rank is None or r > self.rank:   # (a run that starts near a singular pose)
            self.rank, self.best = r, math.inf
        low = s[self.rank - 1]
        self.condition = s0 / low if low > 0.0 else math.inf
        if self.condition < self.best:
            self.best = self.condition

    @property
    def value(self) -> float:
        """The relinearization threshold for the newest keyframe (rad or m)."""
        ratio = self.condition / (NEAR_SINGULAR_MARGIN * self.best)
        if not ratio > 1.0:
            return self.threshold
        return max(min(self.threshold, NEAR_SINGULAR_FLOOR), self.threshold / (ratio * ratio))


SCAN_PERIOD = 0.05             # s between deep relinearization passes while converging,
QUIET_SCAN_PERIOD = 1.0        # and while tracking (after QUIET_PASSES deep passes found no work;
QUIET_PASSES = 3               # a pass that finds work makes it converging again)
QUIET_DEEP_FACTOR = 3.0        # while tracking, deep steps are redone beyond this times the threshold


class Relinearizer:
    """The fluid relinearisation schedule of one estimator: every keyframe the newest step is
    checked (while the previous check found work: the newest ``relinearize_horizon`` steps);
    every SCAN_PERIOD the whole window (a deep pass: it costs milliseconds, and finds work only
    while the estimate converges from a wrong state); every QUIET_SCAN_PERIOD once deep passes
    found nothing QUIET_PASSES times in a row. A deep pass that moved the newest keyframe again
    is followed by one that relinearises the newest step alone (cheap)."""

    def __init__(self, cfg, n: int, dependent: np.ndarray) -> None:
        """``cfg``: the EstimatorConfig; ``n``: coordinates; ``dependent``: the columns of the
        coordinates the DOF do not list (the threshold falls near singular poses:
        :class:`SingularityThreshold`)."""
        self.cfg = cfg
        self.n = n
        self.threshold = SingularityThreshold(cfg.relinearize_threshold, dependent)
        rate = cfg.keyframe_rate
        self.scan_every = max(10, int(round(SCAN_PERIOD * rate)))
        # (odd, so that quiet passes seldom fall on a keyframe that also marginalises)
        self.quiet_scan_every = 2 * max(5, int(round(QUIET_SCAN_PERIOD * rate / 2))) + 1
        self.restart()

    def restart(self) -> None:
        """A new run: converging, the next check active."""
        self.count = 0
        self.active = True
        self.quiet_passes = 0                       # deep passes in a row that found no work

    def after_update(self, sm, rec: StepRecords, k: int, x_k: np.ndarray, linearize, health) -> np.ndarray | None:
        """Relinearise what the schedule asks after an update whose newest keyframe is k (state
        x_k): ``sm`` the FixedLagSmoother, ``linearize(x0, x1, p)`` the step rows (views). Returns
        keyframe k's new state when steps were redone, else None."""
        cfg = self.cfg
        budget = cfg.relinearize_budget
        if budget <= 0 or len(sm) < 2:
            return None
        n, th = self.n, self.threshold.value
        vth = cfg.relinearize_velocity_factor * th
        self.count += 1
        converging = self.quiet_passes < QUIET_PASSES
        deep = self.count % (self.scan_every if converging else self.quiet_scan_every) == 0
        if not deep and not self.active and not rec.moved(k, None, x_k, n, th, vth):
            return None
        X = sm.all_estimates()
        if deep:
            # while tracking, a step beyond the horizon must have moved QUIET_DEEP_FACTOR times
            # the threshold: relinearizing it makes ISAM2 re-eliminate the window (milliseconds)
            order = select_steps(rec, sm.keys, X, n, th, vth, len(sm), 0,
                                 1.0 if converging else QUIET_DEEP_FACTOR, cfg.relinearize_horizon)
            self.quiet_passes = self.quiet_passes + 1 if len(order) <= 1 else 0
        else:
            order = select_steps(rec, sm.keys, X, n, th, vth, budget, cfg.relinearize_horizon)
            self.active = bool(order)
            if len(order) > 1:
                self.quiet_passes = 0
        if not order:
            return None
        x_k = redo_steps(sm, rec, order, X, k, linearize, health)
        if deep and len(order) > 1 and rec.moved(k, None, x_k, n, th, vth):
            # relinearizing old steps moved the newest keyframe: its own step once more (cheap),
            # so that the published estimate rests on a linearization at itself
            x_k = redo_steps(sm, rec, [k], sm.all_estimates()[-2:], k, linearize, health, first_key=k - 1)
        return x_k


def redo_steps(sm, rec: StepRecords, steps: list[int], X: np.ndarray, k: int, linearize, health,
               first_key: int | None = None) -> np.ndarray:
    """Relinearise ``steps`` at the estimates X (rows from ``first_key``, default the window's
    oldest keyframe) and swap their factors in one ISAM2 update; returns the newest keyframe
    k's state after it."""
    first_key = sm.keys[0] if first_key is None else first_key
    factors, removes, redo = [], [], []
    for kk in steps:
        i = kk - first_key
        unary = rec.is_unary(kk)
        x1 = X[i]
        x0 = None if unary else X[i - 1]
        r, J0, J1 = linearize(x0, x1, rec.parameters(kk))
        factors.append(sm.factor(kk, r, J0, J1, x0, x1))
        removes.append(rec.factor_index(kk))
        redo.append((kk, x0, x1))
    touched = min(kk - (0 if rec.is_unary(kk) else 1) for kk, _, _ in redo)
    idx = sm.update(factors, remove=removes, touched=touched)
    for (kk, x0, x1), i in zip(redo, idx):
        rec.relinearized(kk, x0, x1, i)
    health.relinearizations += len(factors)
    return sm.estimate(k)
