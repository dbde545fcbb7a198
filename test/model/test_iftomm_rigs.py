"""The IFToMM benchmark rigs (config/iftomm/): they load and pass every check, their degrees of
freedom come from the closure Jacobian's rank (Bricard's mechanism: 0 by Gruebler's count, 1 by
the rank, at the initial pose and along the motion), and the URDFs are what the generators in
tools/ write."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conftest import CONFIG, ROOT, load_tool
from mbfg_ros.model.assembly import assemble, rank
from mbfg_ros.model.validation import load_rig

RIGS = sorted(p.stem for p in (CONFIG / "iftomm").glob("*.yaml"))


def test_the_rigs_are_there():
    assert RIGS == ["a02_n2", "a02_n2_gyro", "a02_n4", "a02_n4_gyro", "a03_andrews", "a03_andrews_gyro",
                    "a04_bricard", "a04_bricard_gyro"]


@pytest.mark.parametrize("name", RIGS)
def test_every_rig_passes_the_checks_with_one_degree_of_freedom(name):
    rig = load_rig(CONFIG / "iftomm" / f"{name}.yaml")
    mech = rig.mech
    _, J = mech.closure_position(mech.create_data(), rig.q0)
    assert mech.n - rank(J) == 1 and len(mech.dof) == 1
    assert rig.closure_condition < 10.0 and rig.dof_condition < 10.0


def test_bricard_is_one_dof_by_rank_and_zero_by_gruebler():
    """Five moving rods, six revolute joints: Gruebler 6 x 5 - 5 x 6 = 0. The revolute
    closure's 5 rows have rank 4 at the initial pose and along the motion (joint 1 from 0 to 3
    rad, each pose assembled from the previous one): one row is redundant everywhere, and the
    other four stay well conditioned."""
    rig = load_rig(CONFIG / "iftomm" / "a04_bricard.yaml")
    mech = rig.mech
    d = mech.create_data()
    bodies, joints = 5, 6
    assert 6 * bodies - 5 * joints == 0
    assert mech.n == 5 and mech.m == 5
    q = rig.q0
    for angle in np.linspace(0.0, 3.0, 31):
        q = assemble(mech, d, [angle], q).q
        phi, J = mech.closure_position(d, q)
        assert np.max(np.abs(phi)) < 1e-12
        s = np.linalg.svd(J, compute_uv=False)
        assert rank(J) == 4 and s[-1] < 1e-12 * s[0] and s[3] > 0.3 * s[0], (angle, s)


def test_the_urdfs_are_the_generators_output():
    planar, bricard = load_tool("make_planar_urdf"), load_tool("make_bricard_urdf")
    urdf = ROOT / "urdf" / "iftomm"
    for n in (2, 4):
        assert (urdf / f"a02_n{n}.urdf").read_text() == planar.n_four_bar(n)
    assert (urdf / "a03_andrews.urdf").read_text() == planar.andrews()
    assert (urdf / "a04_bricard.urdf").read_text() == bricard.bricard()
    assert Path(ROOT / "urdf" / "four_bar.urdf").read_text() == planar.robot(
        "four_bar", [("crank", 2.0, 2.0), ("coupler", 8.0, 8.0), ("rocker", 5.0, 5.0)],
        [("crank_joint", "motion_plane", "crank", (0, 0)), ("coupler_joint", "crank", "coupler", (2.0, 0)),
         ("rocker_joint", "motion_plane", "rocker", (10.0, 0))],
        "Four-bar of the observer benchmark: ground pivots A(0,0), B(10,0); crank 2 m / 2 kg, "
        "coupler 8 m / 8 kg, rocker 5 m / 5 kg. The loop is closed in config/four_bar.yaml.")
