"""The online estimator: samples in, keyframe estimates out.

Use::

    est = Estimator(mechanism)                 # settings from the mechanism config's estimator:
    est.add_sample("crank_encoder", t, [0.52]) # any order across sensors, any rates
    for e in est.pop_estimates():              # the keyframes closed since the last call
        ...e.q, e.v, e.a, est.forces(e)...

Sensor names are the config's; known input efforts come in as ``"command:<joint>"`` samples.

How it works (../shared/reference/estimator-performance.md):

- Keyframes are at ``keyframe_rate``; keyframe k is closed when every live sensor has reported
  past t_k or the newest stamp is ``sensor_wait`` beyond it. The step's rows (integration,
  random walks, closures, dynamics, every sensor sample in (t_{k-1}, t_k] at its own stamp)
  become ONE linear factor over (x_{k-1}, x_k), linearized outside ISAM2 at the state predicted
  from x_{k-1} (plus optional local Gauss-Newton iterations on x_k).
- Fluid relinearization: ISAM2 itself never relinearizes (its factors are linear); after each
  update the step factors whose keyframes moved by more than ``relinearize_threshold`` since
  they were linearized are relinearized at the current estimate, the most-moved first, at most
  ``relinearize_budget`` per keyframe, over the whole window. Tracking needs almost none; a
  wrong initial pose converges through them.
- Keyframes older than ``lag`` are marginalised. Samples that arrive after their keyframe
  closed but inside the window are added as factors of their own; older ones are counted and
  dropped. NaN/Inf and duplicate stamps are rejected and counted. A failed solve re-initialises
  the smoother from the last good state at the next keyframe; time going backwards resets it.
"""
from __future__ import annotations

import bisect
import gc
import math
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg

from mbfg_ros.estimation.factors import (EncoderBatchFactor, GyroFactor, IntegrationFactor,
                                         KeyframeFactor, LoadCellFactor, PriorFactor,
                                         RandomWalkFactor)
from mbfg_ros.estimation.interpolation import Interpolant
from mbfg_ros.estimation.layout import StateLayout
from mbfg_ros.estimation.outputs import ClosureForce, Estimate, Forces, Health, SensorCounts
from mbfg_ros.estimation.smoother import FixedLagSmoother, SolverFailure
from mbfg_ros.estimation.step import LinearizationError, Step, TaggedFactor, linearize_step
from mbfg_ros.errors import AssemblyError
from mbfg_ros.model.assembly import assemble, solve_velocity
from mbfg_ros.model.assembly import initial_state as assembled_initial_state
from mbfg_ros.model.config import EstimatorConfig
from mbfg_ros.model.mechanism import Mechanism

COMMAND_PREFIX = "command:"


@dataclass
class _Sensor:
    name: str
    kind: str                  # encoder | gyro | load_cell | command
    index: int                 # index in the mechanism's list (joint index for commands)
    counts: SensorCounts = field(default_factory=SensorCounts)
    recent: deque = field(default_factory=lambda: deque(maxlen=64))
    run_last: float = -math.inf       # newest stamp since the current run started (scheduling)
    mean_abs: float = 0.7979          # running mean of |whitened innovation| (Gaussian: 0.7979)
    scale: float = 1.0                # recent innovation scale in sigmas (>= 1)

    def add_innovation(self, r: float) -> None:
        """Update the running innovation scale (each |r| clipped at 10 so a lone outlier barely
        moves it; about the last 50 samples count)."""
        self.mean_abs += 0.02 * (min(abs(r), 10.0) - self.mean_abs)
        self.scale = max(1.0, self.mean_abs / 0.7979)


@dataclass
class _Sample:
    stamp: float
    sensor: _Sensor
    value: np.ndarray


