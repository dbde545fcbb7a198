"""The constant numbers of a rig model that a recording can identify, and the symbolic model
that takes them as parameters (what `mbfg identify` estimates).

Parameters (:func:`model_parameters`), each held as a change from the config's (URDF's) value,
so that theta = 0 is the config's model:

- ``inertia``: per moving body (a URDF link and the links fixed to it, named by the link a
  movable joint carries), its 10 standard inertial parameters in that joint's frame (= the
  link's frame): mass ``mass`` (kg), first moments ``mx my mz`` = mass x centre of mass (kg m)
  and the inertia about the frame's origin ``ixx ixy ixz iyy iyz izz`` (kg m^2). The equations
  of motion are linear in them (so the combinations a recording identifies, the base
  parameters, are a property of the rig and the motion, not of where the solver starts);
- ``friction``: per joint ``viscous`` (N m s/rad or N s/m) and ``coulomb`` (N m or N; its
  smoothing ``coulomb_velocity`` stays the config's);
- ``armature`` (kg m^2 or kg) and ``offset`` (N m or N) per joint;
- the sensors' calibration, one group per sensor kind that has one (its module in
  :mod:`mbfg_ros.sensors` says what: :meth:`~mbfg_ros.sensors.base.SensorModel.calibration`):
  ``encoder``: per encoder its ``offset`` (rad or m: reading = position + offset); ``gyro``: per
  measured axis ``bias_<axis>`` (rad/s) and ``scale_<axis>`` (reading = scale x angular
  velocity + bias); ``load_cell``: per load cell ``offset`` (N or N m) and ``scale`` (reading =
  scale x load + offset);
- ``timing``: per sensor but the reference (:func:`timing_reference`, the first encoder) its
  ``time_offset`` (s): its reading stamped t was taken at t - time_offset. The estimator takes
  the config's value off the stamps at intake; the parameter's change moves each reading's
  fraction of its keyframe step, s - change / h, in the step function (the identification
  moves the readings to the current offset before each pass, so that the change is 0 where
  the rows are linearised).

:class:`ParametricMechanism` is :class:`~mbfg_ros.model.symbolic.SymbolicMechanism` with those
changes added to its expressions; the estimator's step function built on it takes them as the
last entries of its parameter vector (``StepLayout.theta``) and returns the rows' Jacobian with
respect to them.
"""
from __future__ import annotations

from dataclasses import dataclass

import casadi as ca
import numpy as np

from mbfg_ros.errors import ConfigError
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.model.symbolic import SymbolicMechanism, _Inertia

GROUPS = ("inertia", "friction", "armature", "offset", "encoder", "gyro", "load_cell", "timing")
"""Parameter groups, in the order of the parameter vector."""
DYNAMICS_GROUPS = ("inertia", "friction", "armature", "offset")
"""The groups that enter the equations of motion (identifiable only where the efforts are known)."""
SENSOR_GROUPS = ("encoder", "gyro", "load_cell")
"""The groups of the sensors' calibration: a sensor kind's name; its constants are the kind's
:meth:`~mbfg_ros.sensors.base.SensorModel.calibration`, which its residual takes through
:meth:`ParametricMechanism.constant`."""
TIMING = "timing"
"""The group of the sensors' time offsets (:func:`timing_reference`)."""
INERTIAL = ("mass", "mx", "my", "mz", "ixx", "ixy", "ixz", "iyy", "iyz", "izz")
"""A body's standard inertial parameters, in their order."""
_SYMMETRIC = ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))     # ixx ixy ixz iyy iyz izz


