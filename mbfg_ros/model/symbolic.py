"""CasADi SX expressions of a mechanism's kinematics, dynamics and loop closures.

Built from the pinocchio model a :class:`~mbfg_ros.model.mechanism.Mechanism` compiles (joint
placements, motion subspaces, inertias, frames, gravity), so every expression equals the numeric
function of the same name in ``Mechanism`` (pinocchio's ``pinocchio.casadi`` is not in the ``pin``
wheel on PyPI). Conventions are pinocchio's: a joint's spatial velocity and acceleration are
expressed in its own frame, [linear; angular]; forces likewise; rotations map the child frame to
the parent (world) frame.

Supported joints: one-coordinate revolute and prismatic joints of any axis (what
:mod:`mbfg_ros.model.urdf` loads). The estimator's step function
(:mod:`mbfg_ros.estimation.step_function`) differentiates these expressions with CasADi's
automatic differentiation.
"""
from __future__ import annotations

from dataclasses import dataclass

import casadi as ca
import numpy as np
import pinocchio as pin

from mbfg_ros.errors import ConfigError
from mbfg_ros.model.closures import RowGroup
from mbfg_ros.model.urdf import link_inertia


@dataclass(frozen=True)
class _Joint:
    parent: int
    index: int                   # coordinate index (idx_q == idx_v)
    R0: np.ndarray               # joint placement in the parent joint frame (rotation, translation)
    p0: np.ndarray
    axis: np.ndarray             # unit axis in the joint frame
    revolute: bool


@dataclass(frozen=True)
class _Inertia:
    """Spatial inertia as (mass, first moment h = m c, rotational inertia about the origin)."""
    m: float
    h: np.ndarray
    Io: np.ndarray

    @staticmethod
    def of(I: pin.Inertia) -> "_Inertia":
        c = np.asarray(I.lever, float)
        m = float(I.mass)
        Io = np.asarray(I.inertia, float) + m * (float(c @ c) * np.eye(3) - np.outer(c, c))
        return _Inertia(m, m * c, Io)


def skew(a):
    return ca.vertcat(ca.horzcat(0, -a[2], a[1]), ca.horzcat(a[2], 0, -a[0]), ca.horzcat(-a[1], a[0], 0))


def _rotation(axis: np.ndarray, angle):
    """Rodrigues' formula for a numeric unit axis (zeros simplify away in SX)."""
    K = ca.DM(np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]]))
    return ca.DM.eye(3) + ca.sin(angle) * K + (1 - ca.cos(angle)) * ca.mtimes(K, K)


class Placement:
    """An SE3 placement (R, p) with SX or numeric entries: x_parent = R x_child + p."""
    __slots__ = ("R", "p")

    def __init__(self, R, p) -> None:
        self.R, self.p = R, p

    @staticmethod
    def of(M: pin.SE3) -> "Placement":
        return Placement(ca.DM(np.asarray(M.rotation)), ca.DM(np.asarray(M.translation)))

    def __mul__(self, other: "Placement") -> "Placement":
        return Placement(ca.mtimes(self.R, other.R), self.p + ca.mtimes(self.R, other.p))

    def inverse(self) -> "Placement":
        RT = self.R.T
        return Placement(RT, -ca.mtimes(RT, self.p))

    def motion_inverse(self, lin, ang):
        """A motion given in this placement's parent frame, expressed in its child frame."""
        RT = self.R.T
        return ca.mtimes(RT, lin + ca.cross(ang, self.p)), ca.mtimes(RT, ang)

    def force_forward(self, lin, ang):
        """A force given in the child frame, expressed in the parent frame."""
        f = ca.mtimes(self.R, lin)
        return f, ca.mtimes(self.R, ang) + ca.cross(self.p, f)

    def force_inverse(self, lin, ang):
        """A force given in the parent frame, expressed in the child frame."""
        RT = self.R.T
        return ca.mtimes(RT, lin), ca.mtimes(RT, ang - ca.cross(self.p, lin))


