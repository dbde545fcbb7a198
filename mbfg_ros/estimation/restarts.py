"""What the online estimator does when a solve fails or its estimate is lost.

- A failed or diverging solve at keyframe k restarts the smoother from the last good state,
  predicted to k, within the same keyframe (``health.recoveries``); if that fails too, the run
  restarts from the encoders (every DOF read by one: the pose assembled at their next readings),
  else from the start hypotheses over the window's newest readings (:mod:`.start_search`), and
  only without gyros from the config's initial state. A solve GTSAM's Cholesky elimination
  judges indeterminate switches the estimator to QR elimination for good
  (``health.qr_fallback``; rigs with closures use QR from the start).
- A lost estimate (the divergence test's verdict, :class:`~.divergence.LossJudge`) restarts: with
  encoders on every DOF once each of them has failed for a whole window at more than
  REINIT_FACTOR times the limit (from their readings); without, once every gyro has been judged
  lost for a whole window (from the start hypotheses); at most once per two windows
  (``health.reinitialisations``).
- On a rig without encoders on every DOF, ``initial_pose: sensors`` takes the run's first state
  from the start hypotheses over its first SEARCH_SECONDS of readings.
No ROS.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from mbfg_ros.estimation.start_search import StartSearch
from mbfg_ros.estimation.smoother import SolverFailure
from mbfg_ros.estimation.start_state import restart_sigmas

if TYPE_CHECKING:
    from mbfg_ros.estimation.estimator import Estimator

REINIT_FACTOR = 10.0
"""A re-initialisation from the encoders needs their residual RMS above this many times the
divergence limit (50 sigma by default)."""
SEARCH_SECONDS = 0.2
"""s of readings over which start hypotheses are scored (start_search.py)."""
MIN_GYRO_READINGS = 3
"""A search needs at least this many gyro readings."""


class Restarts:
    """The restart policy of one Estimator (module docstring). ``search``: the caller allows
    start hypotheses (they are used where some DOF has no encoder and a gyro reads the motion);
    ``given_start``: the caller gave the first state (no start search then)."""

    def __init__(self, est: "Estimator", search: bool, given_start: bool) -> None:
        self.est = est
        self.reinit_after = -math.inf           # no re-initialisation before this stamp
        self.reinit_pending = False             # the next start takes its pose from the encoders
        self.kept_readings: list = []           # the window's newest readings, kept by a recovery
        mech = est.mech
        self.dof_encoders = {mech.encoders[s.index].config.name for s in est.measuring
                             if s.kind == "encoder" and mech.encoders[s.index].config.joint in mech.dof_names}
        self.encoders_cover_dof = set(mech.dof_names) <= {
            e.config.joint for e in mech.encoders if e.config.name in self.dof_encoders}
        self.search = search and not self.encoders_cover_dof and bool(mech.gyros)
        self.search_start = self.search and est.cfg.initial_pose == "sensors" and not given_start

    # ----------------------------------------------------------------------------------------
    def fail(self, k: int, exc: Exception, readings: list) -> None:
        """A step or solve failed at keyframe k (the first of its group): recover from the last
        good state, or, if recovering already failed, restart (module docstring)."""
        est = self.est
        if isinstance(exc, SolverFailure) and exc.indeterminate and not est.qr:
            # GTSAM's Cholesky judges a block indeterminate where its last two pivots differ by
            # more than 2^12: a run's first keyframes on an open chain whose dynamics noise is
            # small (a rod pendulum at 0.005 N m: acceleration and input are told apart there by
            # their loose priors only) never started; QR elimination solves them (est.qr)
            est.health.qr_fallback = f"keyframe {k}: {exc}"
        readings += self.take_back(est.group)     # an unsolved group before k: its readings come back
        if est.group:
            k = est.group[0].k
        est.group = []
        if not est.recovering:
            self.recover(k, str(exc) or type(exc).__name__, readings)
            return
        # the fresh start failed too: drop these readings, restart
        est.recovering = False
        for s, _, _ in readings:
            s.counts.discarded += 1
        t = est.time(k)
        window, self.kept_readings = self.kept_readings, []
        h = est.health
        if self.encoders_cover_dof:
            h.last_recovery += f"; restart failed ({exc}), restarting from the encoders"
            h.divergence.restart(t, lost=f"a restart failed at {t:.3f} s; restarting from the encoders")
            self.reinit_pending = True
            est.start_fresh(None)
        elif self.search and self.restart_from_search(k, "a restart failed", window):
            h.last_recovery += f"; restart failed ({exc}), {h.last_start_search}"
        else:
            h.last_recovery += f"; restart failed ({exc}), back to the initial state"
            h.divergence.restart(t, lost=f"a restart failed at {t:.3f} s; back to the initial state")
            est.start_fresh(None)

    def take_back(self, group: list) -> list:
        """The readings the keyframes of ``group`` had taken, no longer counted as used."""
        est = self.est
        readings = []
        for g in group:
            readings += est.step_readings(est.records.parameters(g.k), est.time(g.k - 1), g.taken)
            readings += g.extra
            for s, c in zip(est.measuring, g.taken):
                s.counts.used -= c
            for s, _, _ in g.extra:
                s.counts.used -= 1
        return readings

    def recover(self, k: int, reason: str, readings: list) -> None:
        """Re-initialise the smoother from the last good state, within this keyframe."""
        est = self.est
        est.health.recoveries += 1
        est.health.last_recovery = f"keyframe {k}: {reason}"
        good = est.states.get(k - 1)             # the last solved keyframe before the failed group
        if good is None or not np.all(np.isfinite(good)):
            x_start, sig = None, None
        else:
            x_start = est.transition @ good
            sig = restart_sigmas(est.lay, est.mech, est.cfg)
        t = est.time(k)
        self.kept_readings = self.window_readings(t) if self.search else []
        self.restart_run(x_start, sig, t, readings, at_or_after=True)
        est.recovering = True
        try:
            est.close(est.schedule.k0)
        finally:
            est.recovering = False

    def restart_run(self, x_start: np.ndarray | None, sigma: np.ndarray | None, t: float, readings: list,
                    at_or_after: bool) -> None:
        """A new run opened at ``t`` from ``x_start`` (prior ``sigma``): the queued readings and
        ``readings`` stamped after t (``at_or_after``: at t too) go to its keyframes, the others
        are counted as discarded."""
        est = self.est
        keep = [(est.measuring[i], stamp, value) for i, stamp, value in est.inbox.drain(est.schedule)]
        latest = est.schedule.latest
        est.start_fresh(x_start, sigma)
        sch = est.schedule
        sch.open(t)
        for s, stamp, value in keep + readings:
            if stamp >= t - 1e-12 if at_or_after else stamp > t:
                kk = sch.keyframe_of(stamp)
                est.inbox.put(s.slot, kk, sch.closed, stamp, value, sch.fraction(stamp, kk))
                s.run_last = max(s.run_last, stamp)
            else:
                s.counts.discarded += 1
        sch.latest = max(latest, t)

    def forget_recent(self) -> None:
        """Every stream's recent readings and innovation scale forgotten (a restart)."""
        for s in self.est.gate.sensors.values():
            s.forget_recent()

    # ----------------------------------------------------------------------------------------
    def after_commit(self, k: int) -> None:
        """After a solve whose newest keyframe is k: restart a lost estimate (module docstring)."""
        est = self.est
        mon = est.health.divergence
        if not mon.open:
            return
        t = est.time(k)
        if t < self.reinit_after:
            return
        if not self.encoders_cover_dof:
            self._search_if_lost(k, t)
            return
        if not all(n in mon.open and t - mon.open[n].start >= mon.window
                   and mon.rms.get(n, 0.0) > REINIT_FACTOR * mon.limit for n in self.dof_encoders):
            return
        what = ", ".join(f"{n} {mon.rms.get(n, 0.0):.1f} sigma" for n in sorted(self.dof_encoders))
        est.health.reinitialisations += 1
        est.health.last_reinitialisation = f"at {t:.3f} s: {what} over {mon.window:g} s"
        self.reinit_after = t + 2 * mon.window
        self.forget_recent()
        mon.restart(t, lost=f"re-initialised from the encoders at {t:.3f} s")
        self.reinit_pending = True
        est.start_fresh(None)

    def _search_if_lost(self, k: int, t: float) -> None:
        """Without encoders on every DOF: when every gyro's failing period has been judged LOST
        and has lasted a whole window, restart from the best start hypothesis over the window's
        newest readings."""
        if not self.search:
            return
        est = self.est
        mon = est.health.divergence
        gyros = [s.name for s in est.measuring if s.kind == "gyro"]
        if not all(n in mon.open and mon.open[n].lost and t - mon.open[n].start >= mon.window for n in gyros):
            return
        what = ", ".join(f"{n} {mon.rms.get(n, 0.0):.1f} sigma" for n in sorted(gyros))
        if self.restart_from_search(k, f"{what} over {mon.window:g} s"):
            est.health.reinitialisations += 1
            est.health.last_reinitialisation = est.health.last_start_search
            self.reinit_after = t + 2 * mon.window

    # ----------------------------------------------------------------------------------------
    def start_from_search(self) -> None:
        """The run's first state from the best start hypothesis over the readings waiting for
        the run to open (the config's initial state and prior sigmas as the prior)."""
        est = self.est
        readings = [(est.measuring[i], stamp, value) for i, stamp, value in est.inbox.waiting]
        t1 = max(r[1] for r in readings)
        result = StartSearch(est).run(est.x_start, est.prior_sigma, readings, est.efforts.samples_until(t1))
        est.health.start_searches += 1
        est.health.last_start_search = "start: " + result.describe()
        if result.best.state is not None:
            est.x_start = result.best.state
            est.prior_sigma = restart_sigmas(est.lay, est.mech, est.cfg)

    def window_readings(self, t: float) -> list:
        """(stream, stamp, value) of the readings the steps of the newest SEARCH_SECONDS before
        ``t`` took (late readings, held as factors of their own, are not among them)."""
        est = self.est
        readings = []
        for kk in list(est.smoother.keys):
            if est.time(kk) > t - SEARCH_SECONDS and not est.records.is_unary(kk):
                readings += est.step_readings(est.records.parameters(kk), est.time(kk - 1))
        return readings

    def restart_from_search(self, k: int, why: str, readings: list | None = None) -> bool:
        """Restart the run at keyframe k's time from the best start hypothesis over ``readings``
        (default: those of the newest SEARCH_SECONDS steps in the window; the prior: the estimate
        of k, with the config's prior sigmas). False when there are too few gyro readings."""
        est = self.est
        t = est.time(k)
        if readings is None:
            readings = self.window_readings(t)
        if sum(1 for s, _, _ in readings if s.kind == "gyro") < MIN_GYRO_READINGS:
            return False
        prior = est.states.get(k)
        if prior is None or not np.all(np.isfinite(prior)):
            prior = est.initial_state()
        t0 = min(r[1] for r in readings)
        commands = [c for c in est.efforts.samples_until(t) if c[1] >= t0]
        result = StartSearch(est).run(prior, est.lay.prior_sigmas(est.mech, est.cfg), readings, commands)
        est.health.start_searches += 1
        est.health.last_start_search = f"at {t:.3f} s ({why}): " + result.describe()
        best = result.best
        if best.end is None:
            return False
        est.health.divergence.restart(t, lost=f"restarted from the start hypotheses at {t:.3f} s ({why})")
        dt = t - best.end_time
        x = best.end.copy()
        lay = est.lay
        x[lay.Q] = x[lay.Q] + dt * x[lay.V] + 0.5 * dt * dt * x[lay.A]
        x[lay.V] = x[lay.V] + dt * x[lay.A]
        self.forget_recent()
        self.restart_run(x, restart_sigmas(lay, est.mech, est.cfg), t, [], at_or_after=False)
        return True
