"""Per-sensor stream state and the latency recorder (constant memory)."""
from __future__ import annotations

import numpy as np
import pytest

from mbfg_ros.estimation.latency import LatencyHistogram, LatencyRecorder
from mbfg_ros.estimation.sensor_streams import SensorStream


def test_duplicates_are_the_recent_stamps():
    s = SensorStream("enc", "encoder", 0, 1)
    assert not s.is_duplicate(1.0)
    assert s.is_duplicate(1.0)
    for i in range(100):
        s.is_duplicate(2.0 + i)
    assert not s.is_duplicate(1.0)          # forgotten after 64 newer stamps


def test_innovation_scale_follows_large_residuals_and_ignores_a_lone_spike():
    s = SensorStream("enc", "encoder", 0, 1)
    s.add_innovations(np.full(200, 0.8))
    assert s.scale == pytest.approx(1.0, abs=0.01)
    s.add_innovations(np.array([1e6]))
    assert s.scale < 1.3
    s.add_innovations(np.full(300, 8.0))
    assert s.scale > 9.0


def test_histogram_percentiles_within_a_bin():
    h = LatencyHistogram()
    x = np.random.default_rng(1).lognormal(-1.0, 0.7, 20000)
    for v in x:
        h.add(float(v))
    for q in (50, 99, 99.9):
        assert h.percentile(q) == pytest.approx(np.percentile(x, q), rel=0.015)
    assert h.max == x.max() and h.mean() == pytest.approx(x.mean())


def test_a_burst_leaves_the_rolling_window_but_not_the_whole_run():
    r = LatencyRecorder(window_s=10.0, capacity=1000)
    for i in range(500):
        r.add(50.0 if i < 10 else 0.2, 0.1, now=i * 0.05)         # a burst in the first 0.5 s
    assert r.summary(now=5.0)[1:] == (50.0, 50.0)                  # p99 and max during it
    assert r.summary(now=25.0) == pytest.approx((0.2, 0.2, 0.2))  # gone from the window
    assert r.summary(whole_run=True)[2] == 50.0                   # kept in the whole run
    assert r.summary(cpu=True, now=25.0)[0] == pytest.approx(0.1)
