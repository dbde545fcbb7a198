"""BatchForces equals the per-estimate forces (pinocchio) on every example rig."""
from __future__ import annotations

import numpy as np

from mbfg_ros.estimation.estimator import estimate_forces
from mbfg_ros.estimation.forces_batch import BatchForces
from mbfg_ros.estimation.layout import StateLayout
from mbfg_ros.estimation.outputs import Estimate
from mbfg_ros.model.assembly import initial_state


def test_batch_forces_equal_the_per_estimate_ones(example):
    mech = example
    lay = StateLayout.for_mechanism(mech, mech.config.estimator)
    d = mech.create_data()
    q0, v0 = initial_state(mech, d)
    rng = np.random.default_rng(3)
    N = 5
    est = []
    for i in range(N):
        v = v0 + 0.1 * rng.standard_normal(mech.n)
        a, lam = mech.forward_dynamics(d, q0, v)
        x = lay.pack(q0, v, a, lam, u=rng.standard_normal(lay.n_u))
        est.append(Estimate(float(i), i, True, x, lay, rng.standard_normal(mech.n)))
    tau = rng.standard_normal((N, mech.n))
    got = BatchForces(mech, block=2).forces(est, tau)        # three blocks, the last padded
    for e, t, g in zip(est, tau, got):
        ref = estimate_forces(mech, d, e, t)
        for a, b in zip(g.closures, ref.closures):
            np.testing.assert_allclose(a.force, b.force, rtol=1e-9, atol=1e-9)
            np.testing.assert_allclose(a.torque, b.torque, rtol=1e-9, atol=1e-9)
        for k in ref.load_cells:
            np.testing.assert_allclose(g.load_cells[k], ref.load_cells[k], rtol=1e-9, atol=1e-9)
        assert g.efforts == ref.efforts
