"""Start hypotheses for a rig whose DOF positions no encoder reads.

With encoders on every DOF the estimator starts (and restarts a lost estimate) from the pose
assembled at their readings. Gyros see the motion only through velocities and the dynamics: a
start far from the truth can settle on another motion that explains them almost as well (on a
slider-crank sensed by a gyro on its rod, the crank at pi - theta turning backwards gives the rod
the very same rotation; only the equations of motion tell them apart), and the estimate stays
lost. This module picks the start from the data instead:

1. candidates: a grid of DOF positions (:data:`GRID_SIZE` per DOF; the prior's own pose too),
   each assembled on the prior's branch (walked to from the prior's pose in steps of
   :data:`ASSEMBLY_STEP`: a Newton solve from a hint half a turn away may land on another branch), with the DOF velocities that best explain the first
   gyro readings at that pose (least squares, damped towards the prior's velocities);
2. each candidate is the start of a short run of an estimator (a probe) over the same readings
   (the first :data:`SCREEN_FRACTION` of them for every candidate, the whole stretch for the
   :data:`FINALISTS` best of those);
3. the score of a run is the whitened chi-square of its steps at the run's smoothed estimates
   over the rows that weigh the evidence: every reading, the equations of motion and the random
   walks (the closure and integration rows, whose noises are tiny, measure the linearisation of
   the run's solve rather than the hypothesis), plus the candidate's squared distance from the
   prior (DOF positions wrapped to +-pi, in the prior's sigmas). The lowest wins, but another
   start replaces the prior (always run over the whole stretch) only when it scores lower by
   :data:`MARGIN_SIGMAS` standard deviations of the chi-square: where the readings cannot tell
   the starts apart (a rig starting at rest) the prior stands. A run that
   left its candidate's assembly branch scores inf: a gyro on a slider-crank's rod sees the same
   rotation with the whole linkage turned half a turn about the crank's pivot (the slider on the
   other side), which only gravity tells apart; the branch is the config's (its
   ``initial.hint``) or the lost estimate's.

The estimator uses it at start-up (``initial_pose: sensors`` on a rig without encoders on every
DOF) and when the estimate is lost (its sensors diverged for a whole window, or a restart failed).
No ROS, no I/O.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from mbfg_ros.errors import AssemblyError
from mbfg_ros.estimation.step_function import LinearizationError
from mbfg_ros.model.assembly import assemble, solve_velocity

if TYPE_CHECKING:                                   # (the estimator imports this module)
    from mbfg_ros.estimation.estimator import Estimator

GRID_SIZE = 12
"""DOF positions per revolute DOF on a one-DOF rig (fewer per DOF on larger rigs, see
:func:`grid_size`)."""
MAX_CANDIDATES = 40
"""At most this many grid poses in all."""
SCREEN_FRACTION = 0.3
"""Every candidate is first run over this fraction of the readings' stretch."""
FINALISTS = 3
"""The best this many of the screening go on over the whole stretch (with the prior)."""
MARGIN_SIGMAS = 3.0
"""Another start replaces the prior only when its score is lower by this many standard
deviations of a chi-square over the scored rows (3 sqrt(2 rows)): on a four-bar starting at
rest, 0.2 s of coupler-gyro readings scored a wrong pose 20 below the right one (rows ~150,
spread 17), and the estimate stayed 128 mrad off."""
SETTLE_FRACTION = 0.25
"""The first part of a probe run that the score leaves out (the run settling from its start)."""
PROBE_SIGMA_POSITION = 0.3
"""rad (or m): the prior sigma of a probe's start positions (about half the grid spacing)."""
PROBE_SIGMA_VELOCITY = 2.0
"""rad/s (or m/s): the prior sigma of a probe's start velocities."""
VELOCITY_READINGS = 0.005
"""s: the gyro readings of this first stretch set a candidate's DOF velocities."""
ASSEMBLY_STEP = 0.2
"""rad (or m): the candidates are assembled by continuation from the prior's pose in steps this large."""
BRANCH_TOLERANCE = 0.1
"""rad (or m): a run whose dependent coordinates are this far from the assembly at its own DOF
values on its candidate's branch has left that branch."""


@dataclass
class Hypothesis:
    """One start candidate and its run (``score`` inf until run; ``state`` the run's smoothed
    state at the stretch's first keyframe, ``end`` its newest state and ``end_time``)."""
    x: np.ndarray
    label: str
    penalty: float
    score: float = math.inf
    rows: int = 0               # whitened rows the score sums
    state: np.ndarray | None = None
    end: np.ndarray | None = None
    end_time: float = math.nan


@dataclass
class SearchResult:
    """The winner and what was tried (for health reports)."""
    best: Hypothesis
    tried: int
    runner_up: float
    hypotheses: list[Hypothesis] = field(default_factory=list)

    def describe(self) -> str:
        return (f"best of {self.tried} start hypotheses ({self.best.label}: score {self.best.score:.3g}, "
                f"next {self.runner_up:.3g})")


