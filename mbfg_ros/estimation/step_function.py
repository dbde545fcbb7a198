"""The step function: every whitened residual row of one keyframe step and its Jacobians w.r.t.
(x_{k-1}, x_k), from ONE call of a CasADi function compiled per mechanism at start-up.

    r, J = step(x0, x1, p)        r (R,), J = [J0 J1] (R, 2D)

Rows, in order:

1. integration of q and v over the step (trapezoidal, Hermite or Euler), whitened by the
   integration noise per coordinate, a parameter of the step (by default the configured noise
   raised to the truncation error at ``mechanism.top_speed``, :mod:`mbfg_ros.model.speed`; the
   online estimator raises it to the motion it sees, :mod:`.integration_noise`);
2. the random walk of the slow states (unknown inputs, model-error forces, sensor biases, log
   gravity / mass scale, the inputs' rates), and with rates (``estimator.input_model``
   ``integrated`` or ``jerk``) their integration over the step (:meth:`StepFunction._rate_rows`);
3. at x1: the loop closures at position, velocity and acceleration level and the equations of
   motion ``M a + h + F(v) - tau - B u - B_e e - Phi_q^T lam = 0`` (with the gravity / mass
   scale; e: the model-error forces, B_e the identity's columns of the coordinates they act
   on, :func:`~mbfg_ros.estimation.layout.model_error_joints`); on a rig whose closure rows are
   redundant everywhere, a weak prior on every multiplier (``noise.multiplier``);
4. every sensor reading of the step at its own stamp: the state is interpolated between the two
   keyframes (q quintic Hermite on q, v, a; v cubic Hermite on v, a; linear on the rest, see
   :func:`~.step_interpolation.interpolate`) and the
   sensor's residual (:mod:`mbfg_ros.estimation.sensor_residuals`) taken there (a model with
   time-offset parameters moves the fraction back by the offset's change / h), with the robust
   kernel's IRLS weight inside, and its stamp's timing error in its noise
   (:func:`timing_weights`, ``estimator.stamp_jitter``).

The dynamics noise and the unknown inputs' and model-error forces' random walks are multiplied
by the step's ``model_scale`` parameter (1: as configured; :mod:`.model_uncertainty` chooses it).
Sensor readings sit in fixed slots of the parameter vector ``p`` (:class:`StepLayout`): per
sensor, ``slots`` readings (fraction of the step, active flag, values, known efforts at the
stamp if the sensor needs them), the sensor's innovation scale and its stamps' jitter; an unused slot gives zero
rows. A symbolic model with constant parameters (``sym.parameter_count`` > 0, the model of
:mod:`mbfg_ros.model.parameters` that `mbfg identify` estimates) takes them as the last
entries of ``p`` (:attr:`StepLayout.theta`), and the function then also returns the rows'
Jacobian with respect to them (a sixth output, ``J_theta``). Readings beyond a sensor's slots, and readings that arrive after their step was solved, go
through the one-reading function of their sensor (:attr:`StepFunction.reading`).

The symbolic model comes from :class:`~mbfg_ros.model.symbolic.SymbolicMechanism` (kinematics
and RNEA built from the pinocchio model); CasADi's SX virtual machine evaluates it, no compiler
needed. Calls go through CasADi's buffer interface into preallocated numpy arrays.
"""
from __future__ import annotations

import copy
import math
import re
import weakref
from dataclasses import dataclass

import casadi as ca
import numpy as np

from mbfg_ros.estimation.layout import StateLayout, model_error_joints
from mbfg_ros.estimation.native_code import native
from mbfg_ros.estimation.sensor_residuals import StateParts, sensor_residuals
from mbfg_ros.estimation.sensor_streams import GAUSSIAN_MEAN_ABS, INNOVATION_CLIP, INNOVATION_RATE
from mbfg_ros.estimation.step_interpolation import interpolate
from mbfg_ros.errors import AssemblyError
from mbfg_ros.model.assembly import generic_rank, initial_state
from mbfg_ros.model.config import EstimatorConfig, RobustLossConfig
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.model.speed import integration_sigmas
from mbfg_ros.model.symbolic import SymbolicMechanism