@dataclass(frozen=True)
class Parameter:
    """One identifiable number.

    ``name``: ``<owner>.<field>`` (``link1.izz``, ``shoulder.viscous``, ``flange_gyro.scale_z``);
    ``group``: one of :data:`GROUPS`; ``owner``: the link, joint or sensor; ``field``: what it
    is (a name of :data:`INERTIAL`, ``viscous``, ``coulomb``, ``armature``, ``offset``,
    ``bias_<axis>``, ``scale_<axis>``, ``scale``); ``nominal``: the config's (URDF's) value;
    ``index``: the pinocchio joint of a body, the coordinate of a joint, the sensor's index
    (with ``axis`` 0-2 for a gyro)."""
    name: str
    group: str
    owner: str
    field: str
    nominal: float
    unit: str
    index: int
    axis: int = -1


def body_link(mech: Mechanism, joint_id: int) -> str:
    """The URDF link a movable joint (pinocchio id) carries: the body's name."""
    name = mech.model.names[joint_id]
    return next(j.child for j in mech.urdf.tree if j.name == name)


def body_parameters(I: _Inertia) -> np.ndarray:
    """(10,) the standard inertial parameters of :data:`INERTIAL` of (m, h, Io)."""
    return np.array([I.m, *I.h] + [I.Io[a, b] for a, b in _SYMMETRIC])


def timing_reference(mech: Mechanism):
    """The sensor whose clock the others' time offsets are relative to (its own is not
    identified: every sensor late by the same time is the same recording, but for the known
    efforts' stamps): the first encoder, else the config's first sensor; None without sensors."""
    return (mech.encoders or mech.sensors or [None])[0]


def model_parameters(mech: Mechanism, groups: tuple[str, ...] = GROUPS) -> list[Parameter]:
    """The rig's parameters of ``groups`` (see the module docstring), in :data:`GROUPS` order."""
    for g in groups:
        if g not in GROUPS:
            raise ConfigError(f"unknown parameter group {g!r} (groups: {', '.join(GROUPS)})")
    sym_inertias = [_Inertia.of(mech.model.inertias[i]) for i in range(mech.model.njoints)]
    out: list[Parameter] = []
    lin = {True: ("N m s/rad", "N m", "kg m^2", "N m"), False: ("N s/m", "N", "kg", "N")}
    jc = [mech.config.joint(name) for name in mech.joint_names]
    for group in GROUPS:
        if group not in groups:
            continue
        if group == "inertia":
            for jid in range(1, mech.model.njoints):
                link = body_link(mech, jid)
                values = body_parameters(sym_inertias[jid])
                units = ["kg"] + ["kg m"] * 3 + ["kg m^2"] * 6
                out += [Parameter(f"{link}.{f}", group, link, f, float(v), u, jid)
                        for f, v, u in zip(INERTIAL, values, units)]
        elif group in ("friction", "armature", "offset"):
            fields = {"friction": ("viscous", "coulomb"), "armature": ("armature",), "offset": ("offset",)}[group]
            for i, name in enumerate(mech.joint_names):
                units = dict(zip(("viscous", "coulomb", "armature", "offset"), lin[bool(mech.angular[i])]))
                for f in fields:
                    out.append(Parameter(f"{name}.{f}", group, name, f, float(getattr(jc[i], f)), units[f], i))
        elif group == TIMING:
            ref = timing_reference(mech)
            out += [Parameter(f"{sensor.name}.time_offset", group, sensor.name, "time_offset", sensor.time_offset,
                              "s", k) for k, sensor in enumerate(mech.sensors) if sensor is not ref]
        else:                                   # a sensor kind's calibration
            for k, sensor in enumerate(mech.sensors_of(group)):
                out += [Parameter(f"{sensor.name}.{c.field}", group, sensor.name, c.field, float(c.value), c.unit,
                                  k, c.axis) for c in sensor.calibration(mech)]
    names = [p.name for p in out]
    for n in names:
        if names.count(n) > 1:
            raise ConfigError(f"two parameters are named {n!r} (a link, joint or sensor name is used twice)")
    return out


