"""Constant model and sensor parameters estimated from a whole recording (`mbfg identify`).

The parameters (:mod:`mbfg_ros.model.parameters`: inertias, friction, armature, effort offsets,
encoder offsets, gyro biases and scales, load-cell offsets and scales, the sensors' time
offsets) are variables of the offline smoother's graph (:mod:`.offline_smoother`): every
keyframe step's factor gets one more key, theta, shared by all steps, whose Jacobian the
compiled step function returns beside
[J0 J1] (the model is :class:`~mbfg_ros.model.parameters.ParametricMechanism`; the rows are the
estimator's own: integration, closures, the equations of motion with the known efforts, every
reading at its own stamp with its robust weight). Each pass of the solve:

1. the smoother solves the states at the current parameters (Gauss-Newton per window, from the
   previous pass's states; the first pass from its causal start);
2. every step is linearised at those states with its parameter Jacobian, and GTSAM eliminates
   the keyframes in chain order from the graph of (x_{k-1}, x_k, theta) factors, block by block
   (the factor left on the block's last keyframe and theta is carried into the next block, and
   across windows, moved to the next window's linearisation point), leaving one factor on theta:
   the recording's information about the parameters with every state marginalised (the Schur
   complement of the whole chain) and its gradient;
3. theta takes the Gauss-Newton step of that reduced problem (Levenberg-Marquardt damping when a
   pass does not lower the cost: the step is undone and retried shorter).

A sensor's time offset (group ``timing``) is a parameter of its readings' stamps: each pass
smooths the recordings with every such sensor's readings moved to the current offset (taken
that much earlier), and the step function's rows take the offset's change from there (the
reading's fraction of its step moved by change / h), so that the fractions are exact at the
linearisation point whatever the offset.

This is Gauss-Newton on the states and the parameters together (a step on the reduced problem
at states solved for the parameters: variable projection); it stops when no parameter moves by
more than ``tolerance`` of its standard deviation. The standard deviations are the square roots
of the diagonal of the inverse information (the Cramer-Rao bound of the model with its noises).

The equations of motion are trusted to ``model_accuracy`` of each joint's effort (a per-joint
noise, the weights the parametric model multiplies its equations of motion by, appended to the
parameter vector so that no function is built again): with the estimator's loose dynamics
noise the smoothed accelerations follow the encoders' noise, and the parameters a regression of
the efforts on them gives are biased towards smaller inertias (errors in variables); with the
model trusted they follow the model and the efforts. The first pass, at the config's noise and
values, gives the fit "before" and each joint's effort RMS.

Which parameters a recording identifies (the base parameters): the information matrix scaled to
unit diagonal is searched in the order of the parameter list (inertias, friction, armature,
offsets, sensors); a parameter joins the identified set when the share of its information the
set already chosen does not explain is above ``rank_tolerance`` (it is not, up to that, a
linear combination of them) and its standard deviation beside them is below
:data:`IDENTIFIED_SHARE` of its natural size (:func:`parameter_scales`). The others stay at the
config's values and are named with why: no information, a combination of the identified ones
(an identified parameter then stands for itself plus the listed multiples of the unidentified
ones' errors, e.g. the first joint's armature and its link's inertia about the joint's axis,
which only their sum enters), or too little information.
"""
from __future__ import annotations

import dataclasses
import math
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from mbfg_ros.estimation.layout import StateLayout
from mbfg_ros.estimation.offline_smoother import OfflineSmoother
from mbfg_ros.estimation.parameter_information import (IdentificationError, ParameterInformation, Pass, RowFit,
                                                        StepLinearization, state_covariances)
from mbfg_ros.estimation.smoothing_io import Readings, SmoothingOptions, SolvedWindow
from mbfg_ros.estimation.step_function import StepFunction
from mbfg_ros.model.config import EstimatorConfig, ModelErrorConfig
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.model.parameters import DYNAMICS_GROUPS, GROUPS, TIMING, ParametricMechanism, Parameter, model_parameters

