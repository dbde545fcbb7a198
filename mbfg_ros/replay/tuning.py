"""Noise settings estimated from a recording, without ground truth (`mbfg tune`).

The estimator is replayed over the bag (:func:`~mbfg_ros.replay.session.replay_bag`, in this
process) and judged by its one-step prediction errors: every used reading minus the model's
prediction at the newest (filtered) estimate of the keyframe strictly before it
(:func:`~mbfg_ros.replay.residuals.sensor_residuals` with ``predicted=True``), i.e. the
innovations, which the estimator had not seen yet. Two rules set the noises:

- **sensor noises**: a sensor's noise becomes the RMS of its innovations (sensor unit, all its
  axes), so its whitened innovation RMS is 1, and the process noises move by the geometric mean
  of the sensors' factors (keeping the balance of model and sensors); repeated (replay,
  measure, rescale) until every sensor is within ``tolerance`` of 1;
- **process noises** (``estimator.noise.dynamics``, and the random walks of the slow states the
  rig has: unknown inputs, gravity / mass scale, the model-error force, gyro biases; and the integration's velocity
  noise): a 1-D search per noise, on a log scale (decade steps until it gets worse in the first
  round, half-decade steps in the second), maximising the Gaussian
  log-likelihood of the innovations with each sensor's variance profiled out,
  ``-1/2 sum_s N_s (log(2 pi mse_s) + 1)`` (a prediction-error method, blind to the noises'
  common scale). ``integration_position`` moves with the rescale; closure and prior noises are
  constraint tolerances and stay as they are.

Two rounds of (process search, sensor rescale), then a last rescale until every sensor is
within the tolerance, at most ``max_runs`` replays in all. The search comes first: rescaling a
badly balanced estimator (one that does not track) feeds back and runs away.
The statistics leave out the first ``skip`` s of each era (convergence from the initial state).
The innovation of a reading also holds the prediction's own error, so a noise found this way
can be above the sensor's datasheet noise (most for a load cell when the model is loose). The
residual at the estimate that used the reading (what `mbfg replay` reports) is kept beside it:
far below 1 it says the estimate follows that sensor's noise (over-fitted), typically a load cell
once a large dynamics noise frees the multipliers (a model error the white dynamics noise has to
absorb; an unknown input on the DOF, a random-walk state, absorbs it without freeing them).

:func:`write_tuned_config` writes the result into a copy of the user's YAML, edited as text at the
places PyYAML marks (:class:`~mbfg_ros.model.yaml_edit.YamlTextEdits`): comments, order and layout
are kept byte for byte; only the tuned numbers
and a relative ``mechanism.urdf`` (made absolute when the file moves to another directory) change.
"""
from __future__ import annotations

import json
import math
import os
import re
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from mbfg_ros.errors import MbfgError
from mbfg_ros.model.config import NOISE_RANGE, NoiseConfig, RigConfig
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.model.yaml_edit import YamlTextEdits, float_text, yaml_number
from mbfg_ros.replay.bag_input import BagInput
from mbfg_ros.replay.residuals import sensor_residuals
from mbfg_ros.replay.session import ReplayOptions, replay_bag
from mbfg_ros.sensors.registry import SECTIONS, SENSOR_KINDS

MIN_READINGS = 100
"""A sensor needs this many used readings (after ``skip``) for its noise to be estimated."""

WALKS = ("input_random_walk", "gravity_random_walk", "mass_random_walk")
SCALED = ("integration_position",)
"""Process noises that move with the sensors in a rescale even when not searched (has no search
of its own by default). ``integration_velocity`` moves only when searched: ``--search
dynamics,input_random_walk`` took it from 0.001 to 0.034 on a double pendulum recording."""
MODEL_ERROR = "model_error.random_walk"
"""The process-noise name of ``estimator.model_error.random_walk`` (when the rig has that state).
The others are ``dynamics``, the random walks of WALKS and a sensor's own, ``<field>:<sensor>``
(its kind's tuning hook, :meth:`~mbfg_ros.sensors.base.SensorModel.tuned_fields`, names the
fields: ``bias_instability:<gyro>`` for a gyro or an accelerometer with a bias random walk)."""


