"""Plain GTSAM ISAM2 used as a fixed-lag smoother over one key per keyframe.

What makes it fast from Python: every factor is a
linear ``JacobianFactor`` evaluated outside ISAM2 and handed over in a ``LinearContainerFactor``
(no Python callbacks inside ISAM2, relinearization off, linearized factors cached); the keyframes
touched by an update are given chronological elimination groups, so the Bayes tree stays a chain
with the oldest keyframe a leaf; that keyframe is marginalised with ``marginalizeLeaves`` as soon
as it leaves the window (O(1) per keyframe: no periodic rebuild); only the keys asked for are read.

ISAM2 never relinearizes here, so its linearization point ``theta`` of a keyframe is fixed at the
value the keyframe was inserted with, and an estimate is ``theta + delta``. A factor linearized
elsewhere (at ``x``) is moved to ``theta`` by this class: ``r + J (theta - x)``.
"""
from __future__ import annotations

import math

import gtsam
import numpy as np


WILDFIRE_THRESHOLD = 0.01

BATCH_FRACTION = 0.5
"""An update whose touched keyframes are this fraction of the window or more re-eliminates the
whole window with every keyframe in its chronological group. ISAM2 reorders every key at once
(a batch step) when an update re-eliminates 65 % of them or more (GTSAM's ``kBatchThreshold``),
and keys without a group are then ordered by COLAMD, which can leave the oldest keyframe inside
the tree (``marginalizeLeaves`` then crashes the process); group labels must stay below the
number of keys ISAM2 reorders, so the whole window is re-eliminated whenever it is grouped."""


def key(k: int) -> int:
    """GTSAM key of keyframe k."""
    return gtsam.symbol("x", k)


class SolverFailure(RuntimeError):
    """ISAM2 could not eliminate or returned a non-finite estimate."""

    @property
    def indeterminate(self) -> bool:
        """Whether GTSAM judged the linear system indeterminate (its Cholesky elimination also
        does so where the last two pivots of a keyframe's block differ by more than 2^12)."""
        return "ndeterminate" in str(self)


def exception_summary(exc: Exception) -> str:
    """The first paragraph of an exception's message on one line (GTSAM's start with a newline
    and wrap their first sentence), else its type's name."""
    text = str(exc).strip()
    return " ".join(text.split("\n\n")[0].split()) if text else type(exc).__name__


