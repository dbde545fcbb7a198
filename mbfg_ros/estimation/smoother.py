"""Plain GTSAM ISAM2 used as a fixed-lag smoother over one key per keyframe.

What makes it fast from Python (../shared/reference/estimator-performance.md): every factor is a
linear ``JacobianFactor`` evaluated outside ISAM2 and handed over as a ``LinearContainerFactor``
with its linearization point (no Python callbacks inside ISAM2, relinearization off, linearized
factors cached); the newest key is put last with a constrained ordering group; the oldest key
is marginalised with ``marginalizeLeaves`` once it leaves the window; only the keys asked for
are read.
"""
from __future__ import annotations

import gtsam
import numpy as np


WILDFIRE_THRESHOLD = 0.01


def key(k: int) -> int:
    """GTSAM key of keyframe k."""
    return gtsam.symbol("x", k)


class SolverFailure(RuntimeError):
    """ISAM2 could not eliminate or returned a non-finite estimate."""


class FixedLagSmoother:
    """ISAM2 over keyframe keys; factors are given as (keys, Jacobians, rhs, linearization point)."""

    def __init__(self, capacity: int = 4096) -> None:
        """``capacity``: more than the number of keyframes the window ever holds."""
        params = gtsam.ISAM2Params()
        params.enableRelinearization = False
        params.cacheLinearizedFactors = True
        params.evaluateNonlinearError = False
        # QR, not Cholesky: closure rows are weighted ~1e6 next to loose priors, and Cholesky
        # would square that conditioning.
        params.setFactorization("QR")
        # ISAM2 back-substitutes into older keyframes only while their delta changes by more
        # than this (mixed units: rad, rad/s, N ...). 0.001 (the default) makes nearly every
        # update walk the whole window; the newest keyframe is always exact.
        gn = gtsam.ISAM2GaussNewtonParams()
        gn.setWildfireThreshold(WILDFIRE_THRESHOLD)
        params.setOptimizationParams(gn)
        self.isam = gtsam.ISAM2(params)
        self.keys: list[int] = []           # keyframe indices in the window, oldest first
        self._poison: list = []
        self._poison_keys: list[int] = []
        self.capacity = capacity
        self._theta: np.ndarray | None = None      # ISAM2's (fixed) linearization point, row k % capacity
        self._params = params
        self._live: dict[int, gtsam.NonlinearFactor] = {}    # ISAM2 index -> factor we hold
        self.rebuilds = 0

    @staticmethod
    def linear_factor(ks: list[int], blocks: list[np.ndarray], rhs: np.ndarray,
                      points: list[np.ndarray]) -> gtsam.LinearContainerFactor:
        """A whitened linear factor sum_i A_i dx_i = rhs linearized at ``points``."""
        unit = gtsam.noiseModel.Unit.Create(rhs.size)
        if len(ks) == 1:
            jf = gtsam.JacobianFactor(key(ks[0]), blocks[0], rhs, unit)
        else:
            jf = gtsam.JacobianFactor(key(ks[0]), blocks[0], key(ks[1]), blocks[1], rhs, unit)
        lin = gtsam.Values()
        for k, p in zip(ks, points):
            lin.insert(key(k), p)
        return gtsam.LinearContainerFactor(jf, lin)

    def update(self, factors: list[gtsam.LinearContainerFactor],
               new_keys: dict[int, np.ndarray] | None = None,
               remove: list[int] | None = None, touched: int | None = None) -> list[int]:
        """Add factors (and new keyframes); returns the ISAM2 indices of the added factors.

        ``touched`` is the oldest keyframe any added or removed factor involves. Every keyframe
        from it to the newest is given a chronological elimination group, so whatever ISAM2
        re-eliminates stays a chain with the oldest keyframe a leaf: ``marginalizeLeaves`` on a
        non-leaf crashes the process (no check in release builds).
        """
        graph = gtsam.NonlinearFactorGraph()
        for f in factors:
            graph.add(f)
        for f in self._poison:
            graph.add(f)
        values = gtsam.Values()
        groups = gtsam.KeyGroupMap()
        newest = self.keys[-1] if self.keys else None
        if new_keys:
            for k in sorted(new_keys):
                values.insert(key(k), new_keys[k])
            for k in self._poison_keys:
                values.insert(k, np.zeros(1))
            newest = max(new_keys)
        if newest is not None:
            first = min(touched if touched is not None else newest, min(new_keys) if new_keys else newest)
            if self.keys:
                first = max(first, self.keys[0])
            for k in range(first, newest + 1):
                groups.insert2(key(k), k - first)
        try:
            result = self.isam.update(graph, values, remove or [], groups)
        except RuntimeError as exc:          # IndeterminantLinearSystemException and kin
            raise SolverFailure(str(exc).splitlines()[0] or type(exc).__name__) from None
        if new_keys:
            for k in sorted(new_keys):
                if self.keys and k != self.keys[-1] + 1:
                    raise ValueError("keyframe keys must be consecutive")
                self.keys.append(k)
                if self._theta is None:
                    self._theta = np.zeros((self.capacity, new_keys[k].size))
                self._theta[k % self.capacity] = new_keys[k]
        idx = list(result.getNewFactorsIndices())
        for i in remove or []:
            self._live.pop(i, None)
        for i, f in zip(idx, factors):
            self._live[i] = f
        return idx

    def rebuild(self, estimates: np.ndarray, marginalize: int) -> dict[int, int]:
        """Re-create ISAM2 from the factors it holds, linearized (theta) at ``estimates`` (rows in
        ``keys`` order), in chronological elimination order; then marginalise the ``marginalize``
        oldest keyframes (leaves now). Returns {old factor index: new index} for the factors
        that remain."""
        old_indices = sorted(self._live)
        graph = gtsam.NonlinearFactorGraph()
        for i in old_indices:
            graph.add(self._live[i])
        values = gtsam.Values()
        groups = gtsam.KeyGroupMap()
        first = self.keys[0]
        for j, k in enumerate(self.keys):
            values.insert(key(k), estimates[j])
            groups.insert2(key(k), k - first)
            self._theta[k % self.capacity] = estimates[j]
        isam = gtsam.ISAM2(self._params)
        try:
            result = isam.update(graph, values, [], groups)
        except RuntimeError as exc:
            raise SolverFailure(f"rebuilding the window: {str(exc).splitlines()[0]}") from None
        new_indices = list(result.getNewFactorsIndices())
        self.isam = isam
        self._live = {n: self._live[o] for o, n in zip(old_indices, new_indices)}
        mapping = dict(zip(old_indices, new_indices))
        if marginalize > 0:
            kl = gtsam.KeyList()
            for k in self.keys[:marginalize]:
                kl.push_back(key(k))
            try:
                marginal_idx, deleted_idx = isam.marginalizeLeavesWithIndices(kl)
            except RuntimeError as exc:
                raise SolverFailure(f"marginalising: {str(exc).splitlines()[0]}") from None
            factors = isam.getFactorsUnsafe()
            for i in deleted_idx:
                self._live.pop(i, None)
            for i in marginal_idx:
                self._live[i] = factors.at(i)
            del self.keys[:marginalize]
            mapping = {o: n for o, n in mapping.items() if n in self._live}
        self.rebuilds += 1
        return mapping

    def rows(self) -> np.ndarray:
        """Ring-buffer rows (k % capacity) of the window's keyframes, oldest first."""
        return np.arange(self.keys[0], self.keys[-1] + 1) % self.capacity

    def all_estimates(self) -> np.ndarray:
        """Estimates of every keyframe in the window (rows in ``keys`` order), in one call:
        ISAM2 never relinearizes here, so each estimate is its insertion value plus its delta."""
        if not self.keys:
            return np.zeros((0, 0))
        theta = self._theta[self.rows()]
        delta = self.isam.getDelta().vector()[:theta.size].reshape(theta.shape)
        return theta + delta

    def poison(self) -> None:
        """Make the next update fail: it will add a variable no factor constrains (a real
        IndeterminantLinearSystem inside ISAM2; used to test recovery)."""
        k = gtsam.symbol("z", 0)
        self._poison_keys = [k]
        lin = gtsam.Values()
        lin.insert(k, np.zeros(1))
        jf = gtsam.JacobianFactor(k, np.zeros((1, 1)), np.zeros(1), gtsam.noiseModel.Unit.Create(1))
        self._poison = [gtsam.LinearContainerFactor(jf, lin)]

    def estimate(self, k: int) -> np.ndarray:
        x = self.isam.calculateEstimateVector(key(k))
        if not np.all(np.isfinite(x)):
            raise SolverFailure(f"non-finite estimate of keyframe {k}")
        return x

    def covariance(self, k: int) -> np.ndarray:
        return self.isam.marginalCovariance(key(k))

    def __len__(self) -> int:
        return len(self.keys)
