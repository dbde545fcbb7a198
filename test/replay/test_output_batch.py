"""BatchMessages: a batch of keyframes serialised at once equals the node's messages, on every
example rig."""
from __future__ import annotations

import numpy as np

from mbfg_ros.estimation.forces_batch import BatchForces
from mbfg_ros.estimation.layout import StateLayout
from mbfg_ros.estimation.outputs import Estimate
from mbfg_ros.io import messages as msgs
from mbfg_ros.io.estimate_messages import OutputNames, estimate_messages, tf_message
from mbfg_ros.model.assembly import initial_state
from mbfg_ros.replay.output_batch import BatchMessages


def test_batch_messages_equal_the_per_keyframe_ones(example):
    mech = example
    names = OutputNames("/rig/est", "p/")
    lay = StateLayout.for_mechanism(mech, mech.config.estimator)
    d = mech.create_data()
    q0, v0 = initial_state(mech, d)
    rng = np.random.default_rng(4)
    N = 3
    X = np.stack([lay.pack(q0 + 0.01 * rng.standard_normal(mech.n), v0 + rng.standard_normal(mech.n),
                           rng.standard_normal(mech.n), rng.standard_normal(mech.m)) for _ in range(N)])
    effort = rng.standard_normal((N, mech.n))
    n = mech.n
    F, T, cells = BatchForces(mech)(X[:, :n], X[:, n:2 * n], X[:, 2 * n:3 * n], X[:, lay.L], X[:, lay.U],
                                    np.zeros((N, n)))
    stamps = 1_700_000_000_000_000_000 + np.arange(N) * 5_000_000
    batch = BatchMessages(mech, names)
    args = (X[:, :n], X[:, n:2 * n], X[:, 2 * n:3 * n], effort, F, T, cells)
    assert batch.usable(int(stamps[0]), *args)
    got = batch.serialize(stamps, *args)
    ests = [Estimate(0.0, i, True, X[i], lay, effort[i]) for i in range(N)]
    forces = BatchForces(mech).as_forces(ests, F, T, cells)
    for i in range(N):
        ref = {topic: bytes(msgs.serialize(m)) for topic, _, m in
               estimate_messages(mech, ests[i], forces[i], int(stamps[i]), names)}
        ref["/tf"] = bytes(msgs.serialize(tf_message(mech, d, X[i, :n], int(stamps[i]), names)))
        assert {topic: data[i].tobytes() for topic, _, data in got} == ref
