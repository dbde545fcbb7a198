"""Batch smoothing: Levenberg-Marquardt over many steps with the estimator's own factors.

The reference smoother over a whole recording (benchmark, tests): :func:`smooth_recording`
runs the online estimator keeping every step's parameters, then minimizes the whole graph
starting from the online trajectory. Each iteration linearizes every step (the estimator's own
compiled step function), builds a GTSAM GaussianFactorGraph of their JacobianFactors plus
Marquardt damping, and solves it by sparse elimination.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import gtsam
import numpy as np

from mbfg_ros.estimation.smoother import key
from mbfg_ros.estimation.step_function import LinearizationError


@dataclass
class RecordedStep:
    """One step of a recording: keyframe k, its parameters p, and for the first step of a run
    (``unary``) the prior's mean and sigma."""
    k: int
    p: np.ndarray
    unary: bool
    prior: tuple[np.ndarray, np.ndarray] | None


@dataclass
class BatchResult:
    x: dict[int, np.ndarray]                    # keyframe -> state
    linearization: dict[int, tuple]             # keyframe -> (r, J0, J1) at the solution
    cost: float
    initial_cost: float
    iterations: int
    converged: bool


def _linearize_all(linearize, steps: list[RecordedStep], x: dict[int, np.ndarray]):
    lin = {}
    cost = 0.0
    for s in steps:
        x0 = None if s.unary else x[s.k - 1]
        r, J0, J1 = linearize(x0, x[s.k], s.p, s.prior)
        lin[s.k] = (r, J0, J1)
        cost += float(r @ r)
    return lin, cost


def levenberg_marquardt(linearize, steps: list[RecordedStep], x_init: dict[int, np.ndarray], *,
                        prior: tuple[int, np.ndarray, np.ndarray] | None = None,
                        max_iterations: int = 50, relative_tolerance: float = 1e-6,
                        damping: float = 1e-4) -> BatchResult:
    """Minimize the sum of squared whitened residuals of ``steps`` over the keyframe states.

    ``linearize(x0, x1, p, prior) -> (r, J0, J1)`` gives a step's rows (Estimator.linearize).
    ``steps`` must be ordered; a step that is ``unary`` (no x0) starts a chain. ``prior``
    optionally adds (keyframe, mean, sqrt-information matrix) as a Gaussian prior.
    """
    x = {k: v.copy() for k, v in x_init.items()}

    def prior_rows(xx):
        k, mean, S = prior
        return S @ (xx[k] - mean), S

    lin, cost = _linearize_all(linearize, steps, x)
    if prior is not None:
        rp, _ = prior_rows(x)
        cost += float(rp @ rp)
    initial = cost
    mu = damping
    it = 0
    converged = False
    keys = sorted(x)
    while it < max_iterations:
        it += 1
        graph = gtsam.GaussianFactorGraph()
        diag = {k: np.zeros(x[k].size) for k in keys}
        for s in steps:
            r, J0, J1 = lin[s.k]
            unit = gtsam.noiseModel.Unit.Create(r.size)
            if s.unary:
                graph.add(gtsam.JacobianFactor(key(s.k), J1, -r, unit))
            else:
                graph.add(gtsam.JacobianFactor(key(s.k - 1), J0, key(s.k), J1, -r, unit))
                diag[s.k - 1] += np.einsum("ij,ij->j", J0, J0)
            diag[s.k] += np.einsum("ij,ij->j", J1, J1)
        if prior is not None:
            rp, S = prior_rows(x)
            graph.add(gtsam.JacobianFactor(key(prior[0]), S, -rp, gtsam.noiseModel.Unit.Create(rp.size)))
            diag[prior[0]] += np.einsum("ij,ij->j", S, S)
        while True:
            g = graph.clone()
            for k in keys:
                d = np.sqrt(mu * np.maximum(diag[k], 1e-9))
                g.add(gtsam.JacobianFactor(key(k), np.diag(d), np.zeros(d.size),
                                           gtsam.noiseModel.Unit.Create(d.size)))
            try:
                delta = g.optimize()
            except RuntimeError:
                mu *= 10.0
                if mu > 1e8:
                    return BatchResult(x, lin, cost, initial, it, False)
                continue
            cand = {k: x[k] + delta.at(key(k)) for k in keys}
            try:
                lin_c, cost_c = _linearize_all(linearize, steps, cand)
            except LinearizationError:
                cost_c = np.inf
            if prior is not None and np.isfinite(cost_c):
                rp, _ = prior_rows(cand)
                cost_c += float(rp @ rp)
            if cost_c < cost:
                decrease = (cost - cost_c) / max(cost, 1e-300)
                x, lin, cost = cand, lin_c, cost_c
                mu = max(mu / 3.0, 1e-12)
                if decrease < relative_tolerance:
                    converged = True
                break
            mu *= 5.0
            if mu > 1e8:
                converged = True          # no further decrease possible: at a minimum
                break
        if converged:
            break
    return BatchResult(x, lin, cost, initial, it, converged)


@dataclass
class SmoothedRecording:
    estimates: list                 # Estimate per keyframe (lagged=True), in time order
    online: list                    # the online (filtered) estimates the solve started from
    result: BatchResult


def smooth_recording(mech, samples: Iterable[tuple[str, float, object]], config=None, *,
                     initial_q=None, initial_v=None, max_iterations: int = 30) -> SmoothedRecording:
    """Batch (Levenberg-Marquardt) smoothing of a whole recording with the estimator's factors.

    ``samples``: (sensor name, stamp s, value) in arrival order, as for ``Estimator.add_sample``.
    """
    from mbfg_ros.estimation.estimator import Estimator
    est = Estimator(mech, config, initial_q=initial_q, initial_v=initial_v, record_steps=True,
                    freeze_gc=False)
    online = []
    for sensor, stamp, value in samples:
        est.add_sample(sensor, stamp, value)
        online.extend(est.pop_estimates())
    est.flush()
    online.extend(est.pop_estimates())
    steps = sorted((RecordedStep(*r) for r in est.recorded), key=lambda s: s.k)
    x = {e.keyframe: e.x for e in online}     # filtered states, then the better smoothed ones
    x.update(est.final_states)
    for k in est.smoother.keys:
        x[k] = est.smoother.estimate(k)
    recorded = {s.k for s in steps}
    x = {k: v for k, v in x.items() if k in recorded}
    result = levenberg_marquardt(est.linearize, steps, x, max_iterations=max_iterations)
    estimates = [est.estimate_of(k, result.x[k], lagged=True) for k in sorted(result.x)]
    return SmoothedRecording(estimates, online, result)
