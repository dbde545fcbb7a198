"""Ground truth: joint states, efforts, closure wrenches in frame_b, true load-cell readings."""
from __future__ import annotations

import numpy as np
import pytest

from support.simulations import simulated
from mbfg_ros.sim.ground_truth import ground_truth


def test_ground_truth_at_200_hz_and_on_the_grid():
    tr = simulated("four_bar", duration=10.0, friction=False)
    gt = ground_truth(tr)
    assert gt.t.size == 2000 and gt.t[1] == pytest.approx(0.005)
    np.testing.assert_array_equal(gt.q, tr.q[::5][:2000])
    full = ground_truth(tr, None)
    np.testing.assert_array_equal(full.t, tr.t)
    assert gt.closure_frames == ["rocker_tip"] and gt.load_cell_frames == ["rocker_tip"]


def test_closure_wrench_is_expressed_in_frame_b():
    tr = simulated("spatial_rsur", duration=10.0)
    mech = tr.mechanism
    d = mech.create_data()
    gt = ground_truth(tr, 50.0)
    fid = mech.frame_id("rocker_tip")
    for i in (0, 100, 499):
        f, t = mech.closure_wrench(d, 0, gt.q[i], tr.state_at([gt.t[i]])[3][0])
        R = mech.frame_placement(d, gt.q[i], fid).rotation
        np.testing.assert_allclose(R @ gt.closure_force[i, 0], f, atol=1e-9)
        np.testing.assert_allclose(R @ gt.closure_torque[i, 0], t, atol=1e-9)
        # the point closure's generalized force Phi_q^T lam: for the rocker (the only joint
        # between the base and frame_b) it is the moment of the force about the rocker axis
        _, J = mech.closure_position(d, gt.q[i])
        lam = tr.state_at([gt.t[i]])[3][0]
        jr = mech.index["rocker_joint"]
        oMi = mech.frame_placement(d, gt.q[i], mech.model.getFrameId("rocker_joint"))
        axis = oMi.rotation @ np.asarray(next(j.axis for j in mech.urdf.joints if j.name == "rocker_joint"))
        p_b = mech.frame_placement(d, gt.q[i], fid).translation
        moment = np.cross(p_b - oMi.translation, f) @ axis
        assert (J.T @ lam)[jr] == pytest.approx(moment, abs=1e-9)


def test_load_cell_truth_is_the_closure_force_along_the_axis():
    tr = simulated("four_bar", duration=10.0, friction=False)
    gt = ground_truth(tr)
    # four_bar's load cell: the coupler_rocker force along x of rocker_tip (= frame_b)
    np.testing.assert_allclose(gt.load_cells[:, 0], gt.closure_force[:, 0, 0], atol=1e-9)
    assert np.ptp(gt.load_cells[:, 0]) > 1.0


def test_efforts_are_known_plus_unknown_inputs():
    slider = simulated("slider_crank", duration=10.0, input_profile="sine", input_amplitude=0.2, input_frequency=1.0)
    gt = ground_truth(slider)
    crank = slider.mechanism.index["crank_joint"]
    np.testing.assert_allclose(gt.effort[:, crank], np.where(gt.t >= 1.0, 0.2 * np.sin(2 * np.pi * (gt.t - 1.0)), 0.0),
                               atol=1e-12)
    assert np.count_nonzero(np.delete(gt.effort, crank, axis=1)) == 0
    pend = simulated("pendulum", duration=2.0, input_profile="random", input_amplitude=0.3,
                     input_start=0.5, friction=False)
    gt = ground_truth(pend, 100.0)
    np.testing.assert_allclose(gt.effort[:, 0], pend.input_efforts(gt.t)[1][:, 0])
