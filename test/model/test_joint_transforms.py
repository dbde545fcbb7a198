"""JointTransforms: the movable joints' child-in-parent placements of a batch of states equal
pinocchio's forward kinematics on every example rig; quaternions as Eigen makes them."""
from __future__ import annotations

import numpy as np
import pinocchio as pin

from mbfg_ros.model.joint_transforms import quaternions


def test_batch_placements_equal_pinocchio(example):
    mech = example
    jt = mech.joint_transforms
    assert jt.ok and jt.pairs
    rng = np.random.default_rng(7)
    Q = rng.uniform(-4.0, 4.0, (25, mech.n))
    got = jt.values(Q)
    d = mech.create_data()
    for i, q in enumerate(Q):
        place = mech.link_placements(d, q)
        for p, (parent, child) in enumerate(jt.pairs):
            M = place[parent].actInv(place[child])
            np.testing.assert_allclose(got[i, p, :3], M.translation, atol=1e-12)
            qt = pin.Quaternion(M.rotation)
            ref = np.array([qt.x, qt.y, qt.z, qt.w])
            # same sign as pinocchio's, except where the trace is ~0 and rounding picks the branch
            err = min(np.abs(got[i, p, 3:] - ref).max(), np.abs(got[i, p, 3:] + ref).max())
            assert err < 1e-12


def test_quaternions_follow_eigens_branches():
    rng = np.random.default_rng(3)
    R = [pin.exp3(rng.standard_normal(3)) for _ in range(200)]
    R += [pin.exp3(np.pi * a / np.linalg.norm(a)) for a in rng.standard_normal((50, 3))]   # trace -1
    R += [np.diag([1.0, -1.0, -1.0]), np.diag([-1.0, 1.0, -1.0]), np.diag([-1.0, -1.0, 1.0]), np.eye(3)]
    got = quaternions(np.array(R))
    for g, r in zip(got, R):
        qt = pin.Quaternion(np.asarray(r))
        np.testing.assert_allclose(g, [qt.x, qt.y, qt.z, qt.w], atol=1e-12)
