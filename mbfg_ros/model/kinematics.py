"""Per-frame kinematics and their exact derivatives, from pinocchio.

All vectors are in the base (world) frame; Jacobians are pinocchio's LOCAL_WORLD_ALIGNED frame
Jacobians (rows 0-2: velocity of the frame origin, rows 3-5: angular velocity). With n joint
coordinates (nq == nv == n) and F frames, a :class:`FrameSet` keeps stacked arrays:

- position level: ``P`` (F, 3) origins, ``R`` (F, 3, 3) rotations, ``JL``/``JA`` (F, 3, n) the
  linear and angular rows of the Jacobians.
- ``HL``/``HA`` (F, 3, n, n): ``HL[f, c, i, k] = d JL[f, c, i] / d q_k``. Pinocchio gives them
  exactly as the Jacobian time variation along each unit velocity e_k. ``HL`` holds the
  Hessians of the origins' positions (symmetric in i, k).
- velocity level: ``VL``/``W`` (F, 3) = JL v, JA v and their q-derivatives ``DVL``/``DW``
  (F, 3, n) = sum_i H[.., i, :] v_i.
- acceleration level: the classical acceleration of each origin ``ACC`` (F, 3) and the angular
  acceleration ``ALPHA`` (F, 3), with derivatives ``DACC``/``DALPHA`` (F, 3, 3n), the columns
  being [d/dq | d/dv | d/da], from pinocchio's ``getPointClassicAccelerationDerivatives`` /
  ``getFrameAccelerationDerivatives``.

:class:`FrameKinematics` objects are per-frame views into these arrays.
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin

LWA = pin.LOCAL_WORLD_ALIGNED


class FrameKinematics:
    """Views of one frame's rows in its FrameSet's stacked arrays."""

    def __init__(self, fs: "FrameSet", i: int, model: pin.Model, fid: int) -> None:
        n = fs.n
        self.fid = fid
        self.joint = model.frames[fid].parentJoint
        self.placement = model.frames[fid].placement
        self.p = fs.P[i]
        self.R = fs.R[i]
        self.Jl = fs.JL[i]
        self.Ja = fs.JA[i]
        self.HL = fs.HL[i]
        self.HA = fs.HA[i]
        self.vl = fs.VL[i]
        self.w = fs.W[i]
        self.Dvl_q = fs.DVL[i]
        self.Dw_q = fs.DW[i]
        self.acc = fs.ACC[i]
        self.alpha = fs.ALPHA[i]
        self.Dacc = tuple(fs.DACC[i, :, x * n:(x + 1) * n] for x in range(3))
        self.Dalpha = tuple(fs.DALPHA[i, :, x * n:(x + 1) * n] for x in range(3))


def cross3(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cross product of two 3-vectors (np.cross costs ~50 us per call on numpy 2.x)."""
    return np.array((a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]))


def cross_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cross products of (R, 3) arrays (broadcasting)."""
    return cross(a[:, :, None], b[:, :, None])[:, :, 0]


def cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cross product along axis 1 with broadcasting (shapes (R, 3, k))."""
    a0, a1, a2 = a[:, 0], a[:, 1], a[:, 2]
    b0, b1, b2 = b[:, 0], b[:, 1], b[:, 2]
    return np.stack((a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0), axis=1)


class FrameSet:
    """Evaluates the kinematics of a fixed set of frames, level by level, for one pin.Data.

    ``angular`` False skips the angular velocity/acceleration quantities (only point
    differences are used by the closures)."""

    def __init__(self, model: pin.Model, data: pin.Data, frame_ids: list[int],
                 angular: bool = True) -> None:
        self.model = model
        self.data = data
        n = self.n = model.nv
        F = len(frame_ids)
        self.fids = list(frame_ids)
        self.P = np.zeros((F, 3))
        self.R = np.zeros((F, 3, 3))
        self.JL = np.zeros((F, 3, n))
        self.JA = np.zeros((F, 3, n))
        self.HL = np.zeros((F, 3, n, n))
        self.HA = np.zeros((F, 3, n, n))
        self.VL = np.zeros((F, 3))
        self.W = np.zeros((F, 3))
        self.DVL = np.zeros((F, 3, n))
        self.DW = np.zeros((F, 3, n))
        self.ACC = np.zeros((F, 3))
        self.ALPHA = np.zeros((F, 3))
        self.DACC = np.zeros((F, 3, 3 * n))
        self.DALPHA = np.zeros((F, 3, 3 * n))
        self.frames = [FrameKinematics(self, i, model, f) for i, f in enumerate(frame_ids)]
        self._joints = [(fk.joint, fk.placement) for fk in self.frames]
        self._angular = angular
        self._eye = np.eye(n)

    def position(self, q: np.ndarray) -> None:
        m, d = self.model, self.data
        pin.computeJointJacobians(m, d, q)
        pin.updateFramePlacements(m, d)
        for i, fid in enumerate(self.fids):
            oMf = d.oMf[fid]
            self.P[i] = oMf.translation
            self.R[i] = oMf.rotation
            J = pin.getFrameJacobian(m, d, fid, LWA).reshape(6, self.n)   # (6,) when n == 1
            self.JL[i] = J[:3]
            self.JA[i] = J[3:]

    def hessians(self, q: np.ndarray) -> None:
        """Fill HL, HA (requires ``position(q)`` first)."""
        m, d, HL, HA = self.model, self.data, self.HL, self.HA
        for k in range(self.n):
            pin.computeJointJacobiansTimeVariation(m, d, q, self._eye[k])
            for i, fid in enumerate(self.fids):
                dJ = pin.getFrameJacobianTimeVariation(m, d, fid, LWA).reshape(6, self.n)
                HL[i, :, :, k] = dJ[:3]
                if self._angular:
                    HA[i, :, :, k] = dJ[3:]

    def velocity(self, v: np.ndarray) -> None:
        """Velocity-level quantities (requires ``position`` and ``hessians``)."""
        np.matmul(self.JL, v, out=self.VL)
        np.matmul(v, self.HL, out=self.DVL)
        if self._angular:
            np.matmul(self.JA, v, out=self.W)
            np.matmul(v, self.HA, out=self.DW)

    def acceleration(self, q: np.ndarray, v: np.ndarray, a: np.ndarray) -> None:
        """Acceleration-level quantities and their derivatives w.r.t. q, v, a."""
        m, d, n = self.model, self.data, self.n
        pin.computeForwardKinematicsDerivatives(m, d, q, v, a)
        pin.updateFramePlacements(m, d)
        for i, fid in enumerate(self.fids):
            joint, placement = self._joints[i]
            self.ACC[i] = pin.getFrameClassicalAcceleration(m, d, fid, LWA).linear
            _, daq, dav, daa = pin.getPointClassicAccelerationDerivatives(m, d, joint, placement, LWA)
            D = self.DACC[i]
            D[:, :n] = daq.reshape(3, n)
            D[:, n:2 * n] = dav.reshape(3, n)
            D[:, 2 * n:] = daa.reshape(3, n)
            if self._angular:
                self.ALPHA[i] = pin.getFrameAcceleration(m, d, fid, LWA).angular
                _, aq, av, aa = pin.getFrameAccelerationDerivatives(m, d, fid, LWA)
                D = self.DALPHA[i]
                D[:, :n] = aq.reshape(6, n)[3:]
                D[:, n:2 * n] = av.reshape(6, n)[3:]
                D[:, 2 * n:] = aa.reshape(6, n)[3:]
