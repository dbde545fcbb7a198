"""Errors of a replay's estimates against the ground truth, and their RMSE.

The truth is interpolated at the estimate stamps (it is recorded at 200 Hz by default):
positions by cubic Hermite through the truth's velocities, velocities through its accelerations
(where the truth has them), the rest linearly; a linear interpolation of a fast crank's
velocity between 1 kHz samples is off by up to h^2/8 times its jerk, which on
config/fast_crank.yaml at 400 Hz keyframes (every other one between two truth samples) doubled
the velocity RMSE and made a consistent covariance look overconfident (see :func:`consistency`).
Errors are estimate minus truth. Angles are compared unwrapped: the truth of an angular joint
is unwrapped in time first (a recorder may publish it wrapped), the estimate never is, and
the error is taken relative to the whole-turn offset at the first compared stamp (so a
single-turn start one turn away is no error), so a crank that falls behind by whole turns shows
in the RMSE; ``turn_slips`` counts, per angular joint, how often the error's whole-turn count
changed over the compared stamps (0 on a healthy run); ``startup`` holds the largest position
and velocity errors within the skipped start of each era (the start-up transient, reported, not
hidden). Effort: the estimate's actuator effort
(known + estimated inputs, without friction) against the truth's joint_states effort, which
``mbfg simulate`` writes as the applied actuator effort without friction: like with like.
The RMSE skips the first ``skip`` seconds of each era (the estimator's convergence from the
config's initial state, at the start and after every reset) and uses only stamps the truth
covers. Units: joint position
rad or m, velocity per s, acceleration per s^2, effort N m or N; closure forces N and N m in
the closure's frame_b; load cells in the cell's unit.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.replay.estimate_log import EstimateSeries
from mbfg_ros.replay.truth import TruthSeries

COMPONENTS = ("force_x", "force_y", "force_z", "torque_x", "torque_y", "torque_z")


@dataclass
class Comparison:
    """Errors at every estimate (NaN where the truth has no value) and RMSE after ``skip``."""
    skip: float
    t: np.ndarray                                   # (N,) estimate stamps, s
    used: np.ndarray                                # (N,) bool: counted in the RMSE
    truth_q: np.ndarray                             # (N, n) the truth at the stamps
    truth_v: np.ndarray
    truth_a: np.ndarray | None
    truth_effort: np.ndarray
    error_q: np.ndarray                             # (N, n)
    error_v: np.ndarray
    error_a: np.ndarray | None
    error_effort: np.ndarray
    truth_forces: dict[str, np.ndarray] = field(default_factory=dict)   # name -> (N, 6) or (N, 1)
    error_forces: dict[str, np.ndarray] = field(default_factory=dict)
    rmse: dict[str, dict[str, float | None]] = field(default_factory=dict)
    rmse_forces: dict[str, dict[str, float | None]] = field(default_factory=dict)
    turn_slips: dict[str, int] = field(default_factory=dict)   # angular joint -> whole-turn slips
    startup: dict[str, dict[str, float | None]] = field(default_factory=dict)  # joint -> max |error| in the skip

    @property
    def samples(self) -> int:
        return int(self.used.sum())


def _rmse(err: np.ndarray, used: np.ndarray) -> float | None:
    x = err[used]
    x = x[np.isfinite(x)]
    with np.errstate(over="ignore"):        # a damaged truth message can hold 1e300
        return float(np.sqrt(np.mean(x * x))) if x.size else None


def _max_abs(err: np.ndarray, sel: np.ndarray) -> float | None:
    x = err[sel]
    x = x[np.isfinite(x)]
    return float(np.max(np.abs(x))) if x.size else None


def era_starts(est: EstimateSeries) -> np.ndarray:
    """(N,) the first stamp of each estimate's era."""
    starts = np.zeros(len(est))
    for era in np.unique(est.era):
        sel = est.era == era
        starts[sel] = est.t[sel].min()
    return starts


