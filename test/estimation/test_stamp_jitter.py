"""The stamp-jitter estimate of a sensor (mbfg_ros/estimation/stamp_jitter.py) against stamps of
known timing error."""
from __future__ import annotations

import numpy as np
import pytest

from mbfg_ros.estimation.stamp_jitter import MIN_STEPS, StampJitter


def measured(stamps) -> float:
    j = StampJitter()
    for t in stamps:
        j.add(float(t))
    return j.sigma


def test_periodic_stamps_have_no_jitter():
    assert measured(np.arange(2000) * 0.002) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("sigma", [5e-5, 2e-4])
def test_gaussian_timing_error_is_measured(sigma):
    rng = np.random.default_rng(3)
    t = np.arange(3000) * 0.002 + rng.normal(0.0, sigma, 3000)
    assert measured(t) == pytest.approx(sigma, rel=0.15)


def test_dropped_samples_do_not_count_as_jitter():
    t = np.delete(np.arange(3000) * 0.002, np.arange(50, 3000, 97))
    assert measured(t) == pytest.approx(0.0, abs=1e-9)


def test_nothing_before_enough_steps_and_repeated_stamps_ignored():
    j = StampJitter()
    for t in np.arange(MIN_STEPS) * 0.002:
        j.add(float(t))
        j.add(float(t))                      # a repeated stamp
    assert j.sigma == 0.0
