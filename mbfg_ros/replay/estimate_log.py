"""The estimates of a replay run, with the forces derived from them, as arrays.

One row per written keyframe, in the order written (stamp order within an era; an era ends at
a time jump, where the estimator is reset). Units: rad or m (and per s, per s^2); efforts N m or N; forces in each closure's
frame_b (N, N m); load-cell readings N or N m; ``std`` the DOF standard deviations
[q_dof, v_dof] when the estimator computed covariances (else NaN).
"""
from __future__ import annotations

from array import array
from dataclasses import dataclass

import numpy as np

from mbfg_ros.estimation.outputs import Estimate
from mbfg_ros.model.mechanism import Mechanism


@dataclass
class EstimateSeries:
    t: np.ndarray                 # (N,) s, relative to the replay's epoch
    keyframe: np.ndarray          # (N,) keyframe index
    era: np.ndarray               # (N,) 0, then +1 after each time jump (estimator reset)
    q: np.ndarray                 # (N, n)
    v: np.ndarray
    a: np.ndarray
    effort: np.ndarray            # (N, n) actuator effort (known + estimated input)
    lam: np.ndarray               # (N, m)
    u: np.ndarray                 # (N, n_u)
    bias: np.ndarray              # (N, n_b)
    gravity_scale: np.ndarray     # (N,)
    mass_scale: np.ndarray        # (N,)
    std: np.ndarray               # (N, 2 g): [q_dof, v_dof] standard deviations, NaN if unknown
    closure_force: np.ndarray     # (N, nc, 3) in frame_b
    closure_torque: np.ndarray    # (N, nc, 3)
    load_cells: np.ndarray        # (N, ncell)

    def __len__(self) -> int:
        return int(self.t.size)


class EstimateLog:
    """Append estimates (with their forces); ``series()`` stacks them. Kept as flat arrays
    (8 bytes per number: hour-long replays), not as the objects."""

    def __init__(self, mech: Mechanism) -> None:
        self.mech = mech
        self.layout = None                       # the estimates' StateLayout (from the first)
        self.last_keyframe = -1                  # keyframe of the newest estimate added
        self._n = 0
        self._t, self._x, self._effort, self._std, self._forces = (array("d") for _ in range(5))
        self._key, self._era = array("q"), array("q")

    def __len__(self) -> int:
        return self._n

    def add_rows(self, estimates: list[Estimate], F: np.ndarray, T: np.ndarray, cells: np.ndarray,
                 era: int = 0) -> None:
        """Append estimates with their forces (:class:`BatchForces`' F, T (N, nc, 3) and cells
        (N, ncell)): :meth:`add_arrays` of their fields."""
        if not estimates:
            return
        g = len(self.mech.dof)
        std = np.full((len(estimates), 2 * g), np.nan)
        for i, e in enumerate(estimates):
            if e.covariance is not None:
                std[i] = np.sqrt(np.maximum(np.diag(e.covariance), 0.0))
        self.add_arrays(np.array([e.stamp for e in estimates]), np.array([e.keyframe for e in estimates]), era,
                        np.stack([np.asarray(e.x, float) for e in estimates]),
                        np.stack([np.asarray(e.effort, float).reshape(-1) for e in estimates]), std,
                        F, T, cells, estimates[0].layout)

    def add_arrays(self, t: np.ndarray, keyframe: np.ndarray, era: int, X: np.ndarray, effort: np.ndarray,
                   std: np.ndarray | None, F: np.ndarray, T: np.ndarray, cells: np.ndarray, layout) -> None:
        """Append N keyframes of one era as arrays: times (N,) s, keyframe indexes (N,), states
        X (N, width of ``layout``), efforts (N, n), DOF standard deviations (N, 2 g; None: NaN),
        forces F, T (N, nc, 3) and cells (N, ncell)."""
        N = int(np.size(t))
        if not N:
            return
        if self.layout is None:
            self.layout = layout
        g, nc = len(self.mech.dof), len(self.mech.closure_configs)

        def put(buf: array, x) -> None:
            buf.frombytes(np.ascontiguousarray(x, dtype=np.float64 if buf.typecode == "d" else np.int64).tobytes())
        put(self._t, t)
        put(self._key, keyframe)
        put(self._era, np.full(N, era))
        put(self._x, X)
        put(self._effort, effort)
        put(self._std, np.full((N, 2 * g), np.nan) if std is None else std)
        put(self._forces, np.concatenate([np.stack([F, T], axis=2).reshape(N, 6 * nc),
                                          np.asarray(cells).reshape(N, -1)], axis=1))
        self._n += N
        self.last_keyframe = int(np.asarray(keyframe)[-1])

    def series(self) -> EstimateSeries:
        mech = self.mech
        g, nc, ncell = len(mech.dof), len(mech.closure_configs), len(mech.load_cells)
        N = self._n
        lay = self.layout
        if lay is None:
            z = np.zeros((0, mech.n))
            return EstimateSeries(np.zeros(0), np.zeros(0, int), np.zeros(0, int), z, z, z, z,
                                  np.zeros((0, mech.m)), np.zeros((0, mech.n_u)), np.zeros((0, 0)),
                                  np.zeros(0), np.zeros(0), np.zeros((0, 2 * g)), np.zeros((0, nc, 3)),
                                  np.zeros((0, nc, 3)), np.zeros((0, ncell)))
        X = np.frombuffer(self._x, float).reshape(N, -1).copy()
        F = np.frombuffer(self._forces, float).reshape(N, 6 * nc + ncell)
        W = F[:, :6 * nc].reshape(N, nc, 2, 3)
        n = lay.n
        return EstimateSeries(
            t=np.frombuffer(self._t, float).copy(), keyframe=np.frombuffer(self._key, np.int64).astype(int),
            era=np.frombuffer(self._era, np.int64).astype(int),
            q=X[:, :n], v=X[:, n:2 * n], a=X[:, 2 * n:3 * n],
            effort=np.frombuffer(self._effort, float).reshape(N, -1).copy(), lam=X[:, lay.L], u=X[:, lay.U],
            bias=X[:, lay.B], gravity_scale=lay.gravity_scales(X),
            mass_scale=lay.mass_scales(X),
            std=np.frombuffer(self._std, float).reshape(N, 2 * g).copy(),
            closure_force=W[:, :, 0, :].copy(), closure_torque=W[:, :, 1, :].copy(),
            load_cells=F[:, 6 * nc:].copy())
