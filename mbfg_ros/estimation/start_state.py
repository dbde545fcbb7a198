"""Where a run starts, shared by the online estimator and the offline smoother: the first state,
its prior rows, the prior of a restart, and the constant-acceleration transition between
keyframes.

- :func:`start_state`: the config's assembly (``mechanism.initial``), or the assembly at given DOF
  values (the first encoder readings) on the branch of a hint (the last estimate, else the
  config's), with the config's DOF velocities (a rig recorded running starts at speed), the
  accelerations and multipliers of the equations of motion there;
- :func:`prior_information` / :func:`prior_rows`: the prior of a run's first keyframe, whitened:
  one row (x - mean) / sigma per state entry with a finite, positive sigma;
- :func:`restart_sigmas`: the prior of a restart from a solved state (the config's, positions at
  most 0.05 rad and velocities at most 0.5 rad/s);
- :func:`transition_matrix`: x_k from x_{k-1}: q + h v + h^2/2 a, v + h a, the rest held.
No ROS.
"""
from __future__ import annotations

import numpy as np

from mbfg_ros.errors import AssemblyError
from mbfg_ros.estimation.layout import StateLayout
from mbfg_ros.model.assembly import assemble, initial_state, solve_velocity
from mbfg_ros.model.config import EstimatorConfig
from mbfg_ros.model.mechanism import Mechanism, MechanismData

RESTART_POSITION_SIGMA = 0.05
"""rad (or m): the largest prior sigma of the positions of a restart from a solved state."""
RESTART_VELOCITY_SIGMA = 0.5
"""rad/s (or m/s): the largest prior sigma of the velocities of a restart from a solved state."""


def start_state(mech: Mechanism, data: MechanismData, lay: StateLayout, *, q: np.ndarray | None = None,
                v: np.ndarray | None = None, dof: np.ndarray | None = None,
                branch_hint: np.ndarray | None = None) -> np.ndarray:
    """A first state in ``lay``'s order: at (q, v) if q is given (v default zero); else the
    config's assembly, or, with ``dof`` values, the assembly at them on the branch of
    ``branch_hint`` (default the config's assembly) with the config's DOF velocities (the
    config's assembly where that fails)."""
    if q is not None:
        q = np.asarray(q, float)
        v = np.zeros(mech.n) if v is None else np.asarray(v, float)
    else:
        q, v = initial_state(mech, data)
        if dof is not None:
            hint = branch_hint if branch_hint is not None else q
            try:
                q = assemble(mech, data, dof, hint).q
                v_dof = np.array([v[mech.index[name]] for name in mech.dof_names])
                v = solve_velocity(mech, data, q, v_dof)
            except AssemblyError:
                pass                                  # keep the config's assembly
    a, lam = mech.forward_dynamics(data, q, v)
    return lay.pack(q, v, a, lam)


def prior_information(sigma: np.ndarray) -> np.ndarray:
    """(rows, dim) the square-root information of a prior with per-entry ``sigma``: a row 1/sigma
    per entry with a finite, positive sigma (inf: no prior on that entry)."""
    idx = np.flatnonzero(np.isfinite(sigma) & (sigma > 0))
    S = np.zeros((idx.size, sigma.size))
    S[np.arange(idx.size), idx] = 1.0 / sigma[idx]
    return S


def prior_rows(x: np.ndarray, mean: np.ndarray, sigma: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(x - mean) / sigma on the entries with a finite, positive sigma, and its Jacobian."""
    idx = np.flatnonzero(np.isfinite(sigma) & (sigma > 0))
    inv = 1.0 / sigma[idx]
    J = np.zeros((idx.size, x.size))
    J[np.arange(idx.size), idx] = inv
    return (x[idx] - mean[idx]) * inv, J


def restart_sigmas(lay: StateLayout, mech: Mechanism, cfg: EstimatorConfig) -> np.ndarray:
    """Prior sigmas of a restart from a solved state: the config's, positions at most
    RESTART_POSITION_SIGMA and velocities at most RESTART_VELOCITY_SIGMA."""
    sig = lay.prior_sigmas(mech, cfg)
    sig[lay.Q] = min(cfg.noise.prior_position, RESTART_POSITION_SIGMA)
    sig[lay.V] = min(cfg.noise.prior_velocity, RESTART_VELOCITY_SIGMA)
    return sig


def transition_matrix(lay: StateLayout, h: float) -> np.ndarray:
    """(dim, dim) x_k = T x_{k-1}: q + h v + h^2/2 a, v + h a, the rest held (h: the step, s)."""
    n = lay.n
    T = np.eye(lay.dim)
    T[:n, n:2 * n] = h * np.eye(n)
    T[:n, 2 * n:3 * n] = 0.5 * h * h * np.eye(n)
    T[n:2 * n, 2 * n:3 * n] = h * np.eye(n)
    return T
