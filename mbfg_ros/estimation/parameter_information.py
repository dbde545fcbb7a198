"""What a recording tells about the parameters, window by window (:mod:`.identification`): the
whitened fit of each kind of row (:class:`RowFit`), one identification pass's figures
(:class:`Pass`), the step's rows as a function of the parameters (:class:`StepLinearization`) and
the parameters' information matrix and gradient accumulated over the smoother's windows, with the
states eliminated (:class:`ParameterInformation`). No ROS.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import gtsam
import numpy as np
import scipy.linalg

from mbfg_ros.errors import MbfgError
from mbfg_ros.estimation.mapped_function import mapped_function
from mbfg_ros.estimation.mapped_steps import MAP_BLOCK
from mbfg_ros.estimation.smoother import key
from mbfg_ros.estimation.smoothing_io import SolvedWindow

if TYPE_CHECKING:
    from mbfg_ros.estimation.identification import Identifier

THETA = gtsam.symbol("p", 0)
"""The GTSAM key of the parameters."""


class IdentificationError(MbfgError):
    """The recording cannot identify what was asked (no parameter left, a failed solve)."""

@dataclass
class RowFit:
    """Whitened residuals of one kind of row over the recording: ``sum_squares`` and ``count``
    (rows that carry a reading or an equation); ``sigma``: the noise they are whitened by, in
    ``unit``; for the equations of motion also the known effort's sum of squares (its RMS
    scales the effort fit)."""
    name: str
    kind: str                   # dynamics | encoder | gyro | load_cell
    unit: str
    sigma: float
    sum_squares: float = 0.0
    count: int = 0
    effort_squares: float = 0.0

    @property
    def whitened_rms(self) -> float:
        return math.sqrt(self.sum_squares / self.count) if self.count else math.nan

    @property
    def rms(self) -> float:
        """RMS in the row's unit (whitened RMS x sigma)."""
        return self.whitened_rms * self.sigma

    @property
    def effort_rms(self) -> float:
        return math.sqrt(self.effort_squares / self.count) if self.count else math.nan


@dataclass
class Pass:
    """One pass over the recordings: the parameters' information at the smoothed states."""
    theta: np.ndarray
    X: list[np.ndarray]         # per recording: the smoothed states (K, D)
    H: np.ndarray               # (p, p) information of theta, states marginalised
    g: np.ndarray               # (p,) -J^T r reduced: the Gauss-Newton step solves H d = g
    cost: float                 # sum of squared whitened rows (the priors' included)
    rows: int
    fits: dict[str, RowFit]
    excitation: np.ndarray      # (n,) per joint: RMS acceleration / RMS of its standard deviation
    sigma: np.ndarray           # (n,) the equations of motion's noise per joint (N m or N)


def state_covariances(conditionals: list[tuple[int, np.ndarray, np.ndarray]]) -> np.ndarray:
    """(K, D, D) marginal covariances of a chain's keyframes at fixed parameters, from its
    conditionals R_k x_k + S_k x_{k+1} (+ T_k theta) = d_k in chain order (backward:
    Sigma_k = R_k^-1 R_k^-T + G_k Sigma_{k+1} G_k^T, G_k = -R_k^-1 S_k)."""
    K = len(conditionals)
    D = conditionals[0][1].shape[0]
    cov = np.zeros((K, D, D))
    eye = np.eye(D)
    for i in range(K - 1, -1, -1):
        _, R, S = conditionals[i]
        Ri = scipy.linalg.solve_triangular(R, eye, check_finite=False)
        cov[i] = Ri @ Ri.T
        if i < K - 1:
            G = -Ri @ S
            cov[i] += G @ cov[i + 1] @ G.T
    return cov


class StepLinearization:
    """The rows, the state Jacobian [J0 J1] and the parameter Jacobian of many steps, from the
    step function's compiled rows (its first, second and sixth outputs) mapped over blocks of
    :data:`~.mapped_steps.MAP_BLOCK` steps (``Function.map``)."""

    def __init__(self, rows) -> None:
        self.D, self.R, self.p = rows.dim, rows.R, rows.parameters
        self.B = MAP_BLOCK
        self.f = mapped_function(rows.compiled or rows.fn, self.B)

    def rows(self, X0: np.ndarray, X1: np.ndarray, P: np.ndarray):
        N, B, D, R, p = X0.shape[0], self.B, self.D, self.R, self.p
        r, Jt, Jth = np.empty((N, R)), np.empty((N, 2 * D, R)), np.empty((N, p, R))
        for s in range(0, N, B):
            e = min(N, s + B)
            c = e - s
            idx = np.minimum(np.arange(s, s + B), e - 1)          # (a short block padded with its last step)
            out = self.f(X0[idx].T, X1[idx].T, P[idx].T)
            r[s:e] = np.asarray(out[0]).T[:c]
            # column-major (R, 2D B) and (R, p B): block b's Jacobian is columns b*2D .. (b+1)*2D
            Jt[s:e] = np.asarray(out[1]).T.reshape(B, 2 * D, R)[:c]
            Jth[s:e] = np.asarray(out[5]).T.reshape(B, p, R)[:c]
        return r, Jt, Jth