def compare(mech: Mechanism, est: EstimateSeries, truth: TruthSeries, skip: float = 1.0) -> Comparison:
    """Compare ``est`` with ``truth``; RMSE over the stamps ``skip`` s or more into their era."""
    t = est.t
    ang = mech.angular
    qs = truth.q
    if qs is not None and qs.t.size and ang.any():     # unwrap the truth's angles in time
        y = qs.y.copy()
        y[:, ang] = np.unwrap(y[:, ang], axis=0)
        qs = type(qs)(qs.t, y)
    tq = qs.hermite(t, truth.v) if truth.v is not None else qs.at(t)
    tv = truth.v.hermite(t, truth.a) if truth.a is not None else truth.v.at(t)
    ta = truth.a.at(t) if truth.a is not None else None
    teff = truth.effort.at(t)
    eq = est.q - tq
    used = (t >= era_starts(est) + skip) & np.all(np.isfinite(tq), axis=1)
    slips = {}
    two_pi = 2 * np.pi
    for j in np.flatnonzero(ang):
        turns = np.round(eq[:, j] / two_pi)
        ok = used & np.isfinite(turns)
        if ok.any():
            eq[:, j] -= two_pi * turns[ok][0]          # the whole-turn offset at the first compared stamp
            slips[mech.joint_names[j]] = int(np.count_nonzero(np.diff(turns[ok])))
        else:
            slips[mech.joint_names[j]] = 0
    c = Comparison(skip, t, used, tq, tv, ta, teff, eq, est.v - tv,
                   None if ta is None else est.a - ta, est.effort - teff)
    c.turn_slips = slips
    # the start-up transient the RMSE skips: the largest errors in the first ``skip`` s of each era
    early = (t < era_starts(est) + skip) & np.all(np.isfinite(tq), axis=1)
    for j, name in enumerate(mech.joint_names):
        c.startup[name] = {"position_max": _max_abs(c.error_q[:, j], early),
                           "velocity_max": _max_abs(c.error_v[:, j], early)}
    actuated = set(mech.input_joints) | set(mech.known_input_joints)
    for j, name in enumerate(mech.joint_names):
        row = {"position": _rmse(c.error_q[:, j], used), "velocity": _rmse(c.error_v[:, j], used),
               "acceleration": None if c.error_a is None else _rmse(c.error_a[:, j], used)}
        if name in actuated:
            row["effort"] = _rmse(c.error_effort[:, j], used)
        c.rmse[name] = row
    for i, name in enumerate(mech.closure_names):
        if name not in truth.closure_force:
            continue
        tw = np.hstack([truth.closure_force[name].at(t), truth.closure_torque[name].at(t)])
        ew = np.hstack([est.closure_force[:, i], est.closure_torque[:, i]])
        c.truth_forces[name] = tw
        c.error_forces[name] = ew - tw
        c.rmse_forces[name] = {comp: _rmse(c.error_forces[name][:, k], used) for k, comp in enumerate(COMPONENTS)}
    for k, cell in enumerate(mech.load_cells):
        name = cell.config.name
        if name not in truth.load_cells:
            continue
        tl = truth.load_cells[name].at(t)
        c.truth_forces[name] = tl
        c.error_forces[name] = est.load_cells[:, k:k + 1] - tl
        c.rmse_forces[name] = {"reading": _rmse(c.error_forces[name][:, 0], used)}
    return c


def significant_components(c: Comparison, name: str, rel: float = 1e-6) -> list[int]:
    """Indices of the force components of ``name`` whose truth is not identically ~0 (a planar
    pin has no torque and no out-of-plane force): the ones worth printing and plotting."""
    tw = np.nan_to_num(c.truth_forces[name])
    mag = np.abs(tw).max(axis=0) if tw.shape[0] else np.zeros(tw.shape[1])
    top = float(mag.max()) if mag.size else 0.0
    return [k for k in range(tw.shape[1]) if mag[k] > rel * max(top, 1e-12)]


@dataclass
class DofConsistency:
    """How well the published standard deviations of one DOF cover its errors, over the
    compared stamps (those of the RMSE) where a standard deviation was published: the RMS of
    error / std of the position and of the velocity (1 when the covariance is honest; above 1
    it claims more than the estimate holds, below 1 less), and the fraction of errors within
    two standard deviations (0.954 for Gaussian errors)."""
    joint: str
    position_ratio: float
    velocity_ratio: float
    position_coverage: float
    velocity_coverage: float
    samples: int


def consistency(mech: Mechanism, est: EstimateSeries, c: Comparison) -> dict[str, DofConsistency] | None:
    """Per DOF joint, the consistency of the estimates' published standard deviations
    (``est.std``: a replay with ``covariance=True``) with their errors in ``c`` (the
    :func:`compare` of the same estimates); None where no standard deviation was published."""
    g = len(mech.dof)
    out = {}
    for i, j in enumerate(mech.dof):
        zq = c.error_q[:, j] / est.std[:, i]
        zv = c.error_v[:, j] / est.std[:, g + i]
        ok = c.used & np.isfinite(zq) & np.isfinite(zv)
        if not ok.any():
            return None
        zq, zv = zq[ok], zv[ok]
        out[mech.joint_names[j]] = DofConsistency(
            mech.joint_names[j], float(np.sqrt(np.mean(zq * zq))), float(np.sqrt(np.mean(zv * zv))),
            float(np.mean(np.abs(zq) <= 2.0)), float(np.mean(np.abs(zv) <= 2.0)), int(ok.sum()))
    return out
