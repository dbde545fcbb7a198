"""The simplest method a user would try, beside a replay's accuracy: filtered inverse dynamics.

Savitzky-Golay derivatives (quadratic) of the encoder readings the replay used, then the model's
inverse dynamics with its friction and armature (:mod:`mbfg_ros.benchmark.effort_scoring`):
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
  best for the efforts' mean relative RMSE, reported beside it (a baseline at its best, chosen
  with a truth the estimator never sees).

``lag``: the shift of a series against the truth (ms, positive = late) that minimises its RMSE,
within +-``MAX_SHIFT`` s. Open chains with every joint's position encoded; other rigs get None.
Units: s, rad (or m), N m (or N).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mbfg_ros.benchmark.effort_scoring import BASELINE_ORDER, inverse_dynamics_effort, savgol_derivatives
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.replay.estimate_log import EstimateSeries
from mbfg_ros.replay.metrics import Comparison
from mbfg_ros.replay.residuals import SampleLog
from mbfg_ros.replay.truth import TruthSeries

MAX_SHIFT = 0.03
"""s: the largest shift the lag search tries."""
PILOT_SPAN = 0.1
"""s: the pilot zero-phase fit that estimates the motion's jerk and snap for the rule."""
SWEEP_MS = (11, 21, 31, 41, 61, 81, 101, 141, 201)
"""windows the sweep tries, in samples at 1 kHz (scaled to the encoders' rate, kept odd)."""


@dataclass
class MethodScore:
    """Per joint (config order): RMSE of the acceleration and the effort, and their lags (ms)."""
    acceleration: np.ndarray
    effort: np.ndarray
    acceleration_lag: np.ndarray
    effort_lag: np.ndarray

    def as_dict(self, names: list[str]) -> dict:
        return {name: {"acceleration": _num(self.acceleration[j]), "effort": _num(self.effort[j]),
                       "acceleration_lag_ms": _num(self.acceleration_lag[j]),
                       "effort_lag_ms": _num(self.effort_lag[j])} for j, name in enumerate(names)}


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


def encoder_motion(mech: Mechanism, samples: SampleLog) -> tuple[np.ndarray, np.ndarray] | None:
    """(t (N,), q (N, n)): every joint's encoder readings (less the encoder's offset) on the first
    joint's encoder stamps, or None when a joint has no encoder or a closure exists."""
    if mech.m:
        return None
    encs = {e.joint: e for e in mech.config.sensors.encoders}
    if any(name not in encs for name in mech.joint_names):
        return None
    t0, _ = samples.arrays(encs[mech.joint_names[0]].name)
    if t0.size < 50:
        return None
    q = np.zeros((t0.size, mech.n))
    for j, name in enumerate(mech.joint_names):
        t, y = samples.arrays(encs[name].name)
        if t.size < 2:
            return None
        q[:, j] = np.interp(t0, t, y[:, 0] - encs[name].offset)
    return t0, q


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
    t, q = motion
    noise = np.array([next(e.noise for e in mech.config.sensors.encoders if e.joint == name)
                      for name in mech.joint_names])
    rate = 1.0 / float(np.median(np.diff(t)))
    used, tk = comparison.used, est.t
    dt = max(1e-3, 1.0 / mech.config.estimator.keyframe_rate / 5)
    out = BaselineAccuracy(list(mech.joint_names), rate, rule_window(t, q, noise, mech.config.top_speed), {})

    def score(a: np.ndarray, effort: np.ndarray) -> MethodScore:
        ra, la = lag_and_rmse(tk, a, truth.a, used, dt)
        re, le = lag_and_rmse(tk, effort, truth.effort, used, dt)
        return MethodScore(ra, re, la, le)

    def method(window: int, causal: bool) -> tuple[np.ndarray, np.ndarray]:
        m = savgol_derivatives(t, q, window, BASELINE_ORDER, causal)
        at = [np.column_stack([np.interp(tk, t, x[:, j], left=np.nan, right=np.nan) for j in range(mech.n)])
              for x in (m.q, m.v, m.a)]
        return at[2], inverse_dynamics_effort(mech, *at)

    out.scores["estimate"] = score(est.a, est.effort)
    for kind, causal in (("causal", True), ("zero_phase", False)):
        out.scores[f"{kind}_baseline"] = score(*method(out.rule[kind], causal))
    if sweep:
        scale = max(1.0, rate / 1000.0)
        rms = np.sqrt(np.nanmean(truth.effort.at(tk[used]) ** 2, axis=0))
        rms = np.where(rms > 0, rms, 1.0)
        for kind, causal in (("causal", True), ("zero_phase", False)):
            tried = {}
            for w in sorted({_odd(round(x * rate / 1000.0 * scale / scale)) for x in SWEEP_MS}):
                if w < 5 or w >= t.size:
                    continue
                a, e = method(w, causal)
                err = e[used] - truth.effort.at(tk[used])
                tried[w] = (float(np.nanmean(np.sqrt(np.nanmean(err ** 2, axis=0)) / rms)), a, e)
            if tried:
                w = min(tried, key=lambda k: tried[k][0])
                out.best[kind] = w
                out.scores[f"{kind}_best"] = score(tried[w][1], tried[w][2])
    tq = truth.q.at(tk)
    tv = truth.v.at(tk)
    ta = truth.a.at(tk)
    out.scores["floor"] = score(ta, inverse_dynamics_effort(mech, tq, tv, ta))
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
    for name in mech.joint_names:
        eff = " | ".join(_cell(m[k][name]["effort"], m[k][name]["effort_lag_ms"], k != "floor") for k, _ in keys)
        acc = " | ".join(_cell(m[k][name]["acceleration"], m[k][name]["acceleration_lag_ms"], True) for k, _ in keys[:-1])
        rows.append([name, eff, acc])
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines += ["    " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    return lines


def _cell(x, lag, with_lag: bool) -> str:
    if x is None:
        return "-"
    return f"{x:.3g}" + (f" ({lag:+.0f} ms)" if with_lag and lag is not None else "")