@dataclass(frozen=True)
class IdentificationOptions:
    """How to identify. ``groups``: the parameter groups (:data:`~mbfg_ros.model.parameters.GROUPS`;
    None: every group the rig has but ``timing``, the dynamics groups only when no effort is an
    unknown input); ``max_iterations``: Gauss-Newton passes (smoothing + parameter step) at most;
    ``model_accuracy``: each equation of motion's noise as a share of the RMS of its joint's
    known effort (of the largest known effort for a passive joint; at most the config's
    dynamics noise): the model is trusted that far, so that the accelerations follow it rather
    than the encoders' noise (with the estimator's looser noise they carry the encoders' noise
    into the regression and bias the inertias towards zero); ``tolerance``: stop when no
    parameter moves by more than this many of its standard deviations; ``rank_tolerance``: see
    the module docstring; ``block``: keyframes per GTSAM block (memory: a block holds its steps'
    Jacobians, with the parameters' columns); ``smoothing``: the smoother's windows;
    ``progress``: a tqdm bar over the passes (stderr)."""
    groups: tuple[str, ...] | None = None
    max_iterations: int = 20
    model_accuracy: float = 0.01
    tolerance: float = 0.01
    rank_tolerance: float = 1e-6
    block: int = 500
    smoothing: SmoothingOptions = field(default_factory=lambda: SmoothingOptions(max_iterations=20))
    progress: bool = False

    def check(self) -> None:
        if self.max_iterations < 1:
            raise IdentificationError(f"max_iterations must be at least 1 (value: {self.max_iterations})")
        if not (math.isfinite(self.tolerance) and self.tolerance > 0):
            raise IdentificationError(f"tolerance must be > 0 (value: {self.tolerance:g})")
        if not (math.isfinite(self.rank_tolerance) and 0 < self.rank_tolerance < 1):
            raise IdentificationError(f"rank_tolerance must be between 0 and 1 (value: {self.rank_tolerance:g})")
        if self.block < 2:
            raise IdentificationError(f"block must be at least 2 keyframes (value: {self.block})")
        if not (math.isfinite(self.model_accuracy) and 0 < self.model_accuracy <= 10):
            raise IdentificationError(f"model_accuracy must be above 0 and at most 10 (value: {self.model_accuracy:g})")


PRIOR_LOOSENING = 1e3
"""The identification's prior on a recording's first state is the config's this many times
looser: its mean comes from the first readings, and as tight as the estimator's it would tell
the parameters (an encoder's offset) what those readings already said."""


def identification_config(cfg: EstimatorConfig) -> EstimatorConfig:
    """The estimator settings the identification smooths with: the config's, without the slow
    states that would take up what the parameters explain (the model-error force, the gravity
    and mass scales), with a looser prior on the first state (:data:`PRIOR_LOOSENING`)."""
    nz = cfg.noise
    loose = {k: getattr(nz, k) * PRIOR_LOOSENING for k in
             ("prior_position", "prior_velocity", "prior_acceleration", "prior_input")}
    return dataclasses.replace(cfg, model_error=ModelErrorConfig(0.0, cfg.model_error.prior),
                               estimate_gravity=False, estimate_mass_link="",
                               noise=dataclasses.replace(nz, **loose))


def identification_mechanism(mech: Mechanism, groups: tuple[str, ...]) -> Mechanism:
    """``mech``, or (identifying the gyros) the same rig without gyro bias states: a bias that
    is a constant parameter is not also a random walk."""
    if "gyro" not in groups or not any(g.config.bias_sigma or g.config.bias_instability for g in mech.gyros):
        return mech
    cfg = mech.config
    gyros = tuple(dataclasses.replace(g, bias_sigma=0.0, bias_instability=0.0) for g in cfg.sensors.gyros)
    return Mechanism(dataclasses.replace(cfg, sensors=dataclasses.replace(cfg.sensors, gyros=gyros)))