INPUT_WALK_WITH_RATES = 100.0
"""With the inputs' rates (``input_model`` integrated or jerk), the inputs' own random walk is
this many times looser: the rates' rows carry them; the loose walk only ties an input across
keyframes (with ``jerk`` nothing else does: the equations of motion give it per keyframe)."""


class LinearizationError(RuntimeError):
    """A step produced a non-finite residual or Jacobian."""


def redundant_closures(mech: Mechanism) -> bool:
    """Whether the closure rows are redundant at a generic pose (rank below the row count: every
    row of Bricard's mechanism; a planar pin in a spatial model of a planar linkage is not, its
    rows are independent in the plane), judged at the config's assembled initial pose and the
    generic poses near it (mbfg_ros.model.assembly.generic_rank)."""
    if not mech.m:
        return False
    data = mech.create_data()
    try:
        q0, _ = initial_state(mech, data)
        return generic_rank(mech, data, q0).closures < mech.m
    except AssemblyError:
        return False


def parts(lay: StateLayout, q, v, tail) -> StateParts:
    """Named parts of a state given as q, v and the rest (a, lam, u, e, b, log s, log mu)."""
    n = lay.n

    def col(sl: slice):
        return tail[sl.start - 2 * n:sl.stop - 2 * n]
    s = ca.exp(col(lay.S)[0]) if lay.has_gravity else 1.0
    mu = ca.exp(col(lay.MU)[0]) if lay.has_mass else 1.0
    return StateParts(q, v, col(lay.A), col(lay.L), col(lay.U), col(lay.B), s, mu, col(lay.E))


def robust_weight(rn, loss: RobustLossConfig, scale):
    """IRLS weight of a reading whose whitened residual has RMS ``rn`` (symbolic), judged
    relative to the sensor's innovation ``scale`` (>= 1) so that while the estimate converges
    (every innovation large) readings are not taken for outliers, while a lone spike is."""
    k = loss.threshold * scale
    if loss.type == "huber":
        return ca.if_else(rn <= k, 1.0, k / ca.fmax(rn, 1e-300))
    if loss.type == "cauchy":
        return 1.0 / (1.0 + (rn / k) ** 2)
    return ca.SX(1.0)


def timing_weights(e, s_raw, h: float, jitter):
    """Per row of a reading's whitened residual ``e`` (taken at the fraction ``s_raw`` of a step
    of ``h`` s): 1 / sqrt(1 + (jitter d e / d t)^2), the factor that whitens it by its noise and
    its stamp's timing error added in quadrature. The reading's predicted rate of change
    d e / d t = (d e / d s) / h (sigmas per s, along the interpolated motion) times the timing
    error's standard deviation ``jitter`` (s) is the error a stamp off by that much makes: at
    10 rad/s a stamp 0.3 ms off is 3e-3 rad, thirty times an encoder's quantisation."""
    rate = ca.jacobian(e, s_raw) / h
    return 1.0 / ca.sqrt(1.0 + (jitter * rate) ** 2)


@dataclass(frozen=True)
class SlotBlock:
    """Where one sensor's readings sit in ``p`` and in the outputs.

    In ``p`` a block is the sensor's running mean |whitened innovation| (``mean_abs``), the
    standard deviation of its stamps' timing error (``jitter``, s), then ``slots`` rows of
    ``width`` values: the fraction of the step (t - t_{k-1}) / h, negative for an unused slot;
    the reading's values (``dim``); the known efforts at its stamp (n, if the sensor needs
    them)."""
    sensor: object               # its residual model (sensor_residuals)
    slots: int
    mean_abs: int                # index in p
    jitter: int                  # index in p
    start: int                   # first slot row in p
    width: int
    tau: bool
    rows: slice                  # its rows in r
    readings: slice              # its entries in the per-reading outputs (|r| RMS, weight)
    index: int                   # its entries in the per-sensor outputs (2 * index, 2 * index + 1)

    def view(self, p: np.ndarray) -> np.ndarray:
        """The block's slot rows in p, (slots, width) (a view)."""
        return p[self.start:self.start + self.slots * self.width].reshape(self.slots, self.width)