class ParameterInformation:
    """Accumulates a pass's reduced information over the smoother's windows (see the module
    docstring, step 2): a GTSAM graph per block of steps, the keyframes eliminated in chain
    order, the factor on (last keyframe, theta) carried to the next block."""

    def __init__(self, ident: "Identifier", theta: np.ndarray, fits: dict[str, RowFit]) -> None:
        self.ident = ident
        self.theta = theta
        self.p = theta.size            # (the parameters and the dynamics weights)
        self.conditionals: list[tuple[int, np.ndarray, np.ndarray]] = []     # (keyframe, R_k, S_k)
        self.carried: gtsam.JacobianFactor | None = None
        self.carried_at: np.ndarray | None = None          # the state the carried factor is linear at
        self.carried_key = -1
        self.cost = 0.0
        self.rows = 0
        self.fits = fits

    # ----------------------------------------------------------------------------------------
    def add_window(self, w: SolvedWindow) -> None:
        s0, e0 = w.settled.start, w.settled.stop
        X, P = w.X, w.P
        D = X.shape[1]
        if self.carried is None:
            # the run's start: the prior on its first keyframe and step 0's rows at x0 = x1
            mean, S = w.prior
            k0 = w.first + s0
            r, Jt, Jth = self._rows(w, X[s0:s0 + 1], X[s0:s0 + 1], P[s0:s0 + 1])
            H = self.ident.head(w)
            A = np.vstack((S, (Jt[0, :D, H:] + Jt[0, D:, H:]).T))
            At = np.vstack((np.zeros((S.shape[0], self.p)), Jth[0, :, H:].T))
            b = -np.concatenate((S @ (X[s0] - mean), r[0, H:]))
            self._tally(r[0:1, H:], P[s0:s0 + 1], X[s0:s0 + 1], head=True)
            self.cost += float(b @ b)
            self.rows += b.size
            self.carried = gtsam.JacobianFactor(key(k0), A, THETA, At, b, self._unit(b.size))
            self.carried_key, self.carried_at = key(k0), X[s0].copy()
            start = s0 + 1
        else:
            # the previous window's last settled keyframe is this window's X[s0 - 1]: move the
            # carried factor to this window's linearisation point there
            if self.carried_key != key(w.first + s0 - 1):
                raise IdentificationError("internal: the windows' settled keyframes are not contiguous")
            self._move_carried(X[s0 - 1])
            start = s0
        for b0 in range(start, e0, self.ident.options.block):
            b1 = min(e0, b0 + self.ident.options.block)
            self._block(w, b0, b1)

    def _rows(self, w: SolvedWindow, X0, X1, P):
        """Rows, state Jacobians and parameter Jacobians of the steps (X0[i] -> X1[i], P[i]):
        r (N, R), Jt (N, 2D, R), Jt_theta (N, p, R), from the window's step function mapped over
        blocks of steps."""
        return self.ident.linearization().rows(X0, X1, P)

    @staticmethod
    def _unit(n: int):
        return gtsam.noiseModel.Unit.Create(n)

    def _move_carried(self, x_new: np.ndarray) -> None:
        """The carried factor, linear at ``carried_at``, as a factor linear at ``x_new`` (the same
        keyframe): with dz_old = dz_new + d, d = (x_new - carried_at, 0), the information vector
        becomes eta - Lambda d."""
        g = gtsam.GaussianFactorGraph()
        g.add(self.carried)
        self._carry(g, self.carried_key, x_new, self.carried_at)

    def _block(self, w: SolvedWindow, b0: int, b1: int) -> None:
        """Steps b0..b1-1 (window rows; step k joins X[k-1] and X[k]) into the chain."""
        X, P = w.X, w.P
        D = X.shape[1]
        r, Jt, Jth = self._rows(w, X[b0 - 1:b1 - 1], X[b0:b1], P[b0:b1])
        self._tally(r, P[b0:b1], X[b0:b1], head=False)
        self.cost += float(np.einsum("kr,kr->", r, r))
        self.rows += r.size
        g = gtsam.GaussianFactorGraph()
        g.add(self.carried)
        u = self._unit(r.shape[1])
        first = w.first
        keys = [key(first + k) for k in range(b0 - 1, b1)]
        for i in range(b1 - b0):
            J = Jt[i]
            g.add(gtsam.JacobianFactor(keys[i], J[:D].T, keys[i + 1], J[D:].T, THETA, Jth[i].T, -r[i], u))
        order = gtsam.Ordering()
        for k in keys[:-1]:
            order.push_back(k)
        bn, rest = g.eliminatePartialSequential(order)
        self._keep(bn)
        self._carry(rest, keys[-1], X[b1 - 1])

    def _keep(self, bn: gtsam.GaussianBayesNet) -> None:
        """Each eliminated keyframe's conditional (R_k, S_k on the next keyframe; theta's part
        is not needed at fixed parameters) and its share of the log-determinant."""
        for i in range(bn.size()):
            c = bn.at(i)
            k = c.keys()
            R = np.array(c.R(), copy=True)          # (the Bayes net owns its memory)
            D = R.shape[0]
            S = np.array(c.S(), copy=True)
            col = 0
            Sn = np.zeros((D, D))
            for j, kk in enumerate(k[1:]):
                width = D if kk != THETA else self.p
                if kk != THETA:
                    Sn = S[:, col:col + width]
                col += width
            self.conditionals.append((gtsam.Symbol(k[0]).index(), R, Sn))

    def _carry(self, rest: gtsam.GaussianFactorGraph, k: int, x: np.ndarray, was: np.ndarray | None = None) -> None:
        """The factors left on (keyframe k, theta) after an elimination, as one Hessian factor
        linear at x (``was``: the state they are linear at, if not x)."""
        order = gtsam.Ordering()
        order.push_back(k)
        order.push_back(THETA)
        aug = rest.augmentedHessian(order)
        D = x.size
        L, eta, c = aug[:-1, :-1], aug[:-1, -1].copy(), float(aug[-1, -1])
        if was is not None:
            d = np.zeros(eta.size)
            d[:D] = x - was
            Ld = L @ d
            eta, c = eta - Ld, c - 2.0 * float(aug[:-1, -1] @ d) + float(d @ Ld)
        self.carried = gtsam.HessianFactor(k, THETA, L[:D, :D], L[:D, D:], eta[:D], L[D:, D:], eta[D:], c)
        self.carried_key, self.carried_at = k, x.copy()

    def _tally(self, r: np.ndarray, P: np.ndarray, X: np.ndarray, head: bool) -> None:
        """Whitened sums of squares of the dynamics rows per joint and of each sensor's rows,
        and of the efforts (known, and the estimated inputs)."""
        ident = self.ident
        L, lay = ident.smoother.fn_layout, ident.smoother.lay
        off = L.head if head else 0
        if L.dynamics_rows:
            d = r[:, L.dynamics_start - off:L.dynamics_start - off + L.dynamics_rows]
            tau = np.zeros((r.shape[0], lay.n))
            if L.tau is not None:
                tau += P[:, L.tau]
            if lay.n_u:
                tau += X[:, lay.U] @ ident.mech.B.T
            for j, name in enumerate(ident.mech.joint_names):
                f = self.fits[f"dynamics:{name}"]
                f.sum_squares += float(d[:, j] @ d[:, j])
                f.count += d.shape[0]
                f.effort_squares += float(tau[:, j] @ tau[:, j])
        for b in L.blocks:
            f = self.fits[b.sensor.name]
            rows = r[:, b.rows.start - off:b.rows.stop - off]
            f.sum_squares += float(np.einsum("kr,kr->", rows, rows))
            active = P[:, b.start:b.start + b.slots * b.width:b.width] >= 0      # the slots' step fractions
            f.count += int(np.count_nonzero(active)) * b.sensor.rows

    def finish(self) -> tuple[np.ndarray, np.ndarray]:
        """(H, g) of theta: the last keyframe eliminated from the carried factor."""
        g = gtsam.GaussianFactorGraph()
        g.add(self.carried)
        order = gtsam.Ordering()
        order.push_back(self.carried_key)
        bn, rest = g.eliminatePartialSequential(order)
        self._keep(bn)
        aug = rest.augmentedHessian()
        p = self.p
        return np.asarray(aug[:p, :p]), np.asarray(aug[:p, p])


