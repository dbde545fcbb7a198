"""The symbolic (CasADi SX) model against the numeric one (pinocchio), value and derivatives.

Every expression of SymbolicMechanism is compiled to a casadi.Function and compared at seeded
random states with the numeric Mechanism function of the same name: values to 1e-10 (relative to
their size), and the CasADi Jacobians with Mechanism's analytic derivatives to 1e-9 (the joint
load cell's q and v derivatives are central differences there: 1e-6).
"""
from __future__ import annotations

import dataclasses

import casadi as ca
import numpy as np
import pytest

from mbfg_ros.model.config import JointConfig, LoadCellConfig, SensorsConfig
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.model.symbolic import SymbolicMechanism, function
from support.simulations import config_mechanism

RIGS = ["four_bar", "four_bar_gyro", "five_bar", "five_bar_gyro", "slider_crank", "spatial_rsur", "arm6",
        "pendulum", "spring_mass", "iftomm/a03_andrews", "iftomm/a02_n2", "iftomm/a04_bricard"]


def _close(a, b, tol, what):
    a, b = np.asarray(a, float), np.asarray(b, float)
    scale = max(1.0, float(np.abs(b).max()) if b.size else 1.0)
    assert np.abs(a - b).max(initial=0.0) <= tol * scale, f"{what}: {a} vs {b}"


def _symbols(mech):
    n = mech.n
    return (ca.SX.sym("q", n), ca.SX.sym("v", n), ca.SX.sym("a", n), ca.SX.sym("l", mech.m),
            ca.SX.sym("u", mech.n_u), ca.SX.sym("t", n))


def _with_load_cells(name: str) -> Mechanism:
    """The four-bar with every kind of load cell: the closure's torque component (general
    path), the crank joint's transmitted force and torque, and the crank's actuator (unknown
    input) -- and the slider-crank with its slider as a known input."""
    base = config_mechanism(name).config
    if name == "four_bar":
        cells = base.sensors.load_cells + (
            LoadCellConfig("pin_torque", "closure", 0.1, "/t", closure="coupler_rocker", component="torque",
                           axis=(0.0, 0.0, 1.0)),
            LoadCellConfig("crank_force", "joint", 1.0, "/f", joint="coupler_joint", axis=(0.3, 0.9, 0.0),
                           frame="coupler_tip"),
            LoadCellConfig("crank_moment", "joint", 1.0, "/m", joint="crank_joint", component="torque",
                           axis=(0.0, 0.0, 1.0)),
            LoadCellConfig("crank_motor", "actuator", 0.1, "/a", joint="crank_joint"),
        )
        joints = {**dict(base.joints), "crank_joint": JointConfig("crank_joint", viscous=0.3, coulomb=0.2,
                                                                   armature=0.01, offset=0.05,
                                                                   actuation="unknown")}
    else:
        cells = base.sensors.load_cells + (
            LoadCellConfig("slider_force", "actuator", 0.1, "/a", joint="slider_joint"),)
        joints = {**dict(base.joints), "slider_joint": JointConfig("slider_joint", actuation="known")}
    cfg = dataclasses.replace(base, joints=joints, sensors=SensorsConfig(encoders=base.sensors.encoders,
                                                                        gyros=base.sensors.gyros, load_cells=cells))
    return Mechanism(cfg)


