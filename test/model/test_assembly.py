"""Position and velocity problems, DOF counting, redundant closure rows."""
from __future__ import annotations

import math

import numpy as np
import pytest
import yaml

from conftest import CONFIG, ROOT, mechanism
from mbfg_ros.errors import AssemblyError
from mbfg_ros.model.assembly import (GenericRank, assemble, check_dof_choice, condition_number,
                                     degrees_of_freedom, generic_rank, initial_state, project_position,
                                     rank, solve_velocity)
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


def test_a_dead_centre_of_the_dof_choice_keeps_the_generic_ranks():
    """Five-bar with the DOF [crank1, coupler1] at the pose where crank2 and coupler2 are in line:
    the block on the dependent coordinates loses rank there (a dead centre for this choice), yet
    the choice is independent at a generic pose, so check_dof_choice keeps both ranks at 2 and
    the condition number over that rank tells the singular pose (never 1)."""
    doc = yaml.safe_load((CONFIG / "five_bar.yaml").read_text())
    doc["mechanism"]["urdf"] = str(ROOT / "urdf" / "five_bar.urdf")
    doc["mechanism"]["dof"] = ["crank1_joint", "coupler1_joint"]
    mech = Mechanism(parse_rig_config(doc))
    d = mech.create_data()
    q = _stretched_five_bar(mech, d)
    _, J = mech.closure_position(d, q)
    assert rank(J[:, mech.dependent]) == 1 and rank(J) == 2
    assert check_dof_choice(mech, d, q) == GenericRank(closures=2, dependent=2)
    assert condition_number(J[:, mech.dependent], 2) > 1e12
    assert condition_number(J, 2) < 10.0


def _four_bar_of(coupler: float, rocker: float, dof=("crank_joint",)) -> Mechanism:
    """The benchmark four-bar (ground 10 m, crank 2 m) with other coupler and rocker lengths (m)."""
    doc = yaml.safe_load((CONFIG / "four_bar.yaml").read_text())
    doc["mechanism"]["urdf"] = str(ROOT / "urdf" / "four_bar.urdf")
    doc["mechanism"]["dof"] = list(dof)
    doc["frames"][0]["xyz"] = [coupler, 0.0, 0.0]
    doc["frames"][1]["xyz"] = [rocker, 0.0, 0.0]
    return Mechanism(parse_rig_config(doc))


@pytest.mark.parametrize("name,coupler,rocker,q", [
    # a parallelogram at crank 0: every link on the x axis, where its two branches (parallelogram,
    # anti-parallelogram) meet
    ("parallelogram", 10.0, 2.0, [0.0, 0.0, 0.0]),
    # a four-bar that folds flat at crank pi: crank to (-2, 0), coupler along +x to (6, 0), rocker
    # from B (10, 0) back to (6, 0)
    ("folding", 8.0, 4.0, [math.pi, -math.pi, math.pi]),
])
def test_the_rank_holds_on_a_singular_pose(name, coupler, rocker, q):
    """At a pose where the closure Jacobian loses rank (rank 1 of 2 here) the DOF count stays the
    generic one, and the condition number there is not 1 but unbounded."""
    mech = _four_bar_of(coupler, rocker)
    d = mech.create_data()
    q = np.array(q)
    phi, J = mech.closure_position(d, q)
    assert np.max(np.abs(phi)) < 1e-12 and rank(J) == 1
    assert generic_rank(mech, d, q) == GenericRank(closures=2, dependent=2)
    assert degrees_of_freedom(mech, d, q) == 1
    check_dof_choice(mech, d, q)
    assert condition_number(J, 2) > 1e12
    assert condition_number(J[:, mech.dependent], 2) > 1e12


def test_the_rank_holds_on_a_singular_pose_for_two_declared_dof():
    """The folding four-bar held flat with [crank, coupler] declared: the rank at the pose (1)
    would allow 2 DOF; the generic rank (2) refuses them, naming both joints."""
    mech = _four_bar_of(8.0, 4.0, dof=("crank_joint", "coupler_joint"))
    d = mech.create_data()
    q = np.array([math.pi, -math.pi, math.pi])
    with pytest.raises(AssemblyError, match=r"1 degree\(s\) of freedom.*\[crank_joint, coupler_joint\]"):
        check_dof_choice(mech, d, q)