class FixedLagSmoother:
    """ISAM2 over consecutive keyframe keys; factors are whitened rows ``r + J0 dx0 + J1 dx1``."""

    def __init__(self, dim: int, capacity: int = 4096, qr: bool = True) -> None:
        """``dim``: size of a keyframe state; ``capacity``: more than the number of keyframes the
        window ever holds (ring-buffer rows); ``qr``: QR elimination (needed with closure rows,
        weighted ~1e6 next to loose priors: Cholesky would square that conditioning), else
        Cholesky (about 15 % cheaper)."""
        params = gtsam.ISAM2Params()
        params.enableRelinearization = False
        params.cacheLinearizedFactors = True
        params.evaluateNonlinearError = False
        # reuse the slots of removed / marginalised factors (otherwise the factor list grows forever)
        params.findUnusedFactorSlots = True
        params.setFactorization("QR" if qr else "CHOLESKY")
        # ISAM2 back-substitutes into older keyframes only while their delta changes by more than
        # this (mixed units: rad, rad/s, N ...); the newest keyframe is always exact.
        gn = gtsam.ISAM2GaussNewtonParams()
        gn.setWildfireThreshold(WILDFIRE_THRESHOLD)
        params.setOptimizationParams(gn)
        self._params = params
        self.isam = gtsam.ISAM2(params)
        self.dim = dim
        self.capacity = capacity
        self.keys: list[int] = []                   # keyframe indices in the window, oldest first
        self._theta = np.zeros((capacity, dim))     # ISAM2's linearization point, row k % capacity
        self._units: dict[int, gtsam.noiseModel.Unit] = {}
        self._poisoned = False
        self.marginalized = 0

    # ----------------------------------------------------------------------------------------
    def _unit(self, rows: int):
        u = self._units.get(rows)
        if u is None:
            u = self._units[rows] = gtsam.noiseModel.Unit.Create(rows)
        return u

    def theta(self, k: int) -> np.ndarray:
        return self._theta[k % self.capacity]

    def factor(self, k: int, r: np.ndarray, J0: np.ndarray | None, J1: np.ndarray,
               x0: np.ndarray | None = None, x1: np.ndarray | None = None) -> gtsam.LinearContainerFactor:
        """The linear factor ``r + J0 (y_{k-1} - x0) + J1 (y_k - x1)`` on keyframes (k-1, k)
        (on k alone when J0 is None). ``x0``/``x1``: where the rows were linearized; omitted
        (None), the keyframe's theta (always the case for a keyframe being added)."""
        rhs = -r
        if x1 is not None:
            rhs = rhs - J1 @ (self.theta(k) - x1)
        if J0 is not None and x0 is not None:
            rhs = rhs - J0 @ (self.theta(k - 1) - x0)
        unit = self._unit(r.size)
        if J0 is None:
            jf = gtsam.JacobianFactor(key(k), J1, rhs, unit)
        else:
            jf = gtsam.JacobianFactor(key(k - 1), J0, key(k), J1, rhs, unit)
        return gtsam.LinearContainerFactor(jf)

    def update(self, factors: list, new_keys: list[tuple[int, np.ndarray]] | None = None,
               remove: list[int] | None = None, touched: int | None = None) -> list[int]:
        """Add factors and the next keyframes ``new_keys`` [(k, theta)] (consecutive); returns
        the ISAM2 indices of the added factors.

        ``touched`` is the oldest keyframe any added or removed factor involves. Every keyframe
        from it to the newest gets a chronological elimination group (every keyframe of the
        window when that reaches :data:`BATCH_FRACTION` of it), so whatever ISAM2 re-eliminates
        stays a chain with the oldest keyframe a leaf: ``marginalizeLeaves`` on a non-leaf
        crashes the process (no check in release builds).
        """
        graph = gtsam.NonlinearFactorGraph()
        for f in factors:
            graph.add(f)
        values = gtsam.Values()
        newest = self.keys[-1] if self.keys else None
        if new_keys:
            expect = newest + 1 if newest is not None else new_keys[0][0]
            for k, x in new_keys:
                if k != expect:
                    raise ValueError("keyframe keys must be consecutive")
                values.insert(key(k), x)
                expect = k + 1
            newest = new_keys[-1][0]
        if self._poisoned and newest is not None:
            self._poisoned = False
            nan = np.full(self.dim, np.nan)
            graph.add(gtsam.LinearContainerFactor(gtsam.JacobianFactor(
                key(newest), np.eye(self.dim), nan, self._unit(self.dim))))
        groups = gtsam.KeyGroupMap()
        whole = None
        if newest is not None:
            first = newest if touched is None else min(touched, newest)
            if self.keys:
                first = max(first, self.keys[0])
                if newest - first + 1 >= BATCH_FRACTION * (newest - self.keys[0] + 1):
                    first = self.keys[0]            # ISAM2 may reorder every key: all of them
                    whole = gtsam.KeyList()
                    whole.push_back(key(first))
            for k in range(first, newest + 1):
                groups.insert2(key(k), k - first)
        try:
            result = self.isam.update(graph, values, remove or [], groups, None, whole, False)
        except RuntimeError as exc:          # IndeterminantLinearSystemException and kin
            raise SolverFailure(exception_summary(exc)) from None
        for k, x in new_keys or []:
            self.keys.append(k)
            self._theta[k % self.capacity] = x
        return list(result.getNewFactorsIndices())

    def marginalize_oldest(self, count: int = 1) -> tuple[list[int], list[int]]:
        """Marginalise the ``count`` oldest keyframes (leaves of the chain). Returns the ISAM2
        indices (marginal factors added, factors deleted)."""
        kl = gtsam.KeyList()
        for k in self.keys[:count]:
            kl.push_back(key(k))
        try:
            added, deleted = self.isam.marginalizeLeavesWithIndices(kl)
        except (RuntimeError, ValueError) as exc:
            # (GTSAM raises ValueError when a key still has factors: its state is not to be
            # trusted after that; the estimator's recovery replaces this smoother)
            raise SolverFailure(f"marginalising: {exception_summary(exc)}") from None
        del self.keys[:count]
        self.marginalized += count
        return list(added), list(deleted)

    # ----------------------------------------------------------------------------------------
    def rows(self) -> np.ndarray:
        """Ring-buffer rows (k % capacity) of the window's keyframes, oldest first."""
        return np.arange(self.keys[0], self.keys[-1] + 1) % self.capacity

    def all_estimates(self) -> np.ndarray:
        """Estimates of every keyframe in the window (rows in ``keys`` order), in one call:
        theta plus ISAM2's delta (ISAM2 orders the delta by key when it is a chain of keys of
        one symbol, which is what this class keeps)."""
        if not self.keys:
            return np.zeros((0, self.dim))
        theta = self._theta[self.rows()]
        delta = self.isam.getDelta()
        vec = delta.vector()
        if vec.size != theta.size:
            return np.stack([self.estimate(k) for k in self.keys])
        return theta + vec.reshape(theta.shape)

    def exact_estimates(self, ks: list[int]) -> list[np.ndarray]:
        """Estimates of keyframes ``ks`` from a full back-substitution (exact; O(window))."""
        try:
            values = self.isam.calculateBestEstimate()
        except RuntimeError as exc:
            raise SolverFailure(exception_summary(exc)) from None
        out = [values.atVector(key(k)) for k in ks]
        for k, x in zip(ks, out):
            if not np.all(np.isfinite(x)):
                raise SolverFailure(f"non-finite estimate of keyframe {k}")
        return out

    def __contains__(self, k: int) -> bool:
        return bool(self.keys) and self.keys[0] <= k <= self.keys[-1]

    def estimate(self, k: int) -> np.ndarray:
        try:
            x = self.isam.calculateEstimateVector(key(k))
        except RuntimeError as exc:
            raise SolverFailure(exception_summary(exc)) from None
        if not math.isfinite(x.sum()):            # (a NaN or inf; per keyframe: cheaper than isfinite().all())
            raise SolverFailure(f"non-finite estimate of keyframe {k}")
        return x

    def covariance(self, k: int) -> np.ndarray:
        return self.isam.marginalCovariance(key(k))

    def dense_solution(self) -> np.ndarray:
        """The window's solution by a dense least-squares solve of every factor ISAM2 holds
        (for tests: the incremental solution must equal it)."""
        graph = self.isam.getFactorsUnsafe()
        theta = self.isam.getLinearizationPoint()
        lin = gtsam.GaussianFactorGraph()
        for i in range(graph.size()):
            f = graph.at(i)
            if f is not None:
                lin.push_back(f.linearize(theta))
        ordering = gtsam.Ordering()
        for k in self.keys:
            ordering.push_back(key(k))
        A, b = lin.jacobian(ordering)
        dx = np.linalg.lstsq(A, b, rcond=None)[0]
        return self._theta[self.rows()] + dx.reshape(len(self.keys), self.dim)

    def poison(self) -> None:
        """Make the next update fail (used to test recovery): it adds a factor whose right-hand
        side is NaN on the newest keyframe, so ISAM2's solution becomes non-finite."""
        self._poisoned = True

    def __len__(self) -> int:
        return len(self.keys)
