"""Load cell: one component of a force, geometry_msgs/WrenchStamped (or std_msgs/Float64).

Config section ``load_cells`` (:class:`LoadCellConfig`). Reading (1,): N or N m, the component
``axis`` (in ``frame``) of the ``force`` or ``torque`` of what the cell ``measures``:

- ``closure``: the reaction a loop closure exerts on frame_b's body (at frame_b's origin); the
  frame defaults to frame_b;
- ``joint``: the wrench a joint transmits from its parent to its child (RNEA with the closure
  reactions and the springs' forces as external forces); the frame defaults to the joint's
  child link;
- ``actuator``: the actuator effort of a joint whose actuation is known or unknown.

Model y = scale x load + offset (the calibration ``scale``, ``offset``, which ``mbfg identify``
estimates); residual (y - scale load(q(t), v(t), a(t), lam(t), u(t), tau(t)) - offset) / sigma. Messages: a WrenchStamped
whose ``force`` (or ``torque``) times the axis is the reading, in the cell's frame; a rig that
publishes a plain number sends std_msgs/Float64, stamped with its receive time.
"""
from __future__ import annotations

from dataclasses import dataclass

import casadi as ca
import numpy as np
import pinocchio as pin

from mbfg_ros.model.closures import reaction_wrench
from mbfg_ros.model.config_fields import noise_field, rate_field, scale_field, time_offset_field, topic_field
from mbfg_ros.model.kinematics import cross, cross3
from mbfg_ros.model.symbolic import Placement
from mbfg_ros.model.yaml_reader import YamlNode, check_name
from mbfg_ros.sensors.base import (Calibration, InputReport, Reading, ReadingRows, SensorKind, SensorModel, TopicInput,
                                   stamp_ns)

WRENCH_STAMPED = "geometry_msgs/msg/WrenchStamped"
FLOAT64 = "std_msgs/msg/Float64"
MEASURES = ("closure", "joint", "actuator")


@dataclass(frozen=True)
class LoadCellConfig:
    """Load cell: geometry_msgs/WrenchStamped (or std_msgs/Float64) on ``topic``.

    ``measures``:
      - ``closure``: a component of the reaction the closure exerts on frame_b's body;
      - ``joint``: a component of the wrench a joint transmits from parent to child;
      - ``actuator``: the actuator effort of a joint (N m or N).
    ``component`` (force|torque) and ``axis`` (in ``frame``) select the measured component.
    ``scale`` and ``offset``: the reading is scale x that component + offset (N or N m).
    ``time_offset`` (s): the reading stamped t was taken at t - time_offset.
    """
    name: str
    measures: str
    noise: float
    topic: str
    rate: float = 200.0
    closure: str = ""
    joint: str = ""
    component: str = "force"
    axis: tuple[float, float, float] = (1.0, 0.0, 0.0)
    frame: str = ""
    scale: float = 1.0
    offset: float = 0.0
    time_offset: float = 0.0


def component_wrench(component: str, axis, value) -> tuple[np.ndarray, np.ndarray]:
    """(force, torque) of a reading of ``component`` along ``axis``: the reading times the axis;
    (3,) each for one reading, (N, 3) for N readings (the same products bit for bit)."""
    vec = np.asarray(value, float)[..., None] * np.asarray(axis, float)
    zero = np.zeros_like(vec)
    return (vec, zero) if component == "force" else (zero, vec)


