"""The placement of each movable joint's child link in its parent link, for many states at once.

TF carries, for every movable URDF joint, the child link's placement in the parent link: the
joint's fixed origin times its motion, a rotation by q about the joint axis (revolute,
continuous) or a translation by q along it (prismatic). :class:`JointTransforms` evaluates that
with numpy for a whole batch of joint positions (N, n) -> translations and quaternions (x, y, z,
w), the rotation matrix turned into a quaternion by Eigen's algorithm (the one
``pinocchio.Quaternion(R)`` uses, so signs agree with pinocchio's). The origins are read from
the pinocchio model (the links' placements at q = 0) and the whole is checked against
pinocchio's forward kinematics at random states when built; ``ok`` is False if it disagrees
(the caller then uses pinocchio per state).

Units: m, rad; frames: URDF link frames.
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin

CHECK_TOLERANCE = 1e-9
"""Largest disagreement with pinocchio (m, quaternion components) accepted when built."""


def quaternions(R: np.ndarray) -> np.ndarray:
    """(N, 4) quaternions x, y, z, w of rotation matrices (N, 3, 3), by Eigen's algorithm
    (Shepperd's: from the trace when it is positive, else from the largest diagonal element)."""
    N = R.shape[0]
    out = np.empty((N, 4))
    tr = R[:, 0, 0] + R[:, 1, 1] + R[:, 2, 2]
    pos = tr > 0
    if pos.any():
        Rp = R[pos]
        t = np.sqrt(tr[pos] + 1.0)
        w = 0.5 * t
        t = 0.5 / t
        out[pos, 0] = (Rp[:, 2, 1] - Rp[:, 1, 2]) * t
        out[pos, 1] = (Rp[:, 0, 2] - Rp[:, 2, 0]) * t
        out[pos, 2] = (Rp[:, 1, 0] - Rp[:, 0, 1]) * t
        out[pos, 3] = w
    rest = np.flatnonzero(~pos)
    if rest.size:
        Rr = R[rest]
        d = np.stack([Rr[:, 0, 0], Rr[:, 1, 1], Rr[:, 2, 2]], axis=1)
        i = np.zeros(rest.size, int)
        i[d[:, 1] > d[:, 0]] = 1
        i[d[:, 2] > d[np.arange(rest.size), i]] = 2
        j = (i + 1) % 3
        k = (j + 1) % 3
        a = np.arange(rest.size)
        t = np.sqrt(Rr[a, i, i] - Rr[a, j, j] - Rr[a, k, k] + 1.0)
        q = np.empty((rest.size, 4))
        q[a, i] = 0.5 * t
        t = 0.5 / t
        q[:, 3] = (Rr[a, k, j] - Rr[a, j, k]) * t
        q[a, j] = (Rr[a, j, i] + Rr[a, i, j]) * t
        q[a, k] = (Rr[a, k, i] + Rr[a, i, k]) * t
        out[rest] = q
    return out


class JointTransforms:
    """Child-in-parent placements of a mechanism's movable URDF joints (tree order, as
    :func:`mbfg_ros.io.estimate_messages.tf_placements` lists them)."""

    def __init__(self, mech) -> None:
        self.pairs: list[tuple[str, str]] = []
        data = mech.create_data()
        place = mech.link_placements(data, np.zeros(mech.n))
        by_name = {j.name: j for j in mech.urdf.joints}
        cols, axes, prismatic, R0, t0 = [], [], [], [], []
        self.ok = True
        for tj in mech.urdf.tree:
            if tj.type == "fixed" or tj.parent not in place or tj.child not in place:
                continue
            j = by_name.get(tj.name)
            if j is None or tj.name not in mech.index or j.type not in ("revolute", "continuous", "prismatic"):
                self.ok = False
                continue
            M0 = place[tj.parent].actInv(place[tj.child])
            self.pairs.append((tj.parent, tj.child))
            cols.append(mech.index[tj.name])
            a = np.asarray(j.axis, float)
            axes.append(a / np.linalg.norm(a))
            prismatic.append(j.type == "prismatic")
            R0.append(np.array(M0.rotation))
            t0.append(np.array(M0.translation))
        self.cols = np.array(cols, int)
        self.axes = np.array(axes).reshape(-1, 3)
        self.prismatic = np.array(prismatic, bool)
        self.R0 = np.array(R0).reshape(-1, 3, 3)
        self.t0 = np.array(t0).reshape(-1, 3)
        self.K = np.array([[[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]] for a in self.axes]
                          ).reshape(-1, 3, 3)
        self.K2 = self.K @ self.K
        if self.ok:
            self.ok = self._agrees(mech)

    def values(self, Q: np.ndarray) -> np.ndarray:
        """(N, pairs, 7): translation x, y, z and quaternion x, y, z, w of each pair at the joint
        positions Q (N, n)."""
        Q = np.atleast_2d(np.asarray(Q, float))
        N, P = Q.shape[0], len(self.pairs)
        out = np.empty((N, P, 7))
        if not P:
            return out
        q = Q[:, self.cols]                                       # (N, P)
        th = np.where(self.prismatic, 0.0, q)
        s, c = np.sin(th)[..., None, None], np.cos(th)[..., None, None]
        Rm = np.eye(3) + s * self.K + (1.0 - c) * self.K2          # (N, P, 3, 3) joint motion
        R = self.R0 @ Rm
        d = np.where(self.prismatic, q, 0.0)[..., None] * self.axes     # (N, P, 3) along the axis
        t = self.t0 + np.einsum("pij,npj->npi", self.R0, d)
        out[..., :3] = t
        out[..., 3:] = quaternions(R.reshape(N * P, 3, 3)).reshape(N, P, 4)
        return out

    def _agrees(self, mech) -> bool:
        """Whether :meth:`values` matches pinocchio's forward kinematics at a few random states
        (quaternions compared up to sign)."""
        rng = np.random.default_rng(0)
        data = mech.create_data()
        Q = rng.uniform(-3.0, 3.0, (4, mech.n))
        got = self.values(Q)
        for i, q in enumerate(Q):
            place = mech.link_placements(data, q)
            for p, (parent, child) in enumerate(self.pairs):
                M = place[parent].actInv(place[child])
                qt = pin.Quaternion(M.rotation)
                ref = np.array([*M.translation, qt.x, qt.y, qt.z, qt.w])
                g = got[i, p]
                err = min(np.abs(g - ref).max(), np.abs(np.r_[g[:3], -g[3:]] - ref).max())
                if not err <= CHECK_TOLERANCE:
                    return False
        return True