def parameter_scales(mech: Mechanism, parameters: list[Parameter], p: "Pass") -> np.ndarray:
    """Each parameter's natural size, for telling a parameter the recording determines from one
    it only hints at (:func:`base_parameters`): a body's mass m, m rho for its first moments and
    m rho^2 for its inertia (rho its radius of gyration about the joint, at least 1 cm); a
    joint's effort RMS E (the largest known one for a joint without) for its Coulomb friction and
    offset, E / RMS velocity for its viscous friction, E / RMS acceleration for its armature;
    0.1 rad or m for an encoder's offset, 1 rad/s for a gyro's bias, 1 for a scale factor, 100
    noise sigmas for a load cell's offset, :data:`TIMING_PERIODS` of its sample periods for a
    sensor's time offset."""
    n = mech.n
    X = np.concatenate(p.X)
    v = np.sqrt(np.mean(X[:, n:2 * n] ** 2, axis=0))
    a = np.sqrt(np.mean(X[:, 2 * n:3 * n] ** 2, axis=0))
    E = np.array([p.fits[f"dynamics:{j}"].effort_rms for j in mech.joint_names])
    E = np.where(E > 0, E, max(float(E.max()), 1e-6))
    masses = [float(mech.model.inertias[j].mass) for j in range(1, mech.model.njoints)]
    out = np.ones(len(parameters))
    for k, par in enumerate(parameters):
        i = par.index
        if par.group == "inertia":
            I = mech.model.inertias[i]
            m = float(I.mass) if I.mass > 0 else max(max(masses), 1e-6)
            Io = np.asarray(I.inertia) + m * (float(I.lever @ I.lever) * np.eye(3) - np.outer(I.lever, I.lever))
            rho = max(math.sqrt(max(float(np.linalg.eigvalsh(Io).max()), 0.0) / m), 0.01)
            out[k] = m * rho ** {"mass": 0, "mx": 1, "my": 1, "mz": 1}.get(par.field, 2)
        elif par.field in ("coulomb",) or par.group == "offset":
            out[k] = E[i]
        elif par.field == "viscous":
            out[k] = E[i] / max(v[i], 1e-6)
        elif par.field == "armature":
            out[k] = E[i] / max(a[i], 1e-6)
        elif par.group == "load_cell" and par.field == "offset":
            out[k] = 100.0 * mech.load_cells[i].config.noise
        elif par.group == "encoder":
            out[k] = 0.1
        elif par.group == TIMING:
            out[k] = TIMING_PERIODS / mech.sensors[i].rate
    return out


TIMING_PERIODS = 10.0
"""A sensor's time offset's natural size, in its sample periods (1 / its config ``rate``): a
large lag (a few samples of buffering and a filter's delay); an offset is then identified when
the recording places the sensor's readings to a tenth of its sample period (0.2 ms at 500 Hz)."""


def default_groups(mech: Mechanism) -> tuple[tuple[str, ...], str]:
    """The groups identified by default (the sensors' time offsets only when asked for) and,
    when the dynamics groups are left out, why: they need every driving effort known or
    measured (an ``unknown`` input is measured by an actuator load cell on its joint)."""
    groups = [g for g in GROUPS if g in DYNAMICS_GROUPS or (g != TIMING and mech.sensors_of(g))]
    measured = {c.config.joint for c in mech.load_cells if c.config.measures == "actuator"}
    free = [j for j in mech.input_joints if j not in measured]
    if free:
        note = (f"the effort of {', '.join(free)} is estimated (actuation: unknown), not measured: the inertias, "
                "friction, armature and offsets need every driving effort known or measured (actuation: known, "
                "`mbfg identify --known-inputs` with the measured effort in the recording, or an actuator load "
                "cell on the joint)")
        return tuple(g for g in groups if g not in DYNAMICS_GROUPS), note
    return tuple(groups), ""


