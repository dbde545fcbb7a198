"""Integration of the truth: the constrained equations of motion under the scenario's efforts.

The state y = (q, v) is integrated with scipy's ``solve_ivp`` (DOP853, rtol 1e-10, atol 1e-12 by
default) on the right-hand side of :class:`~mbfg_ros.sim.constrained_dynamics.ConstrainedDynamics`
with Baumgarte stabilisation of the closure rows (a + 2 w Phi' + w^2 Phi = 0 at acceleration
level). The run is cut into segments (at most ``projection_interval`` long, and at every time the
input efforts jump); at each segment end the state is projected onto the position manifold
Phi(q) = 0 and the velocity manifold Phi_q v = 0 and the integrator restarts from the projected
state. Every output sample is read from the segment's dense output (DOP853's 7th-order
interpolant) and projected too; its accelerations and multipliers come from the constrained
dynamics (without stabilisation) at that state and the efforts at that time. The truth at any
other time comes the same way (:meth:`Trajectory.state_at`). Singular positions, where the closure
Jacobian loses rank during the motion (two motion branches meet), are passed on the branch the
motion came on (the proximal multipliers of constrained_dynamics); the run lists them
(:meth:`Trajectory.singular_passages`).

Units: t in s; q rad or m; v rad/s or m/s; a rad/s^2 or m/s^2; efforts N m or N; lam the closure
multipliers as in the model. Never uses estimator code.
"""
from __future__ import annotations

import bisect
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
from scipy.integrate import solve_ivp

from mbfg_ros.errors import MbfgError
from mbfg_ros.model.assembly import initial_state, solve_velocity
from mbfg_ros.model.config import RigConfig
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.sim.constrained_dynamics import ConstrainedDynamics
from mbfg_ros.sim.input_profiles import InputProfile
from mbfg_ros.sim.scenario import Scenario, truth_mechanism


@dataclass(frozen=True)
class IntegratorOptions:
    """Settings of the truth integrator.

    Attributes:
        rtol, atol: DOP853 tolerances (relative; absolute in rad, m, rad/s, m/s).
        baumgarte: closure stabilisation rate w (1/s) in a + 2 w Phi' + w^2 Phi = 0; 0 disables.
        projection_interval: s, the longest segment between projections (and restarts).
        output_rate: Hz, the rate of the trajectory's fixed output grid t_k = k / output_rate.
        max_step: s, the longest integration step. The output samples are read from DOP853's
            dense output, a 7th-order interpolant less accurate than the steps' ends: with
            steps of 30 ms on the N-four-bar (6.8 rad/s) it was off by 1e-6 of the energy
            between the ends; 20 ms keeps it at the ends' 3e-8.
    """
    rtol: float = 1e-10
    atol: float = 1e-12
    baumgarte: float = 10.0
    projection_interval: float = 0.1
    output_rate: float = 1000.0
    max_step: float = 0.02

    def __post_init__(self) -> None:
        for name in ("rtol", "atol", "projection_interval", "output_rate", "max_step"):
            val = getattr(self, name)
            if not (math.isfinite(val) and val > 0):
                raise MbfgError(f"integrator option {name} must be positive (value: {val!r})")
        if not (math.isfinite(self.baumgarte) and self.baumgarte >= 0):
            raise MbfgError(f"integrator option baumgarte must be >= 0 (value: {self.baumgarte!r})")


@dataclass(frozen=True)
class IntegrationStats:
    """What the integration cost and how well it held the constraints.

    ``max_drift`` is the largest max |Phi| (m or rad) reached by the integrator itself at a
    segment end, before projection; ``wall_time`` covers integration and output evaluation (s).
    """
    rhs_evaluations: int
    steps: int
    segments: int
    max_drift: float
    wall_time: float


@dataclass(frozen=True)
class _Segment:
    t0: float
    t1: float
    solution: object          # scipy OdeSolution over [t0, t1]


