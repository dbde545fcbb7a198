"""The estimates of a replay run, with the forces derived from them, as arrays.

One row per written keyframe, in the order written (stamp order within an era; an era ends at
a time jump, where the estimator is reset). Units: rad or m (and per s, per s^2); efforts N m or N; forces in each closure's
frame_b (N, N m); load-cell readings N or N m; ``std`` the DOF standard deviations
[q_dof, v_dof] when the estimator computed covariances (else NaN).
"""
from __future__ import annotations

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
    """Append estimates (with their forces); ``series()`` stacks them."""

    def __init__(self, mech: Mechanism) -> None:
        self.mech = mech
        self.rows: list[tuple[Estimate, Forces]] = []
        self.eras: list[int] = []

    def __len__(self) -> int:
        return len(self.rows)

    def add(self, e: Estimate, forces: Forces, era: int = 0) -> None:
        self.rows.append((e, forces))
        self.eras.append(era)

    def series(self) -> EstimateSeries:
        mech = self.mech
        g, nc, ncell = len(mech.dof), len(mech.closure_configs), len(mech.load_cells)
        N = len(self.rows)
        es = [r[0] for r in self.rows]

        def stack(attr: str, width: int) -> np.ndarray:
            if not N:
                return np.zeros((0, width))
            return np.stack([np.asarray(getattr(e, attr), float).reshape(-1) for e in es])

        std = np.full((N, 2 * g), np.nan)
        for i, e in enumerate(es):
            if e.covariance is not None:
                std[i] = np.sqrt(np.maximum(np.diag(e.covariance), 0.0))
        cf = np.zeros((N, nc, 3))
        ct = np.zeros((N, nc, 3))
        cells = np.zeros((N, ncell))
        names = [c.config.name for c in mech.load_cells]
        for i, (_, f) in enumerate(self.rows):
            for j, c in enumerate(f.closures):
                cf[i, j] = c.force
                ct[i, j] = c.torque
            for j, name in enumerate(names):
                cells[i, j] = f.load_cells[name]
        return EstimateSeries(
            t=np.array([e.stamp for e in es], float), keyframe=np.array([e.keyframe for e in es], int),
            era=np.array(self.eras, int),
            q=stack("q", mech.n), v=stack("v", mech.n), a=stack("a", mech.n),
            effort=stack("effort", mech.n), lam=stack("lam", mech.m), u=stack("u", mech.n_u),
            bias=stack("bias", 0), gravity_scale=np.array([e.gravity_scale for e in es], float),
            mass_scale=np.array([e.mass_scale for e in es], float), std=std,
            closure_force=cf, closure_torque=ct, load_cells=cells)