@dataclass(frozen=True)
class TuningOptions:
    """How to tune. ``search``: the process noises searched (None: :func:`process_noises`)."""
    tolerance: float = 0.05          # |whitened innovation RMS - 1| accepted per sensor
    max_runs: int = 30               # replays at most
    skip: float = 1.0                # s after each era's start left out of the statistics
    remap: dict[str, str] = field(default_factory=dict)
    search: tuple[str, ...] | None = None
    progress: bool = False           # tqdm bar (stderr) over the replays


@dataclass
class NoiseSettings:
    """Sensor noises {sensor: sigma} (sensor unit) and process noises {name: sigma} (SI)."""
    sensors: dict[str, float]
    process: dict[str, float]

    def copy(self) -> "NoiseSettings":
        return NoiseSettings(dict(self.sensors), dict(self.process))


@dataclass
class SensorStat:
    """One sensor's innovations in one run: ``rms`` in its unit over ``samples`` readings (all
    axes), ``whitened`` = rms / sigma."""
    name: str
    kind: str
    unit: str
    sigma: float
    samples: int
    rms: float
    mean: float
    rms_at_estimate: float = math.nan   # RMS of reading - prediction at the estimate that used it
                                        # (what `mbfg replay` reports), sensor unit

    @property
    def whitened(self) -> float:
        return self.rms / self.sigma

    @property
    def whitened_at_estimate(self) -> float:
        return self.rms_at_estimate / self.sigma


@dataclass
class Evaluation:
    """One replay at ``settings``: per-sensor innovation statistics and their log-likelihood."""
    settings: NoiseSettings
    sensors: dict[str, SensorStat]
    log_likelihood: float
    wall_time: float
    resets: int = 0
    failure: str = ""

    @property
    def ok(self) -> bool:
        return not self.failure

    def worst(self) -> float:
        """Largest |log whitened RMS| over the sensors (0: every sensor at 1)."""
        return max((abs(math.log(s.whitened)) for s in self.sensors.values() if s.rms > 0), default=0.0)


@dataclass
class TuningResult:
    before: Evaluation
    after: Evaluation
    runs: int
    wall_time: float
    converged: bool
    searched: tuple[str, ...]
    history: list[tuple[str, Evaluation]]      # (stage, evaluation) of every replay


def _sensor_noise(name: str) -> tuple[str, str] | None:
    """(config field, sensor) of a sensor's process noise ``<field>:<sensor>``, else None."""
    field, sep, sensor = name.partition(":")
    return (field, sensor) if sep else None


def current_settings(cfg: RigConfig, names: tuple[str, ...]) -> NoiseSettings:
    """The noises of ``cfg``: every measuring sensor's, and the process noises ``names``."""
    sensors = {s.name: float(s.noise) for s in cfg.sensors.all()}
    by_name = {s.name: s for s in cfg.sensors.all()}
    process = {}
    for n in names:
        own = _sensor_noise(n)
        if own is not None:
            process[n] = float(getattr(by_name[own[1]], own[0]))
        elif n == MODEL_ERROR:
            process[n] = float(cfg.estimator.model_error.random_walk)
        else:
            process[n] = float(getattr(cfg.estimator.noise, n))
    return NoiseSettings(sensors, process)


def process_noises(mech: Mechanism) -> tuple[str, ...]:
    """The process noises searched by default: dynamics, the integration's velocity noise, and the
    random walk of each slow state ``mech`` has (unknown inputs, gravity / mass scale, the
    model-error force, the sensors' own: gyro and accelerometer biases)."""
    est = mech.config.estimator
    out = ["dynamics", "integration_velocity"]
    if mech.input_joints:
        out.append("input_random_walk")
    if est.estimate_gravity:
        out.append("gravity_random_walk")
    if est.estimate_mass_link:
        out.append("mass_random_walk")
    if est.model_error.enabled:
        out.append(MODEL_ERROR)
    out += [f"{field}:{s.name}" for s in mech.sensors for field in s.tuned_fields()]
    return tuple(out)


def check_search(mech: Mechanism, names: tuple[str, ...]) -> None:
    """Raise MbfgError for a process-noise name that does not act on ``mech``."""
    valid = (*process_noises(mech), *SCALED)
    for n in names:
        if n not in valid:
            raise MbfgError(f"--search: {n!r} is not a process noise of the config {mech.config.name!r} "
                            f"(its process noises: {', '.join(valid)})")