# Bricard's mechanism (the orthogonal 6R loop): five unit rods and the ground, six revolute joints,
# consecutive axes perpendicular to each other and to the rod between them; at q = 0 the joints
# sit on six vertices of a unit cube. The chain j1..j5 is the tree, j6 a revolute closure (5 rows).
_BRICARD_VERTICES = [(0, 0, 0), (1, 0, 0), (1, 1, 0), (1, 1, 1), (0, 1, 1), (0, 0, 1)]
_BRICARD_AXES = [(0, -1, 0), (0, 0, 1), (1, 0, 0), (0, -1, 0), (0, 0, 1), (1, 0, 0)]


def _bricard(tmp_path) -> Mechanism:
    links, joints = ['<link name="ground"/>'], []
    parent, at = "ground", np.zeros(3)
    for i in range(5):
        mid = 0.5 * np.subtract(_BRICARD_VERTICES[i + 1], _BRICARD_VERTICES[i])
        links.append(f'<link name="rod{i + 1}"><inertial><origin xyz="{mid[0]} {mid[1]} {mid[2]}"/>'
                     '<mass value="1"/><inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/>'
                     '</inertial></link>')
        o, a = np.subtract(_BRICARD_VERTICES[i], at), _BRICARD_AXES[i]
        joints.append(f'<joint name="j{i + 1}" type="continuous"><parent link="{parent}"/>'
                      f'<child link="rod{i + 1}"/><origin xyz="{o[0]} {o[1]} {o[2]}"/>'
                      f'<axis xyz="{a[0]} {a[1]} {a[2]}"/></joint>')
        parent, at = f"rod{i + 1}", np.asarray(_BRICARD_VERTICES[i], float)
    urdf = tmp_path / "bricard.urdf"
    urdf.write_text('<robot name="bricard">' + "".join(links + joints) + "</robot>")
    doc = {"mechanism": {"name": "bricard", "urdf": str(urdf), "dof": ["j1"],
                         "initial": {"positions": {"j1": 0.3}}},
           "frames": [{"name": "rod5_end", "parent": "rod5", "xyz": [0.0, -1.0, 0.0]},
                      {"name": "ground_end", "parent": "ground", "xyz": [0.0, 0.0, 1.0]}],
           "closures": [{"name": "j6", "type": "revolute", "frame_a": "rod5_end",
                         "frame_b": "ground_end", "axis": list(_BRICARD_AXES[5])}],
           "sensors": {"encoders": [{"name": "j1_encoder", "joint": "j1", "noise": 0.01,
                                     "topic": "encoders"}]}}
    return Mechanism(parse_rig_config(doc))


def test_bricards_mechanism_has_one_dof_where_gruebler_counts_none(tmp_path):
    """5 coordinates, 5 closure rows (Gruebler: 0 DOF); the geometry gives rank 4 everywhere, so
    1 DOF, every row is redundant (any four have rank 4), and the check passes with a finite
    condition number over that rank."""
    from mbfg_ros.model.validation import check_rig
    mech = _bricard(tmp_path)
    assert (mech.n, mech.m) == (5, 5)
    rig = check_rig(mech)
    assert rig.ranks == GenericRank(closures=4, dependent=4) and rig.dof == 1
    assert rig.closure_condition < 10.0 and rig.dof_condition < 10.0
    d = mech.create_data()
    assert rig.q0[0] == pytest.approx(0.3) and abs(rig.q0[1]) > 0.1          # it moved
    _, J = mech.closure_position(d, rig.q0)
    assert [rank(np.delete(J, r, axis=0)) for r in range(5)] == [4] * 5


def _stretched_five_bar(mech, d):
    """A pose where crank2 and coupler2 are aligned (the toggle): Phi_q[:, dependent] drops rank."""
    from scipy.optimize import least_squares

    def res(x):
        q = np.array([x[0], x[1], x[2], 0.0])
        return mech.closure_position(d, q)[0]
    sol = least_squares(res, [0.2, 1.8, 3.0], xtol=1e-15, ftol=1e-15, gtol=1e-15)
    return np.array([sol.x[0], sol.x[1], sol.x[2], 0.0])
