"""Sensor synthesis: rates, noise, quantisation, bias, timing faults, a lagging sensor clock,
determinism."""
from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np
import pinocchio as pin
import pytest

from support.simulations import config_mechanism, simulated
from mbfg_ros.errors import MbfgError
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.sim.sensors import (SensorOptions, sample_times, sensor_channels, synthesize,
                                  synthesize_series)


def four_bar():
    return simulated("four_bar", duration=10.0, friction=False)


def series_by_name(series):
    return {s.channel.name: s for s in series}


def test_counts_at_the_default_rates():
    samples = synthesize(four_bar())
    counts = Counter(s.sensor for s in samples)
    assert counts == {"crank_encoder": 10000, "rocker_pin_load": 2000}
    gyro = synthesize(four_bar(), config_mechanism=config_mechanism("four_bar_gyro"))
    assert Counter(s.sensor for s in gyro) == {"coupler_gyro": 4000}
    assert all(s.value.shape == (3,) and s.kind == "gyro" for s in gyro)


def test_samples_are_sorted_by_receive_time_then_stamp():
    samples = synthesize(four_bar(), SensorOptions(jitter=2e-4, delay=0.003))
    keys = [(s.receive, s.stamp) for s in samples]
    assert keys == sorted(keys)
    assert samples[0].stamp >= 0.0 and samples[-1].stamp <= 10.0


def test_rate_overrides_by_kind_and_by_name():
    mech = config_mechanism("spatial_rsur")
    rates = {ch.name: ch.rate for ch in sensor_channels(mech)}
    assert rates == {"crank_encoder": 1000.0, "coupler_gyro": 400.0, "coupler_axial": 200.0}
    opts = SensorOptions(rates={"encoder": 500.0, "gyro": 100.0, "coupler_gyro": 250.0})
    rates = {ch.name: ch.rate for ch in sensor_channels(mech, opts)}
    assert rates == {"crank_encoder": 500.0, "coupler_gyro": 250.0, "coupler_axial": 200.0}
    commands = {ch.name: ch.rate for ch in sensor_channels(config_mechanism("slider_crank"))}
    assert commands["command:crank_joint"] == 1000.0
    with pytest.raises(MbfgError, match=r"unknown sensor or kind 'imu'.*encoder, gyro, load_cell, accelerometer, command.*"
                                        r"crank_encoder, coupler_gyro, coupler_axial"):
        sensor_channels(mech, SensorOptions(rates={"imu": 100.0}))
    with pytest.raises(MbfgError, match="positive"):
        SensorOptions(rates={"gyro": 0.0})


def test_any_rate_works_including_off_the_truth_grid():
    series = series_by_name(synthesize_series(four_bar(), SensorOptions(rates={"encoder": 333.0, "load_cell": 300.0})))
    enc, cell = series["crank_encoder"], series["rocker_pin_load"]
    assert enc.stamp.size == 3330 and cell.stamp.size == 3000
    np.testing.assert_allclose(enc.stamp, np.arange(3330) / 333.0)
    q, *_ = four_bar().state_at(enc.stamp[:50])
    np.testing.assert_allclose(enc.true_value[:50, 0], q[:, 0], atol=1e-12)


def test_sample_times_count():
    assert sample_times(10.0, 1000.0).size == 10000
    assert sample_times(10.0, 400.0).size == 4000
    assert sample_times(10.0, 200.0)[-1] == pytest.approx(9.995)
    assert sample_times(0.0105, 200.0).size == 3


def test_noise_statistics_match_the_config():
    tr = simulated("spatial_rsur", duration=10.0)
    s = series_by_name(synthesize_series(tr, SensorOptions(seed=2)))
    for name, sigma in (("crank_encoder", 0.002), ("coupler_gyro", 0.005), ("coupler_axial", 0.2)):
        err = s[name].value - s[name].true_value
        assert np.std(err) == pytest.approx(sigma, rel=0.04), name
        assert abs(np.mean(err)) < 4 * sigma / np.sqrt(err.size), name
    quiet = series_by_name(synthesize_series(tr, SensorOptions(noise=False)))
    for name, ser in quiet.items():
        np.testing.assert_array_equal(ser.value, ser.true_value)