class StepLayout:
    """Layout of the parameter vector ``p`` and of the rows of one step."""

    def __init__(self, mech: Mechanism, lay: StateLayout, cfg: EstimatorConfig, slots: list[int],
                 residuals: list, model_rows: bool = True, h: float = 0.0, parameters: int = 0) -> None:
        """``h``: the keyframe step, s (sets the integration rows' default sigmas);
        ``parameters``: the symbolic model's constant parameters (:attr:`theta`, after the slots)."""
        n, m = mech.n, mech.m
        self.n = n
        self.known = bool(mech.known_input_joints) and model_rows
        P = 0
        self.tau = None
        if self.known:
            self.tau = slice(0, n)
            P = n
        # the integration rows' sigmas per coordinate (position, then velocity): by default the
        # configured ones raised to the truncation error at top speed (model/speed.py); the
        # online estimator raises them further to the motion it sees (integration_noise.py)
        self.integration = None
        self.integration_default = (0.0, 0.0)
        if model_rows:
            self.integration = slice(P, P + 2 * n)
            P += 2 * n
            nz = cfg.noise
            self.integration_default = integration_sigmas(nz.integration_position, nz.integration_velocity, h,
                                                          mech.config.top_speed)
        # the scale of the model's uncertainty (the dynamics noise and the input and model-error
        # random walks), chosen online (model_uncertainty.py); 1: as configured
        self.model_scale = None
        if model_rows:
            self.model_scale = P
            P += 1
        self.integration_rows = (2 * n) if model_rows else 0
        slow = lay.dim - lay.slow.start
        self.walk_rows = (slow + lay.n_r) if model_rows else 0     # + the rates' integration rows
        self.acc = cfg.acceleration_constraints and m > 0
        self.closure_rows = ((3 if self.acc else 2) * m) if model_rows else 0
        self.dynamics_rows = n if model_rows else 0
        # a weak prior on every multiplier where the closure rows are redundant everywhere
        self.multiplier_rows = m if (model_rows and m and redundant_closures(mech)) else 0
        R = self.integration_rows + self.walk_rows
        self.phi = slice(R, R + (m if model_rows else 0))          # closure position rows
        self.dynamics_start = R + self.closure_rows                  # the equations-of-motion rows
        R += self.closure_rows + self.dynamics_rows + self.multiplier_rows
        self.head = self.integration_rows + self.walk_rows          # rows that need x0
        self.blocks: list[SlotBlock] = []
        A = 0
        for res, S in zip(residuals, slots):
            if S <= 0:
                continue
            width = 1 + res.dim + (n if res.needs_tau else 0)
            rows = slice(R, R + S * res.rows)
            self.blocks.append(SlotBlock(res, S, P, P + 1, P + 2, width, res.needs_tau, rows, slice(A, A + S),
                                         len(self.blocks)))
            P += 2 + S * width
            R = rows.stop
            A += S
        self.theta = slice(P, P + parameters) if parameters else None
        """The model's constant parameters in ``p`` (None without any; 0 there = the config's values)."""
        P += parameters
        self.P, self.R, self.readings = P, R, A

    def block(self, name: str) -> SlotBlock | None:
        for b in self.blocks:
            if b.sensor.name == name:
                return b
        return None

    def empty_parameters(self) -> np.ndarray:
        """A parameter vector with every slot unused, Gaussian innovation means, no stamp jitter
        and the model's uncertainty as configured."""
        p = np.zeros(max(self.P, 1))
        if self.integration is not None:
            n = self.n
            p[self.integration] = [self.integration_default[0]] * n + [self.integration_default[1]] * n
            p[self.model_scale] = 1.0
        for b in self.blocks:
            p[b.mean_abs] = GAUSSIAN_MEAN_ABS
            b.view(p)[:, 0] = -1.0
        return p


