"""The forces of many estimates at once: closure reactions and load-cell readings.

Same quantities as :func:`mbfg_ros.estimation.estimator.estimate_forces` (each closure's
reaction on frame_b's body at its origin, in frame_b, N and N m; each load cell's estimated
reading, N or N m), from the symbolic model (:class:`~mbfg_ros.model.symbolic.SymbolicMechanism`)
as one CasADi function mapped over a block of keyframes: one call per block instead of a
pinocchio pass per keyframe.
"""
from __future__ import annotations

import casadi as ca
import numpy as np

from mbfg_ros.estimation.mapped_function import mapped_function
from mbfg_ros.estimation.outputs import ClosureForce, Estimate, Forces
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.model.symbolic import SymbolicMechanism

BLOCK = 1024


class BatchForces:
    """Forces of stacked states; ``sym``: a SymbolicMechanism of ``mech`` to share."""

    def __init__(self, mech: Mechanism, sym: SymbolicMechanism | None = None, block: int = BLOCK) -> None:
        self.mech = mech
        sym = sym or SymbolicMechanism(mech)
        n, m, nu = mech.n, mech.m, mech.n_u
        q, v, a, tau = (ca.SX.sym(s, n) for s in ("q", "v", "a", "tau"))
        lam, u = ca.SX.sym("lam", m), ca.SX.sym("u", nu)
        outs = []
        for f, t in sym.closure_wrenches_in_frame_b(q, lam):
            outs += [f, t]
        outs += [cell.symbolic(sym, q, v, a, lam, u, tau) for cell in mech.load_cells]
        self.width = 6 * len(mech.closure_configs) + len(mech.load_cells)
        out = ca.vertcat(*outs) if outs else ca.SX.zeros(1)
        fn = ca.Function("forces", [q, v, a, lam, u, tau], [ca.densify(out)], {"cse": True})
        self.B = block
        self._args = [np.zeros((block, max(k, 1))) for k in (n, n, n, m, nu, n)]
        self._out = np.zeros((block, max(self.width, 1)))
        self.mapped = mapped_function(fn, block)
        self._buf, self._eval = self.mapped.buffer()
        for i, arr in enumerate(self._args):
            self._buf.set_arg(i, memoryview(arr))
        self._buf.set_res(0, memoryview(self._out))

    def __call__(self, q, v, a, lam, u, tau) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(closure force (N, nc, 3), closure torque (N, nc, 3), load cells (N, ncell)) of the
        states given as (N, .) arrays (tau: the known input efforts)."""
        N = q.shape[0]
        nc, ncell = len(self.mech.closure_configs), len(self.mech.load_cells)
        out = np.zeros((N, self.width))
        parts = [q, v, a, lam, u, tau]
        for s in range(0, N, self.B):
            e = min(N, s + self.B)
            c = e - s
            for buf, x in zip(self._args, parts):
                if x.shape[1]:
                    buf[:c] = x[s:e]
                    buf[c:] = 0.0
            self._eval()
            out[s:e] = self._out[:c, :self.width]
        w = out[:, :6 * nc].reshape(N, nc, 2, 3)
        return w[:, :, 0, :], w[:, :, 1, :], out[:, 6 * nc:]

    def forces(self, estimates: list[Estimate], tau: np.ndarray) -> list[Forces]:
        """The Forces of each estimate (``tau`` (N, n): their known input efforts)."""
        if not estimates:
            return []
        mech = self.mech
        X = np.stack([e.x for e in estimates])
        lay = estimates[0].layout
        n = lay.n
        F, T, cells = self(X[:, :n], X[:, n:2 * n], X[:, 2 * n:3 * n], X[:, lay.L], X[:, lay.U], tau)
        return self.as_forces(estimates, F, T, cells)

    def as_forces(self, estimates: list[Estimate], F: np.ndarray, T: np.ndarray, cells: np.ndarray) -> list[Forces]:
        """Forces objects of the estimates from the arrays :meth:`__call__` gave for them."""
        mech = self.mech
        act = [(name, mech.index[name]) for name in mech.joint_names
               if name in set(mech.input_joints) | set(mech.known_input_joints)]
        names = [c.config.name for c in mech.load_cells]
        out = []
        for i, e in enumerate(estimates):
            closures = [ClosureForce(c.name, c.frame_b, F[i, j], T[i, j]) for j, c in enumerate(mech.closure_configs)]
            out.append(Forces(closures, {nm: float(cells[i, k]) for k, nm in enumerate(names)},
                              {nm: float(e.effort[j]) for nm, j in act}))
        return out
