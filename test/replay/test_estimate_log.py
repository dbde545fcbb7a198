"""EstimateLog: estimates added with their forces as rows (the online replay) or as arrays (the
smoothing replay) give the same series, holding what was added."""
from __future__ import annotations

import numpy as np

from mbfg_ros.estimation.forces_batch import BatchForces
from mbfg_ros.estimation.layout import StateLayout
from mbfg_ros.estimation.outputs import Estimate
from mbfg_ros.model.assembly import initial_state
from mbfg_ros.replay.estimate_log import EstimateLog


def test_rows_in_bulk_equal_rows_one_by_one(example):
    mech = example
    lay = StateLayout.for_mechanism(mech, mech.config.estimator)
    q0, v0 = initial_state(mech, mech.create_data())
    rng = np.random.default_rng(5)
    N = 7
    X = np.stack([lay.pack(q0 + 0.01 * rng.standard_normal(mech.n), v0, rng.standard_normal(mech.n),
                           rng.standard_normal(mech.m)) for _ in range(N)])
    ests = [Estimate(0.005 * i, i, False, X[i], lay, rng.standard_normal(mech.n)) for i in range(N)]
    n = mech.n
    bf = BatchForces(mech)
    F, T, cells = bf(X[:, :n], X[:, n:2 * n], X[:, 2 * n:3 * n], X[:, lay.L], X[:, lay.U], np.zeros((N, n)))
    arrays, rows = EstimateLog(mech), EstimateLog(mech)
    arrays.add_arrays(np.array([e.stamp for e in ests]), np.arange(N), 2, X, np.stack([e.effort for e in ests]),
                      None, F, T, cells, lay)
    rows.add_rows(ests[:3], F[:3], T[:3], cells[:3], era=2)
    rows.add_rows(ests[3:], F[3:], T[3:], cells[3:], era=2)
    a, b = arrays.series(), rows.series()
    assert len(rows) == N and rows.last_keyframe == arrays.last_keyframe == N - 1
    for name in vars(a):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    np.testing.assert_array_equal(a.q, X[:, :n])
    np.testing.assert_array_equal(a.era, np.full(N, 2))
    np.testing.assert_array_equal(a.closure_force, F)
    np.testing.assert_array_equal(a.load_cells, cells)
    assert np.isnan(a.std).all()