class CompiledRows:
    """A CasADi function f(x0, x1, p) -> (r, J^T, per-sensor (mean |r|, downweighted), |r| per
    reading, weight per reading) called through its buffer interface; outputs land in
    preallocated arrays (views are returned). ``p`` is the bound parameter array: fill it in
    place, or pass another to copy."""

    def __init__(self, fn: ca.Function, dim: int, rows: int, readings: int, params: int, blocks: int,
                 compiled: ca.Function | None = None, parameters: int = 0) -> None:
        """``fn``: the SX function; ``compiled``: the same compiled to native code, used if given;
        ``parameters``: the model's constant parameters (then ``Jt_theta`` (parameters, R) holds
        the rows' Jacobian with respect to them, transposed)."""
        self.fn = fn
        self.compiled = compiled
        self.dim, self.R = dim, rows
        self.x0 = np.zeros(dim)
        self.x1 = np.zeros(dim)
        self.p = np.zeros(params)
        self.r = np.zeros(rows)
        self.Jt = np.zeros((2 * dim, rows))        # column-major (R, 2D) = C-order (2D, R)
        self.stats = np.zeros(2 * blocks)
        self.abs = np.zeros(readings)
        self.weight = np.zeros(readings)
        self.parameters = parameters
        self.Jt_theta = np.zeros((parameters, rows))
        self._buf, self._eval = (compiled or fn).buffer()
        for i, a in enumerate((self.x0, self.x1, self.p)):
            self._buf.set_arg(i, memoryview(a))
        outs = (self.r, self.Jt, self.stats, self.abs, self.weight) + ((self.Jt_theta,) if parameters else ())
        for i, a in enumerate(outs):
            self._buf.set_res(i, memoryview(a))
        self.J0 = self.Jt[:dim].T
        self.J1 = self.Jt[dim:].T

    def __call__(self, x0: np.ndarray, x1: np.ndarray, p: np.ndarray | None = None):
        """(r, J0, J1) at (x0, x1) with parameters p (default: the bound ``self.p``); views into
        this object's buffers, valid until the next call."""
        self.x0[:] = x0
        self.x1[:] = x1
        if p is not None and p is not self.p:
            self.p[:] = p
        self._eval()
        return self.r, self.J0, self.J1

    def finite(self) -> bool:
        """Whether the last call's rows and Jacobian are finite."""
        return math.isfinite(float(self.r @ self.r) + float(self.Jt.sum()))

    def instructions(self) -> int:
        """Instructions of the SX function (what CasADi's virtual machine executes)."""
        return int(self.fn.n_instructions())

    def fresh(self) -> "CompiledRows":
        """The same function with buffers of its own."""
        return self.with_compiled(self.compiled)

    def with_compiled(self, compiled: ca.Function | None) -> "CompiledRows":
        """The same function, run as ``compiled`` (native code), with buffers of its own."""
        return CompiledRows(self.fn, self.dim, self.R, self.abs.size, self.p.size, self.stats.size // 2,
                            compiled, self.parameters)


