"""Local observability of the DOF from a sensor set, at one pose.

Two tests on the state x = (q, v), always stacked with the closure rows at position and velocity
level (which tie the dependent coordinates to the DOF):

- instantaneous: the sensor Jacobian dh/dx (encoders see positions, gyros velocities,
  accelerometers the direction of gravity, i.e. orientations, and the accelerations the forward
  dynamics give; load cells are left out);
- over a short time window (local weak observability): dh/dx stacked with the Jacobian of the
  first Lie derivative dh/dt = h_q v + h_v a(q, v), with a from the constrained forward
  dynamics. This is how gyros see positions: through the dynamics (gravity), as in the
  benchmark's gyro-only rigs.

A DOF is reported unobservable (position or velocity) when the null space of the stacked
Jacobian has a component along it. The Lie-derivative Jacobian is a central difference (this is
a start-up diagnostic, not a hot path).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mbfg_ros.model.mechanism import Mechanism, MechanismData


@dataclass
class ObservabilityReport:
    observable: bool                       # every DOF position and velocity, over a short window
    unobservable: list[str] = field(default_factory=list)
    direct_positions: list[str] = field(default_factory=list)    # DOF seen at once (position)
    direct_velocities: list[str] = field(default_factory=list)   # DOF seen at once (velocity)
    rank: int = 0
    state_dimension: int = 0


def _observing(mech: Mechanism) -> list:
    """The sensors the test counts (kinematic and inertial ones: not the load cells, whose
    readings the unknown inputs may explain)."""
    return [s for s in mech.sensors if s.observes]


def _sensor_values(mech: Mechanism, data: MechanismData, q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The measured readings of the observing sensors at (q, v); a sensor of accelerations reads
    them from the forward dynamics (no inputs)."""
    sensors = _observing(mech)
    a = lam = None
    if any(s.level >= 2 for s in sensors):
        a, lam = mech.forward_dynamics(data, q, v)
    out: list[float] = []
    for s in sensors:
        out.extend(s.measured(s.value(mech, data, q, v, a, lam, np.zeros(mech.n_u), np.zeros(mech.n))))
    return np.asarray(out, float)


def _null_components(O: np.ndarray, n: int, dof: np.ndarray, rtol: float = 1e-7) -> tuple[np.ndarray, np.ndarray, int]:
    """Per-DOF size of the null-space components on (position, velocity), and the rank."""
    if O.shape[0] == 0:
        N = np.eye(2 * n)
        r = 0
    else:
        _, s, Vt = np.linalg.svd(O)
        r = int(np.sum(s > rtol * max(1.0, s[0])))
        N = Vt[r:].T                                   # (2n, 2n - r)
    pos = np.linalg.norm(N[dof], axis=1) if N.size else np.zeros(len(dof))
    vel = np.linalg.norm(N[n + dof], axis=1) if N.size else np.zeros(len(dof))
    return pos, vel, r


def observability(mech: Mechanism, data: MechanismData, q: np.ndarray, v: np.ndarray | None = None,
                  eps: float = 1e-6) -> ObservabilityReport:
    """Observability report at the pose q (velocity v, default a small generic motion)."""
    n = mech.n
    if v is None:
        from mbfg_ros.model.assembly import solve_velocity
        v = solve_velocity(mech, data, q, np.full(len(mech.dof), 0.1))
    e = mech.closures(data, q, v)
    C = np.block([[e.phi_q, np.zeros((mech.m, n))], [e.phid_q, e.phi_q]])

    def h(x):
        return _sensor_values(mech, data, x[:n], x[n:])

    def lie(x):
        qq, vv = x[:n], x[n:]
        a, _ = mech.forward_dynamics(data, qq, vv)
        hq = _jac(lambda y: h(np.concatenate([y, vv])), qq, eps)
        hv = _jac(lambda y: h(np.concatenate([qq, y])), vv, eps)
        return hq @ vv + hv @ a

    x = np.concatenate([q, v])
    dh = _jac(h, x, eps) if _observing(mech) else np.zeros((0, 2 * n))
    direct_p, direct_v, _ = _null_components(np.vstack([C, dh]), n, mech.dof)
    if dh.shape[0]:
        dl = _jac(lie, x, 1e-4)
        O = np.vstack([C, dh, dl / max(1.0, np.abs(dl).max()) * max(1.0, np.abs(dh).max())])
    else:
        O = C
    pos, vel, r = _null_components(O, n, mech.dof)
    tol = 1e-6
    unobs = [f"{name} position" for name, c in zip(mech.dof_names, pos) if c > tol]
    unobs += [f"{name} velocity" for name, c in zip(mech.dof_names, vel) if c > tol]
    return ObservabilityReport(
        observable=not unobs, unobservable=unobs,
        direct_positions=[nm for nm, c in zip(mech.dof_names, direct_p) if c <= tol],
        direct_velocities=[nm for nm, c in zip(mech.dof_names, direct_v) if c <= tol],
        rank=r, state_dimension=2 * n)


def _jac(f, x: np.ndarray, eps: float) -> np.ndarray:
    f0 = f(x)
    J = np.zeros((f0.size, x.size))
    for i in range(x.size):
        dx = np.zeros_like(x)
        dx[i] = eps
        J[:, i] = (f(x + dx) - f(x - dx)) / (2 * eps)
    return J