def apply_settings(cfg: RigConfig, s: NoiseSettings) -> RigConfig:
    """``cfg`` with the noises of ``s``."""
    own: dict[str, dict[str, float]] = {}           # sensor -> {config field: value}
    for k, v in s.process.items():
        if (f := _sensor_noise(k)) is not None:
            own.setdefault(f[1], {})[f[0]] = v

    def tuned(c):
        return replace(c, noise=s.sensors.get(c.name, c.noise), **own.get(c.name, {}))
    sens = replace(cfg.sensors, **{kind.section: tuple(tuned(c) for c in getattr(cfg.sensors, kind.section))
                                   for kind in SENSOR_KINDS})
    walks = {k: v for k, v in s.process.items() if _sensor_noise(k) is None and k != MODEL_ERROR}
    est = replace(cfg.estimator, noise=replace(cfg.estimator.noise, **walks))
    if MODEL_ERROR in s.process:
        est = replace(est, model_error=replace(est.model_error, random_walk=s.process[MODEL_ERROR]))
    return replace(cfg, sensors=sens, estimator=est)


def check_bag(bag: str | Path, mech: Mechanism, remap: dict[str, str]) -> None:
    """Raise MbfgError unless the bag holds every sensor topic of the config, of a usable type."""
    inp = BagInput(bag, mech, remap, truth=False)
    held = ", ".join(f"{t} ({v['type']}, {v['count']})" for t, v in sorted(inp.bag.items())) or "no topics"
    for s in inp.missing:
        raise MbfgError(f"the bag {str(bag)!r} has no topic {s.topic} (sensors {', '.join(s.sensors)} of the "
                        f"config {mech.config.name!r}): every sensor is needed to estimate its noise; the bag "
                        f"holds {held}. Map a config topic to a bag topic with --remap CONFIG_TOPIC:=BAG_TOPIC")
    for s in inp.wrong_type:
        raise MbfgError(f"the bag {str(bag)!r} has topic {s.topic} as {s.msgtype}, but the config's sensors "
                        f"{', '.join(s.sensors)} read {' or '.join(s.expected)}")


def _clamp(x: float) -> float:
    return float(min(max(x, NOISE_RANGE[0]), NOISE_RANGE[1]))


