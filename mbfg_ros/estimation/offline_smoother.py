"""Offline smoothing: a whole recording solved as one least-squares problem over its keyframes.

The online estimator answers "what would the node have published"; this module answers "what
best explains everything that was recorded". Every keyframe step (the estimator's own rows:
integration, random walks, closures, dynamics, every reading at its own stamp, robust weights;
:mod:`.step_function`) is linearised with the compiled step function *mapped over time*
(``casadi.Function.map``: one call evaluates a block of keyframes from numeric arrays), the
chain's Gauss-Newton system is solved with GTSAM (a GaussianFactorGraph of one JacobianFactor
per step, eliminated in chain order), the new states are put back on the loop closures
(:class:`ClosureProjection`: the closure rows are stiff), and that is iterated to convergence
(Levenberg-Marquardt damping only when a Gauss-Newton step raises the cost).

Initialisation: a fast causal pass (:meth:`OfflineSmoother._causal`: a square-root information
filter over the chain, each step linearised at the prediction from the previous keyframe: the
online estimator's filter without its window), or states the caller gives (e.g. the online
estimates). From there one Gauss-Newton step usually converges.

Memory is bounded by windows: a recording longer than ``window`` seconds is solved in windows
that overlap by ``overlap`` seconds; each window keeps the keyframes nearer its middle than the
next window's (the seam is in the middle of the overlap) and starts from the previous window's
states with the config's (loose) prior on its first keyframe, so only a window's Jacobians are
ever in memory (about 10 KB per keyframe for the four-bar, with the solver's copies). The
readings themselves are held as arrays (16 bytes per scalar reading).

Units and frames are the estimator's (:mod:`.layout`, :mod:`.sensor_residuals`); stamps are s.
No ROS here: readings come in as arrays (see :class:`Readings`).

`mbfg identify` (:mod:`.identification`) smooths with a step function whose model takes
constant parameters (``step_function``, :attr:`OfflineSmoother.parameter_values`) and reads
each solved window's linearisation through :attr:`OfflineSmoother.window_solved`.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator

import gtsam
import numpy as np
import scipy.linalg

from mbfg_ros.estimation.layout import StateLayout
from mbfg_ros.estimation.mapped_steps import MAP_BLOCK, ClosureProjection, MappedSteps
from mbfg_ros.estimation.smoother import key
from mbfg_ros.estimation.smoothing_io import (NoFiniteReadings, Readings, SmoothedEstimates, SmoothingOptions,
                                            SmoothingResult, SolvedWindow, WindowReport)
from mbfg_ros.estimation.start_state import prior_information, start_state, transition_matrix
from mbfg_ros.estimation.step_function import StepFunction, compiled_step_function
from mbfg_ros.model.channels import command_channel, command_joint
from mbfg_ros.model.config import EstimatorConfig
from mbfg_ros.model.mechanism import Mechanism


class OfflineSmoother:
    """Smooths recordings of one mechanism (estimator settings from ``config``, default the
    mechanism config's).

    ``step_function``: the step function to use (built for ``config``; default the estimator's,
    :func:`~.step_function.compiled_step_function`), e.g. one whose model has constant
    parameters; their values (``parameter_values``, (p,)) go into every step's parameters
    (None: zeros, the config's model). ``model_scale``: the factor on the dynamics and random-walk
    noises (1: as configured; :func:`.smoothing_scale.online_scale` gives the online estimator's).
    ``window_solved``, if set, is called with a :class:`SolvedWindow` after each window's solve."""

    def __init__(self, mech: Mechanism, config: EstimatorConfig | None = None,
                 options: SmoothingOptions | None = None, step_function: StepFunction | None = None) -> None:
        self.mech = mech
        self.cfg = config or mech.config.estimator
        self.options = options or SmoothingOptions()
        self.options.check()
        self.lay = StateLayout.for_mechanism(mech, self.cfg)
        self.h = 1.0 / self.cfg.keyframe_rate
        self.data = mech.create_data()
        self.fn = step_function or compiled_step_function(mech, self.cfg, self.lay, self.h)
        self.parameter_values: np.ndarray | None = None
        self.model_scale = 1.0
        self.window_solved: Callable[[SolvedWindow], None] | None = None
        self.names = [res.name for res in self.fn.residuals]
        self._transition = transition_matrix(self.lay, self.h)
        self._mapped: MappedSteps | None = None
        self._scratch: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    # ----------------------------------------------------------------------------------------
    def _clean(self, readings: Readings):
        """Finite, unique, sorted readings per sensor, each stamp moved to the time the reading
        was taken (the stamp minus its sensor's ``time_offset``); counts of what was dropped."""
        out, rejected = {}, {}
        lags = {s.name: s.time_offset for s in self.mech.sensors}
        for name, (t, y) in list(readings.sensors.items()) + [(command_channel(j), v) for j, v in readings.commands.items()]:
            t = np.asarray(t, float).reshape(-1) - lags.get(name, 0.0)
            y = np.asarray(y, float).reshape(t.size, -1)
            ok = np.isfinite(t) & np.all(np.isfinite(y), axis=1)
            bad = int(t.size - ok.sum())
            t, y = t[ok], y[ok]
            order = np.argsort(t, kind="stable")
            t, y = t[order], y[order]
            keep = np.ones(t.size, bool)
            keep[1:] = np.diff(t) > 0
            out[name] = (t[keep], y[keep])
            rejected[name] = (bad, int(t.size - keep.sum()))
        return out, rejected

    def _grid(self, data: dict, rejected: dict) -> tuple[list[str], float, int]:
        """The sensors with readings, keyframe 0's stamp (the earliest reading) and the number of
        keyframes (the last at or after the latest reading)."""
        measuring = [n for n in self.names if n in data and data[n][0].size]
        if not measuring:
            raise NoFiniteReadings(rejected)
        t0 = min(float(data[n][0][0]) for n in measuring)
        t_end = max(float(data[n][0][-1]) for n in measuring)
        return measuring, t0, int(max(0, math.ceil((t_end - t0) / self.h - 1e-9))) + 1

    def keyframe_times(self, readings: Readings) -> np.ndarray:
        """(K,) the stamps (s) of the keyframes :meth:`smooth` solves ``readings`` on."""
        data, rejected = self._clean(readings)
        _, t0, K = self._grid(data, rejected)
        return t0 + self.h * np.arange(K)

    def _step_function_for(self, counts: dict[str, int]) -> StepFunction:
        """The estimator's step function, or one with more slots where a sensor has more
        readings in a step than its slots hold (jittered or irregular stamps)."""
        slots = [b.slots for b in self.fn.layout.blocks]
        need = [max(s, counts.get(name, 0)) for s, name in zip(slots, self.names)]
        if need == slots:
            return self.fn
        return StepFunction(self.mech, self.cfg, self.lay, self.h, sym=self.fn.sym, slots=need)

    def _initial_state(self, data: dict, t0: float) -> np.ndarray:
        """The config's assembly, or (``initial_pose: sensors``, encoders on every DOF) the
        assembly at the first encoder readings with the config's DOF velocities, as the online
        estimator starts (:func:`.start_state.start_state`)."""
        mech = self.mech
        dof = None
        if self.cfg.initial_pose == "sensors":
            first: dict[int, float] = {}
            for enc in mech.encoders:
                t, y = data.get(enc.config.name, (np.zeros(0), None))
                if t.size and t[0] <= t0 + self.cfg.sensor_wait + 1e-9:
                    first.setdefault(int(enc.index), float(y[0, 0]) - enc.config.offset)
            if all(int(j) in first for j in mech.dof):
                dof = np.array([first[int(j)] for j in mech.dof])
        return start_state(mech, self.data, self.lay, dof=dof)

    # ----------------------------------------------------------------------------------------
    def _parameters(self, fn: StepFunction, data: dict, t0: float, k_first: int, k_end: int,
                    efforts) -> np.ndarray:
        """(k_end - k_first, P): the step parameters of keyframes [k_first, k_end): every reading
        in its slot, known efforts, Gaussian innovation means."""
        L, h = fn.layout, self.h
        K = k_end - k_first
        P = np.tile(L.empty_parameters(), (K, 1))
        t_lo, t_hi = t0 + (k_first - 1) * h, t0 + (k_end - 1) * h
        if L.tau is not None:
            P[:, L.tau] = efforts(t0 + h * np.arange(k_first, k_end))
        if L.theta is not None and self.parameter_values is not None:
            P[:, L.theta] = self.parameter_values
        if L.model_scale is not None:
            P[:, L.model_scale] = self.model_scale
        for b, name in zip(L.blocks, self.names):
            t, y = data.get(name, (None, None))
            if t is None or not t.size:
                continue
            lo = int(np.searchsorted(t, t_lo - h, side="left")) if k_first else 0
            hi = int(np.searchsorted(t, t_hi + h, side="right"))
            if hi <= lo:
                continue
            tt, yy = t[lo:hi], y[lo:hi]
            f = (tt - t0) / h
            k = np.maximum(0, np.ceil(f - 1e-9)).astype(np.int64)
            keep = (k >= k_first) & (k < k_end)
            tt, yy, f, k = tt[keep], yy[keep], f[keep], k[keep]
            if not tt.size:
                continue
            start = np.searchsorted(k, k, side="left")        # first reading of each one's keyframe
            j = np.arange(k.size) - start
            base = b.start + j * b.width
            rows = k - k_first
            P[rows, base] = f - (k - 1)
            for c in range(b.sensor.dim):
                P[rows, base + 1 + c] = yy[:, c]
            if b.tau:
                tau = efforts(tt)
                for c in range(self.lay.n):
                    P[rows, base + 1 + b.sensor.dim + c] = tau[:, c]
        return P

    def _causal(self, X: np.ndarray, P: np.ndarray, start: int, info: np.ndarray | None, prior) -> np.ndarray:
        """Fill X[start:] with a causal pass: a square-root information filter over the chain
        (each step linearised at the prediction from x_{k-1}, x_{k-1} eliminated by QR, the
        marginal of x_k kept: the online estimator's filter without its window). ``info``: the
        square-root information of X[start - 1] (None: start from ``prior`` at keyframe 0).
        Returns the square-root information of the last keyframe."""
        step = self.fn_step
        T = self._transition
        D = X.shape[1]
        H = self.fn_layout.head
        qr = scipy.linalg.qr
        if info is None:
            mean, S = prior
            x = X[0]
            r, J0, J1 = step(x, x, P[0])
            A = np.vstack((S, J0[H:] + J1[H:]))
            b = -np.concatenate((S @ (x - mean), r[H:]))
            Rf = qr(np.column_stack((A, b)), mode="r", check_finite=False)[0]
            info = np.triu(Rf[:D, :D])
            X[0] = x + scipy.linalg.solve_triangular(info, Rf[:D, D], check_finite=False)
            start = 1
        R = self.fn_layout.R
        M = np.zeros((max(D + R, 2 * D + 1), 2 * D + 1), order="F")   # [info 0 0; J0 J1 -r], QR in place
        upper = np.triu(np.ones((D, D)))       # R11 = upper triangle of the QR's block (below: reflectors)
        pad = M.shape[0] > D + R
        info = np.asfortranarray(info)
        geqrf = scipy.linalg.lapack.dgeqrf
        trtrs = scipy.linalg.lapack.dtrtrs
        isfinite = math.isfinite
        for k in range(max(start, 1), X.shape[0]):
            x0 = X[k - 1]
            x = T @ x0
            r, J0, J1 = step(x0, x, P[k])
            M[:D, :D] = info
            M[:D, D:] = 0.0
            M[D:D + R, :D] = J0
            M[D:D + R, D:2 * D] = J1
            M[D:D + R, 2 * D] = -r
            if pad:
                M[D + R:] = 0.0
            Rf = geqrf(M, overwrite_a=1)[0]          # (in M's storage: next step refills it)
            R11 = Rf[D:2 * D, D:2 * D] * upper
            dx, ok = trtrs(R11, Rf[D:2 * D, 2 * D])
            if ok != 0 or not isfinite(dx @ dx):
                dx = np.zeros(D)
            X[k] = x + dx
            info = R11
        return info

    def _linearize(self, X: np.ndarray, P: np.ndarray, prior, r: np.ndarray, Jt: np.ndarray | None) -> float:
        """Every step's rows at X into r (and Jt, unless None) (step 0: x0 = x1, its head rows
        replaced by the prior); returns the cost (sum of squares)."""
        X0 = np.empty_like(X)
        X0[1:] = X[:-1]
        X0[0] = X[0]
        if Jt is None:
            self._mapped.residuals(X0, X, P, r)
        else:
            self._mapped.evaluate(X0, X, P, r, Jt)
        H = self.fn_layout.head
        mean, S = prior
        rp = S @ (X[0] - mean)
        cost = float(np.einsum("ij,ij->", r[1:], r[1:])) + float(r[0, H:] @ r[0, H:]) + float(rp @ rp)
        return cost if math.isfinite(cost) and (Jt is None or np.all(np.isfinite(Jt))) else math.inf

    def _buffers(self, K: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """r, r_candidate (K, R) and Jt (K, 2D, R), kept from window to window (a window's
        Jacobians are the smoother's largest array: touching new memory for each costs more
        than filling it)."""
        R, D = self.fn_layout.R, self.lay.dim
        have = self._scratch
        if have is None or have[0].shape[0] < K or have[0].shape[1] != R:
            have = self._scratch = (np.empty((K, R)), np.empty((K, R)), np.empty((K, 2 * D, R)))
        return have[0][:K], have[1][:K], have[2][:K]

    def _solve(self, X: np.ndarray, r: np.ndarray, Jt: np.ndarray, prior, damping: float) -> np.ndarray | None:
        """The Gauss-Newton (damping > 0: Levenberg-Marquardt) step of the chain, from GTSAM."""
        K, D = X.shape
        H = self.fn_layout.head
        mean, S = prior
        g = gtsam.GaussianFactorGraph()
        units: dict[int, object] = {}

        def unit(n: int):
            u = units.get(n)
            if u is None:
                u = units[n] = gtsam.noiseModel.Unit.Create(n)
            return u
        rp = S @ (X[0] - mean)
        J0u = Jt[0, :D, H:].T + Jt[0, D:, H:].T
        A = np.vstack((S, J0u))
        b = -np.concatenate((rp, r[0, H:]))
        g.add(gtsam.JacobianFactor(key(0), A, b, unit(b.size)))
        R = r.shape[1]
        nb = -r
        u = unit(R)
        keys = [key(k) for k in range(K)]
        add = g.add
        for k in range(1, K):                   # Jt[k, :D].T is J0 column-major, as Eigen takes it
            J = Jt[k]
            add(keys[k - 1], J[:D].T, keys[k], J[D:].T, nb[k], u)
        if damping > 0:
            diag = np.einsum("kir,kir->ki", Jt[:, D:], Jt[:, D:])
            diag[:-1] += np.einsum("kir,kir->ki", Jt[1:, :D], Jt[1:, :D])
            d = np.sqrt(damping * np.maximum(diag, 1e-9))
            z = np.zeros(D)
            uD = unit(D)
            for k in range(K):
                add(keys[k], np.diag(d[k]), z, uD)
        ordering = gtsam.Ordering()
        for k in keys:
            ordering.push_back(k)
        try:                        # sequential elimination in chain order, then back substitution
            delta = g.eliminateSequential(ordering).optimize()
        except RuntimeError:
            return None
        dx = np.asarray(delta.vector(keys)).reshape(K, D)
        return dx if np.all(np.isfinite(dx)) else None

    def _model_cost(self, X: np.ndarray, dx: np.ndarray, r: np.ndarray, Jt: np.ndarray, prior) -> float:
        """The cost the linearisation (r, Jt at X) predicts at X + dx."""
        D = X.shape[1]
        H = self.fn_layout.head
        mean, S = prior
        e = r[1:] + np.einsum("kdr,kd->kr", Jt[1:, :D], dx[:-1]) + np.einsum("kdr,kd->kr", Jt[1:, D:], dx[1:])
        e0 = r[0, H:] + (Jt[0, :D, H:] + Jt[0, D:, H:]).T @ dx[0]
        ep = S @ (X[0] + dx[0] - mean)
        return float(np.einsum("kr,kr->", e, e) + e0 @ e0 + ep @ ep)

    def _solve_window(self, X: np.ndarray, P: np.ndarray, prior) -> WindowReport:
        """Iterate Gauss-Newton (LM when a step raises the cost) on the chain X (in place)."""
        opt = self.options
        K = X.shape[0]
        r, r_c, Jt = self._buffers(K)
        t0 = time.perf_counter()
        cost = self._linearize(X, P, prior, r, Jt)
        self.timings["linearize"] += time.perf_counter() - t0
        initial = cost
        damping = 0.0
        it = 0
        converged = False
        while it < opt.max_iterations and math.isfinite(cost):
            it += 1
            t0 = time.perf_counter()
            dx = self._solve(X, r, Jt, prior, damping)
            self.timings["solve"] += time.perf_counter() - t0
            if dx is None:
                damping = max(damping * 10.0, 1e-6)
                if damping > 1e8:
                    break
                continue
            cand = X + dx
            self._project(cand)
            t0 = time.perf_counter()
            cost_c = self._linearize(cand, P, prior, r_c, None)
            self.timings["linearize"] += time.perf_counter() - t0
            change = (cost - cost_c) / max(cost, 1e-300)
            # the linear model's cost at the step: when the new cost is what it predicted, the
            # problem is linear enough here that another step would not lower it further
            model = self._model_cost(X, dx, r, Jt, prior) if damping == 0.0 else -math.inf
            accepted = cost_c <= cost
            if accepted:
                X[:] = cand
                r, r_c, cost = r_c, r, cost_c
                damping = damping / 10.0 if damping > 1e-6 else 0.0
            if abs(change) < opt.tolerance or abs(cost_c - model) < opt.tolerance * cost_c:
                converged = True                # (a rise this small is rounding: at the minimum)
                break
            if accepted:                        # the Jacobians at the new states, for the next step
                t0 = time.perf_counter()
                cost = self._linearize(X, P, prior, r, Jt)
                self.timings["linearize"] += time.perf_counter() - t0
            else:
                damping = max(damping * 10.0, 1e-4)
                if damping > 1e8:
                    converged = True        # no step lowers the cost: at a minimum
                    break
        return WindowReport(0, K - 1, it, initial, cost, converged)

    # ----------------------------------------------------------------------------------------
    def windows(self, readings: Readings, x_start: np.ndarray | None = None,
                x_init: np.ndarray | None = None) -> Iterator[tuple[int, np.ndarray, "SmoothingResult"]]:
        """Smooth ``readings`` window by window; yields (first keyframe, states (N, D)) of the
        keyframes each window settles, in order, with the result so far (its ``x`` is filled
        at the end). ``x_start``: the first keyframe's prior mean (default: the config's
        initial pose, from the first encoder readings); ``x_init`` (K, D): initial states
        instead of the causal pass."""
        c0, w0 = time.process_time(), time.perf_counter()
        opt = self.options
        data, rejected = self._clean(readings)
        measuring, t0, K = self._grid(data, rejected)
        h = self.h
        counts = {}
        used = {}
        for n in measuring:
            t = data[n][0]
            k = np.maximum(0, np.ceil((t - t0) / h - 1e-9)).astype(np.int64)
            counts[n] = int(np.bincount(k).max())
            used[n] = int(t.size)
        fn = self._step_function_for(counts)
        self.fn_step, self.fn_layout = fn.step, fn.layout
        self._mapped = MappedSteps(fn, min(MAP_BLOCK, max(K, 1)), opt.threads)
        self._project = ClosureProjection(fn, min(8 * MAP_BLOCK, max(K, 1)))
        cmd = {self.mech.index[command_joint(j)]: data[j] for j in data if command_joint(j) is not None}
        for j in data:
            if command_joint(j) is not None:
                used[j] = int(data[j][0].size)
        n = self.lay.n

        def efforts(ts: np.ndarray) -> np.ndarray:
            tau = np.zeros((np.size(ts), n))
            for jj, (tc, yc) in cmd.items():
                tau[:, jj] = np.interp(ts, tc, yc[:, 0])
            return tau
        x_start = self._initial_state(data, t0) if x_start is None else np.asarray(x_start, float)
        S0 = prior_information(self.lay.prior_sigmas(self.mech, self.cfg))
        W = max(2, int(round(opt.window / h)))
        O = min(W - 1, int(round(opt.overlap / h)))
        per_keyframe = 8.0 * 2 * self.lay.dim * fn.layout.R         # bytes of one step's Jacobians
        W = min(W, max(2, 4 * O, int(opt.jacobian_mb * 1e6 / per_keyframe)))
        O = min(W - 1, O)
        self.timings = {"causal": 0.0, "linearize": 0.0, "solve": 0.0, "total": 0.0}
        result = SmoothingResult(t0, h, np.zeros((0, self.lay.dim)), used, rejected, [], self.timings, 0.0,
                                 efforts)
        a = 0
        carry: np.ndarray | None = None           # previous window's states from a on
        info: np.ndarray | None = None            # the causal filter's information at carry's end
        prior = (x_start, S0)
        while True:
            b = min(K, a + W)
            if K - b <= O:
                b = K                                 # (no window shorter than the overlap at the end)
            P = self._parameters(fn, data, t0, a, b, efforts)
            X = np.zeros((b - a, self.lay.dim))
            t1 = time.perf_counter()
            if x_init is not None:
                X[:] = x_init[a:b]
            else:
                done = 0
                if carry is not None:
                    done = min(carry.shape[0], b - a)
                    X[:done] = carry[:done]
                else:
                    X[0] = prior[0]
                info = self._causal(X, P, done, info, prior)
            self.timings["causal"] += time.perf_counter() - t1
            rep = self._solve_window(X, P, prior)
            rep.first, rep.last = a, b - 1
            result.windows.append(rep)
            last = b == K
            keep_to = b if last else b - O // 2         # settle [a + O//2 (0 for the first), keep_to)
            keep_from = a if a == 0 else a + (O - O // 2)
            keep_from = max(keep_from, 0)
            if self.window_solved is not None:
                self.window_solved(SolvedWindow(a, X, P, prior, slice(keep_from - a, keep_to - a)))
            self.timings["total"] = time.perf_counter() - w0
            result.cpu = time.process_time() - c0
            yield keep_from, X[keep_from - a:keep_to - a].copy(), result
            if last:
                break
            a_next = b - O
            carry = X[a_next - a:].copy()
            # the next window starts at this one's smoothed state there, with the config's loose
            # prior (the causal filter's marginal there, tried instead, is overconfident: worse)
            prior = (carry[0].copy(), S0)
            a = a_next
        self.timings["total"] = time.perf_counter() - w0
        result.cpu = time.process_time() - c0

    def smooth(self, readings: Readings, x_start: np.ndarray | None = None,
               x_init: np.ndarray | None = None) -> SmoothingResult:
        """Smooth a whole run (see :meth:`windows`); the result holds every keyframe's state."""
        parts = []
        result = None
        for _, X, result in self.windows(readings, x_start, x_init):
            parts.append(X)
        result.x = np.concatenate(parts) if parts else np.zeros((0, self.lay.dim))
        return result

    def estimates(self, result: SmoothingResult, first_keyframe: int, X: np.ndarray,
                  key_offset: int = 0) -> "SmoothedEstimates":
        """Estimates (lagged = smoothed) of keyframes first_keyframe.. with states X (keyframe
        numbers + ``key_offset``): a sequence that makes each Estimate when it is asked for."""
        lay, mech = self.lay, self.mech
        ks = np.arange(first_keyframe, first_keyframe + X.shape[0])
        ts = result.t0 + result.h * ks
        eff = result.efforts(ts)
        if lay.n_u:
            eff = eff + X[:, lay.U] @ mech.B.T
        return SmoothedEstimates(ts, ks + key_offset, X, eff, lay)