class ParametricMechanism(SymbolicMechanism):
    """The symbolic model with ``parameters``' changes from the config (SX, bound by
    :meth:`bind_parameters`, zeros until then) added: inertias, friction, armature, effort
    offsets, encoder offsets, gyro biases and scales, load-cell offsets and scales.

    With ``dynamics_weights`` the bound vector has n more entries after the parameters: each
    coordinate's equation of motion is multiplied by its weight (its noise becomes the
    config's dynamics noise / weight; 1: the config's), so that the identification can set
    each joint's noise without building the functions again."""

    def __init__(self, mech: Mechanism, parameters: list[Parameter], dynamics_weights: bool = False) -> None:
        super().__init__(mech)
        self.parameters = list(parameters)
        self.dynamics_weights = dynamics_weights
        self.parameter_count = len(self.parameters) + (self.n if dynamics_weights else 0)
        self._where = {(p.group, p.field, p.index, p.axis): i for i, p in enumerate(self.parameters)}
        self._named = {(p.owner, p.field): i for i, p in enumerate(self.parameters)
                       if p.group in SENSOR_GROUPS + (TIMING,)}
        self._theta = ca.SX.zeros(self.parameter_count)

    def bind_parameters(self, theta) -> None:
        self._theta = theta

    def _d(self, group: str, field: str, index: int, axis: int = -1):
        """The change of one parameter (SX), or None when it is not a parameter."""
        i = self._where.get((group, field, index, axis))
        return None if i is None else self._theta[i]

    # dynamics ------------------------------------------------------------------------------
    def _inertia_times(self, i: int, lin, ang, mass_scale):
        out_l, out_a = super()._inertia_times(i, lin, ang, mass_scale)
        d = [self._d("inertia", f, i) for f in INERTIAL]
        if all(x is None for x in d):
            return out_l, out_a
        d = [ca.SX(0.0) if x is None else x for x in d]
        m, h = d[0], ca.vertcat(d[1], d[2], d[3])
        Io = ca.SX.zeros(3, 3)
        for k, (a, b) in enumerate(_SYMMETRIC):
            Io[a, b] = d[4 + k]
            Io[b, a] = d[4 + k]
        return out_l + m * lin + ca.cross(ang, h), out_a + ca.mtimes(Io, ang) + ca.cross(h, lin)

    def armature_effort(self, a):
        out = super().armature_effort(a)
        extra = [self._d("armature", "armature", i) for i in range(self.n)]
        if all(x is None for x in extra):
            return out
        return out + ca.vertcat(*[0.0 if x is None else x * a[i] for i, x in enumerate(extra)])

    def friction(self, v):
        out = super().friction(v)
        mech = self.mech
        rows = []
        for i in range(self.n):
            f = ca.SX(0.0)
            dv, dc = self._d("friction", "viscous", i), self._d("friction", "coulomb", i)
            if dv is not None:
                f = f + dv * v[i]
            if dc is not None:
                f = f + dc * ca.tanh(v[i] / mech.coulomb_velocity[i])
            rows.append(f)
        return out + ca.vertcat(*rows)

    def dynamics_residual(self, q, v, a, lam, tau, u, gravity_scale=1.0, mass_scale=1.0, model_error=None,
                          model_error_joints=None):
        r = super().dynamics_residual(q, v, a, lam, tau, u, gravity_scale, mass_scale, model_error,
                                      model_error_joints)
        extra = [self._d("offset", "offset", i) for i in range(self.n)]
        if any(x is not None for x in extra):
            r = r + ca.vertcat(*[0.0 if x is None else x for x in extra])
        if self.dynamics_weights:
            p = len(self.parameters)
            r = r * self._theta[p:p + self.n]
        return r

    # sensors -------------------------------------------------------------------------------
    def constant(self, owner: str, field: str, value: float):
        """A sensor's calibration constant (or, ``time_offset``, the change of its time offset
        from the config's: the step function moves its readings by it) plus its parameter's
        change, when it is one."""
        i = self._named.get((owner, field))
        return value if i is None else value + self._theta[i]