class Tuner:
    """Replays ``bag`` with noise settings and keeps every evaluation."""

    def __init__(self, bag: str | Path, mech: Mechanism, options: TuningOptions) -> None:
        self.bag, self.base, self.opt = Path(bag), mech.config, options
        self.names = options.search if options.search is not None else process_noises(mech)
        check_search(mech, self.names)
        self.measuring = [s.name for s in mech.config.sensors.all()]
        self.history: list[tuple[str, Evaluation]] = []
        self.bar = None
        if options.progress:
            from tqdm import tqdm
            self.bar = tqdm(total=options.max_runs, unit=" replay", desc="tune", leave=False, file=sys.stderr,
                            bar_format="{desc}: {n}/{total} replays |{bar}| [{elapsed}] {postfix}")

    @property
    def runs(self) -> int:
        return len(self.history)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

    def evaluate(self, s: NoiseSettings, stage: str) -> Evaluation:
        """Replay at ``s`` and measure the innovations."""
        t0 = time.perf_counter()
        if self.bar is not None:
            self.bar.set_postfix_str(stage)
        cfg = apply_settings(self.base, s)
        # the same rows in CasADi's VM: compiling native code for every trial (~1.5 s) costs
        # more than it saves on a replay of a few tens of seconds; and no online search of the
        # model uncertainty's scale: a trial scores the innovations at the noises ``s``, not at
        # a scale of them the search would choose (and its candidates would replay the run 5 times)
        mech = Mechanism(replace(cfg, estimator=replace(
            cfg.estimator, native_code="off",
            model_uncertainty=replace(cfg.estimator.model_uncertainty, adapt=False))))
        try:
            res = replay_bag(self.bag, mech, ReplayOptions(remap=self.opt.remap, truth=False, processes=False))
        except (MbfgError, RuntimeError, ArithmeticError, np.linalg.LinAlgError) as exc:
            # a trial at extreme noises may fail (nothing estimated, a solver error): it loses
            ev = Evaluation(s.copy(), {}, -math.inf, time.perf_counter() - t0,
                            failure=str(exc) or type(exc).__name__)
        else:
            ev = self._statistics(mech, res, s, time.perf_counter() - t0)
        self.history.append((stage, ev))
        if self.bar is not None:
            self.bar.update(1)
        return ev

    def _statistics(self, mech: Mechanism, res, s: NoiseSettings, wall: float) -> Evaluation:
        resid = sensor_residuals(mech, res.layout, res.estimates, res.samples, predicted=True)
        posterior = sensor_residuals(mech, res.layout, res.estimates, res.samples)
        stats: dict[str, SensorStat] = {}
        loglik = 0.0

        def kept(t: np.ndarray) -> np.ndarray:
            keep = np.ones(t.size, bool)
            for a, _ in res.eras:
                keep &= ~((t >= a) & (t < a + self.opt.skip))
            return keep

        for name in self.measuring:
            r = resid.get(name)
            keep = np.ones(0, bool) if r is None else kept(r.t)
            if r is None or keep.sum() < MIN_READINGS:
                got = 0 if r is None else int(keep.sum())
                return Evaluation(s.copy(), stats, -math.inf, wall, res.health.resets,
                                  failure=f"sensor {name!r} has {got} used readings after the first "
                                          f"{self.opt.skip:g} s (at least {MIN_READINGS} are needed)")
            x = r.r[keep].reshape(-1)
            mse = float(np.mean(x * x))
            p = posterior[name]
            xp = p.r[kept(p.t)].reshape(-1)
            stats[name] = SensorStat(name, r.kind, r.unit, s.sensors[name], int(keep.sum()), math.sqrt(mse),
                                     float(np.mean(x)), float(np.sqrt(np.mean(xp * xp))) if xp.size else math.nan)
            loglik += -0.5 * x.size * (math.log(2 * math.pi * max(mse, 1e-300)) + 1.0)
        return Evaluation(s.copy(), stats, loglik, wall, res.health.resets)

    def budget(self) -> int:
        return self.opt.max_runs - self.runs

    # ----------------------------------------------------------------------------------------
    def rescale(self, ev: Evaluation, rounds: int) -> Evaluation:
        """Sensor noises := their innovation RMS, replayed until all are within the tolerance.
        The process noises move by the geometric mean of the sensors' factors, so the balance
        of model and sensors (which the search sets) stays: scaling every noise alike leaves
        the estimate nearly unchanged, and rescaling the sensors alone would feed back (a
        looser sensor lets the estimate drift from it, which raises its innovations)."""
        tol = math.log1p(self.opt.tolerance)
        for _ in range(rounds):
            if not ev.ok or ev.worst() <= tol or self.budget() <= 0:
                break
            s = ev.settings.copy()
            logs = [math.log(st.whitened) for st in ev.sensors.values() if st.rms > 0]
            for name, st in ev.sensors.items():
                s.sensors[name] = _clamp(st.rms) if st.rms > 0 else s.sensors[name]
            common = math.exp(sum(logs) / len(logs)) if logs else 1.0
            for name in s.process:
                s.process[name] = _clamp(s.process[name] * common)
            new = self.evaluate(s, "sensor noises")
            if not new.ok:
                break              # keep the last settings that ran
            ev = new
        return ev

    def search(self, ev: Evaluation, name: str, coarse: bool) -> Evaluation:
        """1-D search of process noise ``name`` (log scale) maximising the innovations' likelihood."""
        best = ev
        step = 1.0 if coarse else 0.5          # decades
        for direction in (+1, -1):
            moved = False
            while self.budget() > 0:
                s = best.settings.copy()
                x = s.process[name]
                new = _clamp(x * 10.0 ** (direction * step))
                if new == x:
                    break
                s.process[name] = new
                cand = self.evaluate(s, f"{name} {new:.3g}")
                if cand.ok and cand.log_likelihood > best.log_likelihood:
                    best, moved = cand, True
                else:
                    break
            if moved:
                break              # improved in this direction: the other one was not tried
        return best


def tune(bag: str | Path, mech: Mechanism, options: TuningOptions | None = None) -> TuningResult:
    """Estimate the noise settings of ``mech``'s config from ``bag`` (see the module docstring).
    Raises MbfgError for a bag without the config's sensor topics or a run that fails at the
    config's own noises."""
    opt = options or TuningOptions()
    t0 = time.perf_counter()
    check_bag(bag, mech, opt.remap)
    tuner = Tuner(bag, mech, opt)
    try:
        carried = tuple(dict.fromkeys((*tuner.names, *SCALED)))
        before = tuner.evaluate(current_settings(mech.config, carried), "config as given")
        if not before.ok:
            raise MbfgError(f"cannot tune on {str(bag)!r}: {before.failure}")
        ev = before
        tol = math.log1p(opt.tolerance)
        for round_ in range(2):
            for name in tuner.names:
                ev = tuner.search(ev, name, coarse=round_ == 0)
            ev = tuner.rescale(ev, 4)
        ev = tuner.rescale(ev, 4)
        converged = ev.ok and ev.worst() <= tol
    finally:
        tuner.close()
    return TuningResult(before, ev, tuner.runs, time.perf_counter() - t0, converged, tuner.names,
                        tuner.history)