def _check(mech: Mechanism, gravity_scale=1.0, mass_scale=1.0, trials=3):
    sym = SymbolicMechanism(mech)
    q, v, a, lam, u, tau = _symbols(mech)
    X = ca.vertcat(q, v, a, lam, u)
    n, m = mech.n, mech.m
    d = mech.create_data()
    dyn = sym.dynamics_residual(q, v, a, lam, tau, u, gravity_scale, mass_scale)
    phi, phid, phidd = sym.closure_levels(q, v, a)
    gyros = [g.symbolic(sym, q, v) for g in mech.gyros]
    cells = [c.symbolic(sym, q, v, a, lam, u, tau) for c in mech.load_cells]
    wrenches = [ca.vertcat(f, t) for f, t in sym.closure_wrenches_in_frame_b(q, lam)]
    outs = [dyn, ca.jacobian(dyn, X), phi, phid, phidd, ca.jacobian(phi, q), ca.jacobian(phid, ca.vertcat(q, v)),
            ca.jacobian(phidd, ca.vertcat(q, v, a))]
    outs += [e for g in gyros for e in (g, ca.jacobian(g, ca.vertcat(q, v)))]
    outs += [e for c in cells for e in (c, ca.jacobian(c, X))]
    outs += wrenches
    f = function("check", [q, v, a, lam, u, tau], outs)
    rng = np.random.default_rng(42)
    for _ in range(trials):
        qn, vn, an = rng.standard_normal(n), rng.standard_normal(n), rng.standard_normal(n)
        ln, un, tn = 10 * rng.standard_normal(m), rng.standard_normal(mech.n_u), rng.standard_normal(n)
        res = [np.array(o) for o in f(qn, vn, an, ln, un, tn)]
        it = iter(res)
        ref = mech.inverse_dynamics(d, qn, vn, an, ln, tn, un if mech.n_u else None, gravity_scale, mass_scale)
        _close(next(it).ravel(), ref.r, 1e-10, "dynamics")
        Jd = next(it)
        blocks = [ref.r_q, ref.r_v, ref.r_a] + ([ref.r_lam] if m else []) + ([ref.r_u] if mech.n_u else [])
        _close(Jd, np.hstack(blocks), 1e-9, "dynamics Jacobian")
        c = mech.closures(d, qn, vn, an)
        for name, val in (("phi", c.phi), ("phid", c.phid), ("phidd", c.phidd)):
            _close(next(it).ravel(), val, 1e-10, name)
        _close(next(it), c.phi_q, 1e-9, "phi_q")
        _close(next(it), np.hstack([c.phid_q, c.phid_v]), 1e-9, "phid_(q,v)")
        _close(next(it), np.hstack([c.phidd_q, c.phidd_v, c.phidd_a]), 1e-9, "phidd_(q,v,a)")
        for k, g in enumerate(mech.gyros):
            y, yq, yv = g.evaluate(mech, d, qn, vn)
            _close(next(it).ravel(), y, 1e-10, f"gyro {k}")
            _close(next(it), np.hstack([yq, yv]), 1e-9, f"gyro {k} Jacobian")
        for k, cell in enumerate(mech.load_cells):
            y, yq, yv, ya, yl, yu = cell.evaluate(mech, d, qn, vn, an, ln, un if mech.n_u else None, tn)
            _close(next(it).ravel(), [y], 1e-10, cell.config.name)
            J = next(it)
            tol = 1e-6 if cell.config.measures == "joint" else 1e-9
            zero = np.zeros(n)
            blocks = [yq, zero if yv is None else yv, zero if ya is None else ya] + ([yl] if m else []) + \
                ([yu] if mech.n_u else [])
            _close(J.ravel(), np.concatenate([np.atleast_1d(b) for b in blocks]), tol, f"{cell.config.name} Jacobian")
        for k, (fw, tw) in enumerate(mech.closure_wrenches_in_frame_b(d, qn, ln)):
            _close(next(it).ravel(), np.concatenate([fw, tw]), 1e-10, f"closure wrench {k}")


@pytest.mark.parametrize("rig", RIGS)
def test_every_function_equals_the_numeric_model(rig):
    _check(config_mechanism(rig))


@pytest.mark.parametrize("rig", ["four_bar", "slider_crank"])
def test_every_load_cell_kind(rig):
    _check(_with_load_cells(rig))


def test_gravity_and_mass_scales():
    base = config_mechanism("four_bar").config
    cfg = dataclasses.replace(base, estimator=dataclasses.replace(base.estimator, estimate_mass_link="coupler"))
    _check(Mechanism(cfg), gravity_scale=1.3, mass_scale=0.7)
    _check(config_mechanism("arm6"), gravity_scale=0.6)


def test_every_closure_kind_and_load_cell_path():
    """The derivative tests' rig with every closure kind (point, planar revolute, revolute,
    prismatic, planar prismatic, weld, distance), every load-cell path, a rotated gyro, known
    and unknown inputs, friction, armature, offsets, a mass-scaled link and two damped springs."""
    from support.all_kinds import all_kinds_mechanism
    _check(all_kinds_mechanism(), gravity_scale=0.8, mass_scale=1.3)