class Estimator:
    """Multibody factor-graph estimator on an incremental fixed-lag smoother."""

    def __init__(self, mechanism: Mechanism, config: EstimatorConfig | None = None, *,
                 initial_q: np.ndarray | None = None, initial_v: np.ndarray | None = None,
                 lagged: bool = False, covariance: bool = False, freeze_gc: bool = True,
                 record_steps: bool = False) -> None:
        """``record_steps`` keeps every step's factors (for a batch solve over the whole run,
        see :func:`mbfg_ros.estimation.batch.smooth_recording`); memory grows with the run."""
        self.mech = mechanism
        self.recorded: list[Step] | None = [] if record_steps else None
        self.final_states: dict[int, np.ndarray] = {}    # (recording) states as they left the window
        self.cfg = config or mechanism.config.estimator
        self.lay = StateLayout.for_mechanism(mechanism, self.cfg)
        self.data = mechanism.create_data()
        self.h = 1.0 / self.cfg.keyframe_rate
        self.window = max(2, int(round(self.cfg.lag * self.cfg.keyframe_rate)))
        self.want_lagged = lagged
        self.want_covariance = covariance
        self.health = Health()
        self._sensors: dict[str, _Sensor] = {}
        for k, e in enumerate(mechanism.encoders):
            self._sensors[e.config.name] = _Sensor(e.config.name, "encoder", k)
        for k, g in enumerate(mechanism.gyros):
            self._sensors[g.config.name] = _Sensor(g.config.name, "gyro", k)
        for k, c in enumerate(mechanism.load_cells):
            self._sensors[c.config.name] = _Sensor(c.config.name, "load_cell", k)
        for name in mechanism.known_input_joints:
            s = COMMAND_PREFIX + name
            self._sensors[s] = _Sensor(s, "command", mechanism.index[name])
        self._measuring = [s for s in self._sensors.values() if s.kind != "command"]
        # every live stream, known-input commands included, holds a keyframe back until it
        # has reported past it (so a keyframe never closes before its command arrived)
        self._streams = list(self._sensors.values())
        self._initial_q = initial_q
        self._initial_v = initial_v
        self._integration = IntegrationFactor(self.lay, self.h, self.cfg)
        self._random_walk = RandomWalkFactor(self.lay, self.h, self._random_walk_sigmas())
        self._keyframe = KeyframeFactor(mechanism, self.data, self.lay, self.cfg, np.zeros(mechanism.n))
        self._command_t: dict[int, list[float]] = {}
        self._command_y: dict[int, list[float]] = {}
        self._next_key = 0
        self._branch_hint: np.ndarray | None = None   # the last estimated q (survives restarts)
        self._start_fresh(None)
        if freeze_gc:
            gc.collect()
            gc.freeze()

    # ----------------------------------------------------------------------------------------
    # set-up
    def _random_walk_sigmas(self) -> np.ndarray:
        nz, lay = self.cfg.noise, self.lay
        out = [nz.input_random_walk] * lay.n_u
        for g, sl in zip(self.mech.gyros, lay.bias_slices):
            if sl is not None:
                out += [max(g.config.bias_instability, 1e-9)] * (sl.stop - sl.start)
        if lay.has_gravity:
            out.append(nz.gravity_random_walk)
        if lay.has_mass:
            out.append(nz.mass_random_walk)
        return np.asarray(out, float)

    def _initial_state(self) -> np.ndarray:
        """The state keyframe 0 starts from: ``initial_q``/``initial_v`` if given; else, with
        ``initial_pose: sensors`` and encoders on every DOF, the assembly at the first encoder
        readings (branch from the last estimate, or the config's hint); else the config's initial
        assembly."""
        mech, lay = self.mech, self.lay
        if self._initial_q is not None:
            q = np.asarray(self._initial_q, float)
            v = np.zeros(mech.n) if self._initial_v is None else np.asarray(self._initial_v, float)
        else:
            q, v = assembled_initial_state(mech, self.data)
            z = self._dof_from_encoders() if self.cfg.initial_pose == "sensors" else None
            if z is not None:
                hint = self._branch_hint if self._branch_hint is not None else q
                try:
                    q = assemble(mech, self.data, z, hint).q
                    v = solve_velocity(mech, self.data, q, np.zeros(len(mech.dof)))
                except AssemblyError:
                    pass                              # keep the config's assembly
        a, lam = mech.forward_dynamics(self.data, q, v)
        return lay.pack(q, v, a, lam)

    def _dof_from_encoders(self) -> np.ndarray | None:
        """The earliest queued encoder reading of every DOF coordinate, or None if one is missing."""
        mech = self.mech
        first: dict[int, tuple[float, float]] = {}
        for p in self._pending:
            if p.sensor.kind == "encoder":
                j = mech.encoders[p.sensor.index].index
                if j not in first or p.stamp < first[j][0]:
                    first[j] = (p.stamp, float(p.value[0]))
        if not all(int(j) in first for j in mech.dof):
            return None
        return np.array([first[int(j)][1] for j in mech.dof])

    def _prior_sigmas(self) -> np.ndarray:
        nz, lay = self.cfg.noise, self.lay
        sig = np.full(lay.dim, np.inf)
        sig[lay.Q] = nz.prior_position
        sig[lay.V] = nz.prior_velocity
        sig[lay.A] = nz.prior_acceleration
        sig[lay.U] = nz.prior_input
        for g, sl in zip(self.mech.gyros, lay.bias_slices):
            if sl is not None:
                sig[lay.B.start + sl.start:lay.B.start + sl.stop] = max(g.config.bias_sigma, 1e-6)
        sig[lay.S] = nz.prior_gravity
        sig[lay.MU] = nz.prior_mass
        return sig

    def _start_fresh(self, x_start: np.ndarray | None, prior_sigma: np.ndarray | None = None) -> None:
        """(Re)start; the next sample opens keyframe 0 at its stamp (keys stay unique). Samples
        still queued are counted as discarded."""
        for p in getattr(self, "_pending", []):
            p.sensor.counts.discarded += 1
        self.smoother = FixedLagSmoother(capacity=2 * self.window + 64)
        self._x_start = x_start
        self._prior_sigma = prior_sigma
        self._started = False
        self._t0 = 0.0
        self._k0 = self._next_key
        self._closed = self._k0 - 1                  # index of the newest closed keyframe
        self._x: dict[int, np.ndarray] = {}          # states of the newest keyframes
        self._pending: list[_Sample] = []
        self._late: list = []
        for sensor in self._sensors.values():
            sensor.run_last = -math.inf
        self._steps: deque[Step] = deque(maxlen=2 * self.window + 1)
        self._lin1: np.ndarray | None = None
        self._lin0: np.ndarray | None = None
        self._scan_count = 0
        self._scan_active = True
        self._latest_stamp = -math.inf
        self._out: list[Estimate] = []
        self._out_lagged: list[Estimate] = []
        self._last: Estimate | None = None
        self._last_lagged: Estimate | None = None
        self._recovering = False

    def reset(self, reason: str = "requested") -> None:
        """Forget everything and start again from the config's initial state."""
        self.health.resets += 1
        self.health.last_reset = reason
        self._command_t.clear()
        self._command_y.clear()
        for s in self._sensors.values():
            s.recent.clear()
            s.mean_abs, s.scale = 0.7979, 1.0
        self._start_fresh(None)

    # ----------------------------------------------------------------------------------------
    # time
    def _time(self, k: int) -> float:
        return self._t0 + (k - self._k0) * self.h

    def _keyframe_of(self, stamp: float) -> int:
        """The keyframe k with t_{k-1} < stamp <= t_k."""
        return self._k0 + max(0, math.ceil((stamp - self._t0) / self.h - 1e-9))

    def _window_start(self) -> int:
        return self.smoother.keys[0] if self.smoother.keys else self._k0

    @property
    def started(self) -> bool:
        return self._started

    # ----------------------------------------------------------------------------------------
    # input
    def counts(self) -> dict[str, SensorCounts]:
        for s in self._sensors.values():
            s.counts.pending = sum(1 for p in self._pending if p.sensor is s)
        return {name: s.counts for name, s in self._sensors.items()}

    def add_sample(self, sensor: str, stamp: float, value) -> str:
        """Feed one sample: the reading of ``sensor`` taken at ``stamp`` (s).

        value: encoder (1,) rad or m; gyro (3,) rad/s in the sensor frame (x, y, z; the config's
        ``axes`` are used); load cell (1,) N or N m; ``command:<joint>`` (1,) the known effort.
        Returns what happened to it: queued, late, too_old, rejected_nonfinite,
        rejected_duplicate or unknown_sensor (the counts record the same).
        """
        s = self._sensors.get(sensor)
        if s is None:
            self.health.unknown_sensor += 1
            return "unknown_sensor"
        c = s.counts
        c.received += 1
        value = np.atleast_1d(np.asarray(value, float))
        if not (math.isfinite(stamp) and math.isfinite(value.sum())):      # NaN/Inf propagate
            c.rejected_nonfinite += 1
            return "rejected_nonfinite"
        if s.kind == "gyro" and value.size != 3:
            c.rejected_nonfinite += 1
            return "rejected_nonfinite"
        if stamp in s.recent:
            c.rejected_duplicate += 1
            return "rejected_duplicate"
        if self.started and stamp < self._time(self._window_start()) - max(self.cfg.lag, 1.0):
            self.reset(f"time jumped backwards to {stamp:.3f} s on {sensor}")
        s.recent.append(stamp)
        c.first_stamp = stamp if c.first_stamp is None else min(c.first_stamp, stamp)
        c.last_stamp = stamp if c.last_stamp is None else max(c.last_stamp, stamp)
        s.run_last = max(s.run_last, stamp)
        if s.kind == "command":
            self._add_command(s.index, stamp, float(value[0]))
            c.used += 1
            return "queued"
        if not self.started:
            # collect the first sensor_wait seconds, then start at the earliest stamp seen
            self._pending.append(_Sample(stamp, s, value))
            self._latest_stamp = max(self._latest_stamp, stamp)
            earliest = min(p.stamp for p in self._pending)
            if self._latest_stamp - earliest >= self.cfg.sensor_wait:
                self._open(earliest)
                self._close_ready()
            return "queued"
        status = "queued"
        if stamp <= self._time(self._closed):
            status = self._add_late(_Sample(stamp, s, value))
        else:
            self._pending.append(_Sample(stamp, s, value))
        self._latest_stamp = max(self._latest_stamp, stamp)
        self._close_ready(stamp)
        return status

    def advance_to(self, stamp: float) -> None:
        """Close every keyframe up to ``stamp`` even if sensors are silent (dynamics only)."""
        if not self.started and self._pending:
            self._open(min(p.stamp for p in self._pending))
        if not self.started:
            return
        while self._time(self._closed + 1) <= stamp:
            self._close(self._closed + 1)

    def flush(self) -> None:
        """Close the keyframes the queued samples reach (end of a recording)."""
        if not self.started and self._pending:
            self._open(min(p.stamp for p in self._pending))
        if self.started and self._pending:
            last = max(p.stamp for p in self._pending)
            while self._time(self._closed) < last:
                self._close(self._closed + 1)

    def _add_command(self, j: int, stamp: float, effort: float) -> None:
        ts = self._command_t.setdefault(j, [])
        ys = self._command_y.setdefault(j, [])
        i = bisect.bisect(ts, stamp)
        ts.insert(i, stamp)
        ys.insert(i, effort)
        horizon = stamp - 2.0 * max(self.cfg.lag, 0.1)
        while len(ts) > 2 and ts[1] < horizon:
            ts.pop(0)
            ys.pop(0)

    def known_efforts(self, stamp: float) -> np.ndarray:
        """Known input efforts at ``stamp`` (linear between commands, held beyond them)."""
        tau = np.zeros(self.mech.n)
        for j, ts in self._command_t.items():
            if ts:
                tau[j] = float(np.interp(stamp, ts, self._command_y[j]))
        return tau

    def _open(self, stamp: float) -> None:
        """Keyframe 0 at the first sample's stamp."""
        self._started = True
        self._t0 = stamp
        self._closed = self._k0 - 1

    def _live(self, s: _Sensor) -> bool:
        """A sensor is live if it reported within the last 0.5 s of this run."""
        return s.run_last >= self._latest_stamp - 0.5

    def _close_ready(self, stamp: float | None = None) -> None:
        """Close the keyframes that can be closed. A sample stamped before the next keyframe
        time cannot make it closable, so that (most frequent) case returns at once."""
        if stamp is not None and stamp < self._time(self._closed + 1):
            return
        while True:
            t = self._time(self._closed + 1)
            if self._latest_stamp >= t + self.cfg.sensor_wait:
                self._close(self._closed + 1)
                continue
            live = [s for s in self._streams if self._live(s)]
            if live and all(s.run_last >= t for s in live):
                self._close(self._closed + 1)
                continue
            return

    # ----------------------------------------------------------------------------------------
    # factors
    def _sample_factors(self, samples: list[_Sample], t_prev: float) -> list:
        mech, lay, h = self.mech, self.lay, self.h
        loss = self.cfg.robust_loss
        factors: list = []
        enc = [p for p in samples if p.sensor.kind == "encoder"]
        if enc:
            idx, s, y, sig, ang = [], [], [], [], []
            for p in enc:
                e = mech.encoders[p.sensor.index]
                idx.append(e.index)
                s.append((p.stamp - t_prev) / h)
                y.append(p.value[0])
                sig.append(e.config.noise)
                ang.append(e.angular)
            f = EncoderBatchFactor(lay, h, idx, s, y, sig, ang, loss)
            f.scale = max(p.sensor.scale for p in enc)
            factors.append(TaggedFactor(f, enc))
        for p in samples:
            if p.sensor.kind == "gyro":
                f = GyroFactor(mech, self.data, lay, p.sensor.index,
                               Interpolant.at((p.stamp - t_prev) / h, h), p.value, loss)
            elif p.sensor.kind == "load_cell":
                f = LoadCellFactor(mech, self.data, lay, p.sensor.index,
                                   Interpolant.at((p.stamp - t_prev) / h, h), float(p.value[0]),
                                   self.known_efforts(p.stamp), loss)
            else:
                continue
            f.scale = p.sensor.scale
            factors.append(TaggedFactor(f, [p]))
        return factors

    def _step_factors(self, k: int, samples: list[_Sample]) -> list:
        factors: list = []
        if k == self._k0:
            sig = self._prior_sigma if self._prior_sigma is not None else self._prior_sigmas()
            factors.append(TaggedFactor(PriorFactor(self._x_start, sig), []))
        else:
            factors.append(TaggedFactor(self._integration, []))
            if not self._random_walk.empty:
                factors.append(TaggedFactor(self._random_walk, []))
        kf = self._keyframe if not self._command_t else KeyframeFactor(
            self.mech, self.data, self.lay, self.cfg, self.known_efforts(self._time(k)))
        factors.append(TaggedFactor(kf, []))
        factors.extend(self._sample_factors(samples, self._time(k) - self.h))
        return factors

    def _predict(self, x: np.ndarray) -> np.ndarray:
        lay, h = self.lay, self.h
        y = x.copy()
        y[lay.Q] = x[lay.Q] + h * x[lay.V] + 0.5 * h * h * x[lay.A]
        y[lay.V] = x[lay.V] + h * x[lay.A]
        return y

    def _gauss_newton(self, factors: list, x0: np.ndarray | None, x1: np.ndarray, iterations: int):
        """Refine x1 with x0 fixed; return the final linearization (r, J0, J1) and x1."""
        for _ in range(iterations):
            r, J0, J1 = linearize_step(factors, x0, x1)
            dx = scipy.linalg.lstsq(J1, -r, lapack_driver="gelsy", check_finite=False)[0]
            if not math.isfinite(dx.sum()):
                break
            x1 = x1 + dx
        r, J0, J1 = linearize_step(factors, x0, x1)
        return r, J0, J1, x1

    # ----------------------------------------------------------------------------------------
    # keyframes
    def _take_samples(self, t: float) -> list[_Sample]:
        take = [p for p in self._pending if p.stamp <= t]
        if take:
            self._pending = [p for p in self._pending if p.stamp > t]
            take.sort(key=lambda p: p.stamp)
        return take

    def _close(self, k: int) -> None:
        t0 = time.perf_counter()
        c0 = time.thread_time()
        samples = self._take_samples(self._time(k))
        first = k == self._k0
        if first and self._x_start is None:
            self._x_start = self._initial_state()
        factors = self._step_factors(k, samples)
        x_prev = None if first else self._x[k - 1]
        x_pred = self._x_start if first else self._predict(x_prev)
        self._next_key = k + 1
        try:
            r, J0, J1, x1 = self._gauss_newton(factors, x_prev, x_pred, self.cfg.gauss_newton_iterations)
            rms = float(np.sqrt(np.mean(r * r)))
            if rms > self.cfg.divergence_threshold:
                raise SolverFailure(f"diverging: whitened residual RMS {rms:.3g} at keyframe {k}")
            lf = self._factor(k, J0, J1, r, x_prev, x1)
            late, self._late = self._late, []
            touched = min([k if first else k - 1] + [kk - 1 for kk, _ in late])
            idx = self.smoother.update([lf] + [f for _, f in late], new_keys={k: x1}, touched=touched)
            step = Step(k, factors, idx[0], x_prev, x1, unary=first)
            self._steps.append(step)
            self._set_lin(k, x_prev, x1)
            if self.recorded is not None:
                self.recorded.append(step)
            self._closed = k
            self._x[k] = self.smoother.estimate(k)
            self._x.pop(k - 2, None)
            self._relinearize()
            self._marginalize()
            self.health.residual_rms = rms
            if self.mech.m:
                self.health.closure_residual = float(np.abs(r[self._phi_rows(first)]).max()) * \
                    self.cfg.noise.closure_position
        except (SolverFailure, LinearizationError, np.linalg.LinAlgError) as exc:
            if self._recovering:
                # the fresh start failed too: drop this keyframe's samples, restart from the config
                self._recovering = False
                for p in samples:
                    p.sensor.counts.discarded += 1
                self.health.last_recovery += f"; restart failed ({exc}), back to the initial state"
                self._start_fresh(None)
                return
            self._recover(k, str(exc) or type(exc).__name__, samples)
            return
        self._count_used(factors)
        self.health.keyframes += 1
        self._emit(k, lagged=False)
        self.health.update_ms.append((time.perf_counter() - t0) * 1e3)
        self.health.update_cpu_ms.append((time.thread_time() - c0) * 1e3)

    def _phi_rows(self, first: bool) -> slice:
        """Rows of the closure position residual in a step's stacked rows."""
        if first:
            start = int(np.sum(np.isfinite(self._prior_sigma if self._prior_sigma is not None
                                           else self._prior_sigmas())))
        else:
            start = self._integration.J1.shape[0] + (0 if self._random_walk.empty else self._random_walk.cols.size)
        return slice(start, start + self.mech.m)

    def _factor(self, k: int, J0, J1, r, x_prev, x1):
        if J0 is None:
            return self.smoother.linear_factor([k], [J1], -r, [x1])
        return self.smoother.linear_factor([k - 1, k], [J0, J1], -r, [x_prev, x1])

    def _marginalize(self) -> None:
        """Keep between ``lag`` and twice ``lag`` of keyframes: when the window reaches twice the
        lag, rebuild ISAM2 and marginalise the oldest half (see FixedLagSmoother.rebuild)."""
        if self.want_lagged:
            old = self._closed - self.window
            if old in self.smoother.keys:
                self._x[old] = self.smoother.estimate(old)
                self._emit(old, lagged=True)
                self._x.pop(old, None)
        if len(self.smoother) < 2 * self.window:
            return
        count = len(self.smoother) - self.window
        X = self.smoother.all_estimates()
        if self.recorded is not None:
            for j, k in enumerate(self.smoother.keys[:count]):
                self.final_states[k] = X[j].copy()
        mapping = self.smoother.rebuild(X, count)
        for step in self._steps:
            step.index = mapping.get(step.index, -1)
        start = self._window_start()
        while self._steps and (self._steps[0].k < start or
                               (self._steps[0].k == start and not self._steps[0].unary)):
            self._steps.popleft()

    # ----------------------------------------------------------------------------------------
    # relinearization, late samples, recovery
    def _set_lin(self, k: int, x0: np.ndarray | None, x1: np.ndarray) -> None:
        """Remember where step k was linearized (ring-buffer rows as in the smoother)."""
        if self._lin1 is None:
            cap = self.smoother.capacity
            self._lin1 = np.zeros((cap, x1.size))
            self._lin0 = np.zeros((cap, x1.size))
        row = k % self.smoother.capacity
        self._lin1[row] = x1
        if x0 is not None:
            self._lin0[row] = x0

    def _relinearize(self) -> None:
        """Fluid relinearization: the step factors whose keyframes ISAM2 moved by more than
        ``relinearize_threshold`` since they were linearized are relinearized at the current
        estimate, the most-moved first, at most ``relinearize_budget`` per keyframe. With
        ``relinearize_window`` every step of the window is a candidate (how a wrong initial pose
        converges); otherwise only the newest ``relinearize_budget`` steps are."""
        budget = self.cfg.relinearize_budget
        keys = self.smoother.keys
        if budget <= 0 or len(keys) < 2:
            return
        n, th = self.lay.n, self.cfg.relinearize_threshold
        vth = self.cfg.relinearize_velocity_factor * th
        # Scanning the window costs a read of every keyframe's delta; while tracking only the
        # newest steps move, so the window is scanned every 10th keyframe, whenever the two
        # newest steps moved, and as long as the previous scan still found steps to redo.
        self._scan_count += 1
        if not self._scan_active and self._scan_count % 10 and self.cfg.relinearize_window:
            rows2 = self.smoother.rows()[-3:]
            x2 = np.stack([self.smoother.estimate(k) for k in keys[-3:]])
            d = np.maximum(np.abs(x2[1:, :2 * n] - self._lin1[rows2[1:], :2 * n]),
                           np.abs(x2[:-1, :2 * n] - self._lin0[rows2[1:], :2 * n]))
            if max(d[:, :n].max() / th, d[:, n:].max() / vth) <= 1.0:
                return
        X = self.smoother.all_estimates()             # rows: keys[0] .. keys[-1]
        rows = self.smoother.rows()
        first = 1 if self.cfg.relinearize_window else max(1, len(keys) - budget)
        # steps k = keys[first:] (their previous keyframe is in the window)
        d1 = np.abs(X[first:, :2 * n] - self._lin1[rows[first:], :2 * n])
        d0 = np.abs(X[first - 1:-1, :2 * n] - self._lin0[rows[first:], :2 * n])
        d = np.maximum(d1, d0)
        moved = np.maximum(d[:, :n].max(axis=1) / th, d[:, n:].max(axis=1) / vth)
        order = [first + i for i in np.argsort(-moved)[:budget] if moved[i] > 1.0]
        # the window's steps, aligned with its keys (steps[j].k == keys[0] + j - offset)
        steps = self._steps
        offset = keys[0] - steps[0].k if steps else 0
        head = steps[offset] if steps and 0 <= offset < len(steps) and steps[offset].k == keys[0] else None
        if head is not None and head.unary and head.index >= 0 and len(order) < budget:
            d = np.abs(X[0, :2 * n] - self._lin1[rows[0], :2 * n])   # the run's first step
            if max(d[:n].max() / th, d[n:].max() / vth) > 1.0:
                order.append(0)
        self._scan_active = bool(order)
        if not order:
            return

        def step_of(i: int):
            j = i + offset
            return steps[j] if 0 <= j < len(steps) and steps[j].k == keys[i] else None

        factors, removes, redo = [], [], []
        for i in order:
            k = keys[i]
            step = step_of(i)
            if step is None or step.index < 0 or (step.unary and i != 0) or (not step.unary and i == 0):
                continue
            x1 = X[i]
            x0 = None if step.unary else X[i - 1]
            r, J0, J1 = linearize_step(step.factors, x0, x1)
            factors.append(self._factor(k, J0, J1, r, x0, x1))
            removes.append(step.index)
            redo.append((step, x0, x1))
        if not factors:
            return
        touched = min(step.k - (0 if step.unary else 1) for step, _, _ in redo)
        idx = self.smoother.update(factors, remove=removes, touched=touched)
        for (step, x0, x1), i in zip(redo, idx):
            step.index, step.x0, step.x1 = i, x0, x1
            self._set_lin(step.k, x0, x1)
        self.health.relinearizations += len(factors)
        self._x[self._closed] = self.smoother.estimate(self._closed)

    def _add_late(self, p: _Sample) -> str:
        k = self._keyframe_of(p.stamp)
        if k - 1 < self._window_start() or k > self._closed:
            p.sensor.counts.too_old += 1
            return "too_old"
        x0, x1 = self.smoother.estimate(k - 1), self.smoother.estimate(k)
        for tf in self._sample_factors([p], self._time(k - 1)):
            try:
                r, J0, J1 = linearize_step([tf], x0, x1)
            except LinearizationError:
                p.sensor.counts.rejected_nonfinite += 1
                return "rejected_nonfinite"
            self._late.append((k, self.smoother.linear_factor([k - 1, k], [J0, J1], -r, [x0, x1])))
            self._count_used([tf], late=True)
        return "late"

    def _count_used(self, factors: list, late: bool = False) -> None:
        for tf in factors:
            f = tf.factor
            w = getattr(f, "weight", None)
            last = getattr(f, "last_abs", None)
            for i, p in enumerate(tf.samples):
                c = p.sensor.counts
                if last is not None:
                    p.sensor.add_innovation(float(last[i] if last.size > 1 else last[0]))
                if late:
                    c.late += 1
                else:
                    c.used += 1
                wi = w[i] if isinstance(w, np.ndarray) else w
                if wi is not None and wi < 0.999:
                    c.downweighted += 1

    def _recover(self, k: int, reason: str, samples: list[_Sample]) -> None:
        """Re-initialise the smoother from the last good state, within this keyframe."""
        self.health.recoveries += 1
        self.health.last_recovery = f"keyframe {k}: {reason}"
        good = self._x.get(self._closed)
        if good is None or not np.all(np.isfinite(good)):
            x_start, sig = None, None
        else:
            x_start = self._predict(good)
            sig = self._prior_sigmas()
            sig[self.lay.Q] = min(self.cfg.noise.prior_position, 0.05)
            sig[self.lay.V] = min(self.cfg.noise.prior_velocity, 0.5)
        t = self._time(k)
        keep_pending = self._pending
        self._pending = []                      # re-queued below, not discarded
        self._start_fresh(x_start, sig)
        self._open(t)
        self._pending = [p for p in samples if p.stamp >= t - 1e-12] + keep_pending
        self._latest_stamp = max([p.stamp for p in self._pending], default=t)
        self._recovering = True
        try:
            self._close(self._k0)
        finally:
            self._recovering = False

    def force_solver_failure(self) -> None:
        """Make the next update fail inside ISAM2 (for tests of the recovery path): an
        unconstrained extra variable makes the linear system indeterminant."""
        self.smoother.poison()

    # ----------------------------------------------------------------------------------------
    # output
    def estimate_of(self, k: int, x: np.ndarray, lagged: bool = True, cov=None) -> Estimate:
        lay, mech = self.lay, self.mech
        u = x[lay.U].copy()
        effort = self.known_efforts(self._time(k))
        if lay.n_u:
            effort = effort + mech.B @ u
        return Estimate(stamp=self._time(k), keyframe=k, lagged=lagged, q=x[lay.Q].copy(),
                        v=x[lay.V].copy(), a=x[lay.A].copy(), lam=x[lay.L].copy(), u=u,
                        effort=effort, bias=x[lay.B].copy(), gravity_scale=lay.gravity_scale(x),
                        mass_scale=lay.mass_scale(x), covariance=cov, x=x.copy())

    def _emit(self, k: int, lagged: bool) -> None:
        x = self._x.get(k)
        if x is None:
            x = self.smoother.estimate(k)
        cov = None
        if self.want_covariance and not lagged:
            try:
                P = self.smoother.covariance(k)
                idx = np.concatenate([self.mech.dof, self.mech.n + self.mech.dof])
                cov = P[np.ix_(idx, idx)]
            except RuntimeError:
                cov = None
        e = self.estimate_of(k, x, lagged, cov)
        if lagged:
            self._out_lagged.append(e)
            self._last_lagged = e
        else:
            self._out.append(e)
            self._last = e
            self._branch_hint = e.q

    def estimate(self) -> Estimate | None:
        """The newest (filtered) estimate."""
        return self._last

    def lagged_estimate(self) -> Estimate | None:
        """The oldest estimate of the window (smoothed over the whole lag), if enabled."""
        return self._last_lagged

    def pop_estimates(self) -> list[Estimate]:
        """Filtered estimates of the keyframes closed since the last call, oldest first."""
        out, self._out = self._out, []
        return out

    def pop_lagged(self) -> list[Estimate]:
        """Lagged (smoothed) estimates produced since the last call (needs lagged=True)."""
        out, self._out_lagged = self._out_lagged, []
        return out

    def smoothed_window(self) -> list[Estimate]:
        """The current smoothed estimates of every keyframe in the window, oldest first."""
        return [self.estimate_of(k, self.smoother.estimate(k), True) for k in list(self.smoother.keys)]

    def forces(self, e: Estimate) -> Forces:
        """Closure reactions (in frame_b), load-cell readings and actuator efforts of an estimate."""
        mech, d = self.mech, self.data
        closures = [ClosureForce(c.name, c.frame_b, f, tq) for c, (f, tq) in
                    zip(mech.closure_configs, mech.closure_wrenches_in_frame_b(d, e.q, e.lam))]
        tau = self.known_efforts(e.stamp)
        cells = {}
        for k, cell in enumerate(mech.load_cells):
            cells[cell.config.name] = mech.load_cell(d, k, e.q, e.v, e.a, e.lam, e.u, tau,
                                                      derivatives=False)[0]
        act = set(mech.input_joints) | set(mech.known_input_joints)
        efforts = {name: float(e.effort[mech.index[name]]) for name in mech.joint_names if name in act}
        return Forces(closures, cells, efforts)
