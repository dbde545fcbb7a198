"""The online estimator: samples in, keyframe estimates out.

Use::

    est = Estimator(mechanism)                 # settings from the mechanism config's estimator:
    est.add_sample("crank_encoder", t, [0.52]) # any order across sensors, any rates
    for e in est.pop_estimates():              # the keyframes closed since the last call
        ...e.q, e.v, e.a, est.forces(e)...

Sensor names are the config's; known input efforts come in as ``"command:<joint>"`` samples.
This module is the keyframe loop; each concept it uses has a module of its own: input
(:mod:`.sample_gate`, :mod:`.known_efforts`, :mod:`.late_readings`), scheduling
(:mod:`.schedule`), linearising (:mod:`.linearization`, :mod:`.step_function`,
:mod:`.start_state`, :mod:`.integration_noise`, :mod:`.relinearization`, :mod:`.stamp_jitter`,
:mod:`.model_uncertainty`), solving
(:mod:`.smoother`: one linear factor per step on GTSAM ISAM2, keyframes older than ``lag``
marginalised as they leave the window), health (:mod:`.divergence`, :mod:`.grid_advice`,
:mod:`.restarts`, :mod:`.start_search`) and output (:mod:`.estimate_output`, :mod:`.outputs`).
"""
from __future__ import annotations

import gc
import math
import time
from functools import partial

import numpy as np

from mbfg_ros.estimation.divergence import DivergenceMonitor, LossJudge, test_step
from mbfg_ros.estimation.estimate_output import EstimateOutput
from mbfg_ros.estimation.grid_advice import window_note
from mbfg_ros.estimation.integration_noise import IntegrationNoise
from mbfg_ros.estimation.known_efforts import KnownEfforts
from mbfg_ros.estimation.late_readings import add_late, reading_factor
from mbfg_ros.estimation.layout import StateLayout
from mbfg_ros.estimation.linearization import StepLinearizer
from mbfg_ros.estimation.model_uncertainty import SKIP, ModelUncertainty, score_innovations
from mbfg_ros.estimation.outputs import Estimate, Forces, Health, SensorCounts, estimate_forces
from mbfg_ros.estimation.relinearization import Relinearizer, StepRecords
from mbfg_ros.estimation.restarts import SEARCH_SECONDS, Restarts
from mbfg_ros.estimation.sample_gate import SampleGate
from mbfg_ros.estimation.schedule import GroupStep, KeyframeSchedule, StepInbox, keyframes_per_update, step_readings
from mbfg_ros.estimation.sensor_streams import SensorStream, count_step
from mbfg_ros.estimation.smoother import FixedLagSmoother, SolverFailure
from mbfg_ros.estimation.start_state import start_state, transition_matrix
from mbfg_ros.estimation.step_function import LinearizationError, StepFunction, compiled_step_function
from mbfg_ros.model.channels import COMMAND_PREFIX
from mbfg_ros.model.config import EstimatorConfig
from mbfg_ros.model.mechanism import Mechanism

MARGINALIZE_EVERY = 4          # keyframes leave the window in groups of this many
LAGGED_PERIOD = 0.05           # s: lagged estimates come out in groups this long
FAILURES = (LinearizationError, SolverFailure, np.linalg.LinAlgError)
SMOOTHED_BEHIND = 8            # the integration noise follows the smoothed accelerations this far back


