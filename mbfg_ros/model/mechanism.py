"""The mechanism model: URDF + mechanism config compiled into pinocchio-backed functions.

Following pinocchio's split, :class:`Mechanism` holds what never changes (the pinocchio Model,
the compiled closures and sensors, index maps) and :class:`MechanismData` the scratch of one
evaluation thread; every function takes the data explicitly, so one Mechanism can serve several
threads or estimators. Each sensor is compiled by its kind (:mod:`mbfg_ros.sensors`) into
``Mechanism.sensors``, which holds its numeric and symbolic models.

Coordinates: ``q``, ``v``, ``a`` are the joint coordinates of the URDF's movable joints in
pinocchio order (``Mechanism.joint_names``), radians or metres; n = len(q). The closure rows
number ``m``; ``lam`` (m,) are their multipliers; ``u`` (n_u,) the unknown input efforts of the
joints whose actuation is ``unknown`` (``Mechanism.input_joints``); ``tau`` (n,) the known
input efforts (zero for other joints).

The equations of motion residual (N m or N per coordinate) is

    r = RNEA(q, v, a) + (s - 1) G(q) + F(v) + o - tau - B u - Q_s(q, v) - Phi_q(q)^T lam

with ``s`` the gravity scale (1 unless estimated), ``G`` the generalized gravity at the config's
gravity, ``F`` the joint friction, ``o`` the joints' constant effort offsets and ``Q_s`` the
generalized force of the config's springs (:mod:`mbfg_ros.model.springs`); RNEA includes the
joints' armature (rotor inertia reflected through the gear: diag(armature) a, pinocchio's
``model.armature``, which its CRBA adds to the mass matrix too). Every function returning
derivatives returns them as dense arrays, exact (analytic, from pinocchio) unless its docstring
says otherwise.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pinocchio as pin

from mbfg_ros.errors import ConfigError
from mbfg_ros.model.closures import (ROWS, ClosureEval, ClosureSet, RowGroup, compile_closure,
                                     reaction_wrench, rotation_neutral)
from mbfg_ros.model.config import KEYFRAME_RATE_RANGE, ClosureConfig, RigConfig, load_rig_config, window_problem
from mbfg_ros.model.kinematics import FrameSet, cross3, cross_rows
from mbfg_ros.model.speed import needed_keyframe_rate
from mbfg_ros.model.springs import SpringModel, SpringSet
from mbfg_ros.model.urdf import UrdfDescription, link_inertia, load_urdf
from mbfg_ros.model.yaml_reader import YamlNode, check_name
from mbfg_ros.sensors.base import SensorModel
from mbfg_ros.sensors.encoder import EncoderModel
from mbfg_ros.sensors.gyro import GyroModel
from mbfg_ros.sensors.load_cell import LoadCellModel
from mbfg_ros.sensors.registry import SENSOR_KINDS, TopicConflict, channels, topic_inputs


@dataclass
class DynamicsEval:
    """Equations-of-motion residual r (n,) and its derivatives."""
    r: np.ndarray
    r_q: np.ndarray
    r_v: np.ndarray
    r_a: np.ndarray           # the mass matrix M(q)
    r_lam: np.ndarray         # -Phi_q^T
    r_u: np.ndarray           # -B
    r_s: np.ndarray           # d r / d gravity scale = G(q)
    r_mass: np.ndarray        # d r / d mass scale of the estimated link (zeros if none)


class MechanismData:
    """Scratch for evaluating a Mechanism (one per thread / estimator)."""

    def __init__(self, mech: "Mechanism") -> None:
        self.pin = mech.model.createData()
        self.frames = FrameSet(mech.model, self.pin, mech.closure_frame_ids,
                               angular=mech.closure_set.need_angular)
        self.closure_set = ClosureSet(mech.groups, mech.m, len(mech.closure_frame_ids), mech.n)
        self.springs = mech.springs.frame_set(mech.model, self.pin)
        self.sensor = mech.model.createData()       # the sensor models' (mbfg_ros.sensors)
        self.body = mech.body_model.createData() if mech.body_model is not None else None


class Mechanism:
    """Immutable mechanism model compiled from a URDF and a RigConfig."""

    def __init__(self, config: RigConfig, *, urdf_xml: str | None = None,
                 gravity: tuple[float, float, float] | None = None,
                 mass_scale: dict[str, float] | None = None,
                 length_scale: dict[str, float] | None = None) -> None:
        """Compile ``config``; the keyword overrides build a deliberately different model
        (used by the simulator for modelling-error scenarios)."""
        self.config = config
        cfg_file = str(config.source) if config.source else None
        if urdf_xml is not None:
            model, desc = load_urdf(xml=urdf_xml, source="robot_description")
        else:
            model, desc = load_urdf(config.urdf)
        self.urdf: UrdfDescription = desc
        root = YamlNode({}, "", cfg_file)
        if config.base_frame and config.base_frame != desc.root_link:
            raise ConfigError(f"base_frame must be the URDF's root link '{desc.root_link}'",
                              file=cfg_file, field="mechanism.base_frame", value=config.base_frame)
        self.base_frame = desc.root_link
        g = np.asarray(gravity if gravity is not None else config.gravity, float)
        model.gravity = pin.Motion(np.concatenate([g, np.zeros(3)]))
        self.gravity = g
        self._apply_overrides(model, mass_scale or {}, length_scale or {}, cfg_file)
        self.joint_names: list[str] = [model.names[j] for j in range(1, model.njoints)]
        self.n = model.nv
        self._tril = np.tril_indices(self.n, -1)
        self._diag = np.diag_indices(self.n)
        types = {j.name: j for j in desc.joints}
        self.joint_types = [types[name].type for name in self.joint_names]
        self.angular = np.array([types[name].is_angular for name in self.joint_names])
        self.index = {name: i for i, name in enumerate(self.joint_names)}
        self.lower = np.array([types[name].lower for name in self.joint_names])
        self.upper = np.array([types[name].upper for name in self.joint_names])
        self.link_names = list(desc.links)
        # extra frames from the config
        for i, fc in enumerate(config.frames):
            f = f"frames[{i}]"
            if model.existFrame(fc.name):
                raise ConfigError("a frame of this name already exists in the URDF", file=cfg_file,
                                  field=f + ".name", value=fc.name)
            parent = self._frame_id(model, fc.parent, root, f + ".parent")
            pf = model.frames[parent]
            placement = pf.placement * pin.SE3(pin.rpy.rpyToMatrix(*fc.rpy), np.asarray(fc.xyz, float))
            model.addFrame(pin.Frame(fc.name, pf.parentJoint, parent, placement, pin.FrameType.OP_FRAME))
        self.model = model
        self.frame_names = [fr.name for fr in model.frames]
        # joints config
        for name in config.joints:
            check_name(root, f"joints.{name}", name, self.joint_names, "joint")
        jc = [config.joint(name) for name in self.joint_names]
        self.viscous = np.array([j.viscous for j in jc])
        self.coulomb = np.array([j.coulomb for j in jc])
        self.coulomb_velocity = np.array([j.coulomb_velocity for j in jc])
        self.has_friction = bool(np.any(self.viscous > 0) or np.any(self.coulomb > 0))
        self._set_drive(jc)
        self.input_joints = [name for name, j in zip(self.joint_names, jc) if j.actuation == "unknown"]
        self.known_input_joints = [name for name, j in zip(self.joint_names, jc) if j.actuation == "known"]
        self.n_u = len(self.input_joints)
        self.B = np.zeros((self.n, self.n_u))
        for k, name in enumerate(self.input_joints):
            self.B[self.index[name], k] = 1.0
        # closures and springs
        self._compile_closures(config.closures, root)
        self.springs = self._compile_springs(config, root)
        # DOF
        for i, name in enumerate(config.dof):
            check_name(root, f"mechanism.dof[{i}]", name, self.joint_names, "joint")
        self.dof_names = list(config.dof) if config.dof else (list(self.joint_names) if self.m == 0 else [])
        if not self.dof_names:
            raise ConfigError("list the independent coordinates (joint names) of this closed-chain "
                              "mechanism", file=cfg_file, field="mechanism.dof")
        self.dof = np.array([self.index[name] for name in self.dof_names], dtype=int)
        self.dependent = np.array([i for i in range(self.n) if i not in set(self.dof)], dtype=int)
        for key in ("positions", "hint", "velocities"):
            for name in getattr(config.initial, key):
                check_name(root, f"mechanism.initial.{key}.{name}", name, self.joint_names, "joint")
        # sensors
        self._compile_sensors(config, root)
        self.dof_positions_sensed = set(self.dof_names) <= {e.config.joint for e in self.encoders}
        """Whether encoders read every DOF position (else the positions come from integrating
        velocities: ``keyframe_rate: auto`` then takes a finer grid, model/speed.py)."""
        self._settle_auto_rate(root)
        # optional mass-scale parameter: a model where only that link has inertia
        self.mass_link = config.estimator.estimate_mass_link
        self.body_model = None
        if self.mass_link:
            check_name(root, "estimator.estimate_mass_link", self.mass_link, self.link_names, "link")
            self.body_model = self._single_body_model(self.mass_link, root)

    # ----------------------------------------------------------------------------------------
    # construction helpers
    def _settle_auto_rate(self, root: YamlNode) -> None:
        """``keyframe_rate: auto`` on a rig whose DOF positions no encoder reads: the finer grid
        of :func:`~mbfg_ros.model.speed.needed_keyframe_rate` (the config parser, which does
        not know the URDF's joints, chose the rate for sensed positions)."""
        cfg = self.config
        est = cfg.estimator
        if not est.keyframe_rate_auto or self.dof_positions_sensed:
            return
        rate = min(needed_keyframe_rate(cfg.top_speed, positions_sensed=False), KEYFRAME_RATE_RANGE[1])
        if rate == est.keyframe_rate:
            return
        problem = window_problem(rate, est.lag)
        if problem:
            raise ConfigError(f"with keyframe_rate auto ({rate:g} Hz at top_speed {cfg.top_speed:g} rad/s, no "
                              f"encoder on a DOF): {problem}", file=root.file, field="estimator.lag",
                              value=est.lag)
        self.config = dataclasses.replace(cfg, estimator=dataclasses.replace(est, keyframe_rate=rate))

    @staticmethod
    def _frame_id(model: pin.Model, name: str, node: YamlNode, field: str) -> int:
        for ftype in (pin.FrameType.BODY, pin.FrameType.OP_FRAME, pin.FrameType.FIXED_JOINT,
                      pin.FrameType.JOINT):
            if model.existFrame(name, ftype):
                return model.getFrameId(name, ftype)
        names = sorted({fr.name for fr in model.frames if fr.type in (pin.FrameType.BODY, pin.FrameType.OP_FRAME)})
        check_name(node, field, name, names, "link or frame")
        raise AssertionError  # check_name raised

    def frame_id(self, name: str, node: YamlNode | None = None, field: str = "frame") -> int:
        """Pinocchio frame id of a link or config frame name (a ConfigError at ``field`` of
        ``node`` for an unknown one, with a "did you mean")."""
        return self._frame_id(self.model, name, node or YamlNode({}, "", None), field)

    def tf_frame(self, name: str) -> str:
        """The TF frame id of a link, config frame or joint name: a URDF joint's frame is its
        child link's (URDF puts the child link's frame at the joint)."""
        child = {j.name: j.child for j in self.urdf.tree}
        return child.get(name, name)

    def _apply_overrides(self, model: pin.Model, mass_scale: dict, length_scale: dict, cfg_file) -> None:
        for link, factor in mass_scale.items():
            fid = model.getFrameId(link, pin.FrameType.BODY)
            if fid >= len(model.frames):
                raise ConfigError("unknown link in mass scale", file=cfg_file, value=link)
            jid = model.frames[fid].parentJoint
            # scale the link's own inertia (pinocchio merged it into its joint's body)
            inertia = link_inertia(self.urdf, link)
            delta = pin.Inertia(inertia.mass * (factor - 1.0), inertia.lever,
                                inertia.inertia * (factor - 1.0))
            model.inertias[jid] = model.inertias[jid] + model.frames[fid].placement.act(delta)
        for joint, factor in length_scale.items():
            jid = model.getJointId(joint)
            if jid >= model.njoints:
                raise ConfigError("unknown joint in length scale", file=cfg_file, value=joint)
            pl = model.jointPlacements[jid]
            model.jointPlacements[jid] = pin.SE3(pl.rotation, pl.translation * factor)

    def _set_drive(self, joints: list) -> None:
        """The drives' armature (kg m^2 or kg, into pinocchio's ``model.armature``, which its
        CRBA, RNEA, RNEA derivatives and energy include) and constant offsets (N m or N)."""
        self.armature = np.array([j.armature for j in joints], float)
        self.offset = np.array([j.offset for j in joints], float)
        self.has_offset = bool(np.any(self.offset != 0.0))
        self.model.armature = self.armature.copy()

    def _single_body_model(self, link: str, root: YamlNode) -> pin.Model:
        body = self.model.copy()
        body.armature = np.zeros(body.nv)        # the link's own inertia only, no rotor
        fid = body.getFrameId(link, pin.FrameType.BODY)
        jid = body.frames[fid].parentJoint
        if jid == 0:
            raise root.error("estimator.estimate_mass_link", "the link does not move", link)
        own = body.frames[fid].placement.act(link_inertia(self.urdf, link))
        for j in range(body.njoints):
            body.inertias[j] = pin.Inertia.Zero()
        body.inertias[jid] = own
        return body

    def _compile_closures(self, closures: tuple[ClosureConfig, ...], root: YamlNode) -> None:
        frame_ids: list[int] = []

        def slot(fid: int) -> int:
            if fid not in frame_ids:
                frame_ids.append(fid)
            return frame_ids.index(fid)

        self.closure_configs = list(closures)
        self.groups: list[RowGroup] = []
        self.closure_rows: list[slice] = []
        start = 0
        for i, c in enumerate(closures):
            fa = self._frame_id(self.model, c.frame_a, root, f"closures[{i}].frame_a")
            fb = self._frame_id(self.model, c.frame_b, root, f"closures[{i}].frame_b")
            if self.model.frames[fa].parentJoint == self.model.frames[fb].parentJoint:
                raise root.error(f"closures[{i}].frame_b", "frame_a and frame_b are on the same rigid "
                                 "body: the closure would constrain nothing", c.frame_b)
            try:
                groups = compile_closure(i, c, start, slot(fa), slot(fb),
                                         rotation_neutral(self.model, fa))
            except ValueError as exc:
                raise root.error(f"closures[{i}].axis", str(exc), c.axis) from None
            self.groups.extend(groups)
            self.closure_rows.append(slice(start, start + ROWS[c.type]))
            start += ROWS[c.type]
        self.m = start
        self.closure_names = [c.name for c in closures]
        self.closure_groups = [[g for g in self.groups if g.closure == i] for i in range(len(closures))]
        self.closure_frame_ids = frame_ids
        self._slot = slot

    def closure_frame_slot(self, frame_id: int) -> int:
        """The slot of a pinocchio frame among the frames the closures evaluate (added if new)."""
        return self._slot(frame_id)

    def _compile_springs(self, config: RigConfig, root: YamlNode) -> SpringSet:
        springs = []
        for i, sc in enumerate(config.springs):
            fa = self._frame_id(self.model, sc.frame_a, root, f"springs[{i}].frame_a")
            fb = self._frame_id(self.model, sc.frame_b, root, f"springs[{i}].frame_b")
            if self.model.frames[fa].parentJoint == self.model.frames[fb].parentJoint:
                raise root.error(f"springs[{i}].frame_b", "frame_a and frame_b are on the same rigid "
                                 "body: the spring would exert no force", sc.frame_b)
            springs.append(SpringModel(sc, fa, fb))
        return SpringSet(springs, self.n)

    def _compile_sensors(self, config: RigConfig, root: YamlNode) -> None:
        """Every sensor of the config compiled by its kind (:mod:`mbfg_ros.sensors`), in the
        kinds' order; a load cell may add its frame to the closures' frames."""
        self.sensors: list[SensorModel] = []
        fields: dict[str, str] = {}
        for kind in SENSOR_KINDS:
            for i, c in enumerate(getattr(config.sensors, kind.section)):
                fields[c.name] = f"sensors.{kind.section}[{i}]"
                self.sensors.append(kind.compile(self, c, root, fields[c.name]))
        self.closure_frame_ids = list(self.closure_frame_ids)
        self.closure_set = ClosureSet(self.groups, self.m, len(self.closure_frame_ids), self.n)
        try:
            topic_inputs(channels(self))
        except TopicConflict as exc:
            field = fields.get(exc.model.name, f"joints.{exc.model.joint}")
            raise root.error(f"{field}.topic", str(exc), exc.model.topic) from None

    def sensors_of(self, kind: str) -> list[SensorModel]:
        """The compiled sensors of one kind (``encoder``, ``gyro``, ...), in config order."""
        return [s for s in self.sensors if s.kind == kind]

    @cached_property
    def encoders(self) -> list[EncoderModel]:
        return self.sensors_of("encoder")

    @cached_property
    def gyros(self) -> list[GyroModel]:
        return self.sensors_of("gyro")

    @cached_property
    def load_cells(self) -> list[LoadCellModel]:
        return self.sensors_of("load_cell")

    # ----------------------------------------------------------------------------------------
    def create_data(self) -> MechanismData:
        return MechanismData(self)

    def neutral(self) -> np.ndarray:
        return np.zeros(self.n)

    # ----------------------------------------------------------------------------------------
    # closures
    def closures(self, data: MechanismData, q: np.ndarray, v: np.ndarray | None = None,
                 a: np.ndarray | None = None, lam: np.ndarray | None = None) -> ClosureEval:
        """Closure rows at position level, and at velocity / acceleration level when v / a are
        given; with ``lam`` also the multiplier-weighted Hessian for the dynamics derivative."""
        level = 0 if v is None else (1 if a is None else 2)
        if self.m == 0:
            z = np.zeros((0, self.n))
            e = ClosureEval(np.zeros(0), z, np.zeros(0), z, z, np.zeros(0), z, z, z)
            e.hess_lambda = np.zeros((self.n, self.n)) if lam is not None else None
            return e
        fs = data.frames
        fs.position(q)
        if level >= 1 or lam is not None:
            fs.hessians(q)
        if level >= 1:
            fs.velocity(v)
        if level >= 2:
            fs.acceleration(q, v, a)
        return data.closure_set.evaluate(fs, level, lam)

    def closure_position(self, data: MechanismData, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Phi(q) (m,) and Phi_q (m, n)."""
        e = self.closures(data, q)
        return e.phi, e.phi_q

    def closure_wrench(self, data: MechanismData, closure: int, q: np.ndarray, lam: np.ndarray):
        """(force, torque) the closure exerts on frame_b's body at its origin, base frame (N, N m).

        Requires nothing else; evaluates the closure frames at q.
        """
        data.frames.position(q)
        return reaction_wrench(self.closure_groups[closure], data.frames.frames, lam, self.n)

    def closure_wrenches_in_frame_b(self, data: MechanismData, q: np.ndarray,
                                    lam: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """Every closure's (force, torque) on frame_b's body at its origin, expressed in frame_b
        (N, N m); one evaluation of the closure frames for all of them."""
        if self.m == 0:
            return []
        fs = data.frames
        fs.position(q)
        out = []
        for groups in self.closure_groups:
            f, t = reaction_wrench(groups, fs.frames, lam, self.n)
            R = fs.frames[groups[0].bslot].R
            out.append((R.T @ f, R.T @ t))
        return out

    # ----------------------------------------------------------------------------------------
    # dynamics
    def friction(self, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Joint friction efforts F(v) and dF/dv (diagonal, returned as a vector)."""
        th = np.tanh(v / self.coulomb_velocity)
        f = self.viscous * v + self.coulomb * th
        df = self.viscous + self.coulomb * (1.0 - th * th) / self.coulomb_velocity
        return f, df

    def mass_matrix(self, data: MechanismData, q: np.ndarray) -> np.ndarray:
        M = pin.crba(self.model, data.pin, q).copy()
        M[self._tril] = M.T[self._tril]
        return M

    def inverse_dynamics(self, data: MechanismData, q: np.ndarray, v: np.ndarray, a: np.ndarray,
                         lam: np.ndarray | None = None, tau: np.ndarray | None = None,
                         u: np.ndarray | None = None, gravity_scale: float = 1.0,
                         mass_scale: float = 1.0, closure: ClosureEval | None = None,
                         parameters: bool = True) -> DynamicsEval:
        """Residual of the equations of motion and its derivatives (see module docstring).

        ``closure`` may pass a ClosureEval of the same q evaluated with ``lam`` (reuses its
        Phi_q and multiplier Hessian). ``parameters`` False skips the derivatives w.r.t. the
        gravity and mass scales (then r_s and r_mass are zeros).
        """
        m, n = self.model, self.n
        dq, dv, M = pin.computeRNEADerivatives(m, data.pin, q, v, a)
        r = data.pin.tau.copy()
        r_q = dq.copy()
        r_v = dv.copy()
        M = M.copy()
        M[self._tril] = M.T[self._tril]          # pinocchio fills the upper triangle
        r_s = np.zeros(n)
        r_mass = np.zeros(n)
        if self.body_model is not None and (parameters or mass_scale != 1.0):
            bq, bv, bM = pin.computeRNEADerivatives(self.body_model, data.body, q, v, a)
            rb = data.body.tau.copy()
            bM = bM.copy()
            bM[self._tril] = bM.T[self._tril]
            Gb = pin.computeGeneralizedGravity(self.body_model, data.body, q).copy()
            dGb = pin.computeGeneralizedGravityDerivatives(self.body_model, data.body, q)
            r_mass = rb + (gravity_scale - 1.0) * Gb
            r += (mass_scale - 1.0) * r_mass
            r_q += (mass_scale - 1.0) * (bq + (gravity_scale - 1.0) * dGb)
            r_v += (mass_scale - 1.0) * bv
            M += (mass_scale - 1.0) * bM
            r_s = (mass_scale - 1.0) * Gb
        if parameters or gravity_scale != 1.0:
            G = pin.computeGeneralizedGravity(m, data.pin, q)
            r_s = r_s + G
            if gravity_scale != 1.0:
                r += (gravity_scale - 1.0) * G
                r_q += (gravity_scale - 1.0) * pin.computeGeneralizedGravityDerivatives(m, data.pin, q)
        if self.has_friction:
            f, df = self.friction(v)
            r += f
            r_v[self._diag] += df
        if self.has_offset:
            r += self.offset
        if self.springs:
            se = self.springs.evaluate(data.springs, q, v)
            r -= se.Q
            r_q -= se.Q_q
            r_v -= se.Q_v
        if tau is not None:
            r -= tau
        if u is not None and self.n_u:
            r -= self.B @ u
        if self.m:
            lam = np.zeros(self.m) if lam is None else lam
            if closure is None or closure.hess_lambda is None:
                closure = self.closures(data, q, lam=lam)
            r -= closure.phi_q.T @ lam
            r_q -= closure.hess_lambda
            r_lam = -closure.phi_q.T
        else:
            r_lam = np.zeros((n, 0))
        return DynamicsEval(r, r_q, r_v, M, r_lam, -self.B, r_s, r_mass)

    def forward_dynamics(self, data: MechanismData, q: np.ndarray, v: np.ndarray,
                         tau: np.ndarray | None = None, u: np.ndarray | None = None,
                         gravity_scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
        """Accelerations and multipliers of the constrained equations of motion.

        Solves [M Phi_q^T; Phi_q 0] [a; -lam] = [tau + B u - h; -(Phi_q)' v] in the least-squares
        sense (rank-revealing, so redundant closure rows are fine).
        """
        n = self.n
        zero = np.zeros(n)
        d = self.inverse_dynamics(data, q, v, zero, np.zeros(self.m), tau, u, gravity_scale,
                                  parameters=False)
        rhs_dyn = -d.r                      # tau + B u - h(q, v) - F(v)
        if self.m == 0:
            return np.linalg.solve(d.r_a, rhs_dyn), np.zeros(0)
        c = self.closures(data, q, v, zero)
        K = np.block([[d.r_a, -c.phi_q.T], [c.phi_q, np.zeros((self.m, self.m))]])
        rhs = np.concatenate([rhs_dyn, -c.phidd])
        sol = np.linalg.lstsq(K, rhs, rcond=1e-12)[0]
        return sol[:n], sol[n:]

    def closure_external_forces(self, data: MechanismData, q: np.ndarray, lam: np.ndarray):
        """The closure reactions as pinocchio external forces (local joint frames), so that
        rnea(q, v, a, fext) = RNEA(q, v, a) - Phi_q^T lam. Uses the placements at q."""
        fext = pin.StdVec_Force()
        for _ in range(self.model.njoints):
            fext.append(pin.Force.Zero())
        if self.m == 0:
            return fext
        fs = data.frames
        fs.position(q)
        for groups in self.closure_groups:
            A = fs.frames[groups[0].aslot]
            B = fs.frames[groups[0].bslot]
            fB, tB = reaction_wrench(groups, fs.frames, lam, self.n)
            fA, tA = _reaction_on_a(groups, fs.frames, lam)
            for F, f, t in ((B, fB, tB), (A, fA, tA)):
                jid = F.joint
                if jid == 0:
                    continue
                # wrench about the world origin, then into the joint's local frame
                wrench_o = pin.Force(f, t + cross3(F.p, f))
                fext[jid] = fext[jid] + data.pin.oMi[jid].actInv(wrench_o)
        return fext

    def spring_external_forces(self, data: MechanismData, q: np.ndarray, v: np.ndarray, fext=None):
        """The springs' forces as pinocchio external forces (local joint frames), added to
        ``fext`` (a new list when None), so that rnea(q, v, a, fext) = RNEA(q, v, a) - Q_s."""
        if fext is None:
            fext = pin.StdVec_Force()
            for _ in range(self.model.njoints):
                fext.append(pin.Force.Zero())
        d = data.pin
        for spring, f_b in self.springs.end_forces(self.model, d, q, v):
            for fid, f in ((spring.frame_b, f_b), (spring.frame_a, -f_b)):
                jid = self.model.frames[fid].parentJoint
                if jid == 0:
                    continue
                p = d.oMf[fid].translation
                fext[jid] = fext[jid] + d.oMi[jid].actInv(pin.Force(f, cross3(p, f)))
        return fext

    # ----------------------------------------------------------------------------------------
    # kinematics for output
    @cached_property
    def joint_transforms(self):
        """The movable joints' child-in-parent placements for many states at once (TF):
        :class:`~mbfg_ros.model.joint_transforms.JointTransforms`, built on first use."""
        from mbfg_ros.model.joint_transforms import JointTransforms
        return JointTransforms(self)

    def link_placements(self, data: MechanismData, q: np.ndarray) -> dict[str, pin.SE3]:
        """Placement of every URDF link in the base frame (for TF)."""
        pin.framesForwardKinematics(self.model, data.pin, q)
        out = {}
        for name in self.link_names:
            fid = self.model.getFrameId(name, pin.FrameType.BODY)
            if fid < len(self.model.frames):
                out[name] = data.pin.oMf[fid]
        return out

    def frame_placement(self, data: MechanismData, q: np.ndarray, frame_id: int) -> pin.SE3:
        pin.framesForwardKinematics(self.model, data.pin, q)
        return data.pin.oMf[frame_id]

    def mechanical_energy(self, data: MechanismData, q: np.ndarray, v: np.ndarray) -> float:
        """Kinetic + potential energy (J): gravity's relative to the base origin, plus the
        springs' k (L - L0)^2 / 2."""
        energy = float(pin.computeMechanicalEnergy(self.model, data.pin, q, v))
        if self.springs:
            energy += self.springs.potential_energy(self.model, data.pin, q)
        return energy


def _reaction_on_a(groups, frames, lam):
    """Force and torque the closure exerts on frame A's body, about A's origin (base frame)."""
    A, B = frames[groups[0].aslot], frames[groups[0].bslot]
    d = B.p - A.p
    f = np.zeros(3)
    t = np.zeros(3)
    for g in groups:
        lr = lam[g.rows]
        if g.wkind == "diff" and g.ukind != "diff":
            u = g.u0 @ A.R.T if g.ukind == "attached" else g.u0
            f -= lr @ u
            if g.ukind == "attached":
                t += lr @ cross_rows(u, np.broadcast_to(d, u.shape))
        elif g.wkind == "diff":
            f -= lr[0] * 2.0 * g.uscale * d
        else:
            u = g.u0 @ frames[g.uslot].R.T
            w = g.w0 @ frames[g.wslot].R.T
            t += lr @ cross_rows(u, w)
    return f, t


def load_mechanism(config_path: str | Path, **overrides) -> Mechanism:
    """Load a mechanism config file and compile its Mechanism."""
    cfg = load_rig_config(config_path)
    try:
        return Mechanism(cfg, **overrides)
    except ConfigError as exc:
        raise exc.with_file(str(config_path)) from None