class _StateEvaluator:
    """Truth at arbitrary times from the segments' dense output (not thread-safe)."""

    def __init__(self, mech: Mechanism, inputs: InputProfile) -> None:
        self.mech = mech
        self.inputs = inputs
        self.dynamics = ConstrainedDynamics(mech, baumgarte=0.0)
        self.segments: list[_Segment] = []

    @property
    def t_end(self) -> float:
        return self.segments[-1].t1 if self.segments else 0.0

    def dense(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(t clipped to the span, q, v) from the segments' dense output, not projected."""
        n = self.mech.n
        if not self.segments:
            raise MbfgError("the trajectory has not been integrated yet")
        t0, t1 = self.segments[0].t0, self.t_end
        tol = 1e-9 * max(1.0, t1)
        if np.min(t) < t0 - tol or np.max(t) > t1 + tol:
            raise MbfgError(f"truth requested at t = {np.min(t):.9g}..{np.max(t):.9g} s, outside the "
                            f"simulated span [{t0:.9g}, {t1:.9g}] s")
        tc = np.clip(t, t0, t1)
        q = np.empty((t.size, n))
        v = np.empty((t.size, n))
        ends = np.array([s.t1 for s in self.segments])
        which = np.minimum(np.searchsorted(ends, tc, side="left"), len(ends) - 1)
        for k in np.unique(which):
            sel = which == k
            y = self.segments[k].solution(tc[sel])
            q[sel] = y[:n].T
            v[sel] = y[n:].T
        return tc, q, v

    def evaluate(self, times, level: int = 2) -> tuple[np.ndarray, ...]:
        """(q, v, a, lam, tau, u, residual) at ``times`` (s, within the integrated span).

        ``level`` 0 projects and returns positions only, 1 also velocities, 2 everything; the
        quantities not computed are NaN."""
        t = np.atleast_1d(np.asarray(times, float))
        n, m = self.mech.n, self.mech.m
        N = t.size
        if N == 0:
            z = np.zeros((0, n))
            return z, z.copy(), z.copy(), np.zeros((0, m)), z.copy(), np.zeros((0, self.mech.n_u)), np.zeros(0)
        tc, q, v = self.dense(t)
        tau, u = self.inputs.efforts(tc)
        felt = tau + self.inputs.disturbance_at(tc) if self.inputs.disturbed else tau
        a = np.full((N, n), np.nan)
        lam = np.full((N, m), np.nan)
        res = np.empty(N)
        dyn = self.dynamics
        if level <= 0:
            v[:] = np.nan
            for i in range(N):
                q[i], _, res[i] = dyn.project(q[i], None, velocity=False)
            return q, v, a, lam, tau, u, res
        for i in range(N):
            qi, vi, res[i] = dyn.project(q[i], v[i])
            q[i], v[i] = qi, vi
            if level >= 2:
                a[i], lam[i] = dyn.accelerations(qi, vi, felt[i], u[i] if self.mech.n_u else None)
        return q, v, a, lam, tau, u, res


@dataclass
class Trajectory:
    """The simulated truth on a fixed output grid, and at any time via :meth:`state_at`.

    Attributes:
        mechanism: the truth Mechanism (the config with the scenario's errors).
        scenario: what was simulated.
        t: (N,) output times, s (t_k = k / output_rate, from 0 to the duration).
        q, v, a: (N, n) joint positions, velocities, accelerations (rad, m; per s; per s^2).
        lam: (N, m) closure multipliers (the model's convention; see Mechanism.closure_wrench).
        tau: (N, n) known input efforts applied (N m or N; zero on other joints).
        u: (N, n_u) unknown input efforts applied, on ``mechanism.input_joints``.
        residual: (N,) max |Phi| after projection (m or rad).
        stats: integration statistics.
    """
    mechanism: Mechanism
    scenario: Scenario
    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    a: np.ndarray
    lam: np.ndarray
    tau: np.ndarray
    u: np.ndarray
    residual: np.ndarray
    stats: IntegrationStats
    _evaluator: _StateEvaluator = field(repr=False, compare=False)

    @property
    def duration(self) -> float:
        return float(self.scenario.duration)

    def state_at(self, times, level: int = 2) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                        np.ndarray, np.ndarray, np.ndarray]:
        """The truth (q, v, a, lam, tau, u) at arbitrary ``times`` (s, within [0, duration]),
        each with a leading axis of len(times). Times on the output grid (within 1e-12 s) give
        the grid's values; others are evaluated from the dense output. ``level`` 0 computes
        positions only and 1 also velocities for off-grid times (cheaper; the rest is NaN).
        Not thread-safe (one scratch per trajectory)."""
        t = np.atleast_1d(np.asarray(times, float))
        grid = self.t
        if t.size == 0 or grid.size < 2:
            q, v, a, lam, tau, u, _ = self._evaluator.evaluate(t, level)
            return q, v, a, lam, tau, u
        rate = (grid.size - 1) / (grid[-1] - grid[0])
        k = np.clip(np.rint((t - grid[0]) * rate).astype(np.int64), 0, grid.size - 1)
        on = np.abs(grid[k] - t) <= 1e-12
        out = [x[k].copy() for x in (self.q, self.v, self.a, self.lam, self.tau, self.u)]
        if not np.all(on):
            off = ~on
            for dst, src in zip(out, self._evaluator.evaluate(t[off], level)[:6]):
                dst[off] = src
        return tuple(out)

    def input_efforts(self, times) -> tuple[np.ndarray, np.ndarray]:
        """The applied efforts at ``times``: tau (N, n) known, u (N, n_u) unknown (N m or N)."""
        return self._evaluator.inputs.efforts(times)

    def efforts(self) -> np.ndarray:
        """(N, n) applied actuator effort per joint: known plus unknown inputs (zero on passive
        joints; friction is not an actuator effort)."""
        return self.tau + self.u @ self.mechanism.B.T

    def energy(self) -> np.ndarray:
        """(N,) mechanical energy (kinetic + potential relative to the base origin), J."""
        d = self.mechanism.create_data()
        return np.array([self.mechanism.mechanical_energy(d, qi, vi) for qi, vi in zip(self.q, self.v)])

    def work_done(self) -> np.ndarray:
        """(N,) work done on the mechanism from t = 0 to each output time (J) by the applied
        efforts (known and unknown inputs) minus what the joint friction, the joints' constant effort
        offsets and the springs' dampers took: in an exact run, E(t) - E(0). Integrated from the dense output,
        8-point Gauss-Legendre per output interval; zeros for a run without any of them."""
        mech = self.mechanism
        W = np.zeros(self.t.size)
        damped = bool(mech.springs) and mech.springs.damped
        inputs = self._evaluator.inputs
        if not (mech.has_friction or mech.has_offset or damped or inputs.active or inputs.disturbed) or self.t.size < 2:
            return W
        x, w = np.polynomial.legendre.leggauss(8)
        mid, half = 0.5 * (self.t[1:] + self.t[:-1]), 0.5 * np.diff(self.t)
        nodes = (mid[:, None] + half[:, None] * x[None, :]).ravel()
        tc, q, v = self._evaluator.dense(nodes)
        tau, u = inputs.applied(tc)                 # the disturbance works on the rig too
        effort = tau + u @ mech.B.T
        if mech.has_friction:
            effort = effort - mech.friction(v)[0]
        if mech.has_offset:
            effort = effort - mech.offset              # a constant effort the drive loses
        power = np.sum(effort * v, axis=1)
        if damped:
            pd = mech.model.createData()
            power -= np.array([mech.springs.dissipation(mech.model, pd, qi, vi) for qi, vi in zip(q, v)])
        power = power.reshape(-1, x.size)
        W[1:] = np.cumsum(half * (power @ w))
        return W

    def energy_drift(self) -> float:
        """max |E(t) - E(0) - W(t)| relative to max(|E(0)|, the largest kinetic energy reached)
        (dimensionless), W the inputs' work net of dissipation (:meth:`work_done`): the energy
        balance, 0 in an exact run (conservative or not)."""
        E = self.energy() - self.work_done()
        d = self.mechanism.create_data()
        T_max = 0.0
        for qi, vi in zip(self.q, self.v):
            M = self.mechanism.mass_matrix(d, qi)
            T_max = max(T_max, 0.5 * float(vi @ M @ vi))
        scale = max(abs(E[0]), T_max, 1e-300)
        return float(np.max(np.abs(E - E[0])) / scale)

    def singular_ratios(self) -> np.ndarray:
        """(N,) per output sample: the closure Jacobian's r-th largest singular value over its
        largest, r its rank at t = 0 (ones for an open chain). It collapses to 0 where the
        closure rows lose rank: a singular position."""
        mech = self.mechanism
        if not mech.m:
            return np.ones(self.t.size)
        d = mech.create_data()
        s = np.array([np.linalg.svd(mech.closure_position(d, qi)[1], compute_uv=False) for qi in self.q])
        r = int(np.sum(s[0] > 1e-9 * s[0, 0]))
        return s[:, r - 1] / s[:, 0] if r else np.ones(self.t.size)

    def singular_passages(self, fraction: float = 0.01) -> list[tuple[float, float]]:
        """The singular positions the run passed: for each interval of output samples where
        :meth:`singular_ratios` stayed below ``fraction`` of its value at t = 0, (the time,
        the ratio) of its smallest sample."""
        ratio = self.singular_ratios()
        low = ratio < fraction * ratio[0]
        out = []
        edges = np.flatnonzero(np.diff(np.concatenate([[0], low.astype(int), [0]])))
        for start, stop in zip(edges[::2], edges[1::2]):
            k = start + int(np.argmin(ratio[start:stop]))
            out.append((float(self.t[k]), float(ratio[k])))
        return out

    def closure_residual(self) -> np.ndarray:
        """(N,) max |Phi(q)| per output sample (m or rad); zeros for open chains."""
        return self.residual.copy()


