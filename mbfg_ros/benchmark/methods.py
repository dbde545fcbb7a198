"""The methods the benchmark compares, and how each one is run over one recording.

Every method gets the same (wrong) model and the same samples, and returns its estimate of the
full state at every time step t_k = k dt (a :class:`Track`), plus the CPU time it took
(``time.process_time`` around the method's whole pass over the data, set-up excluded).

Methods (keys for ``--methods``):

| key | what |
|---|---|
| dekf | DEKF on the independent coordinates (paper 3.1.2) |
| ukf | UKF on the independent coordinates, filterpy (paper 3.1.3) |
| error_ekf | errorEKF: error-state EKF beside a multibody simulation (paper 3.3) |
| diekf_pm | DIEKFpm: iterated EKF in dependent coordinates, constraints as perfect measurements (3.2.1) |
| cekf | CEKF: continuous EKF, correction fused into the implicit trapezoidal rule (paper 3.1.1) |
| batch | reference: Levenberg-Marquardt over the whole recording, mbfg_ros factors (paper 3.4) |
| mbfg_online, mbfg_lagged | mbfg_ros: newest estimate per keyframe; estimate smoothed over the lag |
| mbfg_online_g, mbfg_lagged_g | the same with online gravity estimation |
| mbfg_default, mbfg_default_lagged | mbfg_ros with the rig's ONE default configuration (estimator_tuning.rig_default: gravity everywhere, the model-error force where encoders see every DOF) |

The online and lagged variants come from one estimator run (``lagged=True``) and share its
CPU time. The lagged track is ``pop_lagged()`` during the run plus ``smoothed_window()`` at
the end (the last ``lag`` seconds).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from mbfg_ros.benchmark.estimator_tuning import estimator_config, rig_estimator_config
from mbfg_ros.benchmark.observers.cekf import CEKF
from mbfg_ros.benchmark.observers.dekf import DEKF
from mbfg_ros.benchmark.observers.diekf_pm import DIEKFpm
from mbfg_ros.benchmark.observers.error_ekf import ErrorEKF
from mbfg_ros.benchmark.observers.independent_model import IndependentModel
from mbfg_ros.benchmark.observers.observer import run_observer
from mbfg_ros.benchmark.observers.ukf import UKF
from mbfg_ros.estimation.reference import reference_smoothing
from mbfg_ros.estimation.estimator import Estimator
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.sim.sensors import Sample


@dataclass(frozen=True)
class MethodSpec:
    """key: the CLI name; label: the table's; kind: baseline | reference | mbfg; group: the run
    that produces it (methods of one group come from one pass)."""
    key: str
    label: str
    kind: str
    group: str


METHODS: dict[str, MethodSpec] = {m.key: m for m in (
    MethodSpec("dekf", "DEKF", "baseline", "dekf"),
    MethodSpec("ukf", "UKF", "baseline", "ukf"),
    MethodSpec("error_ekf", "errorEKF", "baseline", "error_ekf"),
    MethodSpec("diekf_pm", "DIEKFpm", "baseline", "diekf_pm"),
    MethodSpec("cekf", "CEKF", "baseline", "cekf"),
    MethodSpec("batch", "batch (LM)", "reference", "batch"),
    MethodSpec("mbfg_online", "mbfg online", "mbfg", "mbfg"),
    MethodSpec("mbfg_lagged", "mbfg lagged", "mbfg", "mbfg"),
    MethodSpec("mbfg_online_g", "mbfg online+g", "mbfg", "mbfg_g"),
    MethodSpec("mbfg_lagged_g", "mbfg lagged+g", "mbfg", "mbfg_g"),
    MethodSpec("mbfg_default", "mbfg default", "mbfg", "mbfg_default"),
    MethodSpec("mbfg_default_lagged", "mbfg default lag", "mbfg", "mbfg_default"),
)}
BASELINES = tuple(k for k, m in METHODS.items() if m.kind == "baseline")


@dataclass
class RunData:
    """One recording as every method sees it.

    model: the cell's (wrong) Mechanism; samples: the sensor samples in arrival order;
    readings[k]: the (sensor, value) pairs taken at step k (stamp = k dt); steps, dt (s);
    dynamics_noise / dynamics_noise_g: the mbfg_ros dynamics noise (N m per coordinate) without /
    with online gravity estimation (:mod:`mbfg_ros.benchmark.estimator_tuning`); rig:
    (mechanism, sensor set) of the cell, for the rig's default configuration.
    """
    model: Mechanism
    samples: list[Sample]
    readings: list[list[tuple[str, np.ndarray]]]
    steps: int
    dt: float
    dynamics_noise: float = 1.0
    dynamics_noise_g: float = 1.0
    rig: tuple[str, str] = ("", "")


@dataclass
class Track:
    """A method's estimate at every step: q, v, a (N, n), lam (N, m); cpu (s); held: steps that
    had no estimate of their own and repeat the previous one; info: method-specific figures."""
    q: np.ndarray
    v: np.ndarray
    a: np.ndarray
    lam: np.ndarray
    cpu: float
    held: int = 0
    info: dict = field(default_factory=dict)


def readings_by_step(samples: list[Sample], steps: int, dt: float) -> list[list[tuple[str, np.ndarray]]]:
    """Group samples by the time step of their stamp (stamps are multiples of dt here)."""
    out: list[list[tuple[str, np.ndarray]]] = [[] for _ in range(steps)]
    for s in samples:
        k = int(round(s.stamp / dt))
        if 0 <= k < steps:
            out[k].append((s.sensor, s.value))
    return out


def run_group(group: str, data: RunData) -> dict[str, Track]:
    """Run the methods of ``group`` (see METHODS) over ``data``; {method key: Track}."""
    if group in ("dekf", "ukf", "error_ekf", "diekf_pm", "cekf"):
        cls = {"dekf": DEKF, "ukf": UKF, "error_ekf": ErrorEKF, "diekf_pm": DIEKFpm, "cekf": CEKF}[group]
        observer = cls(IndependentModel(data.model), data.dt)
        t0 = time.process_time()
        tr = run_observer(observer, data.readings)
        cpu = time.process_time() - t0
        return {group: Track(tr.q, tr.v, tr.a, tr.lam, cpu, info=dict(getattr(observer, "info", {})))}
    if group == "batch":
        return {"batch": _run_batch(data)}
    if group in ("mbfg", "mbfg_g"):
        return _run_mbfg(data, estimate_gravity=group == "mbfg_g")
    if group == "mbfg_default":
        cfg = rig_estimator_config(data.model, data.rig[0], data.dt)
        out = _run_mbfg(data, estimate_gravity=cfg.estimate_gravity, cfg=cfg)
        return {"mbfg_default": next(v for k, v in out.items() if k.startswith("mbfg_online")),
                "mbfg_default_lagged": next(v for k, v in out.items() if k.startswith("mbfg_lagged"))}
    raise KeyError(group)


def _track_from_estimates(estimates, data: RunData, cpu: float, info: dict) -> Track:
    """Place estimates (anything with stamp, q, v, a, lam) on the step grid; steps without one
    repeat the previous (or the first) estimate and are counted in ``held``."""
    mech, N = data.model, data.steps
    by_step = {}
    for e in estimates:
        k = int(round(e.stamp / data.dt))
        if 0 <= k < N:
            by_step[k] = e
    if not by_step:
        raise RuntimeError("no estimate was produced")
    q = np.empty((N, mech.n))
    v = np.empty((N, mech.n))
    a = np.empty((N, mech.n))
    lam = np.empty((N, mech.m))
    held = 0
    last = by_step[min(by_step)]
    for k in range(N):
        e = by_step.get(k)
        if e is None:
            held += 1
            e = last
        q[k], v[k], a[k], lam[k] = e.q, e.v, e.a, e.lam
        last = e
    return Track(q, v, a, lam, cpu, held, info)


def _run_mbfg(data: RunData, estimate_gravity: bool, cfg=None) -> dict[str, Track]:
    """The online and lagged tracks of one estimator run (``cfg``: its settings, default the
    variant's of estimator_tuning)."""
    if cfg is None:
        sigma = data.dynamics_noise_g if estimate_gravity else data.dynamics_noise
        cfg = estimator_config(data.model, estimate_gravity, data.dt, sigma)
    est = Estimator(data.model, cfg, lagged=True, freeze_gc=False)
    online, lagged = [], []
    t0 = time.process_time()
    for s in data.samples:
        est.add_sample(s.sensor, s.stamp, s.value)
        online.extend(est.pop_estimates())
        lagged.extend(est.pop_lagged())
    est.flush()
    est.advance_to((data.steps - 1) * data.dt)
    online.extend(est.pop_estimates())
    lagged.extend(est.pop_lagged())
    done = {round(e.stamp / data.dt) for e in lagged}
    lagged.extend(e for e in est.smoothed_window() if round(e.stamp / data.dt) not in done)
    cpu = time.process_time() - t0
    h = est.health
    mean, p99, worst = h.latency(whole_run=True)
    info = {"keyframes": h.keyframes, "recoveries": h.recoveries, "resets": h.resets,
            "relinearizations": h.relinearizations, "latency_ms_mean": mean,
            "latency_ms_p99": p99, "latency_ms_max": worst,
            "gravity_scale": online[-1].gravity_scale if online else float("nan"),
            "dynamics_noise": cfg.noise.dynamics, "model_error_random_walk": cfg.model_error.random_walk,
            "estimate_gravity": cfg.estimate_gravity}
    suffix = "_g" if estimate_gravity else ""
    return {f"mbfg_online{suffix}": _track_from_estimates(online, data, cpu, info),
            f"mbfg_lagged{suffix}": _track_from_estimates(lagged, data, cpu, dict(info))}


def _run_batch(data: RunData) -> Track:
    cfg = estimator_config(data.model, False, data.dt, data.dynamics_noise)
    t0 = time.process_time()
    result = reference_smoothing(data.model, [(s.sensor, s.stamp, s.value) for s in data.samples], cfg)
    cpu = time.process_time() - t0
    w = result.result.windows[0]
    info = {"iterations": w.iterations, "converged": bool(w.converged), "cost": w.cost,
            "initial_cost": w.initial_cost, "dynamics_noise": cfg.noise.dynamics}
    return _track_from_estimates(result.estimates, data, cpu, info)
