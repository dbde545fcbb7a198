"""The benchmark's ONE mbfg_ros configuration per mechanism and sensor set (estimator_tuning.rig_default)."""
from __future__ import annotations

import pytest

from mbfg_ros.benchmark.estimator_tuning import (MODEL_ERROR_RATE, WITHOUT_ENCODERS, effective_inertia, rig_default,
                                                 rig_estimator_config)
from mbfg_ros.benchmark.grid import Cell, GridOptions, benchmark_config, observer_mechanism
from mbfg_ros.benchmark.observers.tuning import FilterTuning
from mbfg_ros.model.config import EstimatorConfig


def _model(mechanism: str, sensors: str, gravity_error: float = 1.0):
    return observer_mechanism(benchmark_config(GridOptions(), Cell(mechanism, sensors, gravity_error, 1)), gravity_error)


@pytest.mark.parametrize("mechanism,sensors,force,gravity", [
    ("four_bar", "encoder", True, True), ("five_bar", "encoder", True, True),
    ("four_bar", "gyro", False, True), ("five_bar", "gyro", False, True)])
def test_rule(mechanism, sensors, force, gravity):
    """Encoders on every DOF: gravity and the model-error force, whose random walk is the rate
    times the DOFs' mean effective inertia; gyros only: gravity, no force (it would hide the
    pose)."""
    mech = _model(mechanism, sensors)
    d = rig_default(mech, mechanism)
    assert (d.model_error > 0) == force and d.estimate_gravity == gravity
    if force:
        assert d.model_error == pytest.approx(MODEL_ERROR_RATE * effective_inertia(mech).mean())
    cfg = rig_estimator_config(mech, mechanism, 0.005)
    assert cfg.model_error.random_walk == d.model_error and cfg.estimate_gravity == gravity
    assert cfg.noise.dynamics == d.dynamics and cfg.keyframe_rate == pytest.approx(200.0)


def test_same_for_every_cell_of_a_set():
    """One configuration per set: the gravity error (the model's) does not change it."""
    for sensors in ("encoder", "gyro"):
        assert rig_default(_model("four_bar", sensors, 1.0), "four_bar") == \
            rig_default(_model("four_bar", sensors, 4.0), "four_bar")


def test_gyro_rig_choices_reach_the_config():
    """The measured per-mechanism choices of gyro-only rigs (WITHOUT_ENCODERS) are what the
    estimator gets, the four-bar's threshold from its config file; encoder rigs keep the
    config's threshold and position prior."""
    four = rig_estimator_config(_model("four_bar", "gyro"), "four_bar", 0.005)
    assert four.relinearize_threshold == pytest.approx(1e-4)
    assert four.noise.dynamics == WITHOUT_ENCODERS["four_bar"].dynamics
    five = rig_estimator_config(_model("five_bar", "gyro"), "five_bar", 0.005)
    assert five.noise.prior_position == pytest.approx(FilterTuning().initial_position)
    enc_mech = _model("four_bar", "encoder")
    enc = rig_estimator_config(enc_mech, "four_bar", 0.005)
    assert enc.relinearize_threshold == EstimatorConfig().relinearize_threshold
    assert enc.noise.prior_position == enc_mech.config.estimator.noise.prior_position


@pytest.mark.slow
def test_four_bar_coupler_gyro_tracks_with_its_threshold():
    """Four-bar, one coupler gyro at 20 Hz, +4 m/s^2 gravity error, exploration seed 0, 6 s runs
    (the benchmark's are 10 s): the rig's default (gravity estimated, relinearised at its
    config's 1e-4 rad) tracks; the default 3e-3 leaves the estimate on another motion (measured:
    last-half position RMSE 0.027 vs 2.0 rad; 0.016 vs 1.3 over 10 s)."""
    from dataclasses import replace

    from mbfg_ros.benchmark.methods import _run_mbfg
    from mbfg_ros.benchmark.metrics import evaluate
    from mbfg_ros.benchmark.runner import run_data

    cell = Cell("four_bar", "gyro", 4.0, 10)
    data, truth = run_data(GridOptions(seeds=(0,), duration=6.0), cell, 0)
    cfg = rig_estimator_config(data.model, "four_bar", data.dt)
    loose = replace(cfg, relinearize_threshold=EstimatorConfig().relinearize_threshold)
    assert loose.relinearize_threshold == pytest.approx(3e-3)
    last = {}
    for name, c in (("default", cfg), ("loose", loose)):
        track = _run_mbfg(data, c.estimate_gravity, cfg=c)["mbfg_online_g"]
        last[name] = evaluate(data.model, track, truth, 0.1).position_last_half
    assert last["default"] < 0.1 and last["loose"] > 0.5, last
