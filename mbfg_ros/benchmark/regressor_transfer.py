"""Does a model identified on one recorded run explain the others? A plain least-squares check,
independent of `mbfg identify`.

The effort of an open chain is linear in its parameters:
tau = Y(q, v, a) pi + diag(a) armature + diag(v) viscous + diag(tanh(v / v_c)) coulomb + offset,
Y pinocchio's joint torque regressor (:func:`pinocchio.computeJointTorqueRegressor`: each
body's 10 inertial parameters in its joint's frame, :meth:`pinocchio.Inertia.toDynamicParameters`),
v_c the config's Coulomb velocity scale. :func:`effort_regressor` builds the columns at the
zero-phase Savitzky-Golay derivatives of the encoder positions (the offline baseline of
:mod:`.effort_scoring`); :func:`fit_parameters` fits a chosen set of columns to one or more runs'
recorded efforts by least squares (each run's joint weighted by 1 / the RMS of its recorded
effort; the others at the config's values; the minimum-norm change from the config's values in
scaled columns, so that the combinations a run cannot tell apart stay); :func:`transfer_ratios`
scores a fit on runs it did not see against the config's own parameters.

Units: s, rad (or m), N m (or N); the inertial parameters kg, kg m, kg m^2.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from mbfg_ros.benchmark.effort_scoring import ZERO_PHASE_WINDOW, normalised_rmse, savgol_derivatives
from mbfg_ros.model.mechanism import Mechanism

INERTIAL_FIELDS = ("mass", "mx", "my", "mz", "ixx", "ixy", "iyy", "ixz", "iyz", "izz")
"""pinocchio's order of a body's 10 dynamic parameters (first moments m c, inertia about the
joint frame's origin)."""
DRIVE_FIELDS = ("armature", "viscous", "coulomb", "offset")
"""The per-joint columns after the bodies' (each field for every joint in turn)."""


@dataclass
class RunRegressor:
    """One run's regressor ``Y`` (N, n, p) at its usable samples and the efforts ``tau`` (N, k)
    of the joints ``rows`` (indices into the DOF) recorded there."""
    Y: np.ndarray
    tau: np.ndarray
    rows: list[int]


def parameter_names(mech: Mechanism) -> list[str]:
    """The columns' names: <link>.<inertial field> per moving body (the link its joint carries),
    then <joint>.<drive field>."""
    model = mech.model
    links = [next(f.name for f in model.frames if f.parentJoint == j and f.type == pin.FrameType.BODY)
             for j in range(1, model.njoints)]
    return ([f"{b}.{f}" for b in links for f in INERTIAL_FIELDS]
            + [f"{j}.{f}" for f in DRIVE_FIELDS for j in mech.joint_names])


def config_parameters(mech: Mechanism) -> np.ndarray:
    """The config's values of the columns (:func:`parameter_names`)."""
    inertial = [mech.model.inertias[j].toDynamicParameters() for j in range(1, mech.model.njoints)]
    return np.concatenate(inertial + [mech.armature, mech.viscous, mech.coulomb, mech.offset])


def effort_regressor(mech: Mechanism, t: np.ndarray, q: np.ndarray, tau: np.ndarray, rows: list[int],
                     skip: float = 1.0, window: int = ZERO_PHASE_WINDOW) -> RunRegressor:
    """The regressor of a run with encoder positions ``q`` (N, n) at ``t`` (N,) s and recorded
    efforts ``tau`` (N, len(rows)) of the DOF ``rows``, at the samples from ``skip`` s after
    the first where the centred Savitzky-Golay ``window`` fits and the efforts are finite."""
    if mech.m:
        raise ValueError("the effort regressor is for open chains (this rig has closures)")
    m = savgol_derivatives(t, q, window, causal=False)
    ok = (np.all(np.isfinite(m.a), axis=1) & np.all(np.isfinite(tau), axis=1) & (t >= t[0] + skip))
    qs, vs, acc = m.q[ok], m.v[ok], m.a[ok]
    n, nb = mech.n, mech.model.njoints - 1
    data = mech.model.createData()
    Y = np.zeros((qs.shape[0], n, 10 * nb + 4 * n))
    for i in range(qs.shape[0]):
        Y[i, :, :10 * nb] = pin.computeJointTorqueRegressor(mech.model, data, qs[i], vs[i], acc[i])
    th = np.tanh(vs / mech.coulomb_velocity)
    for j in range(n):
        for k, column in enumerate((acc[:, j], vs[:, j], th[:, j], np.ones(qs.shape[0]))):
            Y[:, j, 10 * nb + k * n + j] = column
    return RunRegressor(Y[:, rows, :], np.asarray(tau, float)[ok], list(rows))


def predicted(run: RunRegressor, theta: np.ndarray) -> np.ndarray:
    """(N, k) the efforts of parameters ``theta`` on ``run``."""
    return run.Y @ theta


def fit_parameters(runs: list[RunRegressor], theta0: np.ndarray, columns: list[int]) -> np.ndarray:
    """``theta0`` with ``columns`` fitted to ``runs`` by least squares (see the module docstring)."""
    A, b = [], []
    for r in runs:
        w = 1.0 / np.sqrt(np.mean(r.tau ** 2, axis=0))
        A.append((r.Y[:, :, columns] * w[None, :, None]).reshape(-1, len(columns)))
        b.append(((r.tau - predicted(r, theta0)) * w).reshape(-1))
    A, b = np.concatenate(A), np.concatenate(b)
    s = np.linalg.norm(A, axis=0)
    s[s == 0] = 1.0
    d = np.linalg.lstsq(A / s, b, rcond=1e-8)[0] / s
    theta = theta0.copy()
    theta[columns] += d
    return theta


def transfer_ratios(theta: np.ndarray, theta0: np.ndarray, runs: list[RunRegressor]) -> np.ndarray:
    """(len(runs), k) each run's normalised effort RMSE with ``theta`` over that with ``theta0``
    (below 1: ``theta`` explains the run better)."""
    return np.array([normalised_rmse(predicted(r, theta), r.tau) / normalised_rmse(predicted(r, theta0), r.tau)
                     for r in runs])