class SymbolicMechanism:
    """CasADi SX expressions of a Mechanism's kinematics, dynamics and closures (the sensor kinds
    of :mod:`mbfg_ros.sensors` build their models from them).

    Every method takes SX column vectors (or numbers) and returns SX; nothing is evaluated."""

    def __init__(self, mech) -> None:
        self.mech = mech
        model = mech.model
        self.n = mech.n
        self.model = model
        self.joints: list[_Joint] = []
        for i in range(1, model.njoints):
            jm = model.joints[i]
            if jm.nq != 1 or jm.nv != 1:
                raise ConfigError(f"joint '{model.names[i]}' ({jm.shortname()}) has {jm.nq} position "
                                  "coordinates: only one-coordinate revolute and prismatic joints are supported")
            jd = jm.createData()
            jm.calc(jd, np.zeros(model.nq))
            S = np.asarray(jd.S).ravel()
            lin, ang = S[:3], S[3:]
            revolute = bool(np.linalg.norm(ang) > 0.5)
            if revolute == bool(np.linalg.norm(lin) > 0.5):
                raise ConfigError(f"joint '{model.names[i]}' ({jm.shortname()}) is neither revolute nor "
                                  "prismatic")
            M = model.jointPlacements[i]
            self.joints.append(_Joint(model.parents[i], jm.idx_v, np.asarray(M.rotation), np.asarray(M.translation),
                                      ang if revolute else lin, revolute))
        self.inertias = [_Inertia.of(model.inertias[i]) for i in range(model.njoints)]
        self.gravity = np.asarray(model.gravity.linear, float)
        # the mass-scaled link's own inertia, in its joint's frame (Mechanism._single_body_model)
        self.mass_joint = -1
        self.mass_inertia = None
        if mech.mass_link:
            fid = model.getFrameId(mech.mass_link, pin.FrameType.BODY)
            self.mass_joint = model.frames[fid].parentJoint
            own = model.frames[fid].placement.act(link_inertia(mech.urdf, mech.mass_link))
            self.mass_inertia = _Inertia.of(own)
        self._groups = sorted(mech.groups, key=lambda g: g.start)

    # ----------------------------------------------------------------------------------------
    # kinematics
    def _joint_motion(self, j: _Joint, qi) -> Placement:
        if j.revolute:
            return Placement(_rotation(j.axis, qi), ca.DM.zeros(3))
        return Placement(ca.DM.eye(3), ca.DM(j.axis) * qi)

    def _local(self, q) -> list[Placement]:
        """liMi: each joint's placement in its parent joint's frame at q (index 0: unused)."""
        out = [Placement(ca.DM.eye(3), ca.DM.zeros(3))]
        for j in self.joints:
            out.append(Placement(ca.DM(j.R0), ca.DM(j.p0)) * self._joint_motion(j, q[j.index]))
        return out

    def joint_placements(self, q, local: list[Placement] | None = None) -> list[Placement]:
        """oMi of every joint (index 0: the base)."""
        local = local or self._local(q)
        out = [local[0]]
        for i, j in enumerate(self.joints, start=1):
            out.append(out[j.parent] * local[i])
        return out

    def frame_pose(self, q, frame_id: int, placements: list[Placement] | None = None) -> tuple:
        """(R, p) of a pinocchio frame in the base frame (= data.oMf[frame_id])."""
        fr = self.model.frames[frame_id]
        oMi = (placements or self.joint_placements(q))[fr.parentJoint]
        M = oMi * Placement.of(fr.placement)
        return M.R, M.p

    def _subspace(self, j: _Joint):
        a = ca.DM(j.axis)
        z = ca.DM.zeros(3)
        return (z, a) if j.revolute else (a, z)

    def joint_velocities(self, q, v, local: list[Placement] | None = None) -> list[tuple]:
        """Spatial velocity (linear, angular) of every joint in its own frame."""
        local = local or self._local(q)
        out = [(ca.DM.zeros(3), ca.DM.zeros(3))]
        for i, j in enumerate(self.joints, start=1):
            lin, ang = local[i].motion_inverse(*out[j.parent])
            Sl, Sa = self._subspace(j)
            out.append((lin + Sl * v[j.index], ang + Sa * v[j.index]))
        return out

    def frame_velocity(self, q, v, frame_id: int) -> tuple:
        """(linear, angular) velocity of a frame in its own frame (pinocchio LOCAL)."""
        fr = self.model.frames[frame_id]
        lin, ang = self.joint_velocities(q, v)[fr.parentJoint]
        return Placement.of(fr.placement).motion_inverse(lin, ang)

    def joint_motions(self, q, v, a, local: list[Placement] | None = None,
                      base_acceleration: tuple | None = None) -> tuple[list, list]:
        """Spatial velocity and spatial acceleration (linear, angular) of every joint in its own
        frame (pinocchio's data.v and data.a after forwardKinematics(q, v, a)); the base's
        acceleration is ``base_acceleration`` (default zero; RNEA gives it -g for gravity)."""
        local = local or self._local(q)
        zero = (ca.DM.zeros(3), ca.DM.zeros(3))
        vel, acc = [zero], [base_acceleration or zero]
        for i, j in enumerate(self.joints, start=1):
            Sl, Sa = self._subspace(j)
            qd, qdd = v[j.index], a[j.index]
            vl, va = local[i].motion_inverse(*vel[j.parent])
            vl, va = vl + Sl * qd, va + Sa * qd
            al, aa = local[i].motion_inverse(*acc[j.parent])
            # a_i = X a_parent + S qdd + v_i x (S qd)
            al = al + Sl * qdd + ca.cross(va, Sl * qd) + ca.cross(vl, Sa * qd)
            aa = aa + Sa * qdd + ca.cross(va, Sa * qd)
            vel.append((vl, va))
            acc.append((al, aa))
        return vel, acc

    def frame_acceleration(self, q, v, a, frame_id: int) -> tuple:
        """(classical linear acceleration of the frame's origin, angular acceleration), both in
        the frame's own coordinates (pinocchio getFrameClassicalAcceleration, LOCAL)."""
        fr = self.model.frames[frame_id]
        vel, acc = self.joint_motions(q, v, a)
        X = Placement.of(fr.placement)
        vl, va = X.motion_inverse(*vel[fr.parentJoint])
        al, aa = X.motion_inverse(*acc[fr.parentJoint])
        return al + ca.cross(va, vl), aa

    # ----------------------------------------------------------------------------------------
    # dynamics
    def rnea_forces(self, q, v, a, gravity_scale=1.0, mass_scale=1.0, fext=None):
        """Recursive Newton-Euler: (tau, per-joint spatial force f_i transmitted from the parent,
        in joint frame i). ``fext``: external forces per joint (local frames), or None."""
        local = self._local(q)
        nj = len(self.joints) + 1
        vel, acc = self.joint_motions(q, v, a, local, (-gravity_scale * ca.DM(self.gravity), ca.DM.zeros(3)))
        f = [None] * nj
        for i in range(1, nj):
            (vl, va), (al, aa) = vel[i], acc[i]
            fl, fa = self._inertia_times(i, al, aa, mass_scale)
            hl, ha = self._inertia_times(i, vl, va, mass_scale)
            # f_i = I a + v x* (I v) - fext
            fl = fl + ca.cross(va, hl)
            fa = fa + ca.cross(va, ha) + ca.cross(vl, hl)
            if fext is not None and fext[i] is not None:
                fl, fa = fl - fext[i][0], fa - fext[i][1]
            f[i] = (fl, fa)
        tau = [None] * self.n
        for i in range(nj - 1, 0, -1):
            j = self.joints[i - 1]
            Sl, Sa = self._subspace(j)
            fl, fa = f[i]
            tau[j.index] = ca.dot(Sl, fl) + ca.dot(Sa, fa)
            if j.parent > 0:
                pl, pa = local[i].force_forward(fl, fa)
                f[j.parent] = (f[j.parent][0] + pl, f[j.parent][1] + pa)
        return ca.vertcat(*tau), f

    def _inertia_times(self, i: int, lin, ang, mass_scale):
        """(linear, angular) of I_i [lin; ang], with the mass-scaled link's share times mass_scale."""
        I = self.inertias[i]
        out_l = I.m * lin + ca.cross(ang, ca.DM(I.h))
        out_a = ca.mtimes(ca.DM(I.Io), ang) + ca.cross(ca.DM(I.h), lin)
        if i == self.mass_joint and not (isinstance(mass_scale, float) and mass_scale == 1.0):
            B = self.mass_inertia
            k = mass_scale - 1.0
            out_l = out_l + k * (B.m * lin + ca.cross(ang, ca.DM(B.h)))
            out_a = out_a + k * (ca.mtimes(ca.DM(B.Io), ang) + ca.cross(ca.DM(B.h), lin))
        return out_l, out_a

    def rnea(self, q, v, a, gravity_scale=1.0, mass_scale=1.0, fext=None):
        """Inverse dynamics M(q) a + C(q, v) v + s G(q) (the mass-scaled link's inertia times
        ``mass_scale``), minus the external forces' generalised effort; M includes the joints'
        armature, as pinocchio's rnea does."""
        return self.rnea_forces(q, v, a, gravity_scale, mass_scale, fext)[0] + self.armature_effort(a)

    def armature_effort(self, a):
        """diag(armature) a: the effort that turns the rotors reflected through the gears."""
        arm = self.mech.armature
        if not np.any(arm):
            return ca.DM.zeros(self.n)
        return ca.vertcat(*[float(arm[i]) * a[i] if arm[i] else ca.DM(0.0) for i in range(self.n)])

    def friction(self, v):
        mech = self.mech
        if not mech.has_friction:
            return ca.DM.zeros(self.n)
        out = []
        for i in range(self.n):
            f = mech.viscous[i] * v[i]
            if mech.coulomb[i] > 0:
                f = f + mech.coulomb[i] * ca.tanh(v[i] / mech.coulomb_velocity[i])
            out.append(f)
        return ca.vertcat(*out)

    def spring_ends(self, q, v, placements: list[Placement] | None = None) -> list[tuple]:
        """Per spring: (its model, p_A, p_B, tension F = k (L - L0) + c L') (base frame)."""
        P = placements or self.joint_placements(q)
        out = []
        for spring in self.mech.springs.springs:
            pa = self.frame_pose(q, spring.frame_a, P)[1]
            pb = self.frame_pose(q, spring.frame_b, P)[1]
            L = ca.norm_2(pb - pa)
            c = spring.config
            F = c.stiffness * (L - c.rest_length) + c.damping * ca.jtimes(L, q, v)
            out.append((spring, pa, pb, F))
        return out

    def spring_force(self, q, v):
        """Q_s: the springs' generalised force, -sum F L_q^T (= SpringSet.generalized_force)."""
        Q = ca.DM.zeros(self.n)
        for _, pa, pb, F in self.spring_ends(q, v):
            Q = Q - ca.jtimes(ca.norm_2(pb - pa), q, F, True)
        return Q

    def dynamics_residual(self, q, v, a, lam, tau, u, gravity_scale=1.0, mass_scale=1.0, model_error=None,
                          model_error_joints=None):
        """RNEA + F(v) + o - tau - B u - Q_s - B_e e - Phi_q^T lam (= Mechanism.inverse_dynamics(...).r
        minus B_e e; o: the joints' constant offsets, Q_s: the springs' generalised force).
        ``model_error`` e: generalised forces on the coordinates ``model_error_joints`` (indices;
        default the DOF), or None; B_e = the identity's columns of those coordinates."""
        mech = self.mech
        r = self.rnea(q, v, a, gravity_scale, mass_scale) + self.friction(v)
        if mech.has_offset:
            r = r + ca.DM(mech.offset)
        if mech.springs:
            r = r - self.spring_force(q, v)
        r = r - tau
        if mech.n_u:
            r = r - ca.mtimes(ca.DM(mech.B), u)
        if model_error is not None:
            cols = mech.dof if model_error_joints is None else model_error_joints
            r = r - ca.mtimes(ca.DM(np.eye(self.n)[:, np.asarray(cols, int)]), model_error)
        if mech.m:
            r = r - ca.jtimes(self.closure_position(q), q, lam, True)
        return r

    # ----------------------------------------------------------------------------------------
    # closures
    def closure_frames(self, q) -> list[tuple]:
        P = self.joint_placements(q)
        return [self.frame_pose(q, fid, P) for fid in self.mech.closure_frame_ids]

    @staticmethod
    def _vector(kind: str, v0: np.ndarray, slot: int, scale: float, g: RowGroup, frames) -> list:
        """The group's vectors (one per row) of one side: const, attached or diff."""
        if kind == "const":
            return [ca.DM(row) for row in v0]
        if kind == "diff":
            d = scale * (frames[g.bslot][1] - frames[g.aslot][1])
            return [d] * v0.shape[0]
        R = frames[slot][0]
        return [ca.mtimes(R, ca.DM(row)) for row in v0]

    def closure_position(self, q, frames=None):
        """Phi(q): every closure row u_r . w_r - c_r, in the mechanism's row order."""
        if not self.mech.m:
            return ca.SX(0, 1)
        frames = frames or self.closure_frames(q)
        rows = []
        for g in self._groups:
            U = self._vector(g.ukind, g.u0, g.uslot, g.uscale, g, frames)
            W = self._vector(g.wkind, g.w0, g.wslot, 1.0, g, frames)
            for r in range(g.size):
                rows.append(ca.dot(U[r], W[r]) - float(g.offset[r]))
        return ca.vertcat(*rows)

    def closure_levels(self, q, v, a):
        """(Phi, Phi' = Phi_q v, Phi'' = Phi_q a + (Phi_q v)_q v)."""
        phi = self.closure_position(q)
        if not self.mech.m:
            return phi, phi, phi
        phid = ca.jtimes(phi, q, v)
        phidd = ca.jtimes(phid, q, v) + ca.jtimes(phi, q, a)
        return phi, phid, phidd

    def reaction(self, groups: list[RowGroup], frames, lam) -> tuple:
        """Force and torque (base frame) a closure exerts on frame B's body at p_B, and on frame
        A's body at p_A (see closures.reaction_wrench and mechanism._reaction_on_a)."""
        A, B = frames[groups[0].aslot], frames[groups[0].bslot]
        d = B[1] - A[1]
        fB = tB = fA = tA = ca.DM.zeros(3)
        for g in groups:
            U = self._vector(g.ukind, g.u0, g.uslot, g.uscale, g, frames)
            lr = [lam[g.start + r] for r in range(g.size)]
            if g.wkind == "diff" and g.ukind != "diff":
                for r in range(g.size):
                    fB = fB + lr[r] * U[r]
                    fA = fA - lr[r] * U[r]
                    if g.ukind == "attached":
                        tA = tA + lr[r] * ca.cross(U[r], d)
            elif g.wkind == "diff":
                fB = fB + lr[0] * 2.0 * g.uscale * d
                fA = fA - lr[0] * 2.0 * g.uscale * d
            else:
                W = self._vector(g.wkind, g.w0, g.wslot, 1.0, g, frames)
                for r in range(g.size):
                    tB = tB + lr[r] * ca.cross(W[r], U[r])
                    tA = tA + lr[r] * ca.cross(U[r], W[r])
        return fB, tB, fA, tA

    def closure_wrenches_in_frame_b(self, q, lam) -> list[tuple]:
        """Every closure's (force, torque) on frame_b's body at its origin, in frame_b."""
        frames = self.closure_frames(q)
        out = []
        for groups in self.mech.closure_groups:
            fB, tB, _, _ = self.reaction(groups, frames, lam)
            R = frames[groups[0].bslot][0]
            out.append((ca.mtimes(R.T, fB), ca.mtimes(R.T, tB)))
        return out

    def closure_external_forces(self, q, lam, placements=None) -> list:
        """The closure reactions as external forces per joint (local joint frames), so that
        rnea(q, v, a, fext) = RNEA(q, v, a) - Phi_q^T lam."""
        P = placements or self.joint_placements(q)
        frames = [self.frame_pose(q, fid, P) for fid in self.mech.closure_frame_ids]
        fext = [None] * (len(self.joints) + 1)
        for groups in self.mech.closure_groups:
            fB, tB, fA, tA = self.reaction(groups, frames, lam)
            for slot, f, t in ((groups[0].bslot, fB, tB), (groups[0].aslot, fA, tA)):
                jid = self.model.frames[self.mech.closure_frame_ids[slot]].parentJoint
                if jid == 0:
                    continue
                p = frames[slot][1]
                loc = P[jid].force_inverse(f, t + ca.cross(p, f))
                fext[jid] = loc if fext[jid] is None else (fext[jid][0] + loc[0], fext[jid][1] + loc[1])
        return fext

    def add_spring_forces(self, q, v, P, fext) -> list:
        """``fext`` (or a new list) plus the springs' forces -F e on frame B's body at p_B and
        +F e on frame A's body at p_A (local joint frames)."""
        fext = fext if fext is not None else [None] * (len(self.joints) + 1)
        for spring, pa, pb, F in self.spring_ends(q, v, P):
            e = (pb - pa) / ca.norm_2(pb - pa)
            for fid, p, f in ((spring.frame_b, pb, -F * e), (spring.frame_a, pa, F * e)):
                jid = self.model.frames[fid].parentJoint
                if jid == 0:
                    continue
                loc = P[jid].force_inverse(f, ca.cross(p, f))
                fext[jid] = loc if fext[jid] is None else (fext[jid][0] + loc[0], fext[jid][1] + loc[1])
        return fext


def function(name: str, inputs: list, outputs: list) -> ca.Function:
    """A casadi.Function of SX expressions (common subexpressions merged)."""
    return ca.Function(name, inputs, outputs, {"cse": True})
