"""The rolling divergence test (mbfg_ros.estimation.divergence) on synthetic residuals."""
from __future__ import annotations

import numpy as np

from mbfg_ros.estimation.divergence import DivergenceMonitor


def test_gaussian_residuals_are_not_flagged():
    rng = np.random.default_rng(1)
    mon = DivergenceMonitor()
    for k in range(2000):                   # 10 s at 200 keyframes/s, 5 readings each
        mon.add("enc", k * 0.005, np.abs(rng.standard_normal(5)))
    assert not mon.periods and not mon.diverged
    assert 0.8 < mon.rms["enc"] < 1.2


def test_a_run_of_large_residuals_is_one_period_with_its_peak():
    mon = DivergenceMonitor(window=0.5, limit=5.0)
    for k in range(600):
        t = k * 0.005
        r = 20.0 if 1.0 <= t < 1.5 else 1.0
        mon.add("gyro", t, [r, r])
        if t == 1.0 + 0.005 * 3:
            assert "gyro" in mon.diverged            # flagged within a few keyframes
    assert len(mon.periods) == 1 and mon.period_count == 1
    p = mon.periods[0]
    assert 1.0 <= p.start < 1.05 and p.end is not None and 1.5 < p.end <= 2.0
    assert 19.0 < p.peak <= 20.0
    assert not mon.diverged
    assert mon.diverged_at(np.array([0.5, 1.2, 2.5])).tolist() == [False, True, False]


def test_restart_closes_an_open_period():
    mon = DivergenceMonitor()
    for k in range(20):
        mon.add("enc", k * 0.01, [50.0])
    assert mon.diverged
    mon.restart()
    assert not mon.diverged and mon.periods[0].end == 0.19
