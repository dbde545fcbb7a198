"""The newest keyframe's Gauss-Newton refinement (mbfg_ros/estimation/linearization.py): when it
runs, and its least-squares solve (LAPACK's gelsy called directly gives what scipy's lstsq gives,
bit for bit: the estimator's estimates must not move)."""
from __future__ import annotations

import numpy as np
import scipy.linalg

from conftest import CONFIG
from mbfg_ros.estimation.estimator import Estimator
from mbfg_ros.estimation.linearization import GelsySolver
from mbfg_ros.model.mechanism import load_mechanism
from mbfg_ros.sim.forward import simulate
from mbfg_ros.sim.scenario import Scenario
from mbfg_ros.sim.sensors import SensorOptions, synthesize


def test_the_refinement_trigger_reads_the_configured_dynamics_noise():
    """An estimator whose model uncertainty is scaled (a candidate of the online search, or the
    scale it holds) judges a poor prediction in sigmas of the configured ``noise.dynamics``: at a
    scale of 0.03 the four-bar refined 506 of 600 keyframes' predictions (4 times as many as at
    scale 1), for the same estimate; now as many as at scale 1."""
    mech = load_mechanism(CONFIG / "four_bar.yaml")
    traj = simulate(mech, Scenario(duration=3.0, input_profile="sine", input_amplitude=2.0, input_frequency=0.5,
                                   input_start=0.0, initial_dof_offset=0.05), progress=False)
    samples = synthesize(traj, SensorOptions(seed=3), config_mechanism=mech)
    got = {}
    for scale in (1.0, 0.03):
        est = Estimator(mech, freeze_gc=False, model_scale=scale)
        out = []
        for s in samples:
            est.add_sample(s.sensor, s.stamp, s.value)
            out += est.pop_estimates()
        t = np.array([e.stamp for e in out])
        q = np.array([e.q[mech.dof[0]] for e in out])
        sel = t > 1.0
        rmse = np.sqrt(np.mean((q[sel] - np.interp(t[sel], traj.t, traj.q[:, mech.dof[0]])) ** 2))
        got[scale] = (est.health.gauss_newton_iterations, rmse)
    (n1, e1), (n3, e3) = got[1.0], got[0.03]
    assert n1 > 0 and n3 <= 1.5 * n1, got              # measured 126 and 126
    assert e3 < 1.1 * e1, got                          # measured 1.04 and 1.05 mrad


def test_gelsy_solver_matches_scipy_lstsq_exactly():
    solve = GelsySolver()
    rng = np.random.default_rng(3)
    for m, n in [(20, 12), (40, 28), (27, 27), (5, 8), (60, 21)]:
        for trial in range(6):
            A = rng.standard_normal((m, n)) * 10.0 ** rng.uniform(-6, 6, n)   # badly scaled columns
            if trial % 3 == 0:
                A[:, 1] = 2.0 * A[:, 0]                                         # rank-deficient
            if trial % 2:
                A = np.asfortranarray(A)                                        # (the step's J1 is a transposed view)
            b = rng.standard_normal(m)
            A0, b0 = A.copy(), b.copy()
            x = solve(A, b)
            assert np.array_equal(x, scipy.linalg.lstsq(A, b, lapack_driver="gelsy", check_finite=False)[0])
            assert np.array_equal(A, A0) and np.array_equal(b, b0)              # inputs untouched
