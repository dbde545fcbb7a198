"""A sensor's ``time_offset`` taken off its stamps at intake: the estimator and the offline
smoother given a config whose encoder lags by 2 ms and readings stamped 2 ms late give the
estimates of the config without it on the true stamps (the known efforts keep theirs)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from support.identification_rigs import readings, truth_trajectory, write_configs
from mbfg_ros.estimation.estimator import Estimator
from mbfg_ros.estimation.offline_smoother import OfflineSmoother
from mbfg_ros.estimation.smoothing_io import Readings
from mbfg_ros.model.channels import command_channel
from mbfg_ros.model.config import load_rig_config
from mbfg_ros.model.mechanism import Mechanism

LAG = 0.002


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    nominal, truth = write_configs(tmp_path_factory.mktemp("lag"))
    cfg = load_rig_config(nominal)
    encoders = tuple(dataclasses.replace(e, time_offset=LAG) for e in cfg.sensors.encoders)
    lagged = Mechanism(dataclasses.replace(cfg, sensors=dataclasses.replace(cfg.sensors, encoders=encoders)))
    true = readings(truth_trajectory(truth, 1.0))
    late = Readings({name: (t + LAG, y) for name, (t, y) in true.sensors.items()}, true.commands)
    return Mechanism(cfg), lagged, true, late


def run(mech: Mechanism, r: Readings) -> np.ndarray:
    samples = [(name, float(t), y[i]) for name, (ts, y) in r.sensors.items() for i, t in enumerate(ts)]
    samples += [(command_channel(j), float(t), u[i]) for j, (ts, u) in r.commands.items() for i, t in enumerate(ts)]
    est = Estimator(mech, freeze_gc=False)
    out = []
    for name, t, y in sorted(samples, key=lambda s: s[1]):
        est.add_sample(name, t, y)
        out += est.pop_estimates()
    est.flush()
    out += est.pop_estimates()
    return np.array([[e.stamp, *e.x] for e in out])


def test_the_estimator_takes_a_sensors_time_offset_off_its_stamps(rig):
    plain, lagged, true, late = rig
    a, b = run(plain, true), run(lagged, late)
    assert a.shape == b.shape and a.shape[0] > 100
    np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-8)
    assert not np.allclose(run(plain, late), a, rtol=1e-6, atol=1e-8)     # (the lag does matter)


def test_the_offline_smoother_takes_a_sensors_time_offset_off_its_stamps(rig):
    plain, lagged, true, late = rig
    a = OfflineSmoother(plain).smooth(true)
    b = OfflineSmoother(lagged).smooth(late)
    assert a.t0 == pytest.approx(b.t0, abs=1e-12)
    np.testing.assert_allclose(b.x, a.x, rtol=1e-6, atol=1e-8)