def shared_wrench(parts: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """(force, torque) of one WrenchStamped from the readings of the cells it carries (their
    :meth:`LoadCellModel.message_part`): per component, the vector whose component along each
    cell's axis is its reading (exact: the axes of one component are independent,
    :meth:`WrenchInput.check`); one cell: the reading times its axis."""
    out = []
    for component in ("force", "torque"):
        rows = [p for p in parts if p["component"] == component]
        if len(rows) == 1:
            out.append(component_wrench(component, rows[0]["axis"], rows[0]["value"])[component == "torque"])
        elif rows:
            A = np.array([p["axis"] for p in rows], float)
            out.append(np.linalg.lstsq(A, np.array([p["value"] for p in rows], float), rcond=None)[0])
        else:
            out.append(np.zeros(3))
    return out[0], out[1]


def axis_component(axis: np.ndarray, x, y, z):
    """axis . (x, y, z), for numbers or arrays alike (bit for bit the same either way)."""
    return axis[0] * x + axis[1] * y + axis[2] * z


@dataclass(frozen=True)
class LoadCellModel(SensorModel):
    """A load cell; see LoadCellConfig for ``measures`` kinds."""
    config: LoadCellConfig
    axis: np.ndarray          # unit axis in the measurement frame
    frame_slot: int           # slot of the measurement frame in the closure FrameSet (closure kind)
    frame_id: int             # pinocchio frame the axis is expressed in
    closure: int = -1
    force_map: np.ndarray | None = None   # (3, m): lam -> reaction force, when constant
    joint_index: int = -1     # coordinate index (actuator) / pinocchio joint id (joint)
    joint_id: int = -1
    input_index: int = -1     # index into u for actuator cells on unknown-input joints
    reads_tau: bool = False   # an actuator cell of a rig with known inputs

    kind = "load_cell"
    dim = 1
    level = 2
    message_type = WRENCH_STAMPED
    message_group = "wrench"

    @property
    def needs_tau(self) -> bool:
        return self.reads_tau

    def unit(self, mech) -> str:
        """N or N m: a force component, or an actuator effort of a prismatic joint, is in N."""
        c = self.config
        if c.measures == "actuator":
            return "N m" if mech.angular[mech.index[c.joint]] else "N"
        return "N" if c.component == "force" else "N m"

    def axes(self) -> list[str]:
        return [self.config.component]

    # -- numeric model -------------------------------------------------------------------------
    def value(self, mech, data, q, v=None, a=None, lam=None, u=None, tau=None, gravity_scale=1.0):
        return np.array([self.evaluate(mech, data, q, v, a, lam, u, tau, derivatives=False)[0]])

    def evaluate(self, mech, data, q, v, a, lam, u=None, tau=None, derivatives: bool = True):
        """Load-cell reading model: the calibration's ``scale`` times the load (:meth:`load`)
        plus its ``offset``. Returns (y, y_q, y_v, y_a, y_lam, y_u) as :meth:`load`."""
        out = self.load(mech, data, q, v, a, lam, u, tau, derivatives)
        c = self.config
        if c.scale == 1.0 and c.offset == 0.0:
            return out
        y, *rest = out
        return (c.scale * y + c.offset, *[None if x is None else c.scale * x for x in rest])

    def load(self, mech, data, q, v, a, lam, u=None, tau=None, derivatives: bool = True):
        """The load the cell measures (N or N m, before its calibration). Returns (y, y_q, y_v,
        y_a, y_lam, y_u); y_v and y_a are None when identically zero (closure reactions depend
        on q and lam only).

        closure: exact derivatives. actuator: exact. joint: the transmitted wrench comes from
        pinocchio's RNEA with the closure forces as external forces; pinocchio has no derivative
        of a single joint's transmitted wrench, so its q and v derivatives are central
        differences (a and lam enter linearly and are differenced exactly).
        """
        n, mm = mech.n, mech.m
        zq, zl, zu = np.zeros(n), np.zeros(mm), np.zeros(mech.n_u)
        kind = self.config.measures
        if kind == "actuator":
            j = self.joint_index
            y = (tau[j] if tau is not None else 0.0)
            y_u = zu.copy()
            if self.input_index >= 0:
                y += u[self.input_index] if u is not None else 0.0
                y_u[self.input_index] = 1.0
            return float(y), zq, zq.copy(), zq.copy(), zl, y_u
        if kind == "closure" and self.force_map is not None:
            fs = data.frames
            fs.position(q)
            F = fs.frames[self.frame_slot]
            e = F.R @ self.axis
            f = self.force_map @ lam
            y_q = cross3(e, f) @ F.Ja                 # f . (Ja_i x e) = (e x f) . Ja_i
            return float(e @ f), y_q, None, None, e @ self.force_map, zu
        if kind == "closure":
            fs = data.frames
            fs.position(q)
            groups = mech.closure_groups[self.closure]
            f, t, f_q, t_q, f_l, t_l = reaction_wrench(groups, fs.frames, lam, n, with_derivatives=True)
            F = fs.frames[self.frame_slot]
            e = F.R @ self.axis
            vec, vec_q, vec_l = (f, f_q, f_l) if self.config.component == "force" else (t, t_q, t_l)
            y = float(e @ vec)
            De = cross(F.Ja[None], e[None, :, None])[0]   # d e / dq: Ja_i x e
            y_q = vec @ De + e @ vec_q
            return y, y_q, zq.copy(), zq.copy(), e @ vec_l, zu
        # joint transmitted wrench
        fun = lambda qq, vv, aa, ll: self._joint_wrench_component(mech, data, qq, vv, aa, ll)  # noqa: E731
        y = fun(q, v, a, lam)
        if not derivatives:
            return y, None, None, None, None, zu
        h = 1e-6
        eye = np.eye(n)
        y_q = np.array([(fun(q + h * eye[i], v, a, lam) - fun(q - h * eye[i], v, a, lam)) / (2 * h)
                        for i in range(n)])
        y_v = np.array([(fun(q, v + h * eye[i], a, lam) - fun(q, v - h * eye[i], a, lam)) / (2 * h)
                        for i in range(n)])
        y_a = np.array([fun(q, v, a + eye[i], lam) - y for i in range(n)])
        el = np.eye(mm)
        y_l = np.array([fun(q, v, a, lam + el[i]) - y for i in range(mm)])
        return y, y_q, y_v, y_a, y_l, zu

    def _joint_wrench_component(self, mech, data, q, v, a, lam) -> float:
        m, d = mech.model, data.sensor
        fext = mech.closure_external_forces(data, q, lam) if mech.m else None
        if mech.springs:
            fext = mech.spring_external_forces(data, q, v, fext)
        if fext is None:
            pin.rnea(m, d, q, v, a)
        else:
            # closure_external_forces used data.pin's placements at q (oMi); rnea on data.sensor
            pin.rnea(m, d, q, v, a, fext)
        f_j = d.f[self.joint_id]                    # parent -> subtree wrench, joint frame
        frame = m.frames[self.frame_id]
        # express in the measurement frame: X*_{F<-j}
        jMf = (d.oMi[self.joint_id].inverse() * d.oMi[frame.parentJoint]) * frame.placement
        f_F = jMf.actInv(f_j)
        vec = f_F.linear if self.config.component == "force" else f_F.angular
        return float(self.axis @ vec)

    # -- symbolic ------------------------------------------------------------------------------
    def symbolic(self, sym, q, v, a, lam, u, tau):
        """The cell's reading as SX (= :meth:`evaluate`'s y): scale x load + offset, each
        calibration constant through ``sym.constant`` (an identification's parameters)."""
        c = self.config
        load = self.symbolic_load(sym, q, v, a, lam, u, tau)
        return sym.constant(self.name, "scale", c.scale) * load + sym.constant(self.name, "offset", c.offset)

    def symbolic_load(self, sym, q, v, a, lam, u, tau):
        """The load the cell measures as SX (= :meth:`load`'s y, before the calibration)."""
        mech = sym.mech
        kind = self.config.measures
        if kind == "actuator":
            y = tau[self.joint_index]
            if self.input_index >= 0:
                y = y + u[self.input_index]
            return y
        if kind == "closure":
            frames = sym.closure_frames(q)
            e = ca.mtimes(frames[self.frame_slot][0], ca.DM(self.axis))
            if self.force_map is not None:
                return ca.dot(e, ca.mtimes(ca.DM(self.force_map), lam))
            fB, tB, _, _ = sym.reaction(mech.closure_groups[self.closure], frames, lam)
            return ca.dot(e, fB if self.config.component == "force" else tB)
        # joint: the wrench the joint transmits, from RNEA with the closure reactions and the
        # springs as external forces, expressed in the measurement frame
        P = sym.joint_placements(q)
        fext = sym.closure_external_forces(q, lam, P) if mech.m else None
        if mech.springs:
            fext = sym.add_spring_forces(q, v, P, fext)
        _, f = sym.rnea_forces(q, v, a, 1.0, 1.0, fext)
        fl, fa = f[self.joint_id]
        frame = sym.model.frames[self.frame_id]
        jMf = P[self.joint_id].inverse() * P[frame.parentJoint] * Placement.of(frame.placement)
        fl, fa = jMf.force_inverse(fl, fa)
        return ca.dot(ca.DM(self.axis), fl if self.config.component == "force" else fa)

    def residual(self, sym, z, y, tau, bias):
        t = tau if tau is not None else ca.DM.zeros(sym.n)
        pred = self.symbolic(sym, z.q, z.v, z.a, z.lam, z.u, t)
        return (y[0] - pred) / self.config.noise

    def calibration(self, mech):
        c = self.config
        return [Calibration("offset", c.offset, self.unit(mech)), Calibration("scale", c.scale, "")]

    # -- messages, check -----------------------------------------------------------------------
    def header_frame(self, mech) -> str:
        """Frame name of the cell's axis (the frame_id of its messages, a TF frame): its
        ``frame``, else the closure's frame_b, else the joint's child link (joint and actuator
        cells); a joint named as the frame is its child link."""
        c = self.config
        if c.frame:
            return mech.tf_frame(c.frame)
        if c.measures == "closure":
            return mech.closure_configs[self.closure].frame_b
        child = {j.name: j.child for j in mech.urdf.joints}
        return child[c.joint]

    def sample_group(self, mech, rate: float) -> str:
        """The load cells of one topic read one message: one group, named after the first."""
        first = next(c for c in mech.load_cells if c.config.topic == self.config.topic)
        return f"{self.kind}|{first.name}"

    def message_part(self, value):
        """Its component, axis and reading: the cells of one message make its wrench together
        (:func:`shared_wrench`)."""
        return {"component": self.config.component, "axis": self.axis, "value": float(value[0])}

    def facts(self, mech):
        c = self.config
        what = {"closure": f"closure {c.closure}", "joint": f"joint {c.joint}",
                "actuator": f"actuator {c.joint}"}[c.measures]
        return {"name": c.name, "kind": self.kind, "measures": c.measures, "of": what,
                "component": c.component, "axis": list(c.axis),
                "frame": mech.model.frames[self.frame_id].name if self.frame_id >= 0 else "",
                "topic": c.topic, "rate": c.rate, "noise": c.noise, "unit": self.unit(mech),
                "message": self.message_type}

    @staticmethod
    def describe(facts):
        return f"{facts['of']} {facts['component']} along {tuple(round(a, 3) for a in facts['axis'])}" + \
            (f" in {facts['frame']}" if facts["frame"] else "")


class WrenchInput(TopicInput):
    """A load cell's topic: WrenchStamped (axis . force or torque) or Float64 (the number, at its
    receive time). Several cells may read one WrenchStamped topic, each its component of every
    message (a force-torque sensor's six): :meth:`check` says whether they can; such a topic
    takes no Float64 (one number)."""

    types = (WRENCH_STAMPED, FLOAT64)

    def __init__(self, topic: str) -> None:
        super().__init__(topic)
        self.cells: list[LoadCellModel] = []

    @property
    def sensors(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.cells)

    def add(self, model: LoadCellModel) -> None:
        self.cells.append(model)
        if len(self.cells) > 1:
            self.types = (WRENCH_STAMPED,)        # a Float64 holds one number

    def check(self) -> None:
        """ValueError unless the cells can share the WrenchStamped topic: every message gives
        each of them a reading, so they have one rate and one frame (the message's frame_id),
        and the axes of each component are linearly independent (at most three: two cells along
        one direction would read the same number twice)."""
        cells = self.cells
        if len(cells) < 2:
            return
        names = ", ".join(c.name for c in cells)
        if len({c.config.rate for c in cells}) > 1:
            raise ValueError(f"load cells {names} read one message on {self.topic}: they need the same "
                             f"rate (rates: {', '.join(f'{c.config.rate:g}' for c in cells)} Hz)")
        if len({c.frame_id for c in cells}) > 1:
            raise ValueError(f"load cells {names} read one message on {self.topic}: they need the same "
                             "frame (a WrenchStamped has one frame_id)")
        for component in ("force", "torque"):
            axes = np.array([c.axis for c in cells if c.config.component == component]).reshape(-1, 3)
            if axes.shape[0] > np.linalg.matrix_rank(axes, tol=1e-6):
                raise ValueError(f"load cells {names} read one message on {self.topic}: the axes of "
                                 f"their {component} components must be linearly independent")

    def decode(self, msgtype: str, msg, receive_ns: int | None, report: InputReport) -> list[Reading]:
        if msgtype == FLOAT64:
            if receive_ns is None:
                report.problem("std_msgs/Float64 has no stamp and no receive time is known")
                return []
            (cell,) = self.cells
            return [Reading(cell.name, int(receive_ns), np.array([float(msg.data)]))]
        ns = stamp_ns(msg)
        out = []
        for cell in self.cells:
            v = getattr(msg.wrench, cell.config.component)
            value = float(axis_component(np.asarray(cell.config.axis, float), float(v.x), float(v.y), float(v.z)))
            out.append(Reading(cell.name, ns, np.array([value])))
        return out

    def decode_rows(self, msgtype: str, rows, receive_ns: np.ndarray, report: InputReport) -> list[ReadingRows]:
        N = len(rows)
        if msgtype == FLOAT64:
            (cell,) = self.cells
            return [ReadingRows(cell.name, np.asarray(receive_ns, np.int64), rows.values("data"), 0)]
        stamps = rows.stamps_ns()
        out = []
        for rank, cell in enumerate(self.cells):
            v = rows.values("wrench." + cell.config.component)
            value = axis_component(np.asarray(cell.config.axis, float), v[:, 0], v[:, 1], v[:, 2])
            out.append(ReadingRows(cell.name, stamps, value.reshape(N, 1), rank))
        return out


LoadCellModel.input_type = WrenchInput


class LoadCellKind(SensorKind):
    name = "load_cell"
    section = "load_cells"
    default_rate = 200.0
    model = LoadCellModel

    def parse(self, n: YamlNode) -> LoadCellConfig:
        measures = n.str("measures", choices=MEASURES)
        return LoadCellConfig(
            name=n.str("name"), measures=measures, noise=noise_field(n), topic=topic_field(n),
            rate=rate_field(n, self.default_rate),
            closure=n.str("closure") if measures == "closure" else "",
            joint=n.str("joint") if measures in ("joint", "actuator") else "",
            component=n.str("component", "force", choices=("force", "torque")),
            axis=n.vector("axis", 3, (1.0, 0.0, 0.0), unit=True),
            frame=n.str("frame", ""), scale=scale_field(n, "scale", 1)[0],
            offset=n.float("offset", 0.0, unit="N or N m"), time_offset=time_offset_field(n))

    def compile(self, mech, c: LoadCellConfig, root: YamlNode, f: str) -> LoadCellModel:
        axis = np.asarray(c.axis, float)
        if c.measures == "closure":
            check_name(root, f + ".closure", c.closure, mech.closure_names, "closure")
            k = mech.closure_names.index(c.closure)
            frame = c.frame or mech.closure_configs[k].frame_b
            fid = mech.frame_id(frame, root, f + ".frame")
            return LoadCellModel(c, axis, mech.closure_frame_slot(fid), fid, closure=k,
                                 force_map=self._constant_force_map(mech, k, c))
        check_name(root, f + ".joint", c.joint, mech.joint_names, "joint")
        if c.measures == "joint":
            jid = mech.model.getJointId(c.joint)
            frame = c.frame or c.joint
            fid = mech.frame_id(frame, root, f + ".frame")
            return LoadCellModel(c, axis, -1, fid, joint_index=mech.index[c.joint], joint_id=jid)
        act = mech.config.joint(c.joint).actuation
        if act == "passive":
            raise root.error(f + ".joint", "an actuator load cell needs a joint whose "
                             "actuation is 'known' or 'unknown' (joints: section)", c.joint)
        k = mech.input_joints.index(c.joint) if act == "unknown" else -1
        # only an actuator cell on a rig with known inputs reads the known efforts
        return LoadCellModel(c, axis, -1, -1, joint_index=mech.index[c.joint], input_index=k,
                             reads_tau=bool(mech.known_input_joints))

    @staticmethod
    def _constant_force_map(mech, k: int, cell: LoadCellConfig) -> np.ndarray | None:
        """lam -> reaction force on frame_b (base frame) if the closure's rows all have constant
        directions (points, planar pins): then the map is a constant matrix."""
        groups = mech.closure_groups[k]
        if cell.component != "force" or any(g.ukind != "const" or g.wkind != "diff" for g in groups):
            return None
        F = np.zeros((3, mech.m))
        for g in groups:
            F[:, g.rows] = g.u0.T
        return F


KIND = LoadCellKind()
