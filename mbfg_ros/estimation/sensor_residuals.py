"""Sensor models of the factor graph: one small class per sensor kind, each giving the whitened
symbolic residual of one reading at the state interpolated to the reading's stamp.

A class says how many values a reading carries (``dim``), how many residual rows it gives
(``rows``), whether it needs the known input efforts at its stamp (``needs_tau``), and builds
``error(sym, z, y, tau)``: (measured - predicted) / sigma as CasADi SX, where ``z`` is the
interpolated state (:class:`StateParts`) and ``sym`` the mechanism's
:class:`~mbfg_ros.model.symbolic.SymbolicMechanism`. The step function
(:mod:`mbfg_ros.estimation.step_function`) stacks them, with robust weights, into its rows.
Adding a sensor kind is one class here, one config section, and its entry in
:func:`sensor_residuals`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import casadi as ca

from mbfg_ros.model.mechanism import Mechanism


@dataclass(frozen=True)
class StateParts:
    """Symbolic parts of a keyframe state (see :mod:`mbfg_ros.estimation.layout`)."""
    q: ca.SX
    v: ca.SX
    a: ca.SX
    lam: ca.SX
    u: ca.SX
    b: ca.SX
    gravity_scale: ca.SX | float
    mass_scale: ca.SX | float
    e: ca.SX | None = None             # model-error forces (layout.E, on model_error_joints)


def wrap_angle(e):
    """e wrapped to [-pi, pi) (symbolic; the derivative of the wrap is 1)."""
    return e - 2.0 * math.pi * ca.floor((e + math.pi) / (2.0 * math.pi))


class EncoderResidual:
    """Joint encoder: (y - q_j(t)) / sigma; wrapped to [-pi, pi) only for a single-turn angle
    encoder (``multi_turn: false``): a multi-turn count is compared as it is, so a whole-turn
    slip of the estimate shows as a 2 pi residual."""
    kind = "encoder"
    dim = 1
    rows = 1
    needs_tau = False

    def __init__(self, mech: Mechanism, k: int) -> None:
        e = mech.encoders[k]
        self.name = e.config.name
        self.index = k
        self.joint = e.index
        self.sigma = e.config.noise
        self.wrap = e.wraps
        self.rate = e.config.rate

    def error(self, sym, z: StateParts, y, tau):
        e = y[0] - sym.encoder(self.index, z.q)
        if self.wrap:
            e = wrap_angle(e)
        return e / self.sigma


class GyroResidual:
    """Gyroscope: (y - omega(q(t), v(t)) - b(t)) / sigma on the gyro's measured axes
    (y: the three axes of the sensor frame, rad/s)."""
    kind = "gyro"
    dim = 3
    needs_tau = False

    def __init__(self, mech: Mechanism, k: int, bias_columns: slice | None) -> None:
        g = mech.gyros[k]
        self.name = g.config.name
        self.index = k
        self.axes = [int(i) for i in g.rows]
        self.rows = len(self.axes)
        self.sigma = g.config.noise
        self.bias = bias_columns           # columns of b (within the b block) or None
        self.rate = g.config.rate

    def error(self, sym, z: StateParts, y, tau):
        pred = sym.gyro(self.index, z.q, z.v)
        meas = ca.vertcat(*[y[i] for i in self.axes])
        e = meas - pred
        if self.bias is not None:
            e = e - z.b[self.bias.start:self.bias.stop]
        return e / self.sigma


class LoadCellResidual:
    """Load cell: (y - load(q(t), v(t), a(t), lam(t), u(t), tau(t))) / sigma."""
    kind = "load_cell"
    dim = 1
    rows = 1

    def __init__(self, mech: Mechanism, k: int) -> None:
        c = mech.load_cells[k]
        self.name = c.config.name
        self.index = k
        self.sigma = c.config.noise
        self.rate = c.config.rate
        # only an actuator cell on a known-input joint reads the known efforts
        self.needs_tau = bool(c.config.measures == "actuator" and mech.known_input_joints)
        self.n = mech.n

    def error(self, sym, z: StateParts, y, tau):
        t = tau if tau is not None else ca.DM.zeros(self.n)
        pred = sym.load_cell(self.index, z.q, z.v, z.a, z.lam, z.u, t)
        return (y[0] - pred) / self.sigma


def sensor_residuals(mech: Mechanism, bias_slices) -> list:
    """The residual model of every measuring sensor, in the estimator's order: encoders, gyros,
    load cells (``bias_slices``: StateLayout.bias_slices)."""
    out: list = [EncoderResidual(mech, k) for k in range(len(mech.encoders))]
    out += [GyroResidual(mech, k, bias_slices[k]) for k in range(len(mech.gyros))]
    out += [LoadCellResidual(mech, k) for k in range(len(mech.load_cells))]
    return out