class ForwardSimulator:
    """Integrates the truth incrementally (``advance_to``); :func:`simulate` runs it once.

    A live simulated rig can advance in chunks and read :meth:`state_at` for the new times.
    """

    def __init__(self, mech: Mechanism, scenario: Scenario,
                 options: IntegratorOptions | None = None) -> None:
        self.mech = mech
        self.scenario = scenario
        self.options = options or IntegratorOptions()
        self.inputs = InputProfile(mech, scenario)
        self._dyn = ConstrainedDynamics(mech, baumgarte=self.options.baumgarte)
        self._eval = _StateEvaluator(mech, self.inputs)
        d = mech.create_data()
        q0, v0 = self._initial_state(d)
        self.t = 0.0
        self.y = np.concatenate([q0, v0])
        self._h = None
        self._nfev = 0
        self._steps = 0
        self._drift = 0.0
        self._forgotten = 0              # segments dropped by forget_before
        self._breaks = sorted(b for b in self.inputs.breakpoints() if b > 0.0)
        self._piece: int | None = None   # the disturbance's draw of the segment being integrated

    def _initial_state(self, d) -> tuple[np.ndarray, np.ndarray]:
        mech, sc = self.mech, self.scenario
        k = len(mech.dof)
        off = np.asarray(sc.initial_dof_offset, float)
        if off.ndim == 0:
            off = np.full(k, float(off))
        if off.shape != (k,):
            raise MbfgError(f"initial_dof_offset needs {k} value(s), one per DOF "
                            f"({', '.join(mech.dof_names)}); got {len(off)}")
        q0, v0 = initial_state(mech, d, off)
        if sc.initial_dof_velocity is not None:
            vel = np.asarray(sc.initial_dof_velocity, float)
            if np.ndim(vel) == 0:
                vel = np.full(k, float(vel))
            if vel.shape != (k,):
                raise MbfgError(f"initial_dof_velocity needs {k} value(s), one per DOF "
                                f"({', '.join(mech.dof_names)}); got {vel.size}")
            v0 = solve_velocity(mech, d, q0, vel)
        return q0, v0

    def _describe(self, t: float, q: np.ndarray) -> str:
        joints = ", ".join(f"{name}={val:.6g}" for name, val in zip(self.mech.joint_names, q))
        return f"t = {t:.6g} s ({joints})"

    def _rhs(self, t: float, y: np.ndarray) -> np.ndarray:
        n = self.mech.n
        q, v = y[:n], y[n:]
        tau, u = self.inputs.at(t, self._piece)
        try:
            a, _ = self._dyn.accelerations(q, v, tau, u if self.mech.n_u else None)
        except np.linalg.LinAlgError as exc:
            raise MbfgError(f"the equations of motion cannot be solved at {self._describe(t, q)}: "
                            f"{exc}") from None
        return np.concatenate([v, a])

    def _segment_ends(self, t_end: float) -> list[float]:
        ends = []
        t = self.t
        step = self.options.projection_interval
        while t < t_end - 1e-12:
            nxt = min(t + step, t_end)
            i = bisect.bisect_right(self._breaks, t + 1e-12)
            if i < len(self._breaks) and self._breaks[i] < nxt - 1e-12:
                nxt = self._breaks[i]
            ends.append(nxt)
            t = nxt
        return ends

    def advance_to(self, t_end: float, progress: Callable[[float], None] | None = None) -> None:
        """Integrate from the current time to ``t_end`` (s, at most the scenario's duration);
        ``progress(dt)`` is called after each segment with the simulated time it covered. Raises MbfgError on a solver failure,
        naming the time and the joint values. Singular positions (the closure Jacobian losing
        rank) are passed (see :mod:`mbfg_ros.sim.constrained_dynamics`)."""
        opt, n = self.options, self.mech.n
        if t_end > self.scenario.duration * (1 + 1e-12):
            raise MbfgError(f"cannot simulate to t = {t_end:g} s: the scenario (and its input "
                            f"profile) ends at {self.scenario.duration:g} s")
        for t1 in self._segment_ends(t_end):
            t0 = self.t
            first = None if self._h is None else min(self._h, t1 - t0)
            self._piece = self.inputs.piece(0.5 * (t0 + t1)) if self.inputs.disturbed else None
            sol = solve_ivp(self._rhs, (t0, t1), self.y, method="DOP853", rtol=opt.rtol,
                            atol=opt.atol, dense_output=True, first_step=first,
                            max_step=opt.max_step)
            self._nfev += sol.nfev
            if sol.status != 0:
                raise MbfgError(f"the integrator failed at {self._describe(sol.t[-1], sol.y[:n, -1])}: "
                                f"{sol.message}")
            self._steps += len(sol.t) - 1
            if len(sol.t) >= 3:
                self._h = float(sol.t[-2] - sol.t[-3])
            elif len(sol.t) == 2:
                self._h = float(sol.t[-1] - sol.t[-2])
            y = sol.y[:, -1]
            if not np.all(np.isfinite(y)):
                raise MbfgError(f"the simulation diverged (non-finite state) at "
                                f"{self._describe(t1, y[:n])}")
            self._drift = max(self._drift, self._dyn.closure_residual(y[:n]))
            q, v, res = self._dyn.project(y[:n], y[n:])
            if res > 1e-8:
                raise MbfgError(f"the state cannot be projected onto the closures at "
                                f"{self._describe(t1, q)} (residual {res:.3g}): a singular "
                                "configuration or a closure that came apart")
            self.y = np.concatenate([q, v])
            self.t = t1
            self._eval.segments.append(_Segment(t0, t1, sol.sol))
            if progress is not None:
                progress(t1 - t0)

    def state_at(self, times):
        """(q, v, a, lam, tau, u, residual) at ``times`` within the integrated span."""
        return self._eval.evaluate(times)

    def forget_before(self, t: float) -> None:
        """Drop the dense output of the segments that end before ``t`` (s): a simulator run
        for hours (the live rig) would otherwise keep every segment; the truth before ``t``
        can no longer be evaluated. The statistics keep counting them."""
        segments = self._eval.segments
        keep = next((i for i, seg in enumerate(segments) if seg.t1 >= t), len(segments) - 1)
        if keep > 0:
            self._forgotten += keep
            del segments[:keep]

    def stats(self, wall_time: float) -> IntegrationStats:
        return IntegrationStats(self._nfev, self._steps, self._forgotten + len(self._eval.segments),
                                self._drift, wall_time)