class StepFunction:
    """The compiled rows of a keyframe step (see the module docstring) for one mechanism and
    estimator configuration. ``step`` evaluates a whole step; ``reading[i]`` one reading of
    sensor i (late readings, or readings beyond the step's slots)."""

    def __init__(self, mech: Mechanism, cfg: EstimatorConfig, lay: StateLayout, h: float,
                 sym: SymbolicMechanism | None = None, slots: list[int] | None = None,
                 native_code: bool | None = None) -> None:
        """``native_code``: compile the functions to native code (:mod:`.native_code`); None:
        as the config's ``native_code`` says (auto: when a C compiler is found)."""
        self.mech, self.cfg, self.lay, self.h = mech, cfg, lay, h
        self.native_code = (cfg.native_code == "auto") if native_code is None else native_code
        self.sym = sym if sym is not None else SymbolicMechanism(mech)
        self.residuals = sensor_residuals(mech, lay.bias_slices)
        rate = cfg.keyframe_rate
        if slots is None:
            slots = [max(1, math.ceil(res.rate / rate - 1e-9)) + 1 for res in self.residuals]
        theta = self.sym.parameter_count
        self.layout = StepLayout(mech, lay, cfg, slots, self.residuals, h=h, parameters=theta)
        tag = re.sub(r"\W", "_", mech.config.name)
        self.step = self._compile(f"step_{tag}", self.layout, model_rows=True)
        self.reading_layouts = [StepLayout(mech, lay, cfg, [1 if j == i else 0 for j in range(len(self.residuals))],
                                           self.residuals, model_rows=False, parameters=theta)
                                for i in range(len(self.residuals))]
        self.reading = [self._compile("reading_" + tag + "_" + re.sub(r"\W", "_", res.name), L, model_rows=False)
                        for res, L in zip(self.residuals, self.reading_layouts)]
        compiled = native([f.fn for f in [self.step, *self.reading]]) if self.native_code else None
        if compiled:
            self.step = self.step.with_compiled(compiled[0])
            self.reading = [f.with_compiled(c) for f, c in zip(self.reading, compiled[1:])]

    # ----------------------------------------------------------------------------------------
    def _model_rows(self, x0, x1, p, L: StepLayout):
        mech, lay, cfg, h = self.mech, self.lay, self.cfg, self.h
        n, m = mech.n, mech.m
        nz = cfg.noise
        q0, v0, a0 = x0[0:n], x0[n:2 * n], x0[2 * n:3 * n]
        q1, v1, a1 = x1[0:n], x1[n:2 * n], x1[2 * n:3 * n]
        if cfg.integrator == "hermite":
            # q from the cubic Hermite of (q, v, a): exact for quartic motion (O(h^5) rows)
            rq = q1 - q0 - 0.5 * h * (v0 + v1) - h * h / 12.0 * (a0 - a1)
            rv = v1 - v0 - 0.5 * h * (a0 + a1)
        elif cfg.integrator == "trapezoidal":
            rq = q1 - q0 - 0.5 * h * (v0 + v1)
            rv = v1 - v0 - 0.5 * h * (a0 + a1)
        else:
            rq = q1 - q0 - h * v0
            rv = v1 - v0 - h * a0
        # the integration noise per coordinate, from the parameters (StepLayout.integration)
        sig = p[L.integration]
        out = [rq / sig[:n], rv / sig[n:]]
        scale = p[L.model_scale]
        if L.walk_rows:
            sig, scaled = self._random_walk_sigmas()
            sig = ca.DM(sig * math.sqrt(h)) * (1.0 + ca.DM(scaled) * (scale - 1.0))
            out.append((x1[lay.slow.start:] - x0[lay.slow.start:]) / sig)
            if lay.n_r:
                out.append(self._rate_rows(x0, x1, a0, a1) / scale)
        z = parts(lay, q1, v1, x1[2 * n:])
        if m:
            phi, phid, phidd = self.sym.closure_levels(z.q, z.v, z.a)
            out += [phi / nz.closure_position, phid / nz.closure_velocity]
            if L.acc:
                out.append(phidd / nz.closure_acceleration)
        tau = p[L.tau] if L.tau is not None else ca.DM.zeros(n)
        d = self.sym.dynamics_residual(z.q, z.v, z.a, z.lam, tau, z.u, z.gravity_scale, z.mass_scale,
                                       z.e if lay.n_e else None, model_error_joints(mech))
        out.append(d / (nz.dynamics * scale))
        if L.multiplier_rows:
            out.append(z.lam / nz.multiplier)
        return ca.vertcat(*out)

    def _rate_rows(self, x0, x1, a0, a1):
        """The integration of the inputs' rates over the step (trapezoidal), whitened: u by its
        rate (``integrated``), or the input joints' accelerations by their jerks (``jerk``). Of an
        integrated random walk of intensity w (per sqrt(s)) this residual is the integral of a
        Brownian bridge: variance w^2 h^3 / 12, independent of the rates' own step."""
        lay, h = self.lay, self.h
        moved = (ca.mtimes(ca.DM(self.mech.B.T), a1 - a0) if self.cfg.input_model == "jerk"
                 else x1[lay.U] - x0[lay.U])
        return (moved - 0.5 * h * (x0[lay.R] + x1[lay.R])) / (self.cfg.input_walk * math.sqrt(h ** 3 / 12.0))

    def _random_walk_sigmas(self) -> tuple[np.ndarray, np.ndarray]:
        """The slow states' random walks (per sqrt(s)), and which of them are the model's
        uncertainty (the unknown inputs', their rates' and the model-error forces': scaled by the
        step's ``model_scale``). With rates, the inputs' own walk is :data:`INPUT_WALK_WITH_RATES`
        times looser: the rates' rows (:meth:`_rate_rows`) carry them."""
        nz, lay = self.cfg.noise, self.lay
        out = [INPUT_WALK_WITH_RATES * nz.input_random_walk if lay.n_r else nz.input_random_walk] * lay.n_u
        out += [self.cfg.model_error.random_walk] * lay.n_e
        scaled = np.zeros(lay.dim - lay.slow.start)
        scaled[:len(out)] = 1.0
        for sensor, sl in zip(self.mech.sensors, lay.bias_slices):
            if sl is not None:
                out += [max(sensor.bias_instability, 1e-9)] * (sl.stop - sl.start)
        if lay.has_gravity:
            out.append(nz.gravity_random_walk)
        if lay.has_mass:
            out.append(nz.mass_random_walk)
        if lay.n_r:
            out += [self.cfg.input_walk] * lay.n_r
            scaled[-lay.n_r:] = 1.0
        return np.asarray(out, float), scaled

    def _compile(self, name: str, L: StepLayout, model_rows: bool) -> CompiledRows:
        lay, h, n = self.lay, self.h, self.mech.n
        D = lay.dim
        x0 = ca.SX.sym("x0", D)
        x1 = ca.SX.sym("x1", D)
        p = ca.SX.sym("p", max(L.P, 1))
        X = ca.vertcat(x0, x1)
        theta = p[L.theta] if L.theta is not None else None
        if theta is not None:
            self.sym.bind_parameters(theta)           # (the expressions below take them from p)
        rows = [self._model_rows(x0, x1, p, L)] if model_rows else []
        ones = [ca.DM.ones(rows[0].shape[0])] if model_rows else []
        absr, weights, stats = [], [], []
        timing = self.cfg.stamp_jitter_auto or self.cfg.stamp_jitter > 0
        for b in L.blocks:
            res = b.sensor
            # (identifying its time offset: the change from the config's, s; None otherwise)
            shift = self.sym.constant(res.name, "time_offset", 0.0)
            shift = None if isinstance(shift, float) else shift
            m0 = p[b.mean_abs]
            scale = ca.fmax(1.0, m0 / GAUSSIAN_MEAN_ABS)
            acts, clipped = [], []
            for j in range(b.slots):
                o = b.start + j * b.width
                s_raw = p[o]
                act = ca.if_else(s_raw >= 0, 1.0, 0.0)
                s = ca.fmax(s_raw, 0.0)
                if shift is not None:       # taken that much earlier: its fraction moves back
                    s = s - shift / h
                y = p[o + 1:o + 1 + res.dim]
                tau = p[o + 1 + res.dim:o + 1 + res.dim + n] if b.tau else None
                q, v, tail = interpolate(lay, x0, x1, s, h)
                e = res.error(self.sym, parts(lay, q, v, tail), y, tau)
                # the stamp's timing error, in the reading's noise (held fixed in the Jacobian)
                tw = timing_weights(e, s_raw, h, p[b.jitter]) if timing else 1.0
                rn = ca.norm_2(e * tw) / math.sqrt(res.rows)
                w = robust_weight(rn, self.cfg.robust_loss, scale)
                rows.append(e)
                ones.append(act * ca.sqrt(w) * tw * ca.DM.ones(res.rows))
                absr.append(act * rn)
                weights.append(act * w + (1 - act))
                acts.append(act)
                clipped.append(ca.fmin(rn, INNOVATION_CLIP))
            # the running mean |innovation| after this step's readings, in time order:
            # m_c = (1-a)^c m0 + a sum_j (1-a)^(c-1-j) min(|r_j|, clip)
            c = sum(acts)
            keep = 1.0 - INNOVATION_RATE
            m_new = ca.power(keep, c) * m0
            for j in range(b.slots):
                m_new = m_new + acts[j] * INNOVATION_RATE * ca.power(keep, c - 1 - j) * clipped[j]
            down = sum(acts[j] * ca.if_else(weights[-b.slots + j] < 0.999, 1.0, 0.0) for j in range(b.slots))
            stats += [m_new, down]
        r = ca.vertcat(*rows)
        J = ca.jacobian(r, X)
        weight_rows = ca.vertcat(*ones)
        r_out = r * weight_rows
        J_out = ca.densify(J * ca.repmat(weight_rows, 1, 2 * D))
        cat = lambda xs: ca.vertcat(*xs) if xs else ca.SX(0, 1)  # noqa: E731
        outs, names = [r_out, J_out, cat(stats), cat(absr), cat(weights)], ["r", "J", "stats", "abs", "weight"]
        if theta is not None:               # d r / d theta, weighted as J (the IRLS weight held)
            outs.append(ca.densify(ca.jacobian(r, theta) * ca.repmat(weight_rows, 1, theta.numel())))
            names.append("J_theta")
        fn = ca.Function(name, [x0, x1, p], outs, ["x0", "x1", "p"], names, {"cse": True})
        return CompiledRows(fn, D, L.R, L.readings, max(L.P, 1), len(L.blocks),
                            parameters=0 if theta is None else theta.numel())

    def fresh(self) -> "StepFunction":
        """The same compiled functions with buffers of its own (for another estimator)."""
        other = copy.copy(self)
        other.step = self.step.fresh()
        other.reading = [f.fresh() for f in self.reading]
        return other


