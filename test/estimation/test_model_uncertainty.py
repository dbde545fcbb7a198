"""The model-uncertainty scale's grid and its innovation bookkeeping
(mbfg_ros/estimation/model_uncertainty.py); its search on real recordings is scored in
test/replay/test_double_pendulum_recordings.py, and the simulated rigs of
tools/replay_fingerprint.py (true noises) do not start it."""
from __future__ import annotations

import math

import pytest

from mbfg_ros.estimation.model_uncertainty import InnovationSum, candidate_scales
from mbfg_ros.model.config import ModelUncertaintyConfig


def test_the_grid_spans_the_bounds_by_half_decades():
    got = candidate_scales(ModelUncertaintyConfig())
    assert got == pytest.approx([1.0, 10 ** -0.5, 0.1, 10 ** -1.5, 0.01])
    got = candidate_scales(ModelUncertaintyConfig(min=0.05, max=2.0))
    assert got[0] == 2.0 and got[-1] == 0.05 and all(a / b <= math.sqrt(10) * 1.0001 for a, b in zip(got, got[1:]))


def test_innovation_sum_is_a_mean():
    s = InnovationSum()
    assert math.isnan(s.mean)
    s.add(3.0, 2)
    s.add(1.0, 2)
    assert s.mean == 1.0
