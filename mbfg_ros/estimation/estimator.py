"""The online estimator: samples in, keyframe estimates out.

Use::

    est = Estimator(mechanism)                 # settings from the mechanism config's estimator:
    est.add_sample("crank_encoder", t, [0.52]) # any order across sensors, any rates
    for e in est.pop_estimates():              # the keyframes closed since the last call
        ...e.q, e.v, e.a, est.forces(e)...

Sensor names are the config's; known input efforts come in as ``"command:<joint>"`` samples.

How it works, in four parts:

- scheduling (:mod:`.schedule`, :mod:`.sensor_streams`): a reading is written at arrival into
  a slot of its keyframe's step parameters (no Python object per reading); keyframes are at
  ``keyframe_rate`` and keyframe k closes when every live stream has reported past t_k or the
  newest stamp is ``sensor_wait`` beyond it; ``keyframes_per_update`` closed keyframes are
  solved together (one at the default 200 Hz);
- linearising (:mod:`.step_function`): the step's rows (integration, random walks, closures,
  dynamics, every reading in (t_{k-1}, t_k] at its own stamp) and their Jacobians come out of
  ONE call of a CasADi function compiled for the mechanism at start-up, linearised at the state
  predicted from x_{k-1} (plus optional local Gauss-Newton iterations on x_k); fluid
  relinearization (:mod:`.relinearization`) redoes, within a per-keyframe budget, the steps
  whose keyframes moved by more than ``relinearize_threshold`` since they were linearised;
- solving (:mod:`.smoother`): one linear factor per step on GTSAM ISAM2; the keyframes older
  than ``lag`` are marginalised as they leave the window (no rebuild), after their lagged
  estimates came out of an exact back-substitution;
- reporting (:mod:`.outputs`): estimates, counts, health.

Readings that arrive after their keyframe closed but inside the window are added as factors of
their own; older ones are counted and dropped. NaN/Inf and duplicate stamps are rejected and
counted. A failed solve re-initialises the smoother from the last good state at the next
keyframe; time going backwards beyond the window resets it.
"""
from __future__ import annotations

import bisect
import gc
import math
import time
from dataclasses import dataclass

import numpy as np
import scipy.linalg

from mbfg_ros.errors import AssemblyError
from mbfg_ros.estimation.divergence import DivergenceMonitor, LossJudge
from mbfg_ros.estimation.integration_noise import IntegrationNoise
from mbfg_ros.estimation.layout import StateLayout
from mbfg_ros.estimation.outputs import ClosureForce, Estimate, Forces, Health, SensorCounts
from mbfg_ros.estimation.relinearization import SingularityThreshold, StepRecords, select_steps
from mbfg_ros.estimation.schedule import KeyframeSchedule, StepInbox
from mbfg_ros.estimation.sensor_streams import SensorStream
from mbfg_ros.estimation.smoother import FixedLagSmoother, SolverFailure
from mbfg_ros.estimation.start_search import StartSearch
from mbfg_ros.estimation.step_function import LinearizationError, StepFunction, compiled_step_function
from mbfg_ros.model.assembly import assemble, solve_velocity
from mbfg_ros.model.assembly import initial_state as assembled_initial_state
from mbfg_ros.model.channels import COMMAND_PREFIX
from mbfg_ros.model.config import EstimatorConfig
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.model.speed import needed_keyframe_rate

JUMP_CONFIRM = 3               # readings in a row older than the window make a jump backwards
AUTO_GROUP_PERIOD = 0.004      # s of keyframes per ISAM2 update with keyframes_per_update: 0
MARGINALIZE_EVERY = 4          # keyframes leave the window in groups of this many
LAGGED_PERIOD = 0.05           # s: lagged estimates come out in groups this long
SCAN_PERIOD = 0.05             # s between deep relinearization passes while converging,
QUIET_SCAN_PERIOD = 1.0        # and while tracking (after QUIET_PASSES deep passes found no work;
QUIET_PASSES = 3               # a pass that finds work makes it converging again)
QUIET_DEEP_FACTOR = 3.0        # while tracking, deep steps are redone beyond this times the threshold


@dataclass
class _GroupStep:
    """A linearized step waiting for its group's ISAM2 update."""
    k: int
    factors: list
    x1: np.ndarray
    taken: list[int]
    extra: list
    wall: float
    cpu: float


def keyframes_per_update(cfg: EstimatorConfig) -> int:
    """The configured number, or (0: auto) one per 4 ms of keyframes: 1 up to 375 Hz, 4 at 1 kHz."""
    if cfg.keyframes_per_update > 0:
        return cfg.keyframes_per_update
    return max(1, int(round(cfg.keyframe_rate * AUTO_GROUP_PERIOD)))


GN_TRIGGER = 10.0
"""sigmas (RMS of the equations-of-motion rows at the predicted state) above which the newest
keyframe is refined by Gauss-Newton before ISAM2 (``gauss_newton_adaptive``). Measured on a
gyro-only slider-crank at 1 kHz: the prediction misses by 8.6 sigma at the median, 29 at p90,
165 at p99 (dead centres); on the four-bar at 200 Hz by 1.7 / 12 / 43."""

REINIT_FACTOR = 10.0
"""A re-initialisation from the encoders needs their residual RMS above this many times the
divergence limit (50 sigma by default)."""
ROUGH_FACTOR = 2.0
"""A failing period's note advises a finer grid when the velocity rows' truncation the estimate
shows exceeds the default integration noise by this factor (integration_noise.py)."""
ROUGH_MARGIN = 1.5
"""The finer grid advised is this times the one at which the RMS truncation would meet the noise
(the truncation peaks at dead centres: on a slider-crank at 20-78 rad/s whose RMS truncation at
400 Hz was 2.7 times the noise, 600 Hz fitted its gyro at 2.0 sigma, 800 Hz at 1.13)."""
SEARCH_SECONDS = 0.2
"""s of readings over which start hypotheses are scored (start_search.py)."""