# --------------------------------------------------------------------------------------------
def _significant(x: float, digits: int = 4) -> float:
    return float(f"{x:.{digits}g}")


def write_tuned_config(source: str | Path, out: str | Path, settings: NoiseSettings, note: str = "") -> list[str]:
    """Write ``source`` (a mechanism config YAML) to ``out`` with the noises of ``settings``
    (4 significant digits); everything else, comments included, is kept byte for byte. A relative
    ``mechanism.urdf`` becomes absolute when ``out`` is in another directory. Returns the fields
    whose value changed (``sensors.encoders[crank_encoder].noise``, ``estimator.noise.dynamics``,
    ...); a process noise the file leaves out stays out while it is at its default."""
    source, out = Path(source), Path(out)
    doc = YamlTextEdits(source.read_text(encoding="utf-8"))
    get = doc.get
    changed: list[str] = []

    def put(mapping, key: str, value: float, label: str) -> bool:
        value = _significant(value)
        node = get(mapping, key)
        old = yaml_number(node)
        if old is not None and _significant(old) == value:
            return False
        if node is not None:
            doc.replace(node, float_text(value))
        else:
            doc.insert(mapping, key, float_text(value))
        changed.append(label)
        return True

    sensors = get(doc.root, "sensors")
    own = {(f[1], f[0]): v for k, v in settings.process.items()
           if (f := _sensor_noise(k)) is not None}
    for section in SECTIONS:
        seq = get(sensors, section)
        for item in (seq.value if seq is not None and seq.tag == "tag:yaml.org,2002:seq" else []):
            name = getattr(get(item, "name"), "value", None)
            if name in settings.sensors:
                put(item, "noise", settings.sensors[name], f"sensors.{section}[{name}].noise")
            for (sensor, key), value in own.items():
                if sensor == name:
                    put(item, key, value, f"sensors.{section}[{name}].{key}")
    defaults = NoiseConfig()
    est = get(doc.root, "estimator")
    noise = get(est, "noise")
    new_noise: dict[str, str] = {}           # for a config without estimator.noise
    if MODEL_ERROR in settings.process:          # (on only when the file gives its random walk)
        put(get(est, "model_error"), "random_walk", settings.process[MODEL_ERROR],
            "estimator." + MODEL_ERROR)
    for k, v in settings.process.items():
        if _sensor_noise(k) is not None or k == MODEL_ERROR:
            continue
        if get(noise, k) is None and _significant(v) == _significant(getattr(defaults, k)):
            continue                     # at its default and not in the file: leave it out
        if noise is not None:
            put(noise, k, v, f"estimator.noise.{k}")
        else:
            new_noise[k] = float_text(_significant(v))
            changed.append(f"estimator.noise.{k}")
    if new_noise:
        flow = "{" + ", ".join(f"{k}: {v}" for k, v in new_noise.items()) + "}"
        if est is not None and est.tag == "tag:yaml.org,2002:map" and est.value:
            doc.insert(est, "noise", flow)
        else:
            doc.append(f"estimator:\n  noise: {flow}\n")
    urdf = get(get(doc.root, "mechanism"), "urdf")
    if urdf is not None and urdf.tag == "tag:yaml.org,2002:str" and not os.path.isabs(os.path.expanduser(urdf.value)):
        if source.resolve().parent != out.resolve().parent:
            path = str((source.resolve().parent / os.path.expanduser(urdf.value)).resolve())
            doc.replace(urdf, path if re.fullmatch(r"[\w./+-]+", path) else json.dumps(path))
            changed.append("mechanism.urdf")
    head = "".join(f"# {line}\n" if line else "#\n" for line in note.splitlines())
    tmp = out.with_name(out.name + ".part")
    tmp.write_text(head + doc.result(), encoding="utf-8")
    tmp.replace(out)
    return changed