def grid_size(dof: int) -> int:
    """Grid points per DOF: GRID_SIZE for one DOF, at least 3, at most MAX_CANDIDATES in all."""
    if dof <= 1:
        return GRID_SIZE
    return max(3, int(math.floor(MAX_CANDIDATES ** (1.0 / dof) + 1e-9)))


def _wrap(a: np.ndarray) -> np.ndarray:
    return (a + math.pi) % (2.0 * math.pi) - math.pi


class StartSearch:
    """Scores start hypotheses of ``est`` (the estimator that asks) over a stretch of readings."""

    def __init__(self, est: "Estimator") -> None:
        self.est = est
        self.mech = est.mech
        self.lay = est.lay
        self.data = self.mech.create_data()

    # ----------------------------------------------------------------------------------------
    def candidates(self, prior: np.ndarray, sigma: np.ndarray, readings: list) -> list[Hypothesis]:
        """The grid poses (and the prior itself) as start states, with their prior penalties."""
        mech, lay = self.mech, self.lay
        q0 = prior[lay.Q]
        dof = mech.dof
        axes = []
        for j in dof:
            if mech.angular[j]:
                base = float(q0[j])
                K = grid_size(len(dof))
                axes.append(base + 2.0 * math.pi * np.arange(K) / K)
            else:
                lo, hi = float(mech.lower[j]), float(mech.upper[j])
                if not (math.isfinite(lo) and math.isfinite(hi)):
                    lo, hi = q0[j] - 1.0, q0[j] + 1.0
                axes.append(np.linspace(lo, hi, grid_size(len(dof))))
        grid = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, len(dof))
        gyro = [(s, stamp, np.asarray(value, float)) for s, stamp, value in readings if s.kind == "gyro"]
        if gyro:
            t_first = min(stamp for _, stamp, _ in gyro)
            gyro = [g for g in gyro if g[1] <= t_first + VELOCITY_READINGS]
        out = [Hypothesis(prior.copy(), "the prior", 0.0)]
        sq = np.maximum(sigma[lay.Q][dof], 1e-9)
        sv = np.maximum(sigma[lay.V][dof], 1e-9)
        for z in grid:
            q = self._assemble_from(q0, z)
            if q is None:
                continue
            v_dof = self._velocities(q, prior[lay.V][dof], sv, gyro)
            try:
                v = solve_velocity(mech, self.data, q, v_dof)
            except (AssemblyError, np.linalg.LinAlgError):
                continue
            x = prior.copy()
            x[lay.Q] = q
            x[lay.V] = v
            a, lam = mech.forward_dynamics(self.data, q, v)
            x[lay.A] = a
            x[lay.L] = lam
            dq = q[dof] - q0[dof]
            dq = np.where(mech.angular[dof], _wrap(dq), dq)
            dv = v_dof - prior[lay.V][dof]
            penalty = float(np.sum((dq / sq) ** 2) + np.sum((dv / sv) ** 2))
            out.append(Hypothesis(x, "DOF " + ", ".join(f"{a:.2f}" for a in z), penalty))
        return out

    def _assemble_from(self, q0: np.ndarray, z: np.ndarray) -> np.ndarray | None:
        """The assembly at DOF values z reached from pose q0 by continuation (None if it fails)."""
        mech = self.mech
        z0 = q0[mech.dof]
        steps = max(1, int(math.ceil(float(np.max(np.abs(z - z0))) / ASSEMBLY_STEP)))
        q = q0
        try:
            for i in range(1, steps + 1):
                q = assemble(mech, self.data, z0 + (z - z0) * i / steps, q).q
        except AssemblyError:
            return None
        return q

    def _same_branch(self, q: np.ndarray, hint: np.ndarray) -> bool:
        """Whether q is the assembly at its own DOF values nearest to ``hint`` (angles compared
        modulo 2 pi)."""
        mech = self.mech
        if not mech.m:
            return True
        try:
            qa = assemble(mech, self.data, q[mech.dof], hint).q
        except AssemblyError:
            return False
        d = q - qa
        d = np.where(mech.angular, _wrap(d), d)
        return bool(np.max(np.abs(d)) < BRANCH_TOLERANCE)

    def _velocities(self, q: np.ndarray, v_prior: np.ndarray, sv: np.ndarray, gyro: list) -> np.ndarray:
        """DOF velocities that best explain the gyro readings at pose q (damped least squares
        towards the prior's)."""
        mech = self.mech
        nd = len(mech.dof)
        if not gyro:
            return v_prior.copy()
        cols = []
        for i in range(nd):
            e = np.zeros(nd)
            e[i] = 1.0
            v = solve_velocity(mech, self.data, q, e)
            cols.append(v)
        rows, rhs = [], []
        for s, _, y in gyro:
            g = mech.gyros[s.index]
            sig = g.config.noise
            scale, bias = g.calibration_of_rows()
            G = np.column_stack([g.evaluate(mech, self.data, q, c, derivatives=False) for c in cols])
            rows.append(scale[:, None] * G / sig)
            rhs.append((y[g.rows] - bias) / sig)
        A = np.vstack(rows + [np.diag(1.0 / sv)])
        b = np.concatenate(rhs + [v_prior / sv])
        return np.linalg.lstsq(A, b, rcond=None)[0]

    # ----------------------------------------------------------------------------------------
    def run(self, prior: np.ndarray, sigma: np.ndarray, readings: list, commands: list) -> SearchResult:
        """The best start over ``readings`` [(stream, stamp, value)] (any order; ``commands``
        [(name, stamp, value)] are the known efforts over the same stretch)."""
        readings = sorted(readings, key=lambda r: r[1])
        hyps = self.candidates(prior, sigma, readings)
        t0, t1 = readings[0][1], readings[-1][1]
        screen_end = t0 + SCREEN_FRACTION * (t1 - t0)
        first = [r for r in readings if r[1] <= screen_end]
        for h in hyps:
            self._probe(h, first, commands)
        prior_h = hyps[0]
        finalists = [prior_h] + [h for h in sorted(hyps[1:], key=lambda h: h.score)[:FINALISTS]]
        if len(hyps) > 1:
            for h in finalists:
                self._probe(h, readings, commands)
        ranked = sorted(finalists, key=lambda h: h.score)
        best = ranked[0]
        if best is not prior_h and math.isfinite(prior_h.score) and \
                prior_h.score - best.score < MARGIN_SIGMAS * math.sqrt(2.0 * max(prior_h.rows, 1)):
            best = prior_h          # the data do not tell them apart: keep the prior
        others = [h.score for h in ranked if h is not best]
        return SearchResult(best, len(hyps), min(others) if others else math.inf, hyps)

    def _probe(self, h: Hypothesis, readings: list, commands: list) -> None:
        """Run an estimator from h.x over the readings; set h.score, h.state, h.end. The probe is
        of the searching estimator's own class (this module does not import the estimator); its
        lag covers the readings' stretch, so that its window still holds the stretch's first
        keyframe at the end (h.state; a03_andrews's lag, 0.01 s, is a third of its 0.03 s run)."""
        est, lay = self.est, self.lay
        sig = lay.prior_sigmas(self.mech, est.cfg)
        sig[lay.Q] = PROBE_SIGMA_POSITION
        sig[lay.V] = PROBE_SIGMA_VELOCITY
        stretch = readings[-1][1] - readings[0][1] + 4.0 / est.cfg.keyframe_rate
        cfg = est.cfg if est.cfg.lag >= stretch else replace(est.cfg, lag=stretch)
        probe = type(est)(self.mech, cfg, initial_state=h.x, prior_sigma=sig, freeze_gc=False,
                          step_function=est.fn.fresh(), search=False,
                          local_truncation=False)
        feed = sorted([(s.name, stamp, value) for s, stamp, value in readings] + list(commands), key=lambda r: r[1])
        try:
            for name, stamp, value in feed:
                probe.take_sample(name, stamp, value)
            probe.flush()
        except Exception:                            # a probe that cannot run scores inf
            h.score = math.inf
            return
        keys = list(probe.smoother.keys)
        switched = 1 if probe.health.qr_fallback else 0     # its switch to QR elimination (restarts.py)
        if len(keys) < 3 or probe.health.recoveries > switched:
            h.score = math.inf
            return
        X = probe.smoother.exact_estimates(keys)
        skip = max(1, int(SETTLE_FRACTION * len(keys)))
        L = probe.layout
        walk = slice(L.integration_rows, L.head)
        evidence = slice(L.dynamics_start, L.R)            # equations of motion and every reading
        chi2, rows = 0.0, 0
        try:
            for i in range(skip, len(keys)):
                r, _, _ = probe.linearize(X[i - 1], X[i], probe.records.parameters(keys[i]), copy=False)
                chi2 += float(r[walk] @ r[walk]) + float(r[evidence] @ r[evidence])
                rows += int(np.count_nonzero(r[walk])) + int(np.count_nonzero(r[evidence]))
        except LinearizationError:                   # the run went where the model is not finite
            chi2 = math.inf
        h.score = chi2 + h.penalty if math.isfinite(chi2) else math.inf
        h.rows = rows
        if not self._same_branch(X[0][self.lay.Q], h.x[self.lay.Q]):
            h.score = math.inf
        h.state = X[0].copy()
        h.end = X[-1].copy()
        h.end_time = probe.schedule.time(keys[-1])