class Estimator:
    """Multibody factor-graph estimator on an incremental fixed-lag smoother."""

    def __init__(self, mechanism: Mechanism, config: EstimatorConfig | None = None, *,
                 initial_q: np.ndarray | None = None, initial_v: np.ndarray | None = None,
                 initial_state: np.ndarray | None = None, prior_sigma: np.ndarray | None = None,
                 lagged: bool = False, covariance: bool = False, freeze_gc: bool = True,
                 record_steps: bool = False, step_function: StepFunction | None = None,
                 search: bool = True, local_truncation: bool = True) -> None:
        """``initial_state``: a whole first state (layout order) instead of one assembled, with
        ``prior_sigma`` (default the config's prior sigmas). ``record_steps`` keeps every step's
        parameters (for a batch solve over the whole run, see
        :func:`mbfg_ros.estimation.batch.smooth_recording`); memory grows with the run.
        ``step_function``: a StepFunction built for the same mechanism and settings (estimators
        of one mechanism share the compiled function; by default it comes from a cache).
        ``search``: on a rig whose DOF positions no encoder reads, pick the start (and the
        restart of a lost estimate) among several hypotheses (:mod:`.start_search`).
        ``local_truncation``: a step refined by Gauss-Newton gets its integration noise raised to
        its own local truncation (:meth:`.IntegrationNoise.local`); off for the probes that score
        start hypotheses, which must be held to the model as configured."""
        t_build = time.perf_counter()
        self.mech = mechanism
        self.cfg = config or mechanism.config.estimator
        self.lay = StateLayout.for_mechanism(mechanism, self.cfg)
        self.data = mechanism.create_data()
        self.h = 1.0 / self.cfg.keyframe_rate
        self.window = max(2, int(round(self.cfg.lag * self.cfg.keyframe_rate)))
        self.keyframes_per_update = keyframes_per_update(self.cfg)
        self._scan_every = max(10, int(round(SCAN_PERIOD * self.cfg.keyframe_rate)))
        # (odd, so that quiet passes seldom fall on a keyframe that also marginalises)
        self._quiet_scan_every = 2 * max(5, int(round(QUIET_SCAN_PERIOD * self.cfg.keyframe_rate / 2))) + 1
        self._lagged_every = max(1, int(round(LAGGED_PERIOD * self.cfg.keyframe_rate)))
        self.want_lagged = lagged
        self.want_covariance = covariance
        self.health = Health(divergence=DivergenceMonitor(self.cfg.divergence_window, self.cfg.divergence_sigma))
        self.fn = step_function or compiled_step_function(mechanism, self.cfg, self.lay, self.h)
        self._check = self.fn.step.fresh()             # the divergence test's own buffers
        self.layout = self.fn.layout
        streams = [SensorStream(res.name, res.kind, res.index, res.dim) for res in self.fn.residuals]
        self._measuring = streams
        for name in mechanism.known_input_joints:
            streams = streams + [SensorStream(COMMAND_PREFIX + name, "command", mechanism.index[name], 1)]
        self._sensors = {s.name: s for s in streams}
        self.schedule = KeyframeSchedule(streams, self.h, self.cfg.sensor_wait)
        self._p = self.fn.step.p                       # the step's parameters, filled in place
        self._p[:] = self.layout.empty_parameters()
        for i, s in enumerate(self._measuring):
            s.slot = i                                 # its block in the step parameters
        self._integration = IntegrationNoise(self.lay.n, self.h, *self.layout.integration_default)
        self._local_truncation = local_truncation
        self._relin_threshold = SingularityThreshold(self.cfg.relinearize_threshold, mechanism.dependent)
        self.inbox = StepInbox(self.layout, self._measuring,
                               ahead=max(64, int(math.ceil(4 * self.cfg.sensor_wait * self.cfg.keyframe_rate)) + 8))
        n, h = self.lay.n, self.h
        self._transition = np.eye(self.lay.dim)
        self._transition[:n, n:2 * n] = h * np.eye(n)
        self._transition[:n, 2 * n:3 * n] = 0.5 * h * h * np.eye(n)
        self._transition[n:2 * n, 2 * n:3 * n] = h * np.eye(n)
        self._initial_q = initial_q
        self._initial_v = initial_v
        self._initial_x = None if initial_state is None else np.asarray(initial_state, float).copy()
        self._command_t: dict[int, list[float]] = {}
        self._command_y: dict[int, list[float]] = {}
        self._next_key = 0
        self._branch_hint: np.ndarray | None = None   # the last estimated q (survives restarts)
        self.recorded: list | None = [] if record_steps else None
        self.final_states: dict[int, np.ndarray] = {}    # (recording) states as they left the window
        self._reinit_pending = False                  # the next start takes its pose from the encoders
        self._reinit_after = -math.inf                # no re-initialisation before this stamp
        self._dof_encoders = {mechanism.encoders[s.index].config.name for s in self._measuring
                              if s.kind == "encoder" and mechanism.encoders[s.index].config.joint in mechanism.dof_names}
        self._encoders_cover_dof = set(mechanism.dof_names) <= {
            e.config.joint for e in mechanism.encoders if e.config.name in self._dof_encoders}
        # without encoders on every DOF the start comes from several hypotheses (start_search.py)
        self._judge = LossJudge({e.config.name: e.config.noise for e in mechanism.encoders
                                 if mechanism.angular[e.index]})
        self._search = search and not self._encoders_cover_dof and bool(mechanism.gyros)
        self._search_readings: list = []             # the window's newest readings, kept by a recovery
        self._search_start = (self._search and self.cfg.initial_pose == "sensors" and initial_q is None
                              and initial_state is None)
        self._start_fresh(None, prior_sigma)
        self.startup_s = time.perf_counter() - t_build
        if freeze_gc:
            gc.collect()
            gc.freeze()

    # ----------------------------------------------------------------------------------------
    # set-up
    def _initial_state(self) -> np.ndarray:
        """The state keyframe 0 starts from: ``initial_q``/``initial_v`` if given; else, with
        ``initial_pose: sensors`` and encoders on every DOF, the assembly at the first encoder
        readings (branch from the last estimate, or the config's hint) with the config's initial
        DOF velocities; else the config's initial assembly."""
        mech, lay = self.mech, self.lay
        if self._initial_x is not None:
            return self._initial_x.copy()
        if self._initial_q is not None:
            q = np.asarray(self._initial_q, float)
            v = np.zeros(mech.n) if self._initial_v is None else np.asarray(self._initial_v, float)
        else:
            q, v = assembled_initial_state(mech, self.data)
            z = self._dof_from_encoders() if (self.cfg.initial_pose == "sensors" or self._reinit_pending) else None
            self._reinit_pending = False
            if z is not None:
                hint = self._branch_hint if self._branch_hint is not None else q
                try:
                    q = assemble(mech, self.data, z, hint).q
                    # the config's DOF velocities (a rig recorded running starts at speed)
                    v_dof = np.array([v[mech.index[name]] for name in mech.dof_names])
                    v = solve_velocity(mech, self.data, q, v_dof)
                except AssemblyError:
                    pass                              # keep the config's assembly
        a, lam = mech.forward_dynamics(self.data, q, v)
        return lay.pack(q, v, a, lam)

    def _dof_from_encoders(self) -> np.ndarray | None:
        """The earliest queued encoder reading of every DOF coordinate, or None if one is missing."""
        mech = self.mech
        first: dict[int, tuple[float, float]] = {}
        for i, s in enumerate(self._measuring):
            if s.kind == "encoder":
                e = self.inbox.earliest(i)
                j = mech.encoders[s.index].index
                if e is not None and (j not in first or e[0] < first[j][0]):
                    first[j] = (e[0], float(e[1]))
        if not all(int(j) in first for j in mech.dof):
            return None
        return np.array([first[int(j)][1] for j in mech.dof])

    def _start_fresh(self, x_start: np.ndarray | None, prior_sigma: np.ndarray | None = None) -> None:
        """(Re)start; the next sample opens keyframe 0 at its stamp (keys stay unique). Readings
        still queued are counted as discarded."""
        for i, _, _ in self.inbox.drain(self.schedule):
            self._measuring[i].counts.discarded += 1
        cap = self.window + self._lagged_every + 2 * MARGINALIZE_EVERY + 8
        self.smoother = FixedLagSmoother(self.lay.dim, capacity=cap, qr=self.mech.m > 0)
        self.records = StepRecords(cap, self.lay.dim, self.layout.P)
        self.schedule.restart(self._next_key)
        self._x_start = x_start
        self._prior_sigma = prior_sigma if prior_sigma is not None else self.lay.prior_sigmas(self.mech, self.cfg)
        self._x: dict[int, np.ndarray] = {}          # states of the newest keyframes
        self._late: list = []                        # (k, factor) waiting for the next update
        self._group: list[_GroupStep] = []           # linearized steps waiting for their update
        self._scan_count = 0
        self._scan_active = True
        self._quiet_passes = 0                       # deep passes in a row that found no work
        self._out: list[Estimate] = []
        self._out_lagged: list[Estimate] = []
        self._last: Estimate | None = None
        self._last_lagged: Estimate | None = None
        self._lagged_next = self._next_key           # next keyframe to emit as lagged
        self._back_limit = -math.inf                 # a stamp before this is out of the window
        self._held_back: list = []                   # readings before it, until a jump is confirmed
        self._recovering = False
        self._integration.reset()

    def reset(self, reason: str = "requested") -> None:
        """Forget everything and start again from the config's initial state."""
        self.health.resets += 1
        self.health.last_reset = reason
        self.health.divergence.restart()
        self._command_t.clear()
        self._command_y.clear()
        for s in self._sensors.values():
            s.forget_recent()
        self._start_fresh(None)

    # ----------------------------------------------------------------------------------------
    # time
    def _time(self, k: int) -> float:
        return self.schedule.time(k)

    def _window_start(self) -> int:
        return self.smoother.keys[0] if self.smoother.keys else self.schedule.k0

    @property
    def started(self) -> bool:
        return self.schedule.started

    # ----------------------------------------------------------------------------------------
    # input
    def counts(self) -> dict[str, SensorCounts]:
        for s, n in zip(self._measuring, self.inbox.pending):
            s.counts.pending = n
        for name, _, _ in self._held_back:
            self._sensors[name].counts.pending += 1
        return {name: s.counts for name, s in self._sensors.items()}

    def add_sample(self, sensor: str, stamp: float, value) -> str:
        """Feed one sample: the reading of ``sensor`` taken at ``stamp`` (s).

        value: encoder (1,) rad or m; gyro (3,) rad/s in the sensor frame (x, y, z; the config's
        ``axes`` are used); load cell (1,) N or N m; ``command:<joint>`` (1,) the known effort.
        A scalar is accepted for one-value sensors. Returns what happened to it: queued, late,
        too_old, rejected_nonfinite, rejected_duplicate, unknown_sensor (the counts record the
        same), or held: stamped before the window; it becomes too_old when the next reading is
        in line again, and the start of a new run (a reset) when JUMP_CONFIRM such readings
        come in a row.
        """
        s = self._sensors.get(sensor)
        if s is None:
            self.health.unknown_sensor += 1
            return "unknown_sensor"
        c = s.counts
        c.received += 1
        try:
            if s.dim == 1:
                y = float(value[0]) if hasattr(value, "__getitem__") else float(value)
                ok = math.isfinite(y) and math.isfinite(stamp)
            else:
                y = value
                ok = len(value) == s.dim and math.isfinite(stamp) and all(math.isfinite(float(x)) for x in value)
        except (TypeError, ValueError, IndexError):
            ok = False
        if not ok:
            c.rejected_nonfinite += 1
            return "rejected_nonfinite"
        if s.is_duplicate(stamp):
            c.rejected_duplicate += 1
            return "rejected_duplicate"
        sch = self.schedule
        if stamp < self._back_limit:
            # older than the window: an isolated one is too old; JUMP_CONFIRM in a row are a
            # jump backwards (a looping bag, a clock reset): restart and take them
            self._held_back.append((sensor, stamp, value))
            if len(self._held_back) < JUMP_CONFIRM:
                return "held"
            held, self._held_back = self._held_back, []
            self.reset(f"time jumped backwards to {held[0][1]:.3f} s on {held[0][0]}")
            for name, st, val in held[:-1]:
                self._sensors[name].counts.received -= 1
                self.add_sample(name, st, val)
            s.is_duplicate(stamp)
        elif self._held_back:
            for name, _, _ in self._held_back:       # isolated: too old for the window
                self._sensors[name].counts.too_old += 1
            self._held_back = []
        if c.first_stamp is None or stamp < c.first_stamp:
            c.first_stamp = stamp
        if c.last_stamp is None or stamp > c.last_stamp:
            c.last_stamp = stamp
        if stamp > s.run_last:
            s.run_last = stamp
        if s.kind == "command":
            self._add_command(s.index, stamp, y)
            c.used += 1
            return "queued"
        if not sch.started:
            self.inbox.queue(s.slot, stamp, y)
            if stamp > sch.latest:
                sch.latest = stamp
            if sch.latest - self.inbox.earliest()[0] >= (SEARCH_SECONDS if self._search_start else sch.wait):
                self._open()
                self._close_ready()
            return "queued"
        status = "queued"
        if stamp <= sch.t_closed:
            status = self._add_late(s, stamp, y)
        else:
            # its keyframe k (t_{k-1} < stamp <= t_k) and the fraction of that step
            f = (stamp - sch.t0) / sch.h
            k = sch.k0 + max(0, math.ceil(f - 1e-9))
            self.inbox.put(s.slot, k, sch.closed, stamp, y, f - (k - sch.k0 - 1))
        if stamp > sch.latest:
            sch.latest = stamp
        if stamp >= sch.t_next:
            self._close_ready()
        return status

    def _open(self) -> None:
        """Start the run at the earliest reading waiting (the initial state may come from the
        waiting encoder readings, or from the best start hypothesis over them)."""
        if self._x_start is None:
            self._x_start = self._initial_state()
            if self._search_start and self.inbox.waiting:
                self._start_from_search()
        self.schedule.open(self.inbox.earliest()[0])
        self.inbox.start(self.schedule)

    def _start_from_search(self) -> None:
        """The run's first state from the best start hypothesis over the waiting readings (with
        the config's initial state and prior sigmas as the prior)."""
        readings = [(self._measuring[i], stamp, value) for i, stamp, value in self.inbox.waiting]
        t1 = max(r[1] for r in readings)
        result = StartSearch(self).run(self._x_start, self._prior_sigma, readings, self._commands_until(t1))
        self.health.start_searches += 1
        self.health.last_start_search = "start: " + result.describe()
        if result.best.state is not None:
            self._x_start = result.best.state
            self._prior_sigma = self._restart_sigmas()

    def _commands_until(self, t1: float) -> list:
        """The known-effort commands up to ``t1`` as samples (name, stamp, effort)."""
        out = []
        for j, ts in self._command_t.items():
            name = COMMAND_PREFIX + self.mech.joint_names[j]
            out += [(name, t, y) for t, y in zip(ts, self._command_y[j]) if t <= t1]
        return out

    def _restart_sigmas(self) -> np.ndarray:
        """Prior sigmas of a restart from a solved state: the config's, positions at most 0.05
        rad and velocities 0.5 rad/s."""
        sig = self.lay.prior_sigmas(self.mech, self.cfg)
        sig[self.lay.Q] = min(self.cfg.noise.prior_position, 0.05)
        sig[self.lay.V] = min(self.cfg.noise.prior_velocity, 0.5)
        return sig

    def advance_to(self, stamp: float) -> None:
        """Close every keyframe up to ``stamp`` even if sensors are silent (dynamics only)."""
        sch = self.schedule
        if not sch.started and self.inbox.waiting:
            self._open()
        if not sch.started:
            return
        while sch.started and self._time(sch.closed + 1) <= stamp:   # (a re-initialisation stops it)
            self._close(sch.closed + 1)
        self._commit()

    def flush(self) -> None:
        """Close the keyframes the queued samples reach (end of a recording)."""
        sch = self.schedule
        if not sch.started and self.inbox.waiting:
            self._open()
        if not sch.started:
            return
        last = self.inbox.newest if any(self.inbox.pending) else -math.inf
        while sch.started and self._time(sch.closed) < last:
            self._close(sch.closed + 1)
        self._commit()
        if self.want_lagged and self.smoother.keys:
            self._emit_lagged(sch.closed - self.window)

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

    def _efforts_at(self, stamps: np.ndarray) -> np.ndarray:
        tau = np.zeros((stamps.size, self.mech.n))
        for j, ts in self._command_t.items():
            if ts:
                tau[:, j] = np.interp(stamps, ts, self._command_y[j])
        return tau

    def _fill_efforts(self, p: np.ndarray, t_k: float) -> None:
        """Known efforts at the keyframe and at the readings of sensors that need them."""
        if self.layout.tau is not None:
            p[self.layout.tau] = self.known_efforts(t_k)
        for b, s in zip(self.layout.blocks, self._measuring):
            if b.tau and s.taken:
                V = b.view(p)[:s.taken]
                V[:, 1 + s.dim:] = self._efforts_at(t_k - self.h + V[:, 0] * self.h)

    def _close_ready(self) -> None:
        sch = self.schedule
        while sch.next_ready():
            self._close(sch.closed + 1)

    # ----------------------------------------------------------------------------------------
    # linearising
    def _predict(self, x: np.ndarray) -> np.ndarray:
        """x_k from x_{k-1}: q + h v + h^2/2 a, v + h a, the rest held."""
        return self._transition @ x

    @staticmethod
    def _prior_rows(x1: np.ndarray, mean: np.ndarray, sigma: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(x1 - mean) / sigma on the components with a finite sigma, and its Jacobian."""
        idx = np.flatnonzero(np.isfinite(sigma) & (sigma > 0))
        inv = 1.0 / sigma[idx]
        J = np.zeros((idx.size, x1.size))
        J[np.arange(idx.size), idx] = inv
        return (x1[idx] - mean[idx]) * inv, J

    def linearize(self, x0: np.ndarray | None, x1: np.ndarray, p: np.ndarray | None,
                  prior: tuple[np.ndarray, np.ndarray] | None = None, copy: bool = True):
        """Rows (r, J0, J1) of a step with parameters p (None: the step's bound parameters) at
        (x0, x1); a step without x0 (the first of a run) has the prior (mean, sigma; default
        this run's) instead of the integration and random-walk rows, and J0 None. With
        ``copy`` False a binary step's arrays are views valid until the next evaluation."""
        fn = self.fn.step
        r, J0, J1 = fn(x1 if x0 is None else x0, x1, p)
        if not fn.finite():
            raise LinearizationError("a step's residual or Jacobian is not finite")
        if x0 is None:
            H = self.layout.head
            mean, sigma = prior if prior is not None else (self._x_start, self._prior_sigma)
            pr, pJ = self._prior_rows(x1, mean, sigma)
            return np.concatenate((pr, r[H:])), None, np.vstack((pJ, J0[H:] + J1[H:]))
        if copy:
            return r.copy(), J0.copy(), J1.copy()
        return r, J0, J1

    def _gauss_newton(self, x0: np.ndarray | None, x1: np.ndarray, iterations: int):
        """Refine x1 with x0 fixed (the step's bound parameters); return the final
        linearization (r, J0, J1; views) and x1. ``iterations`` are always taken; up to
        ``gauss_newton_adaptive`` more while the point is poor (:meth:`_poor_point`): at a jerk
        the constant-acceleration prediction misses the equations of motion by many sigmas, and
        the robust kernel, judging the readings there, would down-weight the very readings
        that show the change. An adaptive step that does not lower the step's cost is undone
        (a model the data contradict would otherwise be driven further off)."""
        extra = 0 if x0 is None else self.cfg.gauss_newton_adaptive
        done = 0
        r, J0, J1 = self.linearize(x0, x1, None, copy=False)
        while done < iterations or (done < iterations + extra and self._poor_point(r)):
            if done and self._local_truncation and self._raise_to_local_truncation(x0, x1):
                r, J0, J1 = self.linearize(x0, x1, None, copy=False)
            cost = float(r @ r)
            dx = scipy.linalg.lstsq(J1, -r, lapack_driver="gelsy", check_finite=False)[0]
            if not math.isfinite(dx.sum()):
                break
            x_new = x1 + dx
            r, J0, J1 = self.linearize(x0, x_new, None, copy=False)
            if done >= iterations and not float(r @ r) < cost:
                r, J0, J1 = self.linearize(x0, x1, None, copy=False)     # no gain: back
                break
            x1 = x_new
            done += 1
            self.health.gauss_newton_iterations += 1
        return r, J0, J1, x1

    def _raise_to_local_truncation(self, x0: np.ndarray, x1: np.ndarray) -> bool:
        """Raise the newest step's integration sigmas (in the bound parameters) to the local
        truncation its refined keyframe x1 shows (:meth:`.IntegrationNoise.local`); whether
        any was raised."""
        A = self.lay.A
        before = self._x.get(self.schedule.closed - 2)
        local = self._integration.local(None if before is None else before[A], x0[A], x1[A])
        sig = self._p[self.layout.integration]
        if not np.any(local > sig):
            return False
        np.maximum(sig, local, out=sig)
        self.health.integration_raises += 1
        return True

    def _poor_point(self, r: np.ndarray) -> bool:
        """Whether the step just linearized sits at a poor point: its equations-of-motion rows'
        whitened RMS above GN_TRIGGER sigmas, or a reading down-weighted there."""
        L = self.layout
        d = r[L.dynamics_start:L.dynamics_start + L.dynamics_rows]
        if d.size and float(d @ d) > GN_TRIGGER * GN_TRIGGER * d.size:
            return True
        return bool(self.fn.step.stats[1::2].any())

    def _reading_factor(self, s: SensorStream, stamp: float, value, k: int,
                        x0: np.ndarray, x1: np.ndarray, new_key: bool = False, shift_x0: bool = True):
        """The factor of one reading of stream s in step k, linearized at (x0, x1); ``new_key``:
        keyframe k is being added (x1 becomes its theta); ``shift_x0`` False: so is k-1."""
        i = self._measuring.index(s)
        fn = self.fn.reading[i]
        b = self.fn.reading_layouts[i].blocks[0]
        p = fn.p
        V = b.view(p)
        V[0, 0] = (stamp - self._time(k - 1)) / self.h
        V[0, 1:1 + s.dim] = value
        if b.tau:
            V[0, 1 + s.dim:] = self.known_efforts(stamp)
        p[b.mean_abs] = s.mean_abs
        r, J0, J1 = fn(x0, x1)
        if not fn.finite():
            raise LinearizationError(f"a reading of {s.name} gave a non-finite residual")
        s.set_mean_abs(float(fn.stats[0]))
        s.counts.downweighted += int(fn.stats[1])
        return self.smoother.factor(k, r, J0, J1, x0 if shift_x0 else None, None if new_key else x1)

    # ----------------------------------------------------------------------------------------
    # keyframes
    def _close(self, k: int) -> None:
        """Close keyframe k: take its readings and linearize its step; solve once the group of
        ``keyframes_per_update`` keyframes is complete (at once while recovering)."""
        t0 = time.perf_counter()
        c0 = time.thread_time()
        sch = self.schedule
        first = k == sch.k0
        t_k = self._time(k)
        p = self._p
        extra = self.inbox.take(k, p, sch)
        p[self.layout.integration] = self._integration.sigmas()
        if self._command_t:
            self._fill_efforts(p, t_k)
        if first and self._x_start is None:
            self._x_start = self._initial_state()
        # the previous keyframe's estimate, or its linearization point if it is in this group
        x_prev = None if first else self._x[k - 1]
        x_pred = self._x_start if first else self._predict(x_prev)
        committed_prev = not first and not (self._group and self._group[-1].k == k - 1)
        self._next_key = k + 1
        sch.mark_closed(k)
        try:
            r, J0, J1, x1 = self._gauss_newton(x_prev, x_pred, self.cfg.gauss_newton_iterations)
            if self.mech.m and not first:
                self._relin_threshold.observe(J1[self.layout.phi, :self.lay.n])
            rms = math.sqrt(float(r @ r) / r.size)
            if rms > self.cfg.divergence_threshold:
                raise SolverFailure(f"diverging: whitened residual RMS {rms:.3g} at keyframe {k}")
            if self.mech.m and not first:
                self.health.closure_residual = float(np.abs(r[self.layout.phi]).max()) * \
                    self.cfg.noise.closure_position
            self.health.residual_rms = rms
            # x1 becomes keyframe k's theta; a committed x_prev may have moved from its theta
            factors = [self.smoother.factor(k, r, J0, J1, x_prev if committed_prev else None)]
            taken = self._count_step()
            used_extra = []
            for s, stamp, value in extra:
                if first:                     # (only readings stamped at the run's very start)
                    s.counts.discarded += 1
                    continue
                factors.append(self._reading_factor(s, stamp, value, k, x_prev, x1, new_key=True,
                                                    shift_x0=committed_prev))
                s.counts.used += 1
                used_extra.append((s, stamp, value))
            self.records.store(k, p, x_prev, x1, -1, first)
            self._x[k] = x1
            self._group.append(_GroupStep(k, factors, x1, taken, used_extra,
                                          time.perf_counter() - t0, time.thread_time() - c0))
        except (LinearizationError, SolverFailure, np.linalg.LinAlgError) as exc:
            readings = self._readings_in(p, t_k - self.h) + extra
            self._fail(k, exc, readings)
            return
        if len(self._group) >= self.keyframes_per_update or self._recovering:
            self._commit()

    def _commit(self) -> None:
        """Solve: the group's keyframes and factors (and late readings) in one ISAM2 update;
        then relinearization, marginalisation and the estimates."""
        if not self._group:
            return
        t0 = time.perf_counter()
        c0 = time.thread_time()
        group, self._group = self._group, []
        sch = self.schedule
        try:
            late, self._late = self._late, []
            first_k = group[0].k
            touched = min([first_k if first_k == sch.k0 else first_k - 1] + [kk - 1 for kk, _ in late])
            factors = [f for g in group for f in g.factors] + [f for _, f in late]
            idx = self.smoother.update(factors, new_keys=[(g.k, g.x1) for g in group], touched=touched)
            i = 0
            for g in group:
                self.records.set_index(g.k, idx[i])
                i += len(g.factors)
            if self.recorded is not None:
                for g in group:
                    first = self.records.is_unary(g.k)
                    self.recorded.append((g.k, self.records.parameters(g.k).copy(), first,
                                          (self._x_start.copy(), self._prior_sigma.copy()) if first else None))
            A = self.lay.A
            for g in group:
                self._x[g.k] = self.smoother.estimate(g.k)
                self._integration.add(self._x[g.k][A])
            last = group[-1].k
            self._divergence_test(group[-1])
            self._judge.judge(self.health.divergence, self._time(last), self._speed_note)
            for kk in [kk for kk in self._x if kk < last - 1]:
                del self._x[kk]
            self._relinearize()
            self._marginalize()
            self._back_limit = self._time(self._window_start()) - max(self.cfg.lag, 1.0)
        except (SolverFailure, LinearizationError, np.linalg.LinAlgError) as exc:
            self._fail(group[0].k, exc, self._take_back(group))
            return
        wall = (time.perf_counter() - t0) / len(group)
        cpu = (time.thread_time() - c0) / len(group)
        for g in group:
            self.health.keyframes += 1
            self._emit(g.k, lagged=False)
            self.health.timing.add((g.wall + wall) * 1e3, (g.cpu + cpu) * 1e3)
        self._reinitialise_if_diverged(group[-1].k)

    def _reinitialise_if_diverged(self, k: int) -> None:
        """When encoders measure every DOF and each of them has failed the divergence test for a
        whole window, at more than REINIT_FACTOR times its limit (the estimate is lost, e.g. turns
        away from a multi-turn encoder, not just strained), start again from the encoders' readings (the pose assembled at them, the
        config's velocities): a slipped or lost estimate comes back instead of staying wrong.
        Counted in ``health.reinitialisations``; at most once per two windows."""
        mon = self.health.divergence
        if not mon.open:
            return
        t = self._time(k)
        if t < self._reinit_after:
            return
        if not self._encoders_cover_dof:
            self._search_if_lost(k, t)
            return
        if not all(n in mon.open and t - mon.open[n].start >= mon.window
                   and mon.rms.get(n, 0.0) > REINIT_FACTOR * mon.limit for n in self._dof_encoders):
            return
        what = ", ".join(f"{n} {mon.rms.get(n, 0.0):.1f} sigma" for n in sorted(self._dof_encoders))
        self.health.reinitialisations += 1
        self.health.last_reinitialisation = f"at {t:.3f} s: {what} over {mon.window:g} s"
        self._reinit_after = t + 2 * mon.window
        for s in self._sensors.values():
            s.forget_recent()
        mon.restart(t, lost=f"re-initialised from the encoders at {t:.3f} s")
        self._reinit_pending = True
        self._start_fresh(None)

    def _search_if_lost(self, k: int, t: float) -> None:
        """Without encoders on every DOF: when every gyro's failing period has been judged LOST
        (:class:`~mbfg_ros.estimation.divergence.LossJudge`) and has lasted a whole window,
        restart from the best start hypothesis over the window's newest readings (at most once
        per two windows)."""
        if not self._search:
            return
        mon = self.health.divergence
        gyros = [s.name for s in self._measuring if s.kind == "gyro"]
        if not all(n in mon.open and mon.open[n].lost and t - mon.open[n].start >= mon.window for n in gyros):
            return
        what = ", ".join(f"{n} {mon.rms.get(n, 0.0):.1f} sigma" for n in sorted(gyros))
        if self._restart_from_search(k, f"{what} over {mon.window:g} s"):
            self.health.reinitialisations += 1
            self.health.last_reinitialisation = self.health.last_start_search
            self._reinit_after = t + 2 * mon.window

    def _window_readings(self, t: float) -> list:
        """(stream, stamp, value) of the readings the steps of the newest SEARCH_SECONDS before
        ``t`` took (late readings, held as factors of their own, are not among them)."""
        readings = []
        for kk in list(self.smoother.keys):
            if self._time(kk) > t - SEARCH_SECONDS and not self.records.is_unary(kk):
                readings += self._slot_readings(self.records.parameters(kk), self._time(kk - 1))
        return readings

    def _restart_from_search(self, k: int, why: str, readings: list | None = None) -> bool:
        """Restart the run at keyframe k's time from the best start hypothesis over ``readings``
        (default: those of the newest SEARCH_SECONDS steps in the window; the prior: the estimate
        of k, with the config's prior sigmas). False when there are too few readings."""
        t = self._time(k)
        if readings is None:
            readings = self._window_readings(t)
        if sum(1 for s, _, _ in readings if s.kind == "gyro") < 3:
            return False
        prior = self._x.get(k)
        if prior is None or not np.all(np.isfinite(prior)):
            prior = self._initial_state()
        t0 = min(r[1] for r in readings)
        commands = [c for c in self._commands_until(t) if c[1] >= t0]
        result = StartSearch(self).run(prior, self.lay.prior_sigmas(self.mech, self.cfg), readings, commands)
        self.health.start_searches += 1
        self.health.last_start_search = f"at {t:.3f} s ({why}): " + result.describe()
        best = result.best
        if best.end is None:
            return False
        self.health.divergence.restart(t, lost=f"restarted from the start hypotheses at {t:.3f} s ({why})")
        dt = t - best.end_time
        x = best.end.copy()
        n, lay = self.lay.n, self.lay
        x[lay.Q] = x[lay.Q] + dt * x[lay.V] + 0.5 * dt * dt * x[lay.A]
        x[lay.V] = x[lay.V] + dt * x[lay.A]
        for s in self._sensors.values():
            s.forget_recent()
        keep = [(self._measuring[i], stamp, value) for i, stamp, value in self.inbox.drain(self.schedule)]
        latest = self.schedule.latest
        self._start_fresh(x, self._restart_sigmas())
        sch = self.schedule
        sch.open(t)
        for s, stamp, value in keep:
            if stamp > t:
                kk = sch.keyframe_of(stamp)
                self.inbox.put(s.slot, kk, sch.closed, stamp, value, sch.fraction(stamp, kk))
                s.run_last = max(s.run_last, stamp)
            else:
                s.counts.discarded += 1
        sch.latest = max(latest, t)
        return True

    def _slot_readings(self, p: np.ndarray, t_prev: float) -> list:
        """(stream, stamp, value) of every used slot of a step's parameters."""
        out = []
        for b, s in zip(self.layout.blocks, self._measuring):
            V = b.view(p)
            for j in np.flatnonzero(V[:, 0] >= 0):
                out.append((s, t_prev + float(V[j, 0]) * self.h,
                            float(V[j, 1]) if s.dim == 1 else V[j, 1:1 + s.dim].copy()))
        return out

    def _speed_note(self) -> str:
        """What the DOF speed of the window asks of the keyframe rate, when the configured rate
        is below it: "encoders show 72 rad/s: set mechanism.top_speed: 72 (keyframe_rate auto) or
        keyframe_rate: 400" ("" when the rate suffices). The speed is the fastest DOF encoder's
        (10 ms differences of its readings in the window), else the estimate's."""
        src, w = "encoders show", self._encoder_speed()
        if w is None:
            X = self.smoother.all_estimates() if len(self.smoother) else None
            if X is None or not len(X):
                return ""
            src, w = "the estimate shows", float(np.abs(X[:, self.lay.V][:, self.mech.dof]).max())
        need = needed_keyframe_rate(w, self.mech.dof_positions_sensed)
        if need > self.cfg.keyframe_rate + 1e-9:
            return (f"{src} {w:.0f} rad/s: set mechanism.top_speed: {math.ceil(w)} (keyframe_rate auto) or "
                    f"keyframe_rate: {need:g}")
        rough = self._integration.roughness()
        if rough > ROUGH_FACTOR:
            rate = 50.0 * math.ceil(ROUGH_MARGIN * self.cfg.keyframe_rate * rough ** (1.0 / 3.0) / 50.0)
            return (f"the motion is {rough:.1f} times rougher than the integration noise at {self.cfg.keyframe_rate:g} Hz "
                    f"allows (velocity rows' truncation; a heavy link on a light crank swings its speed within a "
                    f"turn): set keyframe_rate: {rate:g}")
        return ""

    def _encoder_speed(self) -> float | None:
        """The fastest DOF speed the DOF encoders' readings in the window show (rad/s or m/s, over
        differences of at least 10 ms), or None without DOF encoders or readings."""
        streams = {s.name for s in self._measuring if s.name in self._dof_encoders}
        if not streams:
            return None
        series: dict[str, list] = {n: [] for n in streams}
        for kk in list(self.smoother.keys)[1:]:
            for s, stamp, value in self._slot_readings(self.records.parameters(kk), self._time(kk - 1)):
                if s.name in series:
                    series[s.name].append((stamp, float(value)))
        best = None
        for name, pts in series.items():
            if len(pts) < 3:
                continue
            t, q = np.array(sorted(pts)).T
            enc = self.mech.encoders[self._sensors[name].index]
            if enc.wraps:
                q = np.unwrap(q)
            step = max(1, int(round(0.01 / max(float(np.median(np.diff(t))), 1e-6))))
            if step >= t.size:
                continue
            dt = t[step:] - t[:-step]
            ok = dt > 0
            if ok.any():
                w = float(np.abs((q[step:] - q[:-step])[ok] / dt[ok]).max())
                best = w if best is None else max(best, w)
        return best

    def _take_back(self, group) -> list:
        """The readings the keyframes of ``group`` had taken, no longer counted as used."""
        readings = []
        for g in group:
            readings += self._readings_in(self.records.parameters(g.k), self._time(g.k - 1), g.taken)
            readings += g.extra
            for s, c in zip(self._measuring, g.taken):
                s.counts.used -= c
            for s, _, _ in g.extra:
                s.counts.used -= 1
        return readings

    def _fail(self, k: int, exc: Exception, readings: list) -> None:
        """A step or solve failed at keyframe k (the first of its group): recover from the last
        good state, or, if recovering already failed, restart from the config."""
        readings += self._take_back(self._group)   # an unsolved group before k: its readings come back
        if self._group:
            k = self._group[0].k
        self._group = []
        if self._recovering:
            # the fresh start failed too: drop these readings, restart from the config
            self._recovering = False
            for s, _, _ in readings:
                s.counts.discarded += 1
            t = self._time(k)
            window, self._search_readings = self._search_readings, []
            if self._encoders_cover_dof:
                self.health.last_recovery += f"; restart failed ({exc}), restarting from the encoders"
                self.health.divergence.restart(t, lost=f"a restart failed at {t:.3f} s; restarting from the encoders")
                self._reinit_pending = True
                self._start_fresh(None)
            elif self._search and self._restart_from_search(k, "a restart failed", window):
                self.health.last_recovery += f"; restart failed ({exc}), {self.health.last_start_search}"
            else:
                self.health.last_recovery += f"; restart failed ({exc}), back to the initial state"
                self.health.divergence.restart(t, lost=f"a restart failed at {t:.3f} s; back to the initial state")
                self._start_fresh(None)
            return
        self._recover(k, str(exc) or type(exc).__name__, readings)

    def _divergence_test(self, g: _GroupStep) -> None:
        """Hand the whitened residuals of step g's readings at the new estimate to the rolling
        divergence test (:mod:`.divergence`; the newest step of each update)."""
        x0 = self._x.get(g.k - 1)
        if x0 is None or not any(g.taken):
            return
        fn = self._check
        fn(x0, self._x[g.k], self.records.parameters(g.k))
        t = self._time(g.k)
        mon = self.health.divergence
        for b, s, c in zip(self.layout.blocks, self._measuring, g.taken):
            if c:
                mon.add(s.name, t, fn.abs[b.readings.start:b.readings.start + c])

    def _count_step(self) -> list[int]:
        """Counts and innovation scales of the readings in the step just linearized; returns
        how many readings of each stream it took."""
        stats = self.fn.step.stats
        taken = []
        for i, s in enumerate(self._measuring):
            c = s.taken
            taken.append(c)
            if c:
                s.counts.used += c
                s.set_mean_abs(float(stats[2 * i]))
                d = stats[2 * i + 1]
                if d:
                    s.counts.downweighted += int(d)
        return taken

    def _readings_in(self, p: np.ndarray, t_prev: float, taken: list[int] | None = None) -> list:
        """(stream, stamp, value) of the readings in the slots of a step's parameters (``taken``
        per stream; default: as the last step took)."""
        out = []
        for i, (b, s) in enumerate(zip(self.layout.blocks, self._measuring)):
            V = b.view(p)
            for j in range(s.taken if taken is None else taken[i]):
                out.append((s, t_prev + float(V[j, 0]) * self.h,
                            float(V[j, 1]) if s.dim == 1 else V[j, 1:1 + s.dim].copy()))
        return out

    def _marginalize(self) -> None:
        """Emit the lagged estimates of keyframes that reached the lag (a group at a time, from
        an exact solve); marginalise keyframes older than the lag, a few at a time."""
        sm = self.smoother
        upto = self.schedule.closed - self.window
        if self.want_lagged and upto - self._lagged_next + 1 >= self._lagged_every:
            self._emit_lagged(upto)
        oldest = sm.keys[0]
        last = upto - 1 if not self.want_lagged else min(upto, self._lagged_next) - 1
        excess = last - oldest + 1
        if excess < MARGINALIZE_EVERY:
            return
        if self.recorded is not None:
            X = sm.all_estimates()
            for j, k in enumerate(sm.keys[:excess]):
                self.final_states[k] = X[j].copy()
        sm.marginalize_oldest(excess)
        for k in range(oldest, oldest + excess + 1):
            self.records.drop(k)

    def _emit_lagged(self, upto: int) -> None:
        """Emit keyframes lagged_next .. upto (those still in the window) as lagged estimates,
        from an exact back-substitution (ISAM2's own estimates of old keyframes are only
        refreshed while their change exceeds the wildfire threshold)."""
        keys = [k for k in range(self._lagged_next, upto + 1) if k in self.smoother]
        if keys:
            X = self.smoother.exact_estimates(keys)
            for k, x in zip(keys, X):
                self._emit(k, lagged=True, x=x)
        self._lagged_next = max(self._lagged_next, upto + 1)

    # ----------------------------------------------------------------------------------------
    # relinearization, late samples, recovery
    def _relinearize(self) -> None:
        """Fluid relinearization (see :mod:`.relinearization`): every keyframe the newest step is
        checked (while the previous check found work: the newest ``relinearize_horizon`` steps);
        every SCAN_PERIOD the whole window (a deep pass: it costs milliseconds, and finds work
        only while the estimate converges from a wrong state). A deep pass that moved the newest
        keyframe again is followed by one that relinearizes the newest step alone (cheap)."""
        budget = self.cfg.relinearize_budget
        sm = self.smoother
        if budget <= 0 or len(sm) < 2:
            return
        n, th = self.lay.n, self._relin_threshold.value
        vth = self.cfg.relinearize_velocity_factor * th
        rec = self.records
        k = self.schedule.closed
        self._scan_count += 1
        converging = self._quiet_passes < QUIET_PASSES
        deep = self._scan_count % (self._scan_every if converging else self._quiet_scan_every) == 0
        if not deep and not self._scan_active and not rec.moved(k, None, self._x[k], n, th, vth):
            return
        X = sm.all_estimates()
        if deep:
            # while tracking, a step beyond the horizon must have moved QUIET_DEEP_FACTOR times
            # the threshold: relinearizing it makes ISAM2 re-eliminate the window (milliseconds)
            order = select_steps(rec, sm.keys, X, n, th, vth, len(sm), 0,
                                 1.0 if converging else QUIET_DEEP_FACTOR, self.cfg.relinearize_horizon)
            self._quiet_passes = self._quiet_passes + 1 if len(order) <= 1 else 0
        else:
            order = select_steps(rec, sm.keys, X, n, th, vth, budget, self.cfg.relinearize_horizon)
            self._scan_active = bool(order)
            if len(order) > 1:
                self._quiet_passes = 0
        if not order:
            return
        self._redo_steps(order, X)
        if deep and len(order) > 1 and rec.moved(k, None, self._x[k], n, th, vth):
            # relinearizing old steps moved the newest keyframe: its own step once more (cheap),
            # so that the published estimate rests on a linearization at itself
            self._redo_steps([k], sm.all_estimates()[-2:], first_key=k - 1)

    def _redo_steps(self, steps: list[int], X: np.ndarray, first_key: int | None = None) -> None:
        """Relinearize ``steps`` at the estimates X (rows from ``first_key``, default the
        window's oldest keyframe) and swap their factors in one ISAM2 update."""
        sm, rec = self.smoother, self.records
        first_key = sm.keys[0] if first_key is None else first_key
        factors, removes, redo = [], [], []
        for kk in steps:
            i = kk - first_key
            unary = rec.is_unary(kk)
            x1 = X[i]
            x0 = None if unary else X[i - 1]
            r, J0, J1 = self.linearize(x0, x1, rec.parameters(kk), copy=False)
            factors.append(sm.factor(kk, r, J0, J1, x0, x1))
            removes.append(rec.factor_index(kk))
            redo.append((kk, x0, x1))
        touched = min(kk - (0 if rec.is_unary(kk) else 1) for kk, _, _ in redo)
        idx = sm.update(factors, remove=removes, touched=touched)
        for (kk, x0, x1), i in zip(redo, idx):
            rec.relinearized(kk, x0, x1, i)
        self.health.relinearizations += len(factors)
        k = self.schedule.closed
        self._x[k] = sm.estimate(k)

    def _add_late(self, s: SensorStream, stamp: float, value) -> str:
        sch = self.schedule
        k = sch.keyframe_of(stamp)
        if k - 1 < self._window_start() or k > sch.closed or (k == sch.k0 and not self.smoother.keys):
            s.counts.too_old += 1
            return "too_old"
        group = {g.k: g for g in self._group}
        try:
            if k in group:                   # its step waits in the group: linearize at its points
                f = self._reading_factor(s, stamp, value, k, self._x[k - 1], self._x[k], new_key=True,
                                         shift_x0=k - 1 not in group)
                group[k].factors.append(f)
                group[k].extra.append((s, stamp, value))
                s.counts.used += 1
                return "late"
            x0, x1 = self.smoother.estimate(k - 1), self.smoother.estimate(k)
            f = self._reading_factor(s, stamp, value, k, x0, x1)
        except LinearizationError:
            s.counts.rejected_nonfinite += 1
            return "rejected_nonfinite"
        self._late.append((k, f))
        s.counts.late += 1
        return "late"

    def _recover(self, k: int, reason: str, readings: list) -> None:
        """Re-initialise the smoother from the last good state, within this keyframe."""
        self.health.recoveries += 1
        self.health.last_recovery = f"keyframe {k}: {reason}"
        good = self._x.get(k - 1)               # the last solved keyframe before the failed group
        if good is None or not np.all(np.isfinite(good)):
            x_start, sig = None, None
        else:
            x_start = self._predict(good)
            sig = self._restart_sigmas()
        t = self._time(k)
        self._search_readings = self._window_readings(t) if self._search else []
        keep = [(self._measuring[i], stamp, value) for i, stamp, value in self.inbox.drain(self.schedule)]
        latest = self.schedule.latest
        self._start_fresh(x_start, sig)
        sch = self.schedule
        sch.open(t)
        for s, stamp, value in keep + readings:
            if stamp >= t - 1e-12:
                kk = sch.keyframe_of(stamp)
                self.inbox.put(s.slot, kk, sch.closed, stamp, value, sch.fraction(stamp, kk))
                s.run_last = max(s.run_last, stamp)
            else:
                s.counts.discarded += 1
        sch.latest = max(latest, t)
        self._recovering = True
        try:
            self._close(self.schedule.k0)
        finally:
            self._recovering = False

    def force_solver_failure(self) -> None:
        """Make the next update fail inside ISAM2 (for tests of the recovery path): an
        unconstrained extra variable makes the linear system indeterminant."""
        self.smoother.poison()

    # ----------------------------------------------------------------------------------------
    # output
    def estimate_of(self, k: int, x: np.ndarray, lagged: bool = True, cov=None, copy: bool = True) -> Estimate:
        """The Estimate of keyframe k with state x (copied unless ``copy`` is False)."""
        lay, mech = self.lay, self.mech
        if copy:
            x = x.copy()
        t = self._time(k)
        effort = self.known_efforts(t) if self._command_t else np.zeros(mech.n)
        if lay.n_u:
            effort += mech.B @ x[lay.U]
        return Estimate(t, k, lagged, x, lay, effort, cov)

    def _emit(self, k: int, lagged: bool, x: np.ndarray | None = None) -> None:
        """Output the estimate of keyframe k (state x: by default the newest one read)."""
        if x is None:
            x = self._x.get(k) if not lagged else None
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
        e = self.estimate_of(k, x, lagged, cov, copy=False)     # x: a fresh array from ISAM2
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
        """The current smoothed estimates of every keyframe in the window not yet emitted as
        lagged, oldest first (an exact solve of the window)."""
        keys = [k for k in self.smoother.keys if k >= self._lagged_next]
        if not keys:
            return []
        return [self.estimate_of(k, x, True, copy=False) for k, x in zip(keys, self.smoother.exact_estimates(keys))]

    def forces(self, e: Estimate) -> Forces:
        """Closure reactions (in frame_b), load-cell readings and actuator efforts of an estimate."""
        return estimate_forces(self.mech, self.data, e, self.known_efforts(e.stamp))


def estimate_forces(mech: Mechanism, data, e: Estimate, tau: np.ndarray) -> Forces:
    """Closure reactions (in frame_b), load-cell readings and actuator efforts of an estimate
    whose known input efforts are ``tau`` (n,)."""
    closures = [ClosureForce(c.name, c.frame_b, f, tq) for c, (f, tq) in
                zip(mech.closure_configs, mech.closure_wrenches_in_frame_b(data, e.q, e.lam))]
    cells = {}
    for k, cell in enumerate(mech.load_cells):
        cells[cell.config.name] = mech.load_cell(data, k, e.q, e.v, e.a, e.lam, e.u, tau,
                                                  derivatives=False)[0]
    act = set(mech.input_joints) | set(mech.known_input_joints)
    efforts = {name: float(e.effort[mech.index[name]]) for name in mech.joint_names if name in act}
    return Forces(closures, cells, efforts)
