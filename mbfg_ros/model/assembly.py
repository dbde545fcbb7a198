"""The position and velocity problems of a closed-chain mechanism.

Position problem (assembly): given the independent coordinates (the DOF) find the dependent ones
so that Phi(q) = 0, taking the branch nearest a hint. Newton-Raphson on the dependent
coordinates with minimum-norm least-squares steps (SVD, so redundant closure rows are fine).

Velocity problem: given the DOF velocities, the dependent velocities solve Phi_q v = 0.

Both raise :class:`~mbfg_ros.errors.AssemblyError` with a message naming the DOF values and the
closure that cannot be closed, and refuse a DOF choice that is not independent.

Degrees of freedom: n minus the rank of Phi_q at a generic pose (:func:`generic_rank`: the
largest rank over the assembled pose and a few random assembled poses near it), never at one
pose alone: where links are in line the rank drops and two motion branches may meet, and rows
redundant everywhere (Bricard's mechanism) never count.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mbfg_ros.errors import AssemblyError
from mbfg_ros.model.mechanism import Mechanism, MechanismData


RANK_TOLERANCE = 1e-9
"""Singular values of a closure Jacobian below this fraction of its largest are zero (redundant
rows, or a direction the closures do not constrain)."""

GENERIC_POSES = 4
"""Random poses near the assembled one over which :func:`generic_rank` takes the largest rank."""

GENERIC_SPREAD = 0.05
"""rad (m for a prismatic joint): standard deviation of the random step, on every coordinate,
from the assembled pose to each of those poses before it is projected back onto Phi(q) = 0."""

CLOSED = 1e-9
"""m (rad for rotation rows): largest |Phi| of a pose that counts as assembled."""


def rank(A: np.ndarray, rtol: float = RANK_TOLERANCE) -> int:
    """Numerical rank by SVD: the singular values above ``rtol`` times the largest (0 for an
    empty or zero matrix)."""
    if A.size == 0:
        return 0
    s = np.linalg.svd(A, compute_uv=False)
    return int(np.sum(s > rtol * s[0])) if s[0] > 0.0 else 0


def condition_number(A: np.ndarray, r: int) -> float:
    """Largest over the ``r``-th largest singular value of ``A``, where ``r`` is its rank at a
    generic pose (:func:`generic_rank`): the condition over the rows that are not redundant
    everywhere. ``inf`` where A has lost rank (a singular pose), 1.0 for r = 0 (no closure)."""
    if r <= 0 or A.size == 0:
        return 1.0
    s = np.linalg.svd(A, compute_uv=False)
    if r > s.size or not np.all(np.isfinite(s)) or s[r - 1] <= 0.0:
        return float("inf")
    return float(s[0] / s[r - 1])


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
    phi, _ = mech.closure_position(data, q)
    worst = _worst_closure(mech, phi)
    problem = dof_choice_problem(mech, generic_rank(mech, data, q))
    if problem:
        raise AssemblyError(
            f"the mechanism cannot be assembled with the DOF [{', '.join(mech.dof_names)}] held at "
            f"{_describe_dof(mech, q)}: the other coordinates cannot close closure '{worst}': "
            f"{problem}", field="mechanism.dof")
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


@dataclass(frozen=True)
class GenericRank:
    """Ranks of the closure Jacobian Phi_q at a generic pose of the mechanism: the largest over
    the poses of :func:`generic_poses`, so that a singular pose (links in line, two motion
    branches meeting) does not lower them, and rows that are redundant everywhere (Bricard's
    mechanism, a spatial closure on a planar loop) do not count."""
    closures: int       # of Phi_q: the closures remove this many coordinates (DOF = n - closures)
    dependent: int      # of its block on the coordinates mechanism.dof does not list


def generic_poses(mech: Mechanism, data: MechanismData, q: np.ndarray, *, count: int = GENERIC_POSES,
                  spread: float = GENERIC_SPREAD, seed: int = 0) -> list[np.ndarray]:
    """``q`` (if assembled) and up to ``count`` assembled poses near it: q plus a random step of
    ``spread`` per coordinate, projected back onto Phi(q) = 0 over all coordinates (so that the
    DOF choice plays no part); a projection that does not close is dropped. Only ``q`` if none
    closes. The same poses for the same arguments (``seed``)."""
    def closed(p: np.ndarray) -> bool:
        phi = mech.closure_position(data, p)[0]
        return bool(np.all(np.isfinite(phi)) and np.max(np.abs(phi), initial=0.0) < CLOSED)

    rng = np.random.default_rng(seed)
    poses = [q] if closed(q) else []
    for _ in range(count):
        p = project_position(mech, data, q + spread * rng.standard_normal(mech.n))
        if closed(p):
            poses.append(p)
    return poses or [q]


def generic_rank(mech: Mechanism, data: MechanismData, q: np.ndarray) -> GenericRank:
    """Ranks of Phi_q and of its dependent block at a generic pose near ``q`` (see
    :class:`GenericRank`)."""
    if mech.m == 0:
        return GenericRank(0, 0)
    r = r_dep = 0
    for p in generic_poses(mech, data, q):
        _, J = mech.closure_position(data, p)
        r, r_dep = max(r, rank(J)), max(r_dep, rank(J[:, mech.dependent]))
    return GenericRank(r, r_dep)


def degrees_of_freedom(mech: Mechanism, data: MechanismData, q: np.ndarray) -> int:
    """n minus the rank of Phi_q at a generic pose near the assembled ``q``."""
    return mech.n - generic_rank(mech, data, q).closures


def dof_choice_problem(mech: Mechanism, ranks: GenericRank) -> str | None:
    """Why ``mechanism.dof`` is not a set of independent coordinates for these ranks (None if
    it is one): it lists more or fewer joints than the mechanism has degrees of freedom, or the
    other coordinates cannot absorb every closure at a generic pose."""
    names = ", ".join(mech.dof_names)
    dof = mech.n - ranks.closures
    if len(mech.dof) != dof:
        return (f"the closures remove {ranks.closures} of {mech.n} coordinates (the rank of Phi_q at "
                f"a generic pose), so the mechanism has {dof} degree(s) of freedom, but mechanism.dof "
                f"lists {len(mech.dof)}: [{names}]; list {dof} independent joint(s)")
    if ranks.dependent < ranks.closures:
        return (f"the DOF [{names}] are not independent: the other coordinates cannot absorb every "
                f"closure at a generic pose (their block of Phi_q has rank {ranks.dependent}, the "
                f"closures {ranks.closures}); choose other joints in mechanism.dof")
    return None


def check_dof_choice(mech: Mechanism, data: MechanismData, q: np.ndarray) -> GenericRank:
    """Raise AssemblyError (field ``mechanism.dof``) unless the declared DOF are independent and
    complete at a generic pose near the assembled ``q``; return the ranks there. A pose where
    this choice of DOF is singular (a dead centre) is not refused here: the condition number at
    the pose tells it (:func:`condition_number`)."""
    ranks = generic_rank(mech, data, q)
    problem = dof_choice_problem(mech, ranks)
    if problem:
        raise AssemblyError(problem, field="mechanism.dof")
    return ranks


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
