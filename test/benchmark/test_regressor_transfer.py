"""The least-squares transfer check: pinocchio's torque regressor with the drive columns is the
inverse dynamics of the model (RNEA with the armature, friction, offset) at every sample of the
DFKI double pendulum's fixture; efforts made by other drive parameters are fitted back exactly
and explain another run better than the config's."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import CONFIG, ROOT
from mbfg_ros.benchmark.effort_scoring import ZERO_PHASE_WINDOW, inverse_dynamics_effort, savgol_derivatives
from mbfg_ros.benchmark.regressor_transfer import (config_parameters, effort_regressor, fit_parameters,
                                                   parameter_names, predicted, transfer_ratios)
from mbfg_ros.io.log_map import load_log_map
from mbfg_ros.model.mechanism import load_mechanism
from mbfg_ros.replay.recorded_torque import recorded_rows

FIXTURES = ROOT / "test" / "fixtures" / "double_pendulum"
TORQUE = {"shoulder": "tau_meas1", "elbow": "tau_meas2"}


@pytest.fixture(scope="module")
def rig():
    mech = load_mechanism(CONFIG / "double_pendulum.yaml")
    log_map = load_log_map(CONFIG / "double_pendulum.map.yaml")
    logs = [recorded_rows(FIXTURES / f, log_map, mech, TORQUE) for f in
            ("sys_id_trajectory_00_0-3.5s.csv", "acrobot_tvlqr_184506_8-11.5s.csv")]
    return mech, logs


def test_the_regressor_is_the_inverse_dynamics(rig):
    mech, logs = rig
    r = logs[0]
    run = effort_regressor(mech, r.t, r.q, r.recorded, [0, 1], skip=0.0)
    m = savgol_derivatives(r.t, r.q, ZERO_PHASE_WINDOW, causal=False)
    ok = np.all(np.isfinite(m.a), axis=1)
    expected = inverse_dynamics_effort(mech, m.q[ok], m.v[ok], m.a[ok])
    np.testing.assert_allclose(predicted(run, config_parameters(mech)), expected, atol=1e-10)
    names = parameter_names(mech)
    assert len(names) == run.Y.shape[2] and names[3] == "upper_link.mz" and names[-1] == "elbow.offset"


def test_drive_parameters_are_fitted_back_and_transfer(rig):
    mech, logs = rig
    theta0 = config_parameters(mech)
    names = parameter_names(mech)
    drive = [k for k, n in enumerate(names) if n.split(".")[1] in ("viscous", "coulomb", "armature")]
    truth = theta0.copy()
    truth[drive] *= 1.3
    runs = []
    for r in logs:
        run = effort_regressor(mech, r.t, r.q, r.recorded, [0, 1])
        run.tau = predicted(run, truth)                  # efforts of the other drive parameters
        runs.append(run)
    theta = fit_parameters(runs[:1], theta0, drive)
    np.testing.assert_allclose(theta[drive], truth[drive], rtol=1e-6)
    assert np.all(transfer_ratios(theta, theta0, runs[1:]) < 1e-6)