def output_grid(duration: float, rate: float) -> np.ndarray:
    """t_k = k / rate for k = 0 .. floor(duration * rate) (s)."""
    count = int(math.floor(duration * rate + 1e-9))
    return np.arange(count + 1) / rate


def simulate(mechanism_or_config: Mechanism | RigConfig | str | Path, scenario: Scenario | None = None,
             progress: bool = False, options: IntegratorOptions | None = None) -> Trajectory:
    """Simulate the truth of ``scenario`` (default: Scenario()) for the rig given as its config
    Mechanism, RigConfig or config path. The truth Mechanism is the config with the scenario's
    errors (:func:`~mbfg_ros.sim.scenario.truth_mechanism`). ``progress`` shows a tqdm bar on
    stderr. Raises MbfgError on a solver failure (singular positions are passed)."""
    scenario = scenario or Scenario()
    options = options or IntegratorOptions()
    start = time.perf_counter()
    mech = truth_mechanism(mechanism_or_config, scenario)
    sim = ForwardSimulator(mech, scenario, options)
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=round(scenario.duration, 6), unit="s", desc="integrating",
                   bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.2f}/{total:.2f} s [{elapsed}<{remaining}]",
                   leave=False)
    grid = output_grid(scenario.duration, options.output_rate)
    parts: list[tuple[np.ndarray, ...]] = []
    done = 0

    def segment_done(dt: float) -> None:
        # evaluate the output grid up to the integrated time as the run goes (same values as
        # evaluating it at the end: each time uses the segment that covers it)
        nonlocal done
        k = int(np.searchsorted(grid, sim.t + 1e-12, side="right"))
        if k > done:
            parts.append(sim.state_at(grid[done:k]))
            done = k
        if bar is not None:
            bar.update(dt)

    try:
        sim.advance_to(scenario.duration, progress=segment_done)
    finally:
        if bar is not None:
            bar.close()
    if done < grid.size:
        parts.append(sim.state_at(grid[done:]))
    q, v, a, lam, tau, u, res = (np.concatenate(x) for x in zip(*parts))
    stats = sim.stats(time.perf_counter() - start)
    return Trajectory(mech, scenario, grid, q, v, a, lam, tau, u, res, stats, sim._eval)
