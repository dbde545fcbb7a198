"""The simplest method a user would try, beside a replay's accuracy: filtered inverse dynamics.

Savitzky-Golay derivatives (quadratic) of the encoder readings the replay used, then the model's
inverse dynamics with its friction, armature and offsets (:mod:`mbfg_ros.benchmark.effort_scoring`;
not the springs of an open chain):
*causal* (a one-sided window ending at the sample, what a controller can compute online: compare
it with the filtered estimate) and *zero-phase* (a centred window, offline: compare it with the
lagged or smoothed one). Scored against the same truth at the same keyframe stamps and over the
same keyframes as the estimate, with the *floor* beside them: the inverse dynamics of the true
motion (what the model's own error costs, e.g. a tanh Coulomb against an engine's dry friction).

The window (one per rig):
- **by its rule**, from the data and the encoders' noise alone (:func:`rule_window`): per joint the
  odd W minimising the acceleration's error variance, noise 720 s^2 / (W (W^2-1) (W^2-4) dt^4)
  (s the encoder noise, dt the sample period) plus the squared bias: causal, the lag of half the
  window times the jerk's RMS; zero-phase, S (W dt)^2 / 56 (S the snap's RMS); jerk and snap
  from a 0.1 s zero-phase pilot fit (shorter on a rig with a ``top_speed``); the median over
  the joints;
- **swept against the truth** (odd windows 11-201 samples at 1 kHz, scaled with the rate): the
  best for the DOF accelerations' mean relative RMSE, reported beside it (a baseline at its
  best, chosen with a truth the estimator never sees).

A closed loop (every DOF encoded) takes the dependent joints from the loop equations at each
keyframe (position by Newton from the estimate's pose, which picks the branch, to 1e-8; velocity and
acceleration from the closures' rows), and the input efforts and the closure multipliers from the least squares of
``M a + h + F(v) = S tau + Phi_q^T lam`` (S: the actuated joints' columns), the same model the
estimator's equations of motion use; the closures' reactions then follow as the estimator's do
(in frame_b). The sweep picks the window by the DOF accelerations' mean relative RMSE.

``lag``: the shift of a series against the truth (ms, positive = late) that minimises its RMSE,
within +-``MAX_SHIFT`` s. Rigs where a joint (open chain) or a DOF (closed loop) has no encoder
get None. Units: s, rad (or m), N m (or N).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mbfg_ros.benchmark.effort_scoring import (BASELINE_ORDER, generalized_forces, inverse_dynamics_effort,
                                               savgol_derivatives)
from mbfg_ros.errors import AssemblyError
from mbfg_ros.model.assembly import assemble, solve_least_squares, solve_velocity
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.replay.estimate_log import EstimateSeries
from mbfg_ros.replay.metrics import Comparison
from mbfg_ros.replay.residuals import SampleLog
from mbfg_ros.replay.truth import TruthSeries

MAX_SCORED = 300
"""keyframes at most that the baselines and the estimate are scored at (spread evenly over the
compared ones: a closed loop's baseline assembles the loop at each; an RMSE over 300 samples is
within about 4 % of the whole run's)."""
MAX_SHIFT = 0.03
"""s: the largest shift the lag search tries."""
PILOT_SPAN = 0.1
"""s: the pilot zero-phase fit that estimates the motion's jerk and snap for the rule."""
SWEEP_MS = (11, 21, 31, 41, 61, 81, 101, 141, 201)
"""windows the sweep tries, in samples at 1 kHz (scaled to the encoders' rate, kept odd), judged
by the DOF accelerations (the efforts are computed for the best one only)."""


@dataclass
class MethodScore:
    """Per joint (config order): RMSE of the acceleration and the effort, and their lags (ms);
    per closure: the RMSE of its reaction force's components in frame_b (N), the largest."""
    acceleration: np.ndarray
    effort: np.ndarray
    acceleration_lag: np.ndarray
    effort_lag: np.ndarray
    closure_force: dict[str, float] = field(default_factory=dict)

    def as_dict(self, names: list[str]) -> dict:
        out = {name: {"acceleration": _num(self.acceleration[j]), "effort": _num(self.effort[j]),
                      "acceleration_lag_ms": _num(self.acceleration_lag[j]),
                      "effort_lag_ms": _num(self.effort_lag[j])} for j, name in enumerate(names)}
        if self.closure_force:
            out["closures"] = {k: _num(v) for k, v in self.closure_force.items()}
        return out


@dataclass
class BaselineAccuracy:
    """The estimate and the baselines scored alike (module docstring); windows in samples."""
    joints: list[str]
    rate: float                                   # Hz, the encoders' median rate
    rule: dict[str, int]                          # {"causal": W, "zero_phase": W}
    best: dict[str, int]                          # the sweep's windows
    scores: dict[str, MethodScore] = field(default_factory=dict)   # estimate, causal_*, zero_phase_*, floor

    def as_dict(self) -> dict:
        return {"rate_hz": self.rate, "window_rule": self.rule, "window_best": self.best,
                "methods": {k: s.as_dict(self.joints) for k, s in self.scores.items()}}


def _num(x) -> float | None:
    return float(x) if x is not None and np.isfinite(x) else None


def encoder_motion(mech: Mechanism, samples: SampleLog) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(t (N,), q (N, k), coordinates (k,)): the encoder readings (less the encoder's offset) of
    every joint of an open chain, or of every DOF of a closed loop, on the first one's stamps;
    None when one of them has no encoder."""
    coords = np.asarray(mech.dof if mech.m else np.arange(mech.n), int)
    encs = {e.joint: e for e in mech.config.sensors.encoders}
    names = [mech.joint_names[i] for i in coords]
    if any(name not in encs for name in names):
        return None
    t0, _ = samples.arrays(encs[names[0]].name)
    if t0.size < 50:
        return None
    q = np.zeros((t0.size, coords.size))
    for j, name in enumerate(names):
        t, y = samples.arrays(encs[name].name)
        if t.size < 2:
            return None
        q[:, j] = np.interp(t0, t, y[:, 0] - encs[name].offset)
    return t0, q, coords


def closed_loop_motion(mech: Mechanism, q_dof: np.ndarray, v_dof: np.ndarray, a_dof: np.ndarray,
                       hints: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(K, n) q, v, a of every joint from the DOF's, through the loop equations (NaN where the
    DOF's are NaN or the loop does not assemble); ``hints`` (K, n): each row's assembly start
    (the branch)."""
    data = mech.create_data()
    K = q_dof.shape[0]
    Q, V, A = (np.full((K, mech.n), np.nan) for _ in range(3))
    dep = mech.dependent
    for i in range(K):
        if not (np.all(np.isfinite(q_dof[i])) and np.all(np.isfinite(v_dof[i])) and np.all(np.isfinite(a_dof[i]))):
            continue
        try:
            q = assemble(mech, data, q_dof[i], hint=hints[i], tol=1e-8).q
        except AssemblyError:
            continue
        v = solve_velocity(mech, data, q, v_dof[i])
        a = np.zeros(mech.n)
        a[mech.dof] = a_dof[i]
        ce = mech.closures(data, q, v, a)                  # phidd at the dependent accelerations 0
        a[dep] = solve_least_squares(ce.phi_q[:, dep], -ce.phidd)
        Q[i], V[i], A[i] = q, v, a
    return Q, V, A


def closed_loop_efforts(mech: Mechanism, Q: np.ndarray, V: np.ndarray, A: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray]:
    """(K, n) the actuated joints' efforts (zero elsewhere) and (K, nc, 3) the closures' reaction
    forces in frame_b, from the least squares of M a + h + F = S tau + Phi_q^T lam per row."""
    data = mech.create_data()
    actuated = sorted(mech.index[name] for name in (*mech.input_joints, *mech.known_input_joints))
    S = np.eye(mech.n)[:, actuated]
    effort = np.full(Q.shape, np.nan)
    force = np.full((Q.shape[0], len(mech.closure_names), 3), np.nan)
    R = generalized_forces(mech, Q, V, A)
    for i in np.nonzero(np.all(np.isfinite(R), axis=1))[0]:
        r = R[i] - mech.springs.evaluate(data.springs, Q[i], V[i]).Q if mech.springs else R[i]
        _, phi_q = mech.closure_position(data, Q[i])
        x = solve_least_squares(np.hstack([S, phi_q.T]), r)
        effort[i] = S @ x[:S.shape[1]]
        force[i] = [f for f, _ in mech.closure_wrenches_in_frame_b(data, Q[i], x[S.shape[1]:])]
    return effort, force


def rule_window(t: np.ndarray, q: np.ndarray, noise: np.ndarray, top_speed: float = 0.0) -> dict[str, int]:
    """The baseline's windows (samples) by the rule of the module docstring; the pilot fit spans
    PILOT_SPAN s, or one radian of the crank at ``top_speed`` (rad/s) if that is shorter, and its
    accelerations are differenced at half that span (finer differences would measure its noise)."""
    dt = float(np.median(np.diff(t)))
    span = min(PILOT_SPAN, 1.0 / top_speed) if top_speed > 0 else PILOT_SPAN
    pilot = _odd(max(11, round(span / dt)))
    a = savgol_derivatives(t, q, pilot, BASELINE_ORDER, causal=False).a
    ok = np.all(np.isfinite(a), axis=1)
    step = max(1, pilot // 2)
    ta, a = t[ok][::step], a[ok][::step]
    if ta.size < 5:
        return {"causal": pilot, "zero_phase": pilot}
    jerk = np.gradient(a, ta, axis=0)
    snap = np.gradient(jerk, ta, axis=0)
    J = np.sqrt(np.mean(jerk ** 2, axis=0))
    S = np.sqrt(np.mean(snap ** 2, axis=0))
    W = np.arange(7, 402, 2, dtype=float)[:, None]
    var = 720.0 * noise[None, :] ** 2 / (W * (W ** 2 - 1) * (W ** 2 - 4) * dt ** 4)
    causal = var + (J[None, :] * (W - 1) * dt / 2) ** 2
    centred = var + (S[None, :] * (W * dt) ** 2 / 56.0) ** 2
    pick = lambda err: _odd(int(np.median(W[np.argmin(err, axis=0), 0])))     # noqa: E731
    return {"causal": pick(causal), "zero_phase": pick(centred)}


def _odd(w: int) -> int:
    return int(w) | 1


def lag_and_rmse(t: np.ndarray, est: np.ndarray, truth, used: np.ndarray, dt: float) -> tuple[np.ndarray, np.ndarray]:
    """Per column: RMSE of ``est`` (N, k) against ``truth`` (a Series, interpolated) over ``used``,
    and the shift (ms, + late) within +-MAX_SHIFT that minimises it."""
    shifts = np.arange(-MAX_SHIFT, MAX_SHIFT + dt / 2, dt)
    best = np.full((shifts.size, est.shape[1]), np.nan)
    for i, s in enumerate(shifts):
        err = est[used] - truth.at(t[used] - s)
        best[i] = np.sqrt(np.nanmean(err ** 2, axis=0))
    zero = int(np.argmin(np.abs(shifts)))
    lag = np.array([1e3 * shifts[int(np.nanargmin(c))] if np.isfinite(c).any() else np.nan for c in best.T])
    return best[zero], lag


def baseline_accuracy(mech: Mechanism, samples: SampleLog, est: EstimateSeries, truth: TruthSeries,
                      comparison: Comparison, sweep: bool = True) -> BaselineAccuracy | None:
    """Score the estimate and the filtered-inverse-dynamics baselines against ``truth`` at the
    estimate's stamps over ``comparison.used`` (module docstring); None where it does not apply."""
    motion = encoder_motion(mech, samples)
    if motion is None or truth.a is None or truth.effort is None or not comparison.used.any():
        return None
    t, q, coords = motion
    noise = np.array([next(e.noise for e in mech.config.sensors.encoders if e.joint == mech.joint_names[i])
                      for i in coords])
    rate = 1.0 / float(np.median(np.diff(t)))
    keep = np.flatnonzero(comparison.used)
    if keep.size > MAX_SCORED:                         # spread over the run: the RMSE is a statistic
        keep = keep[np.unique(np.linspace(0, keep.size - 1, MAX_SCORED).round().astype(int))]
    tk, used = est.t[keep], np.ones(keep.size, bool)
    dt = max(1e-3, 1.0 / mech.config.estimator.keyframe_rate / 5)
    out = BaselineAccuracy(list(mech.joint_names), rate, rule_window(t, q, noise, mech.config.top_speed), {})
    hints = est.q[keep]                                # the estimate picks the loop's branch
    closures = [name for name in mech.closure_names if name in truth.closure_force]

    def score(a: np.ndarray, effort: np.ndarray, force: np.ndarray | None) -> MethodScore:
        ra, la = lag_and_rmse(tk, a, truth.a, used, dt)
        re, le = lag_and_rmse(tk, effort, truth.effort, used, dt)
        s = MethodScore(ra, re, la, le)
        for name in closures:
            c = mech.closure_names.index(name)
            err = force[used, c] - truth.closure_force[name].at(tk[used])
            s.closure_force[name] = float(np.nanmax(np.sqrt(np.nanmean(err ** 2, axis=0))))
        return s

    def dof_motion(window: int, causal: bool) -> list[np.ndarray]:
        m = savgol_derivatives(t, q, window, BASELINE_ORDER, causal)
        return [np.column_stack([np.interp(tk, t, x[:, j], left=np.nan, right=np.nan) for j in range(coords.size)])
                for x in (m.q, m.v, m.a)]

    def dynamics(q_, v_, a_) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        if not mech.m:
            return a_, inverse_dynamics_effort(mech, q_, v_, a_), None
        Q, V, A = closed_loop_motion(mech, q_, v_, a_, hints)
        effort, force = closed_loop_efforts(mech, Q, V, A)
        return A, effort, force

    out.scores["estimate"] = score(est.a[keep], est.effort[keep], est.closure_force[keep] if mech.m else None)
    for kind, causal in (("causal", True), ("zero_phase", False)):
        out.scores[f"{kind}_baseline"] = score(*dynamics(*dof_motion(out.rule[kind], causal)))
    if sweep:
        # the window whose DOF accelerations have the lowest mean relative RMSE against the truth
        ta = comparison.truth_a[keep][:, coords]
        rms = np.sqrt(np.nanmean(ta ** 2, axis=0))
        rms = np.where(rms > 0, rms, 1.0)
        for kind, causal in (("causal", True), ("zero_phase", False)):
            tried = {}
            for w in sorted({_odd(round(x * rate / 1000.0)) for x in SWEEP_MS}):
                if 5 <= w < t.size:
                    a = dof_motion(w, causal)[2][used]
                    tried[w] = float(np.nanmean(np.sqrt(np.nanmean((a - ta) ** 2, axis=0)) / rms))
            if tried:
                out.best[kind] = min(tried, key=tried.get)
                out.scores[f"{kind}_best"] = (out.scores[f"{kind}_baseline"] if out.best[kind] == out.rule[kind]
                                              else score(*dynamics(*dof_motion(out.best[kind], causal))))
    tq, tv, ta = (x[keep] for x in (comparison.truth_q, comparison.truth_v, comparison.truth_a))  # Hermite
    if mech.m:
        effort, force = closed_loop_efforts(mech, tq, tv, ta)
        out.scores["floor"] = score(ta, effort, force)
    else:
        out.scores["floor"] = score(ta, inverse_dynamics_effort(mech, tq, tv, ta), None)
    return out


def summary_lines(facts: dict, mech: Mechanism, lagged: bool) -> list[str]:
    """The replay summary's lines for ``facts['baselines']`` (BaselineAccuracy.as_dict)."""
    b = facts.get("baselines")
    if not b:
        return []
    ref = "zero_phase" if lagged else "causal"
    m = b["methods"]
    lines = [f"  against filtered inverse dynamics (Savitzky-Golay, quadratic, at {b['rate_hz']:.0f} Hz; windows in "
             f"samples, causal {b['window_rule']['causal']} / zero-phase {b['window_rule']['zero_phase']} by the rule"
             + (f", {b['window_best'].get('causal')} / {b['window_best'].get('zero_phase')} swept against the truth"
                if b.get("window_best") else "") + f"); the estimate is {'lagged' if lagged else 'causal'}: compare with the "
             f"{ref.replace('_', '-')} baseline; lag = the shift (ms, + late) that minimises the RMSE:"]
    keys = [("estimate", "estimate"), (f"{ref}_baseline", f"{ref.replace('_', '-')} (rule)")]
    if f"{ref}_best" in m:
        keys.append((f"{ref}_best", f"{ref.replace('_', '-')} (best)"))
    keys.append(("floor", "floor (true motion)"))
    rows = [["joint", "effort: " + " | ".join(k[1] for k in keys), "acceleration: " + " | ".join(k[1] for k in keys[:-1])]]
    actuated = set(mech.input_joints) | set(mech.known_input_joints)
    for name in mech.joint_names:
        eff = (" | ".join(_cell(m[k][name]["effort"], m[k][name]["effort_lag_ms"], k != "floor") for k, _ in keys)
               if name in actuated else "-")
        acc = " | ".join(_cell(m[k][name]["acceleration"], m[k][name]["acceleration_lag_ms"], True) for k, _ in keys[:-1])
        rows.append([name, eff, acc])
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines += ["    " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    for name in m["estimate"].get("closures", {}):
        lines.append(f"    closure {name}, reaction force in frame_b (the largest component's RMSE, N): " + " | ".join(
            f"{label} {_cell(m[k].get('closures', {}).get(name), None, False)}" for k, label in keys))
    return lines


def _cell(x, lag, with_lag: bool) -> str:
    if x is None:
        return "-"
    return f"{x:.3g}" + (f" ({lag:+.0f} ms)" if with_lag and lag is not None else "")
