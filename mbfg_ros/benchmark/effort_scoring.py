"""Scoring an estimated joint effort against a torque recorded on a real rig, with the simple
method to beat: inverse dynamics of the same model on filtered encoder positions.

- :func:`savgol_derivatives`: a Savitzky-Golay filter on the samples' own stamps (a polynomial
  of ``order`` fitted by least squares to ``window`` consecutive samples, then evaluated with its
  first two derivatives): ``causal`` fits the window ending at each sample (what a controller
  can compute as the samples arrive), otherwise the window centred on it (zero phase: an offline
  reference that sees the future). On uniformly spaced samples one set of coefficients serves
  every sample (scipy's savgol_coeffs); on jittered stamps it stays a least-squares fit at the
  true times.
- :func:`inverse_dynamics_effort`: the effort the model needs for (q, v, a): pinocchio's RNEA
  (the joints' armature included) plus the config's friction and offsets: tau = M a + h + F(v) + o.
- :func:`normalised_rmse`: RMSE(estimate - recorded) / RMS(recorded): 1.0 is what an estimate
  of zero scores, 0 a perfect one.

:func:`mbfg_ros.replay.recorded_torque.score_recorded_run` replays a recorded log and scores
the estimates and these baselines against its recorded torque.

Units: s, rad (or m), N m (or N).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from mbfg_ros.model.mechanism import Mechanism

METHODS = ("filtered", "lagged", "causal_baseline", "zero_phase_baseline")
"""What :func:`~mbfg_ros.replay.recorded_torque.score_recorded_run` scores: the estimator's newest estimate, its smoothed (lagged)
one, the causal and the zero-phase inverse-dynamics baselines."""

CAUSAL_WINDOW = 31
"""samples (62 ms at the double pendulum's 500 Hz) of the causal baseline's Savitzky-Golay fit."""
ZERO_PHASE_WINDOW = 71
"""samples (142 ms at 500 Hz) of the zero-phase (offline) baseline's centred fit. Both windows are
the best of a grid (causal 15-71, centred 25-151 samples) for the elbow of nine recorded runs of
the DFKI double pendulum, design C.0, scored against the recorded torque: the baselines at
their best, chosen with a truth the estimator never sees."""
UNIFORM_TOLERANCE = 1e-6
"""relative: stamps whose steps all lie this close to their median are uniformly spaced (the
Savitzky-Golay fit then takes scipy's coefficients; otherwise a least-squares fit per sample)."""
BASELINE_ORDER = 2
"""polynomial order of the baselines' Savitzky-Golay fit (the lowest with an acceleration)."""


@dataclass(frozen=True)
class FilteredMotion:
    """Positions, velocities and accelerations at each sample (NaN where the window does not fit)."""
    q: np.ndarray
    v: np.ndarray
    a: np.ndarray


def savgol_derivatives(t: np.ndarray, q: np.ndarray, window: int = CAUSAL_WINDOW,
                       order: int = BASELINE_ORDER, causal: bool = True) -> FilteredMotion:
    """Savitzky-Golay position, velocity and acceleration of ``q`` (N,) or (N, n) sampled at
    ``t`` (N,) s (see the module docstring); a centred window needs an odd ``window``."""
    t = np.asarray(t, float)
    q = np.asarray(q, float)
    flat = q.ndim == 1
    Q = q[:, None] if flat else q
    N = t.size
    if order < 2 or window <= order:
        raise ValueError(f"need order >= 2 and window > order (window {window}, order {order})")
    if not causal and window % 2 == 0:
        raise ValueError(f"a centred window has an odd length (value: {window})")
    out = np.full((3,) + Q.shape, np.nan)
    lead = window - 1 if causal else window // 2
    first, last = lead, N - (0 if causal else window // 2)
    if last <= first:
        return FilteredMotion(*(x[:, 0] if flat else x for x in out))
    steps = np.diff(t)
    dt = float(np.median(steps)) if steps.size else 0.0
    if dt > 0 and np.all(np.abs(steps - dt) <= UNIFORM_TOLERANCE * dt):
        # uniformly spaced: one set of fit coefficients for every sample (what scipy's
        # savgol_coeffs gives; computed here, where importing scipy.signal would cost 1.5 s)
        x = (np.arange(window) - lead) / (0.5 * window)                # conditioning
        rows = np.linalg.pinv(x[:, None] ** np.arange(order + 1))     # (p+1, W): the fit's coefficients
        view = np.lib.stride_tricks.sliding_window_view(Q, window, axis=0)   # (N - W + 1, n, W)
        unit = 0.5 * window * dt
        for d, factor in enumerate((1.0, 1.0 / unit, 2.0 / unit ** 2)):
            out[d, first:last] = view @ (factor * rows[d])
        return FilteredMotion(*(x[:, 0] if flat else x for x in out))
    k = np.arange(first, last)
    idx = k[:, None] + np.arange(window)[None, :] - lead          # (K, W) the window's samples
    dt = t[idx] - t[k][:, None]
    scale = max(float(np.median(np.abs(dt))), 1e-12)             # conditioning
    V = (dt / scale)[:, :, None] ** np.arange(order + 1)          # (K, W, p+1)
    coeff = np.linalg.solve(np.einsum("kwi,kwj->kij", V, V),
                            np.einsum("kwi,kwn->kin", V, Q[idx]))  # (K, p+1, n)
    out[0, k] = coeff[:, 0]
    out[1, k] = coeff[:, 1] / scale
    out[2, k] = 2.0 * coeff[:, 2] / scale ** 2
    return FilteredMotion(*(x[:, 0] if flat else x for x in out))


def generalized_forces(mech: Mechanism, q: np.ndarray, v: np.ndarray, a: np.ndarray) -> np.ndarray:
    """(N, n) M(q) a + h(q, v) + F(v) + offset per row (the tree's joint forces, closures and
    springs left out), NaN where the motion is NaN."""
    data = mech.model.createData()
    out = np.full(np.shape(q), np.nan)
    for i in np.nonzero(np.all(np.isfinite(q) & np.isfinite(v) & np.isfinite(a), axis=1))[0]:
        out[i] = pin.rnea(mech.model, data, q[i], v[i], a[i]) + mech.friction(v[i])[0] + mech.offset
    return out


def inverse_dynamics_effort(mech: Mechanism, q: np.ndarray, v: np.ndarray, a: np.ndarray) -> np.ndarray:
    """(N, n) effort M(q) a + h(q, v) + F(v) + offset of an open chain (no closure), NaN where
    the motion is NaN."""
    if mech.m:
        raise ValueError("the inverse-dynamics baseline is for open chains (this rig has closures)")
    return generalized_forces(mech, q, v, a)


def baseline_effort(mech: Mechanism, t: np.ndarray, q: np.ndarray, causal: bool = True,
                    window: int | None = None, order: int = BASELINE_ORDER) -> np.ndarray:
    """(N, n) the inverse-dynamics baseline at the samples: Savitzky-Golay derivatives of the
    encoder positions ``q`` (N, n) at ``t`` (``window`` default :data:`CAUSAL_WINDOW` or
    :data:`ZERO_PHASE_WINDOW`), then :func:`inverse_dynamics_effort`."""
    if window is None:
        window = CAUSAL_WINDOW if causal else ZERO_PHASE_WINDOW
    m = savgol_derivatives(t, q, window, order, causal)
    return inverse_dynamics_effort(mech, m.q, m.v, m.a)


def normalised_rmse(estimate: np.ndarray, recorded: np.ndarray) -> np.ndarray:
    """RMSE / RMS of the recorded values, per column, over the rows where both are finite."""
    e, r = np.atleast_2d(np.asarray(estimate, float).T).T, np.atleast_2d(np.asarray(recorded, float).T).T
    ok = np.all(np.isfinite(e) & np.isfinite(r), axis=1)
    return np.sqrt(np.mean((e[ok] - r[ok]) ** 2, axis=0) / np.mean(r[ok] ** 2, axis=0))
