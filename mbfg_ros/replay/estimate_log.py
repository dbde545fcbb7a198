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

from mbfg_ros.estimation.outputs import Estimate, Forces
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

    def add(self, e: Estimate, forces: Forces, era: int = 0) -> None:
        mech = self.mech
        if self.layout is None:
            self.layout = e.layout
        g = len(mech.dof)
        self._t.append(e.stamp)
        self._key.append(e.keyframe)
        self._era.append(era)
        self._x.extend(np.asarray(e.x, float))
        self._effort.extend(np.asarray(e.effort, float).reshape(-1))
        if e.covariance is not None:
            self._std.extend(np.sqrt(np.maximum(np.diag(e.covariance), 0.0)))
        else:
            self._std.extend(np.full(2 * g, np.nan))
        row = []
        for c in forces.closures:
            row += [*c.force, *c.torque]
        row += [forces.load_cells[c.config.name] for c in mech.load_cells]
        self._forces.extend(np.asarray(row, float))
        self._n += 1
        self.last_keyframe = e.keyframe

    def add_rows(self, estimates: list[Estimate], F: np.ndarray, T: np.ndarray, cells: np.ndarray,
                 era: int = 0) -> None:
        """Append estimates with their forces as arrays (:class:`BatchForces`' F, T (N, nc, 3) and
        cells (N, ncell)): the same rows as :meth:`add` of each, at once."""
        if not estimates:
            return
        mech = self.mech
        N = len(estimates)
        if self.layout is None:
            self.layout = estimates[0].layout
        g = len(mech.dof)
        self._t.extend([e.stamp for e in estimates])
        self._key.extend([e.keyframe for e in estimates])
        self._era.extend([era] * N)
        self._x.extend(np.concatenate([np.asarray(e.x, float) for e in estimates]))
        self._effort.extend(np.concatenate([np.asarray(e.effort, float).reshape(-1) for e in estimates]))
        std = np.full((N, 2 * g), np.nan)
        for i, e in enumerate(estimates):
            if e.covariance is not None:
                std[i] = np.sqrt(np.maximum(np.diag(e.covariance), 0.0))
        self._std.extend(std.reshape(-1))
        nc = len(mech.closure_configs)
        rows = np.concatenate([np.stack([F, T], axis=2).reshape(N, 6 * nc), np.asarray(cells).reshape(N, -1)], axis=1)
        self._forces.extend(rows.reshape(-1))
        self._n += N
        self.last_keyframe = estimates[-1].keyframe

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
