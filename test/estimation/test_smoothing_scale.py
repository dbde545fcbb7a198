"""The offline smoother's model-uncertainty scale is the online estimator's
(mbfg_ros/estimation/smoothing_scale.py), on the real sys_id fixture whose encoders start the
search 1 s in."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from conftest import CONFIG, ROOT
from mbfg_ros.estimation.estimator import Estimator
from mbfg_ros.estimation.smoothing_scale import online_scale
from mbfg_ros.model.config import ModelUncertaintyConfig
from mbfg_ros.model.mechanism import load_mechanism


@pytest.fixture(scope="module")
def rig():
    mech = load_mechanism(CONFIG / "double_pendulum.yaml")
    cfg = dataclasses.replace(mech.config.estimator, model_uncertainty=ModelUncertaintyConfig(seconds=1.5))
    rows = np.loadtxt(ROOT / "test/fixtures/double_pendulum/sys_id_trajectory_00_0-3.5s.csv",
                      delimiter=",", skiprows=1, usecols=(0, 1, 2))
    rows = rows[rows[:, 0] <= 2.0]
    readings = {"elbow_encoder": (rows[:, 0], rows[:, 2:3]), "shoulder_encoder": (rows[:, 0], rows[:, 1:2])}
    return mech, cfg, rows, readings


def test_the_smoother_takes_the_scale_the_online_estimator_holds(rig):
    mech, cfg, rows, readings = rig
    est = Estimator(mech, cfg, freeze_gc=False)
    for t, q1, q2 in rows:                     # the online estimator, as the replay feeds it
        est.add_sample("shoulder_encoder", t, [q1])
        est.add_sample("elbow_encoder", t, [q2])
    assert est.uncertainty.state == "held" and est.uncertainty.searched
    scale, searched = online_scale(mech, cfg, readings)
    assert searched and scale == est.model_scale and scale < 1.0


def test_no_search_without_adapt_or_readings(rig):
    mech, cfg, _, readings = rig
    off = dataclasses.replace(cfg, model_uncertainty=ModelUncertaintyConfig(adapt=False))
    assert online_scale(mech, off, readings) == (1.0, False)
    assert online_scale(mech, cfg, {}) == (1.0, False)