_CACHE: "weakref.WeakKeyDictionary[Mechanism, dict]" = weakref.WeakKeyDictionary()


def compiled_step_function(mech: Mechanism, cfg: EstimatorConfig, lay: StateLayout, h: float) -> StepFunction:
    """The StepFunction of (mechanism, estimator settings), compiled once per process and
    handed out with fresh buffers."""
    per = _CACHE.setdefault(mech, {})
    sf = per.get(cfg)
    if sf is None:
        sf = per[cfg] = StepFunction(mech, cfg, lay, h)
    return sf.fresh()


def step_costs(mech: Mechanism, q: np.ndarray, v: np.ndarray) -> list[tuple[str, float]]:
    """(what, microseconds per call) of the estimator's step function at (q, v), on CasADi's
    virtual machine and, where a C compiler is at hand, as native code (best of 5 runs)."""
    from mbfg_ros.model.timing import best_us
    cfg = mech.config.estimator
    lay = StateLayout.for_mechanism(mech, cfg)
    x = lay.pack(q, v, np.zeros(mech.n))
    out = []
    for native_code in (False, True):
        fn = StepFunction(mech, cfg, lay, 1.0 / cfg.keyframe_rate, native_code=native_code)
        if native_code and fn.step.compiled is None:
            break
        p = fn.layout.empty_parameters()
        what = "native code" if native_code else f"CasADi virtual machine, {fn.step.instructions()} instructions"
        out.append((f"estimator step: every row and [J0 J1], {fn.layout.R} rows ({what})",
                    best_us(lambda fn=fn, p=p: fn.step(x, x, p))))
    return out