# --------------------------------------------------------------------------------------------
@dataclass
class IdentifiedParameter:
    """A parameter's result. ``value``/``sigma``: the identified value and its standard
    deviation (identified), else the config's value and NaN; ``combination``: for an
    identified parameter, the unidentified parameters (name, coefficient c) it moves with (it
    stands for itself + sum c (their true value - their config value)); for an unidentified
    one, why."""
    parameter: Parameter
    identified: bool
    value: float
    sigma: float
    combination: list[tuple[str, float]] = field(default_factory=list)
    note: str = ""
    scale: float = math.nan            # its natural size (parameter_scales)

    @property
    def name(self) -> str:
        return self.parameter.name

    @property
    def no_information(self) -> bool:
        """Unidentified because the recording carries no information about it at all."""
        return not self.identified and self.note == NO_INFORMATION_NOTE

    @property
    def change_sigmas(self) -> float:
        """(value - the config's) / sigma."""
        return (self.value - self.parameter.nominal) / self.sigma if self.identified and self.sigma > 0 else 0.0


@dataclass
class IdentificationResult:
    """What :meth:`Identifier.identify` found. ``before``/``after``: the pass at the config's
    values and the last accepted one (their fits, the smoothed states, the information)."""
    parameters: list[IdentifiedParameter]
    covariance: np.ndarray                 # (q, q) of the identified ones, in their order
    passes: int
    converged: bool
    before: Pass
    after: Pass
    groups: tuple[str, ...]
    note: str                              # why groups were left out ("" if none)
    wall_time: float
    cpu_time: float
    keyframes: int
    duration: float                        # s of recording smoothed (all recordings)
    joints: list[str] = field(default_factory=list)

    def identified(self) -> list[IdentifiedParameter]:
        return [p for p in self.parameters if p.identified]

    def unidentified(self) -> list[IdentifiedParameter]:
        return [p for p in self.parameters if not p.identified]

    def values(self) -> dict[str, float]:
        """Every parameter's value (identified, or the config's)."""
        return {p.name: p.value for p in self.parameters}


def base_parameters(H: np.ndarray, tolerance: float, scales: np.ndarray | None = None) -> np.ndarray:
    """The identified indices: a greedy search in index order over H scaled to unit diagonal;
    a parameter joins when 1 - its squared multiple correlation with those already chosen (the
    share of its information they do not explain) exceeds ``tolerance`` and (``scales``) its
    standard deviation beside them, 1 / sqrt(H_jj (1 - R^2)), is below :data:`IDENTIFIED_SHARE`
    of its scale. A parameter with no information at all never joins."""
    p = H.shape[0]
    d = np.diag(H).copy()
    top = max(float(d.max()) if p else 0.0, 1e-300)
    live = np.flatnonzero(d > NO_INFORMATION * top)
    s = np.sqrt(np.where(d > 0, d, 1.0))
    C = H / np.outer(s, s)
    chosen: list[int] = []
    for j in live:
        if chosen:
            S = np.asarray(chosen)
            c = C[S, j]
            try:
                explained = float(c @ np.linalg.solve(C[np.ix_(S, S)], c))
            except np.linalg.LinAlgError:
                continue
            if 1.0 - explained <= tolerance:
                continue
        else:
            explained = 0.0
        if scales is not None and not 1.0 / math.sqrt(d[j] * (1.0 - explained)) < IDENTIFIED_SHARE * scales[j]:
            continue
        chosen.append(int(j))
    return np.asarray(chosen, int)


NO_INFORMATION = 1e-14
"""A parameter whose information is below this share of the largest has none at all."""
IDENTIFIED_SHARE = 0.01
"""A parameter is identified when the recording determines it (its standard deviation beside
the ones chosen before it) to this share of its natural size (:func:`parameter_scales`)."""
NO_INFORMATION_NOTE = "the recording carries no information about it"
COMBINATION_NOTE = "moves only with the identified ones (a combination of them)"
WEAK_NOTE = "the recording tells too little about it (a standard deviation above 1 % of its natural size)"


