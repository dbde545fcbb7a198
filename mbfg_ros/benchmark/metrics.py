"""Accuracy, cost and failure of one method on one run.

All errors are over every time step of the run (as in the paper; the initial transient from the
pi/16 start is included) and over the DOF coordinates (mech.dof):

- position, velocity, acceleration: RMSE over steps and DOF, rad, rad/s, rad/s^2 (angle errors
  wrapped into (-pi, pi], so a whole turn is no error);
- force: RMSE of the loop-closure reaction force (N): the norm of the force error vector of
  every closure (its reaction on frame_b's body, in frame_b), from the method's closure
  multipliers at its estimated pose (Kalman filters: the multipliers of their model's forward
  dynamics at their estimate; mbfg_ros and the batch smoother: their estimated multipliers);
- cpu: CPU milliseconds per time step (the method's CPU time / the number of steps).

Failure (reported apart, never averaged in): an exception, a non-finite estimate, or a position
RMSE over the last half of the run above ``fail_threshold`` rad (default 0.1 rad = 5.7 deg,
about six times the encoder noise: the estimate has lost the mechanism).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from mbfg_ros.benchmark.methods import Track
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.sim.ground_truth import closure_wrench_in_frame_b

METRICS = ("position", "velocity", "acceleration", "force", "cpu")
UNITS = {"position": "rad", "velocity": "rad/s", "acceleration": "rad/s^2", "force": "N",
         "cpu": "ms/step", "position_last_half": "rad"}


@dataclass
class Truth:
    """The truth at every step: q, v, a (N, n); closure_force (N, nc, 3) in frame_b (N)."""
    q: np.ndarray
    v: np.ndarray
    a: np.ndarray
    closure_force: np.ndarray


@dataclass
class Metrics:
    """One method on one run (units: see UNITS); ``failed`` with its ``reason``."""
    position: float
    velocity: float
    acceleration: float
    force: float
    position_last_half: float
    cpu: float
    failed: bool
    reason: str = ""
    held: int = 0

    def as_dict(self) -> dict:
        return asdict(self)


def failure(reason: str, cpu: float = float("nan")) -> Metrics:
    """The metrics of a method that raised (every figure NaN)."""
    nan = float("nan")
    return Metrics(nan, nan, nan, nan, nan, cpu, True, reason)


def _rmse(err: np.ndarray) -> float:
    return float(np.sqrt(np.mean(err * err))) if err.size else float("nan")


def closure_forces(mech: Mechanism, q: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """(N, nc, 3) every closure's reaction force on frame_b's body in frame_b (N)."""
    d = mech.create_data()
    nc = len(mech.closure_configs)
    out = np.zeros((q.shape[0], nc, 3))
    for i in range(q.shape[0]):
        for k in range(nc):
            out[i, k] = closure_wrench_in_frame_b(mech, d, k, q[i], lam[i])[0]
    return out


def evaluate(mech: Mechanism, track: Track, truth: Truth, fail_threshold: float) -> Metrics:
    """Compare ``track`` with ``truth`` (same steps) on ``mech``'s DOF."""
    N = truth.q.shape[0]
    dof = mech.dof
    cpu = track.cpu / N * 1e3
    arrays = (track.q, track.v, track.a, track.lam)
    if not all(np.all(np.isfinite(x)) for x in arrays):
        m = failure("non-finite estimate", cpu)
        m.held = track.held
        return m
    dq = track.q[:, dof] - truth.q[:, dof]
    ang = mech.angular[dof]
    dq[:, ang] = (dq[:, ang] + math.pi) % (2.0 * math.pi) - math.pi
    dv = track.v[:, dof] - truth.v[:, dof]
    da = track.a[:, dof] - truth.a[:, dof]
    force = float("nan")
    if mech.m:
        df = closure_forces(mech, track.q, track.lam) - truth.closure_force
        force = float(np.sqrt(np.mean(np.sum(df * df, axis=2))))
    last = _rmse(dq[N // 2:])
    failed, reason = False, ""
    if not last <= fail_threshold:
        failed, reason = True, f"diverged: last-half position RMSE {last:.3g} rad > {fail_threshold:g} rad"
    return Metrics(_rmse(dq), _rmse(dv), _rmse(da), force, last, cpu, failed, reason, track.held)