class Estimator:
    """Multibody factor-graph estimator on an incremental fixed-lag smoother."""

    def __init__(self, mechanism: Mechanism, config: EstimatorConfig | None = None, *,
                 initial_q: np.ndarray | None = None, initial_v: np.ndarray | None = None,
                 initial_state: np.ndarray | None = None, prior_sigma: np.ndarray | None = None,
                 lagged: bool = False, covariance: bool = False, freeze_gc: bool = True,
                 step_function: StepFunction | None = None, search: bool = True,
                 local_truncation: bool = True, model_scale: float | None = None) -> None:
        """``initial_q``/``initial_v`` or ``initial_state`` (a whole first state, layout order):
        the first run's start instead of the config's assembly, with ``prior_sigma`` (default the
        config's). ``lagged``: also the smoothed estimates a lag later; ``covariance``: the DOF
        state's marginal covariance with each filtered estimate. ``step_function``: one built for
        the same mechanism and settings (by default from a cache). ``search``: without encoders
        on the DOFs, start (and restart) from the best of several hypotheses (:mod:`.start_search`).
        ``local_truncation``: a Gauss-Newton-refined step's integration noise raised to its local
        truncation (off for the start probes). ``model_scale``: the model uncertainty's scale held
        fixed (a candidate of :mod:`.model_uncertainty`); None: 1, or chosen online (the config)."""
        t_build = time.perf_counter()
        self.mech = mechanism
        self.cfg = cfg = config or mechanism.config.estimator
        self.lay = StateLayout.for_mechanism(mechanism, cfg)
        self.data = mechanism.create_data()
        self.h = 1.0 / cfg.keyframe_rate
        self.window = max(2, int(round(cfg.lag * cfg.keyframe_rate)))
        self.keyframes_per_update = keyframes_per_update(cfg)
        self._lagged_every = max(1, int(round(LAGGED_PERIOD * cfg.keyframe_rate)))
        self.want_lagged = lagged
        self.want_covariance = covariance
        self.health = Health(divergence=DivergenceMonitor(cfg.divergence_window, cfg.divergence_sigma))
        self.fn = step_function or compiled_step_function(mechanism, cfg, self.lay, self.h)
        self._check = self.fn.step.fresh()             # the divergence test's own buffers
        self.layout = self.fn.layout
        self.integration = IntegrationNoise(self.lay.n, self.h, *self.layout.integration_default)
        self.linearizer = StepLinearizer(self.fn, cfg, self.health,
                                         self.integration if local_truncation else None)
        self.relinearizer = Relinearizer(cfg, self.lay.n, mechanism.dependent)
        phi = self.layout.phi                          # (a slice of the rows)
        self._phi_dependent = np.ix_(np.arange(phi.start, phi.stop), np.asarray(mechanism.dependent, int))
        stated = None if cfg.stamp_jitter_auto else cfg.stamp_jitter
        periods = {c.name: 1.0 / c.rate for c in mechanism.config.sensors.all() if c.rate > 0}
        self.measuring = [SensorStream(res.name, res.kind, res.index, res.dim, stated, periods.get(res.name, 0.0))
                          for res in self.fn.residuals]
        streams = self.measuring + [SensorStream(COMMAND_PREFIX + name, "command", mechanism.index[name], 1)
                                    for name in mechanism.known_input_joints]
        self.gate = SampleGate({s.name: s for s in streams})
        self.time_offsets = {s.name: s.time_offset for s in mechanism.sensors if s.time_offset}
        """s per sensor: its config's ``time_offset``, taken off its stamps (:meth:`add_sample`)."""
        self.efforts = KnownEfforts(mechanism.n, mechanism.joint_names, cfg.lag)
        self.schedule = KeyframeSchedule(streams, self.h, cfg.sensor_wait)
        self._p = self.fn.step.p                       # the step's parameters, filled in place
        self._p[:] = self.layout.empty_parameters()
        for i, s in enumerate(self.measuring):
            s.slot = i                                 # its block in the step parameters
        self.inbox = StepInbox(self.layout, self.measuring,
                               ahead=max(64, int(math.ceil(4 * cfg.sensor_wait * cfg.keyframe_rate)) + 8))
        self.transition = transition_matrix(self.lay, self.h)
        self._initial_q, self._initial_v = initial_q, initial_v
        self._initial_x = None if initial_state is None else np.asarray(initial_state, float).copy()
        self._next_key = 0
        self.output = EstimateOutput(self)
        self._judge = LossJudge({e.config.name: e.config.noise for e in mechanism.encoders
                                 if mechanism.angular[e.index]}, [e.config.name for e in mechanism.encoders])
        self.restarts = Restarts(self, search, given_start=initial_q is not None or initial_state is not None)
        self.model_scale = 1.0 if model_scale is None else float(model_scale)
        self.uncertainty = ModelUncertainty.of(self, model_scale, initial_q=initial_q, initial_v=initial_v,
                                               initial_state=initial_state, prior_sigma=prior_sigma, search=search)
        self.start_fresh(None, prior_sigma)
        self.startup_s = time.perf_counter() - t_build
        if freeze_gc:
            gc.collect()
            gc.freeze()

    # runs
    def initial_state(self) -> np.ndarray:
        """The state a run starts from: ``initial_state``, or ``initial_q``/``initial_v`` if
        given; else, with ``initial_pose: sensors`` (or after a lost estimate) and encoders on
        every DOF, the assembly at the first encoder readings (branch from the last estimate,
        or the config's hint) with the config's DOF velocities; else the config's assembly."""
        if self._initial_x is not None:
            return self._initial_x.copy()
        if self._initial_q is not None:
            return start_state(self.mech, self.data, self.lay, q=self._initial_q, v=self._initial_v)
        from_encoders = self.cfg.initial_pose == "sensors" or self.restarts.reinit_pending
        dof = self.inbox.first_dof_values(self.mech, self.measuring) if from_encoders else None
        self.restarts.reinit_pending = False
        return start_state(self.mech, self.data, self.lay, dof=dof, branch_hint=self.output.branch_hint)

    @property
    def qr(self) -> bool:
        """Whether ISAM2 eliminates by QR: with closure rows (smoother.py) or the jerk input model
        (its rows, ~1e5 on the Panda's precise encoders, next to loose priors made Cholesky
        judge the first step indeterminate), else once GTSAM's Cholesky judged a solve
        indeterminate (``health.qr_fallback``, restarts.py)."""
        return self.mech.m > 0 or self.cfg.input_model == "jerk" or bool(self.health.qr_fallback)

    def start_fresh(self, x_start: np.ndarray | None, prior_sigma: np.ndarray | None = None) -> None:
        """(Re)start; the next sample opens keyframe 0 at its stamp (keys stay unique). Readings
        still queued are counted as discarded."""
        for i, _, _ in self.inbox.drain(self.schedule):
            self.measuring[i].counts.discarded += 1
        cap = self.window + self._lagged_every + 2 * MARGINALIZE_EVERY + 8
        self.smoother = FixedLagSmoother(self.lay.dim, capacity=cap, qr=self.qr)
        self.records = StepRecords(cap, self.lay.dim, self.layout.P)
        self.schedule.restart(self._next_key)
        self.x_start = x_start
        self.prior_sigma = prior_sigma if prior_sigma is not None else self.lay.prior_sigmas(self.mech, self.cfg)
        self.states: dict[int, np.ndarray] = {}      # states of the newest keyframes
        self.late: list = []                         # (k, factor) waiting for the next update
        self.group: list[GroupStep] = []             # linearised steps waiting for their update
        self.relinearizer.restart()
        self.output.restart(self._next_key)
        self.gate.restart()
        self.recovering = False
        self.integration.reset()

    def reset(self, reason: str = "requested") -> None:
        """Forget everything and start again from the config's initial state."""
        self.health.resets += 1
        self.health.last_reset = reason
        self.health.divergence.restart()
        self.efforts.clear()
        self.restarts.forget_recent()
        if self.uncertainty is not None:
            self.uncertainty.restart()
        self.start_fresh(None)

    def time(self, k: int) -> float:
        """t_k, s."""
        return self.schedule.time(k)

    @property
    def started(self) -> bool:
        return self.schedule.started

    # input
    def counts(self) -> dict[str, SensorCounts]:
        """Per sensor (and ``command:<joint>``): received, used, late, too_old, rejected,
        down-weighted, discarded and pending readings."""
        return self.gate.counts(self.measuring, self.inbox.pending)

    def spare_time(self, deadline: float) -> None:
        """Time the caller has spare until ``deadline`` (``time.monotonic()`` s): the model
        uncertainty's search, when it runs in the background (:mod:`.model_uncertainty`), works
        until then."""
        u = self.uncertainty
        if u is not None and u.background and u.active:
            u.work(deadline)
            u.apply(self)

    def may_close(self, sensor: str, stamp: float) -> bool:
        """Whether taking a reading of ``sensor`` at ``stamp`` (as :meth:`take_sample` gets it)
        may close a keyframe, the costly readings (linearising, an ISAM2 update): before the run
        has started, or when it lets the next keyframe close. Changes nothing."""
        sch = self.schedule
        if not sch.started:
            return True
        s = self.gate.sensors.get(sensor)
        if s is None:
            return True
        if stamp + s.lead < sch.t_next:           # as take_sample: it cannot be the one awaited
            return False
        return sch.ready_with(s, stamp)

    def add_sample(self, sensor: str, stamp: float, value) -> str:
        """Feed one sample: the reading of ``sensor`` stamped ``stamp`` (s), taken at ``stamp``
        minus the sensor's ``time_offset`` (its clock's lag, the config's; 0 by default), the
        time :meth:`take_sample` gets. See :meth:`take_sample`."""
        return self.take_sample(sensor, stamp - self.time_offsets.get(sensor, 0.0), value)

    def take_sample(self, sensor: str, stamp: float, value) -> str:
        """Feed one sample: the reading of ``sensor`` taken at ``stamp`` (s, the rig's clock: a
        sensor's ``time_offset`` already taken off; readings the estimator keeps and feeds again
        come this way).

        value: encoder (1,) rad or m; gyro (3,) rad/s, accelerometer (3,) m/s^2 in the sensor frame
        (the config's ``axes`` are used); load cell (1,) N or N m; ``command:<joint>`` (1,) effort.
        A scalar is accepted for one-value sensors. Returns what happened to it: queued, late,
        too_old, rejected_nonfinite, rejected_duplicate, unknown_sensor (the counts record the
        same), or held: stamped before the window; it becomes too_old when the next reading is
        in line again, and the start of a new run (a reset) when JUMP_CONFIRM such readings
        come in a row (:mod:`.sample_gate`).
        """
        u = self.uncertainty
        if u is not None and u.active:
            u.feed(self, sensor, stamp, value)
        gate = self.gate
        got = gate.admit(sensor, stamp, value)
        if got.__class__ is str:
            if got == "unknown_sensor":
                self.health.unknown_sensor += 1
            return got
        s, y = got
        s.stamps.add(stamp)
        if stamp < gate.back_limit:
            held = gate.hold(sensor, stamp, value)
            if held is None:
                return "held"
            self.reset(f"time jumped backwards to {held[0][1]:.3f} s on {held[0][0]}")
            for name, st, val in held[:-1]:
                gate.sensors[name].counts.received -= 1
                self.take_sample(name, st, val)
            s.is_duplicate(stamp)
        elif gate.held:
            gate.in_line()
        gate.note_stamp(s, stamp)
        sch = self.schedule
        if s.kind == "command":
            self.efforts.add(s.index, stamp, y)
            s.counts.used += 1
            return "queued"
        if not sch.started:
            self.inbox.queue(s.slot, stamp, y)
            if stamp > sch.latest:
                sch.latest = stamp
            if sch.latest - self.inbox.earliest()[0] >= (SEARCH_SECONDS if self.restarts.search_start else sch.wait):
                self._open()
                self._close_ready()
            return "queued"
        status = "queued"
        # its keyframe k (t_{k-1} < stamp <= t_k, within keyframe_of's tolerance): a closed k
        # takes it late (also a stamp a rounding error past t_closed, which a slot would strand)
        f = (stamp - sch.t0) / sch.h
        k0 = sch.k0
        k = math.ceil(f - 1e-9)
        k = k0 + k if k > 0 else k0
        if k <= sch.closed:
            status = add_late(self, s, stamp, y)
        else:
            self.inbox.put(s.slot, k, sch.closed, stamp, y, f - (k - k0 - 1))
        if stamp > sch.latest:
            sch.latest = stamp
        if stamp + s.lead >= sch.t_next:             # (it may have been the one the keyframe waited for)
            self._close_ready()
        return status

    def _open(self) -> None:
        """Start the run at the earliest waiting reading (the state from them, or the start search)."""
        if self.x_start is None:
            self.x_start = self.initial_state()
            if self.restarts.search_start and self.inbox.waiting:
                self.restarts.start_from_search()
        self.schedule.open(self.inbox.earliest()[0])
        self.inbox.start(self.schedule)

    def _opened(self) -> bool:
        """Whether the run has started (it starts now if readings wait for it)."""
        if not self.schedule.started and self.inbox.waiting:
            self._open()
        return self.schedule.started

    def advance_to(self, stamp: float) -> None:
        """Close every keyframe up to ``stamp`` even if sensors are silent (dynamics only)."""
        sch = self.schedule
        if not self._opened():
            return
        while sch.started and self.time(sch.closed + 1) <= stamp:   # (a re-initialisation stops it)
            self.close(sch.closed + 1)
        self._commit()

    def flush(self) -> None:
        """Close the keyframes the queued samples reach (end of a recording)."""
        sch = self.schedule
        if not self._opened():
            return
        last = self.inbox.newest if any(self.inbox.pending) else -math.inf
        while sch.started and self.time(sch.closed) < last:
            self.close(sch.closed + 1)
        self._commit()
        if self.want_lagged and self.smoother.keys:
            self.output.emit_lagged(sch.closed - self.window)

    def _close_ready(self) -> None:
        sch = self.schedule
        while sch.next_ready():
            self.close(sch.closed + 1)

    # linearising
    def linearize(self, x0: np.ndarray | None, x1: np.ndarray, p: np.ndarray | None,
                  prior: tuple[np.ndarray, np.ndarray] | None = None, copy: bool = True):
        """Rows (r, J0, J1) of a step with parameters p (None: the step's bound parameters) at
        (x0, x1) (:meth:`StepLinearizer.linearize`; the prior of a run's first step: ``prior``,
        default this run's)."""
        return self.linearizer.linearize(x0, x1, p, prior if prior is not None else (self.x_start, self.prior_sigma),
                                         copy)

    def step_readings(self, p: np.ndarray, t_prev: float, taken: list[int] | None = None) -> list:
        """(stream, stamp, value) of the readings in a step's parameters (:func:`.step_readings`)."""
        return step_readings(self.layout, self.measuring, p, t_prev, self.h, taken)

    # keyframes
    def close(self, k: int) -> None:
        """Close keyframe k: take its readings and linearise its step; solve once the group of
        ``keyframes_per_update`` keyframes is complete (at once while recovering)."""
        t0 = time.perf_counter()
        c0 = time.thread_time()
        sch = self.schedule
        first = k == sch.k0
        t_k = self.time(k)
        p = self._p
        extra = self.inbox.take(k, p, sch)
        p[self.layout.integration] = self.integration.sigmas()
        if self.layout.model_scale is not None:
            p[self.layout.model_scale] = self.model_scale
        if self.efforts:
            self.efforts.fill(p, self.layout, self.measuring, t_k, self.h)
        if first and self.x_start is None:
            self.x_start = self.initial_state()
        # the previous keyframe's estimate, or its linearisation point if it is in this group
        x_prev = None if first else self.states[k - 1]
        x_pred = self.x_start if first else self.transition @ x_prev
        committed_prev = not first and not (self.group and self.group[-1].k == k - 1)
        self._next_key = k + 1
        sch.mark_closed(k)
        try:
            r, J0, J1, x1 = self.linearizer.refine(x_prev, x_pred, (self.x_start, self.prior_sigma),
                                                   self.states.get(k - 2))
            if self.mech.m and not first:
                self.relinearizer.threshold.observe_block(J1[self._phi_dependent])
            rms = math.sqrt(float(r @ r) / r.size)
            if rms > self.cfg.divergence_threshold:
                raise SolverFailure(f"diverging: whitened residual RMS {rms:.3g} at keyframe {k}")
            if self.mech.m and not first:
                self.health.closure_residual = float(np.abs(r[self.layout.phi]).max()) * \
                    self.cfg.noise.closure_position
            self.health.residual_rms = rms
            # x1 becomes keyframe k's theta; a committed x_prev may have moved from its theta
            factors = [self.smoother.factor(k, r, J0, J1, x_prev if committed_prev else None)]
            taken = count_step(self.measuring, self.fn.step.stats)
            if self.linearizer.innovations is not None and t_k - sch.t0 >= SKIP:
                score_innovations(self.measuring, self.layout, self.linearizer.innovations)
            used_extra = []
            for s, stamp, value in extra:
                if first:                     # (only readings stamped at the run's very start)
                    s.counts.discarded += 1
                    continue
                factors.append(reading_factor(self, s, stamp, value, k, x_prev, x1, new_key=True,
                                              shift_x0=committed_prev))
                s.counts.used += 1
                used_extra.append((s, stamp, value))
            self.records.store(k, p, x_prev, x1, -1, first)
            self.states[k] = x1
            self.group.append(GroupStep(k, factors, x1, taken, used_extra,
                                        time.perf_counter() - t0, time.thread_time() - c0))
        except FAILURES as exc:
            self.restarts.fail(k, exc, self.step_readings(p, t_k - self.h) + extra)
            return
        if len(self.group) >= self.keyframes_per_update or self.recovering:
            self._commit()

    def _commit(self) -> None:
        """Solve: the group's keyframes and factors (and late readings) in one ISAM2 update;
        then the divergence test, relinearisation, marginalisation and the estimates."""
        if not self.group:
            return
        t0 = time.perf_counter()
        c0 = time.thread_time()
        group, self.group = self.group, []
        sch = self.schedule
        try:
            late, self.late = self.late, []
            first_k = group[0].k
            touched = min([first_k if first_k == sch.k0 else first_k - 1] + [kk - 1 for kk, _ in late])
            factors = [f for g in group for f in g.factors] + [f for _, f in late]
            idx = self.smoother.update(factors, new_keys=[(g.k, g.x1) for g in group], touched=touched)
            i = 0
            for g in group:
                self.records.set_index(g.k, idx[i])
                i += len(g.factors)
            for g in group:
                self.states[g.k] = self.smoother.estimate(g.k)
                if g.k - SMOOTHED_BEHIND in self.smoother:
                    self.integration.add(self.smoother.estimate(g.k - SMOOTHED_BEHIND)[self.lay.A])
            last = group[-1].k
            g = group[-1]
            if g.k - 1 in self.states and any(g.taken):
                self._check(self.states[g.k - 1], self.states[g.k], self.records.parameters(g.k))
                test_step(self.health.divergence, self._check, self.layout, self.measuring, g.taken, self.time(g.k))
            t_last = self.time(last)
            self._judge.judge(self.health.divergence, t_last, lambda: window_note(self),
                              self.uncertainty is None or
                              self.uncertainty.encoder_levels_known(t_last, self.health.divergence.window))
            for kk in [kk for kk in self.states if kk < last - 1]:
                del self.states[kk]
            k = sch.closed
            x_k = self.relinearizer.after_update(self.smoother, self.records, k, self.states.get(k),
                                                 partial(self.linearize, copy=False), self.health)
            if x_k is not None:
                self.states[k] = x_k
            self._marginalize()
            window_start = self.smoother.keys[0] if self.smoother.keys else sch.k0
            self.gate.back_limit = self.time(window_start) - max(self.cfg.lag, 1.0)
        except FAILURES as exc:
            self.restarts.fail(group[0].k, exc, self.restarts.take_back(group))
            return
        wall = (time.perf_counter() - t0) / len(group)
        cpu = (time.thread_time() - c0) / len(group)
        for g in group:
            self.health.keyframes += 1
            self.output.emit(g.k, lagged=False)
            self.health.timing.add((g.wall + wall) * 1e3, (g.cpu + cpu) * 1e3)
        self.restarts.after_commit(group[-1].k)

    def _marginalize(self) -> None:
        """Emit the lagged estimates of keyframes that reached the lag (a group at a time, from
        an exact solve); marginalise keyframes older than the lag, a few at a time."""
        sm = self.smoother
        upto = self.schedule.closed - self.window
        if self.want_lagged and upto - self.output.lagged_next + 1 >= self._lagged_every:
            self.output.emit_lagged(upto)
        oldest = sm.keys[0]
        last = upto - 1 if not self.want_lagged else min(upto, self.output.lagged_next) - 1
        excess = last - oldest + 1
        if excess < MARGINALIZE_EVERY:
            return
        sm.marginalize_oldest(excess)
        for k in range(oldest, oldest + excess + 1):
            self.records.drop(k)

    def force_solver_failure(self) -> None:
        """Make the next ISAM2 update fail, indeterminant (for tests of the recovery path; on a
        rig without closures the recovery then also switches to QR elimination, restarts.py)."""
        self.smoother.poison()

    # output (:mod:`.estimate_output`)
    def estimate_of(self, k: int, x: np.ndarray, lagged: bool = True, cov=None, copy: bool = True) -> Estimate:
        """The Estimate of keyframe k with state x (copied unless ``copy`` is False)."""
        return self.output.estimate_of(k, x, lagged, cov, copy)

    def estimate(self) -> Estimate | None:
        """The newest (filtered) estimate."""
        return self.output.last

    def next_estimate_stamp(self) -> float | None:
        """s: the newest keyframe of the next ISAM2 update (``keyframes_per_update``), which the
        next estimates wait for: for every live sensor due a reading in it, until the sensor has
        reported within :func:`~mbfg_ros.estimation.schedule.due_lead` of it or past it
        (:mod:`.schedule`); None before a run started. A live caller wakes when those readings
        are due to arrive."""
        sch = self.schedule
        if not sch.started:
            return None
        return sch.time(sch.closed + max(1, self.keyframes_per_update - len(self.group)))

    def pop_estimates(self) -> list[Estimate]:
        """Filtered estimates of the keyframes closed since the last call, oldest first."""
        return self.output.pop()

    def pop_lagged(self) -> list[Estimate]:
        """Lagged (smoothed) estimates produced since the last call (needs lagged=True)."""
        return self.output.pop(lagged=True)

    def smoothed_window(self) -> list[Estimate]:
        """The window's smoothed estimates not yet emitted as lagged, oldest first (exact solve)."""
        return self.output.smoothed_window()

    def forces(self, e: Estimate) -> Forces:
        """Closure reactions (in frame_b), load-cell readings and actuator efforts of an estimate."""
        return estimate_forces(self.mech, self.data, e, self.efforts.at(e.stamp))
