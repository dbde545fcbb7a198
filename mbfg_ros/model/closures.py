"""Loop-closure constraints Phi(q) = 0 with exact derivatives at every level.

Each closure (cut joint) between frame A and frame B becomes rows of the form

    Phi_r(q) = u_r . w_r - c_r

where ``u`` and ``w`` are kinematic vectors in the base frame of one of three kinds:

- ``const``: a fixed direction of the base frame (e.g. the in-plane axes of a planar joint),
- ``attached``: a direction fixed in frame A or B (hinge axes, slide normals),
- ``diff``: the point difference ``s * (p_B - p_A)`` of the two frame origins.

The product rule then gives Phi, its time derivatives and all their partial derivatives from
the per-frame quantities of :mod:`mbfg_ros.model.kinematics` (pinocchio), exactly:

    Phi   = u.w
    Phi'  = u'.w + u.w'                 (= Phi_q v)
    Phi'' = u''.w + 2 u'.w' + u.w''      (= Phi_q a + (Phi_q)' v)

Rows per closure type (frames A and B are the closure's ``frame_a`` / ``frame_b``):

==================  ====  ====================================================================
type                rows  meaning
==================  ====  ====================================================================
point               3     origins coincide (spherical joint)
planar_revolute     2     origins coincide in the motion plane (normal ``plane_normal``)
revolute            5     origins coincide and the hinge ``axis`` (same coordinates in A and B)
                          stays aligned
prismatic           5     B slides along ``axis`` of A; A and B keep the same orientation
planar_prismatic    2     in-plane slider: one translation row, one rotation row
weld                6     A and B coincide in position and orientation
distance            1     |p_B - p_A| = ``length`` (a massless rod with ball ends)
==================  ====  ====================================================================

Redundant rows (a spatial closure on a planar mechanism) are allowed: every consumer treats
the rows with rank-revealing factorizations.

Reaction forces: with the equations of motion ``M a + h - tau - Phi_q^T lambda = 0`` the closure
acts on the mechanism with the generalized force ``Phi_q^T lambda``. The wrench it exerts on
frame B's body is ``f_B = sum_r lambda_r dPhi_r/dp_B`` applied at ``p_B`` and
``tau_B = sum_r lambda_r dPhi_r/dtheta_B`` (base frame); the body of frame A receives the
opposite wrench.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pinocchio as pin

from mbfg_ros.model.kinematics import FrameKinematics, FrameSet, cross, cross_rows

if TYPE_CHECKING:                      # the config imports the sensor kinds, which import this
    from mbfg_ros.model.config import ClosureConfig

ROWS = {"point": 3, "planar_revolute": 2, "revolute": 5, "prismatic": 5, "planar_prismatic": 2,
        "weld": 6, "distance": 1}


def perpendicular_pair(axis: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two unit vectors completing ``axis`` to a right-handed orthonormal basis."""
    axis = axis / np.linalg.norm(axis)
    helper = np.array([1.0, 0.0, 0.0]) if abs(axis[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    e1 = np.cross(axis, helper)
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(axis, e1)
    return e1, e2


@dataclass
class RowGroup:
    """Rows of one closure that share the kinds of their two vectors."""
    closure: int
    start: int
    ukind: str              # const | attached | diff
    wkind: str              # attached | diff
    u0: np.ndarray          # (R, 3): const direction (base frame) or direction in frame uslot
    w0: np.ndarray          # (R, 3): direction in frame wslot (attached) / unused (diff)
    uslot: int = -1
    wslot: int = -1
    aslot: int = -1         # frame A / B slots (for diff sides)
    bslot: int = -1
    uscale: float = 1.0     # scale of a diff u (distance rows)
    offset: np.ndarray | None = None

    @property
    def size(self) -> int:
        return self.u0.shape[0]

    @property
    def rows(self) -> slice:
        return slice(self.start, self.start + self.size)


def compile_closure(index: int, cfg: ClosureConfig, start: int, aslot: int, bslot: int,
                    R_a_neutral: np.ndarray) -> list[RowGroup]:
    """Row groups of one closure; ``R_a_neutral`` is frame A's rotation at the neutral pose."""
    axis = np.asarray(cfg.axis, float)
    groups: list[RowGroup] = []

    def add(ukind, wkind, u0, w0, **kw):
        nonlocal start
        g = RowGroup(closure=index, start=start, ukind=ukind, wkind=wkind,
                     u0=np.atleast_2d(np.asarray(u0, float)), w0=np.atleast_2d(np.asarray(w0, float)),
                     aslot=aslot, bslot=bslot, **kw)
        if g.offset is None:
            g.offset = np.zeros(g.size)
        groups.append(g)
        start += g.size

    eye = np.eye(3)
    zeros = np.zeros((3, 3))
    kind = cfg.type
    if kind in ("point", "revolute", "weld"):
        add("const", "diff", eye, zeros)
    if kind == "planar_revolute":
        t1, t2 = perpendicular_pair(np.asarray(cfg.plane_normal, float))
        add("const", "diff", np.stack([t1, t2]), np.zeros((2, 3)))
    if kind == "revolute":
        p1, p2 = perpendicular_pair(axis)
        add("attached", "attached", np.stack([axis, axis]), np.stack([p1, p2]), uslot=aslot, wslot=bslot)
    if kind == "prismatic":
        n1, n2 = perpendicular_pair(axis)
        add("attached", "diff", np.stack([n1, n2]), np.zeros((2, 3)), uslot=aslot)
    if kind in ("prismatic", "weld"):
        # z_A.y_B, x_A.z_B, y_A.x_B vanish when A and B have the same orientation.
        add("attached", "attached", np.stack([eye[2], eye[0], eye[1]]),
            np.stack([eye[1], eye[2], eye[0]]), uslot=aslot, wslot=bslot)
    if kind == "planar_prismatic":
        normal_in_a = R_a_neutral.T @ np.asarray(cfg.plane_normal, float)
        n = np.cross(normal_in_a, axis)
        if np.linalg.norm(n) < 1e-9:
            raise ValueError("the slide axis is parallel to the plane normal")
        n /= np.linalg.norm(n)
        add("attached", "diff", n[None], np.zeros((1, 3)), uslot=aslot)
        add("attached", "attached", axis[None], n[None], uslot=aslot, wslot=bslot)
    if kind == "distance":
        L = float(cfg.length)
        add("diff", "diff", np.zeros((1, 3)), np.zeros((1, 3)), uscale=0.5 / L,
            offset=np.array([0.5 * L]))
    return groups


class _Side:
    """One kinematic vector of a row group at up to three levels (None = identically zero).

    Arrays have a leading row axis: (R, 3) values and (R, 3, n) Jacobians, or a leading axis of
    size 1 when all rows share the vector (point differences)."""
    __slots__ = ("val", "Dq", "dot", "Ddot_q", "Ddot_v", "ddot", "Dddot")

    def __init__(self) -> None:
        self.val = None
        self.Dq = self.dot = self.Ddot_q = self.Ddot_v = self.ddot = self.Dddot = None


def _side(kind: str, v0: np.ndarray, slot: int, scale: float, g: RowGroup,
          frames: list[FrameKinematics], level: int) -> _Side:
    s = _Side()
    if kind == "const":
        s.val = v0
        return s
    if kind == "diff":
        A, B = frames[g.aslot], frames[g.bslot]
        s.val = (scale * (B.p - A.p))[None]
        s.Dq = (scale * (B.Jl - A.Jl))[None]
        if level >= 1:
            s.dot = (scale * (B.vl - A.vl))[None]
            s.Ddot_q = (scale * (B.Dvl_q - A.Dvl_q))[None]
            s.Ddot_v = s.Dq
        if level >= 2:
            s.ddot = (scale * (B.acc - A.acc))[None]
            s.Dddot = tuple((scale * (db - da))[None] for db, da in zip(B.Dacc, A.Dacc))
        return s
    F = frames[slot]
    u = v0 @ F.R.T                                      # (R, 3)
    s.val = u
    uc = u[:, :, None]
    Ja = F.Ja[None]
    s.Dq = cross(Ja, uc)                                # d u / dq: Ja_i x u
    if level >= 1:
        w = F.w[None, :, None]
        s.dot = cross(w, uc)[:, :, 0]                   # w x u
        s.Ddot_q = cross(F.Dw_q[None], uc) + cross(w, s.Dq)
        s.Ddot_v = s.Dq
    if level >= 2:
        alpha = F.alpha[None, :, None]
        udot = s.dot[:, :, None]
        s.ddot = (cross(alpha, uc) + cross(w, udot))[:, :, 0]
        daq, dav, daa = (x[None] for x in F.Dalpha)
        s.Dddot = (cross(daq, uc) + cross(alpha, s.Dq) + cross(F.Dw_q[None], udot) + cross(w, s.Ddot_q),
                   cross(dav, uc) + cross(Ja, udot) + cross(w, s.Ddot_v),
                   cross(daa, uc))
    return s


def _c(a: np.ndarray | None, b: np.ndarray | None):
    """Contract row vectors a (R,3) with b (R,3) -> (R,) or with b (R,3,n) -> (R,n).

    Leading dimensions of size 1 broadcast (shared point differences); None is zero."""
    if a is None or b is None:
        return 0.0
    if b.ndim == 2:
        return np.einsum("...c,...c->...", a, b)
    return np.einsum("...c,...cn->...n", a, b)


def evaluate_group(g: RowGroup, frames: list[FrameKinematics], level: int, out: dict) -> None:
    """Write the group's rows of Phi (and, by ``level``, Phi', Phi'') and derivatives to ``out``."""
    U = _side(g.ukind, g.u0, g.uslot, g.uscale, g, frames, level)
    W = _side(g.wkind, g.w0, g.wslot, 1.0, g, frames, level)
    rows = g.rows
    u, w = U.val, W.val
    out["phi"][rows] = _c(u, w) - g.offset
    out["phi_q"][rows] = _c(u, W.Dq) + _c(w, U.Dq)
    if level < 1:
        return
    ud, wd = U.dot, W.dot
    out["phid"][rows] = _c(ud, w) + _c(u, wd)
    out["phid_q"][rows] = _c(w, U.Ddot_q) + _c(ud, W.Dq) + _c(wd, U.Dq) + _c(u, W.Ddot_q)
    out["phid_v"][rows] = _c(w, U.Ddot_v) + _c(u, W.Ddot_v)
    if level < 2:
        return
    udd, wdd = U.ddot, W.ddot
    Udd = U.Dddot or (None, None, None)
    Wdd = W.Dddot or (None, None, None)
    out["phidd"][rows] = _c(udd, w) + 2.0 * _c(ud, wd) + _c(u, wdd)
    # position-level derivatives exist only w.r.t. q; velocity-level only w.r.t. q and v
    UD = (U.Dq, None, None)
    WD = (W.Dq, None, None)
    Ud = (U.Ddot_q, U.Ddot_v, None)
    Wd = (W.Ddot_q, W.Ddot_v, None)
    for i, key in enumerate(("phidd_q", "phidd_v", "phidd_a")):
        out[key][rows] = (_c(w, Udd[i]) + _c(udd, WD[i]) + 2.0 * (_c(wd, Ud[i]) + _c(ud, Wd[i]))
                          + _c(wdd, UD[i]) + _c(u, Wdd[i]))


def hessian_lambda(g: RowGroup, frames: list[FrameKinematics], lam: np.ndarray, n: int) -> np.ndarray:
    """sum_r lam_r d^2 Phi_r / dq^2 over the group's rows (n x n, symmetric)."""
    lr = lam[g.rows]
    U = _side(g.ukind, g.u0, g.uslot, g.uscale, g, frames, 0)
    W = _side(g.wkind, g.w0, g.wslot, 1.0, g, frames, 0)
    R = g.size
    uv = np.broadcast_to(U.val, (R, 3))
    wv = np.broadcast_to(W.val, (R, 3))
    H = np.zeros((n, n))
    if U.Dq is not None and W.Dq is not None:
        DU = np.broadcast_to(U.Dq, (R, 3, n))
        DW = np.broadcast_to(W.Dq, (R, 3, n))
        cross_term = np.einsum("r,rci,rck->ik", lr, DU, DW)
        H += cross_term + cross_term.T
    for side, other_val, kind, slot, scale in ((W, uv, g.wkind, g.wslot, 1.0),
                                               (U, wv, g.ukind, g.uslot, g.uscale)):
        if kind == "const":
            continue
        weight = np.einsum("r,rc->c", lr, other_val)      # sum_r lam_r * (other vector)
        if kind == "diff":
            A, B = frames[g.aslot], frames[g.bslot]
            H += scale * np.einsum("c,cik->ik", weight, B.HL - A.HL)
        else:
            F = frames[slot]
            vec = np.broadcast_to(side.val, (R, 3))
            # d/dq_k (Ja_i x v) = HA[:, i, k] x v + Ja_i x (Ja_k x v)
            m = lr[:, None] * cross_rows(np.ascontiguousarray(vec), other_val)
            H += np.einsum("c,cik->ik", m.sum(axis=0), F.HA)
            lw = lr[:, None] * other_val                     # (R, 3)
            wxJ = cross(lw[:, :, None], F.Ja[None])          # (R, 3, n): (lam w) x Ja_i
            H += np.einsum("rci,rck->ik", wxJ, np.broadcast_to(side.Dq, (R, 3, n)))
    return H


def reaction_wrench(groups: list[RowGroup], frames: list[FrameKinematics], lam: np.ndarray,
                    n: int, with_derivatives: bool = False):
    """Force and torque (base frame) the closure exerts on frame B's body, at p_B.

    With ``with_derivatives`` also returns d/dq (3, n) and d/dlambda (3, m_total) of both.
    ``groups`` must all belong to one closure; lam is the full multiplier vector.
    """
    m = lam.shape[0]
    f = np.zeros(3)
    t = np.zeros(3)
    if with_derivatives:
        f_q = np.zeros((3, n))
        t_q = np.zeros((3, n))
        f_l = np.zeros((3, m))
        t_l = np.zeros((3, m))
    for g in groups:
        U = _side(g.ukind, g.u0, g.uslot, g.uscale, g, frames, 0)
        W = _side(g.wkind, g.w0, g.wslot, 1.0, g, frames, 0)
        R = g.size
        lr = lam[g.rows]
        uv = np.broadcast_to(U.val, (R, 3))
        if g.wkind == "diff" and g.ukind != "diff":
            # Phi = u.(p_B - p_A): dPhi/dp_B = u
            f += lr @ uv
            if with_derivatives:
                f_l[:, g.rows] = uv.T
                if U.Dq is not None:
                    f_q += np.einsum("r,rcn->cn", lr, np.broadcast_to(U.Dq, (R, 3, n)))
        elif g.wkind == "diff":
            # distance: Phi = s d.d - c: dPhi/dp_B = 2 s d
            d = W.val[0]
            f += lr[0] * 2.0 * g.uscale * d
            if with_derivatives:
                f_l[:, g.rows] = (2.0 * g.uscale * d)[:, None]
                f_q += lr[0] * 2.0 * g.uscale * W.Dq[0]
        else:
            # rotation rows Phi = u_A.w_B: dPhi/dtheta_B = w x u
            wv = np.broadcast_to(W.val, (R, 3))
            wxu = cross_rows(np.ascontiguousarray(wv), np.ascontiguousarray(uv))
            t += lr @ wxu
            if with_derivatives:
                t_l[:, g.rows] = wxu.T
                DU = np.broadcast_to(U.Dq, (R, 3, n))
                DW = np.broadcast_to(W.Dq, (R, 3, n))
                t_q += np.einsum("r,rcn->cn", lr, cross(DW, uv[:, :, None]) + cross(wv[:, :, None], DU))
    if with_derivatives:
        return f, t, f_q, t_q, f_l, t_l
    return f, t


@dataclass
class ClosureEval:
    """Closure rows at one state (arrays (m,), (m, n)); fields filled up to the asked level."""
    phi: np.ndarray
    phi_q: np.ndarray
    phid: np.ndarray | None = None
    phid_q: np.ndarray | None = None
    phid_v: np.ndarray | None = None
    phidd: np.ndarray | None = None
    phidd_q: np.ndarray | None = None
    phidd_v: np.ndarray | None = None
    phidd_a: np.ndarray | None = None
    hess_lambda: np.ndarray | None = None     # sum_r lam_r d2 Phi_r / dq2 (n, n)


class ClosureSet:
    """All closure rows of a mechanism, evaluated together.

    Rows ``n . (p_B - p_A)`` with a constant direction n (points, planar pins, the translation
    rows of revolute and weld closures) are gathered into one matrix C (rows x 3F) so that each
    quantity of all of them is a single product with the FrameSet's stacked arrays; the other
    row groups go through the general product-rule path.
    """

    def __init__(self, groups: list[RowGroup], m: int, n_frames: int, n: int) -> None:
        self.m, self.n = m, n
        self.general = [g for g in groups if not (g.ukind == "const" and g.wkind == "diff")]
        cd = [g for g in groups if g.ukind == "const" and g.wkind == "diff"]
        self.cd_rows = np.concatenate([np.arange(g.start, g.start + g.size) for g in cd]).astype(int) \
            if cd else np.zeros(0, dtype=int)
        if not self.general:
            assert np.array_equal(self.cd_rows, np.arange(m))
        C = np.zeros((len(self.cd_rows), n_frames, 3))
        offset = np.zeros(len(self.cd_rows))
        r = 0
        for g in cd:
            C[r:r + g.size, g.bslot] += g.u0
            C[r:r + g.size, g.aslot] -= g.u0
            offset[r:r + g.size] = g.offset
            r += g.size
        self.C = C.reshape(len(self.cd_rows), 3 * n_frames)
        self.cd_offset = offset
        self.need_angular = any(g.ukind == "attached" or g.wkind == "attached" for g in groups)
        self._out = {k: np.zeros((m, n)) if "_" in k else np.zeros(m)
                     for k in ("phi", "phi_q", "phid", "phid_q", "phid_v", "phidd",
                               "phidd_q", "phidd_v", "phidd_a")}

    def evaluate(self, fs: FrameSet, level: int, lam: np.ndarray | None) -> ClosureEval:
        """Rows at ``level`` (0: Phi, 1: + Phi', 2: + Phi''), FrameSet already evaluated."""
        n, C = self.n, self.C
        F3 = C.shape[1]
        e = ClosureEval(C @ fs.P.reshape(F3) - self.cd_offset, C @ fs.JL.reshape(F3, n))
        if level >= 1:
            e.phid = C @ fs.VL.reshape(F3)
            e.phid_q = C @ fs.DVL.reshape(F3, n)
            e.phid_v = e.phi_q
        if level >= 2:
            e.phidd = C @ fs.ACC.reshape(F3)
            D = C @ fs.DACC.reshape(F3, 3 * n)
            e.phidd_q, e.phidd_v, e.phidd_a = D[:, :n], D[:, n:2 * n], D[:, 2 * n:]
        if lam is not None:
            e.hess_lambda = ((lam[self.cd_rows] @ C) @ fs.HL.reshape(F3, n * n)).reshape(n, n)
        if not self.general:
            return e                          # rows are in order: all rows are of this kind
        out = self._out
        rows = self.cd_rows
        keys = ("phi", "phi_q") + (("phid", "phid_q", "phid_v") if level >= 1 else ()) \
            + (("phidd", "phidd_q", "phidd_v", "phidd_a") if level >= 2 else ())
        for k in keys:
            out[k][rows] = getattr(e, k)
        for g in self.general:
            evaluate_group(g, fs.frames, level, out)
        for k in keys:
            setattr(e, k, out[k].copy())
        if lam is not None:
            for g in self.general:
                e.hess_lambda = e.hess_lambda + hessian_lambda(g, fs.frames, lam, n)
        return e


def rotation_neutral(model: pin.Model, fid: int) -> np.ndarray:
    data = model.createData()
    pin.framesForwardKinematics(model, data, pin.neutral(model))
    return data.oMf[fid].rotation.copy()
