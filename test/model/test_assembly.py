"""Position and velocity problems, DOF counting, redundant closure rows."""
from __future__ import annotations

import math

import numpy as np
import pytest
import yaml

from conftest import CONFIG, ROOT, mechanism
from mbfg_ros.errors import AssemblyError
from mbfg_ros.model.assembly import (assemble, check_dof_choice, degrees_of_freedom, initial_state,
                                     project_position, solve_velocity)
from mbfg_ros.model.config import parse_rig_config
from mbfg_ros.model.mechanism import Mechanism


def test_four_bar_reproduces_the_benchmark_initial_configuration(four_bar):
    d = four_bar.create_data()
    q, v = initial_state(four_bar, d)
    assert q[four_bar.index["crank_joint"]] == pytest.approx(math.pi / 3)
    P1 = four_bar.frame_placement(d, q, four_bar.frame_id("coupler")).translation
    P2 = four_bar.frame_placement(d, q, four_bar.frame_id("rocker_tip")).translation
    # REP 103: the linkage moves in the world's vertical x-z plane (y = 0), z up
    xz = [0, 2]
    np.testing.assert_allclose(P1[xz], [2 * math.cos(math.pi / 3), 2 * math.sin(math.pi / 3)], atol=1e-12)
    assert abs(P1[1]) < 1e-12 and abs(P2[1]) < 1e-12
    # coupler 8 m from P1 and rocker 5 m from B(10, 0); the branch with P2 near (10, 5)
    assert np.linalg.norm(P2 - P1) == pytest.approx(8.0, abs=1e-10)
    assert np.linalg.norm(P2[xz] - [10.0, 0.0]) == pytest.approx(5.0, abs=1e-10)
    assert P2[2] > 0 and np.linalg.norm(P2[xz] - [10.0, 5.0]) < 2.0
    phi, _ = four_bar.closure_position(d, q)
    assert np.max(np.abs(phi)) < 1e-10
    np.testing.assert_allclose(v, 0.0)


def test_five_bar_initial_configuration_is_the_benchmark_one(five_bar):
    d = five_bar.create_data()
    q, _ = initial_state(five_bar, d)
    P2 = five_bar.frame_placement(d, q, five_bar.frame_id("coupler1_tip")).translation
    np.testing.assert_allclose(P2[[0, 2]], [0.0, 2.0], atol=1e-9)        # in the world's x-z plane
    assert abs(P2[1]) < 1e-9


@pytest.mark.parametrize("name,dof", [("four_bar", 1), ("four_bar_gyro", 1), ("five_bar", 2),
                                      ("five_bar_gyro", 2), ("slider_crank", 1), ("spatial_rsur", 1)])
def test_dof_and_closure_residual_after_assembly(name, dof):
    mech = mechanism(name)
    d = mech.create_data()
    q, _ = initial_state(mech, d)
    assert degrees_of_freedom(mech, d, q) == dof
    check_dof_choice(mech, d, q)
    assert np.max(np.abs(mech.closure_position(d, q)[0])) < 1e-10


def test_assembly_over_the_crank_range_stays_on_the_branch(four_bar):
    d = four_bar.create_data()
    q, _ = initial_state(four_bar, d)
    rocker = []
    for z in np.linspace(math.pi / 3, math.pi / 3 + 0.5, 11):
        q = assemble(four_bar, d, [z], q).q
        assert np.max(np.abs(four_bar.closure_position(d, q)[0])) < 1e-10
        rocker.append(q[2])
    assert np.all(np.abs(np.diff(rocker)) < 0.2), "jumped branch"


def test_velocity_problem_satisfies_the_velocity_constraints(example):
    d = example.create_data()
    q, _ = initial_state(example, d)
    v = solve_velocity(example, d, q, np.linspace(0.3, 0.7, len(example.dof)))
    _, J = example.closure_position(d, q)
    assert np.max(np.abs(J @ v)) < 1e-10
    np.testing.assert_allclose(v[example.dof], np.linspace(0.3, 0.7, len(example.dof)))


def _four_bar_with(closure_type: str, **extra) -> Mechanism:
    doc = yaml.safe_load((CONFIG / "four_bar.yaml").read_text())
    doc["mechanism"]["urdf"] = str(ROOT / "urdf" / "four_bar.urdf")
    doc["closures"][0]["type"] = closure_type
    doc["closures"][0].update(extra)
    doc["sensors"]["load_cells"] = []
    return Mechanism(parse_rig_config(doc))


def test_redundant_rows_of_a_spatial_closure_on_a_planar_mechanism():
    """A 5-row revolute closure on the planar four-bar: rank 2, still DOF 1, no singular solve."""
    mech = _four_bar_with("revolute", axis=[0.0, 0.0, 1.0])
    assert mech.m == 5
    d = mech.create_data()
    q, v = initial_state(mech, d)
    assert degrees_of_freedom(mech, d, q) == 1
    check_dof_choice(mech, d, q)
    v = solve_velocity(mech, d, q, [1.0])
    a, lam = mech.forward_dynamics(d, q, v)
    assert np.all(np.isfinite(a)) and np.all(np.isfinite(lam))
    planar = mechanism("four_bar")
    a_ref, _ = planar.forward_dynamics(planar.create_data(), q, v)
    np.testing.assert_allclose(a, a_ref, atol=1e-8)


def test_projection_returns_to_the_manifold(four_bar):
    d = four_bar.create_data()
    q, _ = initial_state(four_bar, d)
    qp = project_position(four_bar, d, q + np.array([0.01, -0.02, 0.015]))
    assert np.max(np.abs(four_bar.closure_position(d, qp)[0])) < 1e-12


def test_unreachable_dof_value_names_the_closure(four_bar):
    # a rocker too short to reach: scale the crank so the loop cannot close
    mech = Mechanism(four_bar.config, length_scale={"coupler_joint": 20.0})
    with pytest.raises(AssemblyError, match="coupler_rocker"):
        initial_state(mech, mech.create_data())


def test_dof_that_is_not_independent_is_refused():
    doc = yaml.safe_load((CONFIG / "four_bar.yaml").read_text())
    doc["mechanism"]["urdf"] = str(ROOT / "urdf" / "four_bar.urdf")
    doc["mechanism"]["dof"] = ["crank_joint", "rocker_joint"]
    mech = Mechanism(parse_rig_config(doc))
    d = mech.create_data()
    with pytest.raises(AssemblyError, match="degree"):
        q, _ = initial_state(mech, d)
        check_dof_choice(mech, d, q)


def test_singular_configuration_is_reported():
    """Five-bar with the crank pinned at a pose where the couplers are stretched in line."""
    doc = yaml.safe_load((CONFIG / "five_bar.yaml").read_text())
    doc["mechanism"]["urdf"] = str(ROOT / "urdf" / "five_bar.urdf")
    doc["mechanism"]["dof"] = ["crank1_joint", "coupler1_joint"]
    mech = Mechanism(parse_rig_config(doc))
    d = mech.create_data()
    with pytest.raises(AssemblyError, match="not independent"):
        check_dof_choice(mech, d, _stretched_five_bar(mech, d))


def _stretched_five_bar(mech, d):
    """A pose where crank2 and coupler2 are aligned (the toggle): Phi_q[:, dependent] drops rank."""
    from scipy.optimize import least_squares

    def res(x):
        q = np.array([x[0], x[1], x[2], 0.0])
        return mech.closure_position(d, q)[0]
    sol = least_squares(res, [0.2, 1.8, 3.0], xtol=1e-15, ftol=1e-15, gtol=1e-15)
    return np.array([sol.x[0], sol.x[1], sol.x[2], 0.0])