class Identifier:
    """Identifies the parameters of ``mech`` from recordings (see the module docstring)."""

    def __init__(self, mech: Mechanism, options: IdentificationOptions | None = None) -> None:
        self.options = options or IdentificationOptions()
        self.options.check()
        self.mech = mech
        groups, self.note = default_groups(mech)
        if self.options.groups is not None:
            groups = tuple(g for g in GROUPS if g in self.options.groups)
            self.note = ""
        self.groups = groups
        self.mech = mech = identification_mechanism(mech, groups)
        self.parameters = model_parameters(mech, groups)
        self.timing = np.array([i for i, par in enumerate(self.parameters) if par.group == TIMING], int)
        """The indices of the sensors' time offsets (:meth:`_retimed`)."""
        if not self.parameters:
            raise IdentificationError("no parameter to identify" + (f": {self.note}" if self.note else ""))
        self.sym = ParametricMechanism(mech, self.parameters, dynamics_weights=True)
        cfg = identification_config(mech.config.estimator)
        self.cfg = cfg
        self.sigma = np.full(mech.n, cfg.noise.dynamics)
        """The equations of motion's noise per joint (N m or N): the config's, then
        ``model_accuracy`` of the efforts (:meth:`identify`)."""
        self._bar = None
        lay = StateLayout.for_mechanism(mech, cfg)
        fn = StepFunction(mech, cfg, lay, 1.0 / cfg.keyframe_rate, sym=self.sym)
        self.smoother = OfflineSmoother(mech, cfg, self.options.smoothing, step_function=fn)

    def head(self, w: SolvedWindow) -> int:
        return self.smoother.fn_layout.head

    def linearization(self) -> StepLinearization:
        """The mapped linearisation of the step function the smoother uses now (one with more
        reading slots for a recording that needs them)."""
        rows = self.smoother.fn_step
        if getattr(self, "_linearized", (None, None))[0] is not rows.fn:
            self._linearized = (rows.fn, StepLinearization(rows))
        return self._linearized[1]

    def empty_fits(self) -> dict[str, RowFit]:
        mech = self.mech
        fits: dict[str, RowFit] = {}
        for i, name in enumerate(mech.joint_names):
            unit = "N m" if mech.angular[i] else "N"
            fits[f"dynamics:{name}"] = RowFit(name, "dynamics", unit, float(self.sigma[i]))
        for res in self.smoother.fn.residuals:
            fits[res.name] = RowFit(res.name, res.kind, res.model.unit(mech), res.sigma)
        return fits

    # ----------------------------------------------------------------------------------------
    def _pass(self, recordings: list[Readings], theta: np.ndarray, x_init: list[np.ndarray] | None) -> Pass:
        """Smooth every recording at ``theta`` (with the dynamics noises :attr:`sigma`) and sum
        their information about it."""
        full = np.concatenate([theta, self.cfg.noise.dynamics / self.sigma])      # (+ the weights)
        recordings = self._retimed(recordings, theta)
        full[self.timing] = 0.0        # (the readings are moved: the rows' shift is the change from here)
        if x_init is not None:         # (a grid the move changed: from the causal pass)
            x_init = [x if x.shape[0] == self.smoother.keyframe_times(r).size else None
                      for x, r in zip(x_init, recordings)]
        self.smoother.parameter_values = full
        p, n = theta.size, self.mech.n
        H, g, cost, rows = np.zeros((p + n, p + n)), np.zeros(p + n), 0.0, 0
        fits = self.empty_fits()
        X_all = []
        a_sq, var_sum, count = np.zeros(n), np.zeros(n), 0
        for i, readings in enumerate(recordings):
            acc = ParameterInformation(self, full, fits)
            self.smoother.window_solved = acc.add_window
            parts = []
            try:
                for _, X, _ in self.smoother.windows(readings, x_init=None if x_init is None else x_init[i]):
                    parts.append(X)
            finally:
                self.smoother.window_solved = None
            He, ge = acc.finish()
            H += He
            g += ge
            cost += acc.cost
            rows += acc.rows
            X = np.concatenate(parts)
            X_all.append(X)
            cov = state_covariances(acc.conditionals)
            A = slice(2 * n, 3 * n)
            a_sq += np.sum(X[:, A] ** 2, axis=0)
            var_sum += np.einsum("kjj->j", cov[:, A, A])
            count += X.shape[0]
        excitation = np.sqrt(a_sq / np.maximum(var_sum, 1e-300))
        if self._bar is not None:
            self._bar.update(1)
            self._bar.set_postfix_str(f"cost {cost:.6g}")
        return Pass(theta.copy(), X_all, H[:p, :p], g[:p], cost, rows, fits, excitation, self.sigma.copy())

    def _retimed(self, recordings: list[Readings], theta: np.ndarray) -> list[Readings]:
        """The recordings with each sensor whose time offset is a parameter moved to the offset's
        value in ``theta`` (its readings taken theta s earlier than the config says): the step
        function's rows take the offset's change from there, so that every reading's fraction of
        its step is exact at the linearisation point whatever the offset (no extrapolation beyond
        a step)."""
        moves = {self.parameters[i].owner: float(theta[i]) for i in self.timing if theta[i] != 0.0}
        if not moves:
            return recordings
        return [Readings({name: (np.asarray(t, float) - moves.get(name, 0.0), y) for name, (t, y) in r.sensors.items()},
                         r.commands) for r in recordings]

    def identify(self, recordings: Readings | list[Readings]) -> IdentificationResult:
        """Identify from the readings of one or more recordings (each its own chain of keyframes;
        the parameters shared; see :class:`~.smoothing_io.Readings`)."""
        if isinstance(recordings, Readings):
            recordings = [recordings]
        opt = self.options
        w0, c0 = time.perf_counter(), time.process_time()
        bar = None
        if opt.progress:
            from tqdm import tqdm
            bar = tqdm(unit=" pass", desc="identify", leave=False, file=sys.stderr,
                       bar_format="{desc}: {n} passes [{elapsed}] {postfix}")
        self.sigma = np.full(self.mech.n, self.cfg.noise.dynamics)
        self._bar = bar
        try:
            first = self._pass(recordings, np.zeros(len(self.parameters)), None)
            # the identification's dynamics noise: the model is trusted to model_accuracy of the
            # efforts, so that the accelerations follow it rather than the encoders' noise
            self.sigma = self._tight_noise(first)
            best = self._pass(recordings, first.theta, first.X)
            self.scales = parameter_scales(self.mech, self.parameters, best)
            I = base_parameters(best.H, opt.rank_tolerance, self.scales)
            if not I.size:
                raise IdentificationError("the recording carries no information about any of the parameters")
            best, used, converged = self._solve(recordings, best, I)
            passes = 2 + used
        finally:
            self._bar = None
            if bar is not None:
                bar.close()
        return self._result(first, best, I, passes, converged, time.perf_counter() - w0, time.process_time() - c0)

    def _solve(self, recordings: list[Readings], best: Pass, I: np.ndarray) -> tuple[Pass, int, bool]:
        """Gauss-Newton passes on the parameters I from ``best`` (Levenberg-Marquardt damping
        when a pass raises the cost); returns (the last accepted pass, passes, converged)."""
        opt = self.options
        damping, passes = 0.0, 0
        while passes < opt.max_iterations:
            HI = best.H[np.ix_(I, I)]
            try:
                step = np.linalg.solve(HI + damping * np.diag(np.diag(HI)), best.g[I])
                sig = np.sqrt(np.maximum(np.diag(np.linalg.inv(HI)), 1e-300))
            except np.linalg.LinAlgError:
                raise IdentificationError("the parameters' information matrix is singular") from None
            moves = float(np.max(np.abs(step) / sig))
            if damping == 0.0 and moves < opt.tolerance:
                return best, passes, True
            theta = best.theta.copy()
            theta[I] += step
            trial = self._pass(recordings, theta, best.X)
            passes += 1
            if math.isfinite(trial.cost) and trial.cost <= best.cost:
                best = trial
                damping = damping / 10.0 if damping > 1e-6 else 0.0
                if moves < opt.tolerance:
                    return best, passes, True
            else:                          # (the step raised the cost: shorter, towards the gradient)
                damping = max(damping * 10.0, 1e-3)
                if damping > 1e6:
                    return best, passes, True      # no step lowers the cost: at its minimum
        return best, passes, False

    def _tight_noise(self, p: Pass) -> np.ndarray:
        """Each joint's dynamics noise: ``model_accuracy`` of the RMS of its effort (known, or
        its estimated input; the largest one for a joint without an effort), at most the
        config's."""
        fits = [p.fits[f"dynamics:{j}"] for j in self.mech.joint_names]
        largest = max([f.effort_rms for f in fits if f.effort_rms > 0] or [self.cfg.noise.dynamics])
        kappa = self.options.model_accuracy
        return np.array([min(self.cfg.noise.dynamics, kappa * (f.effort_rms if f.effort_rms > 0 else largest))
                         for f in fits])

    def _result(self, first: Pass, best: Pass, I: np.ndarray, passes: int, converged: bool, wall: float,
                cpu: float) -> IdentificationResult:
        H = best.H
        HI = H[np.ix_(I, I)]
        cov = np.linalg.inv(HI)
        U = np.setdiff1d(np.arange(len(self.parameters)), I)
        comb = np.linalg.solve(HI, H[np.ix_(I, U)]) if U.size else np.zeros((I.size, 0))
        pos = {int(i): k for k, i in enumerate(I)}
        top = max(float(np.diag(H).max()), 1e-300)
        out = []
        for j, par in enumerate(self.parameters):
            if j in pos:
                k = pos[j]
                big = float(np.max(np.abs(comb[k]))) if U.size else 0.0
                terms = [(self.parameters[u].name, float(comb[k, m])) for m, u in enumerate(U)
                         if abs(comb[k, m]) > COMBINATION_CUTOFF * max(1.0, big)]
                out.append(IdentifiedParameter(par, True, par.nominal + float(best.theta[j]),
                                               float(math.sqrt(max(cov[k, k], 0.0))), terms, "", float(self.scales[j])))
            else:
                if not H[j, j] > NO_INFORMATION * top:
                    note = NO_INFORMATION_NOTE
                else:
                    c = H[I, j]
                    unexplained = 1.0 - float(c @ np.linalg.solve(HI, c)) / H[j, j]
                    note = COMBINATION_NOTE if unexplained <= self.options.rank_tolerance else WEAK_NOTE
                out.append(IdentifiedParameter(par, False, par.nominal, math.nan, [], note, float(self.scales[j])))
        K = sum(X.shape[0] for X in best.X)
        return IdentificationResult(out, cov, passes, converged, first, best, self.groups, self.note, wall, cpu, K,
                                    K / self.cfg.keyframe_rate, list(self.mech.joint_names))


COMBINATION_CUTOFF = 1e-6
"""Coefficients of a combination below this (relative to its largest, or to 1) are not listed."""


def identify(recordings: Readings | list[Readings], mech: Mechanism,
             options: IdentificationOptions | None = None) -> IdentificationResult:
    """Identify ``mech``'s parameters from ``recordings`` (see :class:`Identifier`)."""
    return Identifier(mech, options).identify(recordings)
