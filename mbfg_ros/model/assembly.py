"""The position and velocity problems of a closed-chain mechanism.

Position problem (assembly): given the independent coordinates (the DOF) find the dependent ones
so that Phi(q) = 0, taking the branch nearest a hint. Newton-Raphson on the dependent
coordinates with minimum-norm least-squares steps (SVD, so redundant closure rows are fine).

Velocity problem: given the DOF velocities, the dependent velocities solve Phi_q v = 0.

Both raise :class:`~mbfg_ros.errors.AssemblyError` with a message naming the DOF values and the
closure that cannot be closed, and refuse a DOF choice that is not independent at the pose.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mbfg_ros.errors import AssemblyError
from mbfg_ros.model.mechanism import Mechanism, MechanismData


def rank(A: np.ndarray, rtol: float = 1e-9) -> int:
    """Numerical rank by SVD, relative tolerance ``rtol`` times the largest singular value."""
    if A.size == 0:
        return 0
    s = np.linalg.svd(A, compute_uv=False)
    return int(np.sum(s > rtol * max(1.0, s[0])))


def solve_least_squares(A: np.ndarray, b: np.ndarray, rtol: float = 1e-10) -> np.ndarray:
    """Minimum-norm least-squares solution (rank-revealing, never a singular solve)."""
    return np.linalg.lstsq(A, b, rcond=rtol)[0]


@dataclass
class AssemblyResult:
    q: np.ndarray
    residual: float
    iterations: int


def _describe_dof(mech: Mechanism, q: np.ndarray) -> str:
    return ", ".join(f"{n}={q[i]:.6g}" for n, i in zip(mech.dof_names, mech.dof))


def assemble(mech: Mechanism, data: MechanismData, dof_values, hint: np.ndarray | None = None, *,
             tol: float = 1e-13, max_iterations: int = 100, max_step: float = 0.5) -> AssemblyResult:
    """Solve the position problem: q with q[dof] = dof_values and Phi(q) = 0, near ``hint``."""
    q = np.zeros(mech.n) if hint is None else np.array(hint, float)
    q[mech.dof] = np.asarray(dof_values, float)
    if mech.m == 0:
        return AssemblyResult(q, 0.0, 0)
    dep = mech.dependent
    res = np.inf
    for it in range(1, max_iterations + 1):
        phi, J = mech.closure_position(data, q)
        res = float(np.linalg.norm(phi, np.inf))
        if not np.isfinite(res):
            break
        if res < tol:
            return AssemblyResult(q, res, it - 1)
        dx = solve_least_squares(J[:, dep], -phi)
        norm = np.linalg.norm(dx, np.inf)
        if norm > max_step:
            dx *= max_step / norm
        q[dep] += dx
        if norm < 1e-15:
            break
    phi, J = mech.closure_position(data, q)
    worst = _worst_closure(mech, phi)
    r, r_dep = rank(J), rank(J[:, dep])
    if r_dep < r:
        raise AssemblyError(
            f"the mechanism cannot be assembled with the DOF [{', '.join(mech.dof_names)}] held at "
            f"{_describe_dof(mech, q)}: the other coordinates cannot close closure '{worst}' (the "
            f"closures remove {r} of {mech.n} coordinates, so the mechanism has {mech.n - r} degree(s) "
            f"of freedom, and the DOF listed must be independent); fix mechanism.dof",
            field="mechanism.dof")
    raise AssemblyError(
        f"the mechanism cannot be assembled at {_describe_dof(mech, q)}: closure '{worst}' stays "
        f"open by {np.max(np.abs(phi)):.3g} after {max_iterations} Newton steps (check the link "
        "lengths, the closure frames, or pick DOF values the mechanism can reach)")


def _worst_closure(mech: Mechanism, phi: np.ndarray) -> str:
    worst, best = mech.closure_names[0], -1.0
    for name, rows in zip(mech.closure_names, mech.closure_rows):
        val = float(np.max(np.abs(phi[rows]))) if phi[rows].size else 0.0
        if val > best:
            worst, best = name, val
    return worst


def degrees_of_freedom(mech: Mechanism, data: MechanismData, q: np.ndarray) -> int:
    """n minus the rank of Phi_q at q."""
    _, J = mech.closure_position(data, q)
    return mech.n - rank(J)


def check_dof_choice(mech: Mechanism, data: MechanismData, q: np.ndarray) -> None:
    """Raise AssemblyError unless the declared DOF are independent and complete at q."""
    _, J = mech.closure_position(data, q)
    r = rank(J)
    dof = mech.n - r
    if len(mech.dof) != dof:
        raise AssemblyError(
            f"the mechanism has {dof} degree(s) of freedom at the assembled pose (rank of Phi_q is "
            f"{r} for {mech.n} coordinates) but mechanism.dof lists {len(mech.dof)}: "
            f"{', '.join(mech.dof_names)}")
    if r and rank(J[:, mech.dependent]) < r:
        raise AssemblyError(
            f"the DOF choice [{', '.join(mech.dof_names)}] is not independent at the assembled pose: "
            "the dependent coordinates cannot absorb every closure (a singular configuration or a "
            "DOF that the others determine); choose other joints in mechanism.dof")


def solve_velocity(mech: Mechanism, data: MechanismData, q: np.ndarray, dof_velocities) -> np.ndarray:
    """Velocity problem: v with v[dof] = dof_velocities and Phi_q v = 0."""
    v = np.zeros(mech.n)
    v[mech.dof] = np.asarray(dof_velocities, float)
    if mech.m == 0:
        return v
    _, J = mech.closure_position(data, q)
    v[mech.dependent] = solve_least_squares(J[:, mech.dependent], -J[:, mech.dof] @ v[mech.dof])
    return v


def project_position(mech: Mechanism, data: MechanismData, q: np.ndarray, *, tol: float = 1e-12,
                     max_iterations: int = 20) -> np.ndarray:
    """Nearest q (in the minimum-norm sense, all coordinates free) with Phi(q) = 0."""
    q = np.array(q, float)
    if mech.m == 0:
        return q
    for _ in range(max_iterations):
        phi, J = mech.closure_position(data, q)
        if np.max(np.abs(phi)) < tol:
            break
        q += solve_least_squares(J, -phi)
    return q


def project_velocity(mech: Mechanism, data: MechanismData, q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Nearest v with Phi_q v = 0."""
    if mech.m == 0:
        return np.array(v, float)
    _, J = mech.closure_position(data, q)
    return v - solve_least_squares(J, J @ v)


def initial_state(mech: Mechanism, data: MechanismData, dof_offset=None) -> tuple[np.ndarray, np.ndarray]:
    """The config's initial state: assembly from ``mechanism.initial`` (plus ``dof_offset`` on
    the DOF values, e.g. the benchmark's +pi/16) and the velocity problem."""
    init = mech.config.initial
    hint = np.zeros(mech.n)
    for name, val in {**init.hint, **init.positions}.items():
        hint[mech.index[name]] = val
    z = hint[mech.dof].copy()
    if dof_offset is not None:
        z = z + np.asarray(dof_offset, float)
    q = assemble(mech, data, z, hint).q
    zd = np.array([init.velocities.get(name, 0.0) for name in mech.dof_names])
    return q, solve_velocity(mech, data, q, zd)