def test_true_values_are_the_sensor_models_at_the_stamp():
    tr = simulated("spatial_rsur", duration=10.0)
    mech = tr.mechanism
    d = mech.create_data()
    s = series_by_name(synthesize_series(tr, SensorOptions(jitter=1e-4)))
    for k in (0, 17, 1234):
        for name in ("coupler_gyro", "coupler_axial"):
            t = s[name].stamp[k]
            q, v, a, lam, tau, u = tr.state_at([t])
            if name == "coupler_gyro":            # pinocchio's angular velocity in the sensor frame
                g = mech.gyros[0]
                pin.forwardKinematics(mech.model, d.pin, q[0], v[0])
                w = pin.getFrameVelocity(mech.model, d.pin, g.frame_id, pin.LOCAL).angular
                np.testing.assert_allclose(s[name].true_value[k], g.R_mount.T @ w, atol=1e-12)   # all 3 axes
            else:
                ref = mech.load_cells[0].evaluate(mech, d, q[0], v[0], a[0], lam[0], u[0], tau[0], derivatives=False)[0]
                assert s[name].true_value[k, 0] == pytest.approx(ref, abs=1e-9)


def test_encoder_quantisation():
    tr = simulated("slider_crank", duration=3.0)
    s = series_by_name(synthesize_series(tr, SensorOptions(noise=False)))
    for name, res in (("crank_encoder", 0.0015339807878856412), ("slider_encoder", 0.0001)):
        v, true = s[name].value[:, 0], s[name].true_value[:, 0]
        np.testing.assert_allclose(v / res, np.round(v / res), atol=1e-6)
        assert np.max(np.abs(v - true)) <= res / 2 + 1e-12
        assert len(np.unique(np.round(v / res))) > 10
    raw = series_by_name(synthesize_series(tr, SensorOptions(noise=False, quantize=False)))
    np.testing.assert_array_equal(raw["slider_encoder"].value, raw["slider_encoder"].true_value)


def test_gyro_bias_constant_and_random_walk():
    tr = simulated("spatial_rsur", duration=10.0)
    opts = SensorOptions(noise=False, gyro_bias=0.01, seed=4)
    g = series_by_name(synthesize_series(tr, opts))["coupler_gyro"]
    bias = g.value - g.true_value
    np.testing.assert_allclose(bias, np.broadcast_to(bias[0], bias.shape), atol=1e-15)
    assert 1e-5 < np.max(np.abs(bias[0])) < 0.05
    walk = series_by_name(synthesize_series(tr, SensorOptions(noise=False, gyro_bias=0.01, seed=4,
                                                              gyro_bias_walk=True)))["coupler_gyro"]
    b = walk.value - walk.true_value
    np.testing.assert_allclose(b[0], bias[0], atol=5e-4)
    steps = np.diff(b, axis=0)
    # bias_instability 1e-4 rad/s/sqrt(s) at 400 Hz: steps of 1e-4 * sqrt(1/400) = 5e-6
    assert np.std(steps) == pytest.approx(1e-4 / np.sqrt(400.0), rel=0.05)


def test_delay_jitter_dropout():
    tr = four_bar()
    base = series_by_name(synthesize_series(tr))["crank_encoder"]
    delayed = series_by_name(synthesize_series(tr, SensorOptions(delay=0.02)))["crank_encoder"]
    np.testing.assert_array_equal(delayed.stamp, base.stamp)
    np.testing.assert_allclose(delayed.receive, base.stamp + 0.02)
    np.testing.assert_array_equal(delayed.value, base.value)
    jit = series_by_name(synthesize_series(tr, SensorOptions(jitter=1e-4)))["crank_encoder"]
    dev = jit.stamp - np.arange(10000) / 1000.0
    assert np.std(dev[1:-1]) == pytest.approx(1e-4, rel=0.05)
    np.testing.assert_array_equal(jit.receive, jit.stamp)
    q, *_ = tr.state_at(jit.stamp[:20], level=0)
    np.testing.assert_allclose(jit.true_value[:20, 0], q[:, 0], atol=1e-12)
    dropped = series_by_name(synthesize_series(tr, SensorOptions(dropout=0.1)))
    for name, n in (("crank_encoder", 10000), ("rocker_pin_load", 2000)):
        lost = 1 - dropped[name].stamp.size / n
        assert lost == pytest.approx(0.1, abs=4 * np.sqrt(0.09 / n))


def test_encoders_on_one_topic_share_times_and_dropouts():
    tr = simulated("five_bar", duration=10.0)
    s = series_by_name(synthesize_series(tr, SensorOptions(jitter=1e-4, dropout=0.2)))
    np.testing.assert_array_equal(s["crank1_encoder"].stamp, s["crank2_encoder"].stamp)
    assert not np.array_equal(s["crank1_encoder"].value, s["crank2_encoder"].value)


def test_load_cells_on_one_topic_share_times_and_dropouts_and_need_one_rate():
    tr = simulated("arm6_ros2_control", duration=0.1)
    s = series_by_name(synthesize_series(tr, SensorOptions(jitter=1e-4, dropout=0.2)))
    cells = [s[f"ft_{c}_{a}"] for c in ("force", "torque") for a in "xyz"]
    assert {ch.channel.group for ch in cells} == {"load_cell|ft_force_x"}
    for cell in cells[1:]:
        np.testing.assert_array_equal(cell.stamp, cells[0].stamp)
    with pytest.raises(MbfgError, match="ft_force_x and ft_torque_z share the topic ft_sensor/wrench"):
        sensor_channels(tr.mechanism, SensorOptions(rates={"ft_torque_z": 1000.0}))


