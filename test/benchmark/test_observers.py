"""Each Kalman observer converges on an easy case (four-bar, crank encoder every step, +1 m/s^2
gravity error, pi/16 initial error) and stays finite on a harder one."""
from __future__ import annotations

import numpy as np
import pytest
from support.benchmark_runs import short_run

from mbfg_ros.benchmark.methods import run_group
from mbfg_ros.benchmark.metrics import evaluate


@pytest.mark.parametrize("method", ["dekf", "ukf", "error_ekf", "diekf_pm"])
def test_observer_converges_from_the_initial_error(method):
    data, truth = short_run("four_bar", "encoder", 1.0, 1, duration=1.5)
    track = run_group(method, data)[method]
    assert track.q.shape == truth.q.shape
    m = evaluate(data.model, track, truth, fail_threshold=0.1)
    assert not m.failed, m.reason
    d = data.model.dof
    err0 = abs(track.q[0, d[0]] - truth.q[0, d[0]])
    assert 1e-4 < err0 < np.pi / 16      # from the config's pose, pulled by the first reading
    assert m.position_last_half < 0.02                          # about the encoder noise
    assert m.velocity < 0.5 and m.cpu > 0


@pytest.mark.parametrize("method", ["dekf", "error_ekf", "diekf_pm"])
def test_observer_follows_a_gyro(method):
    data, truth = short_run("five_bar", "gyro", 1.0, 5, duration=1.5)
    track = run_group(method, data)[method]
    m = evaluate(data.model, track, truth, fail_threshold=0.1)
    assert not m.failed, m.reason
    assert m.position_last_half < 0.1


def test_mbfg_variants_share_one_run_and_cover_every_step():
    data, truth = short_run("four_bar", "encoder", 1.0, 10, duration=1.5)
    tracks = run_group("mbfg", data)
    assert set(tracks) == {"mbfg_online", "mbfg_lagged"}
    online, lagged = tracks["mbfg_online"], tracks["mbfg_lagged"]
    assert online.q.shape == lagged.q.shape == truth.q.shape
    assert online.cpu == lagged.cpu and online.held <= 10
    assert online.info["keyframes"] >= truth.q.shape[0] - 1
    assert np.all(np.isfinite(lagged.q))