def test_outliers():
    tr = simulated("spatial_rsur", duration=10.0)
    opts = SensorOptions(outlier_rate=0.05, outlier_scale=20.0, seed=9)
    enc = series_by_name(synthesize_series(tr, opts))["crank_encoder"]
    z = np.abs(enc.value - enc.true_value)[:, 0] / 0.002
    share = np.mean(z > 10.0)
    assert share == pytest.approx(0.05, abs=0.01)
    assert np.all(z[z > 10.0] < 26.0)


def test_synthesis_is_deterministic_for_a_seed():
    tr = simulated("slider_crank", duration=3.0)
    opts = SensorOptions(jitter=1e-4, dropout=0.05, outlier_rate=0.01, gyro_bias=0.01, seed=11)
    a, b = synthesize(tr, opts), synthesize(tr, opts)
    assert len(a) == len(b)
    assert all(x.sensor == y.sensor and x.stamp == y.stamp and np.array_equal(x.value, y.value)
               for x, y in zip(a, b))
    c = synthesize(tr, SensorOptions(jitter=1e-4, dropout=0.05, outlier_rate=0.01, gyro_bias=0.01, seed=12))
    assert [x.stamp for x in c] != [x.stamp for x in a]


def test_known_inputs_become_command_samples():
    tr = simulated("slider_crank", duration=10.0, input_profile="sine", input_amplitude=0.2, input_frequency=1.0)
    cmd = [s for s in synthesize(tr) if s.kind == "command"]
    assert len(cmd) == 10000 and {s.sensor for s in cmd} == {"command:crank_joint"}
    t = np.array([s.stamp for s in cmd])
    values = np.array([s.value[0] for s in cmd])
    np.testing.assert_allclose(values, np.where(t >= 1.0, 0.2 * np.sin(2 * np.pi * (t - 1.0)), 0.0), atol=1e-12)


def test_option_validation():
    for kwargs, word in (({"jitter": -1.0}, "jitter"), ({"delay": -0.1}, "delay"),
                         ({"dropout": 1.0}, "dropout"), ({"outlier_rate": -0.1}, "outlier_rate")):
        with pytest.raises(MbfgError, match=word):
            SensorOptions(**kwargs)


def test_a_lagging_sensor_clock_stamps_the_truth_of_an_earlier_time():
    """A sensor's ``time_offset``: the reading stamped t carries the truth at t - time_offset
    (the gyro's angular velocity from pinocchio at the earlier time); its stamps stay on the
    nominal grid, a stamp whose truth time is before the run gives no sample, and the other
    sensors are untouched. A negative offset (a clock ahead) drops the end instead."""
    tr = simulated("spatial_rsur", duration=10.0)
    cfg = tr.mechanism.config
    lag = 0.003

    def lagged(offset: float) -> Mechanism:
        gyros = tuple(dataclasses.replace(g, time_offset=offset) for g in cfg.sensors.gyros)
        return Mechanism(dataclasses.replace(cfg, sensors=dataclasses.replace(cfg.sensors, gyros=gyros)))

    plain = series_by_name(synthesize_series(tr))
    late = series_by_name(synthesize_series(tr, config_mechanism=lagged(lag)))
    gyro = late["coupler_gyro"]
    nominal = sample_times(10.0, 400.0)
    assert gyro.stamp[0] >= lag and gyro.stamp.size == np.count_nonzero(nominal >= lag - 1e-12)
    np.testing.assert_array_equal(gyro.stamp, nominal[nominal >= lag - 1e-12])
    mech = tr.mechanism
    d = mech.create_data()
    g = mech.gyros[0]
    for k in (0, 17, 1234):
        q, v, *_ = tr.state_at([gyro.stamp[k] - lag])
        pin.forwardKinematics(mech.model, d.pin, q[0], v[0])
        w = pin.getFrameVelocity(mech.model, d.pin, g.frame_id, pin.LOCAL).angular
        np.testing.assert_allclose(gyro.true_value[k], g.R_mount.T @ w, atol=1e-12)
    for name in ("crank_encoder", "coupler_axial"):
        np.testing.assert_array_equal(late[name].value, plain[name].value)
    ahead = series_by_name(synthesize_series(tr, config_mechanism=lagged(-lag)))["coupler_gyro"]
    assert ahead.stamp[0] == 0.0 and ahead.stamp[-1] <= 10.0 - lag + 1e-12
