"""Metrics of one method on one run: RMSE over every step, wrapped angles, failure criterion."""
from __future__ import annotations

import math

import numpy as np
import pytest
from support.benchmark_runs import short_run

from mbfg_ros.benchmark.methods import Track
from mbfg_ros.benchmark.metrics import closure_forces, evaluate


def _track_from_truth(data, truth, dq=0.0):
    q = truth.q.copy()
    q[:, data.model.dof] += dq
    lam = np.array([data.model.forward_dynamics(data.model.create_data(), qi, vi)[1]
                    for qi, vi in zip(truth.q, truth.v)])
    return Track(q, truth.v.copy(), truth.a.copy(), lam, cpu=0.3)


def test_truth_itself_has_no_error_and_whole_turns_do_not_count():
    data, truth = short_run("four_bar", "encoder", 0.0, 10, duration=1.5)
    for shift in (0.0, 2 * math.pi):
        m = evaluate(data.model, _track_from_truth(data, truth, shift), truth, fail_threshold=0.1)
        assert m.position == pytest.approx(0.0, abs=1e-9)
        assert m.velocity == 0.0 and m.acceleration == 0.0
        assert not m.failed
    # the truth's own multipliers reproduce its forces (the model has the true gravity here)
    m = evaluate(data.model, _track_from_truth(data, truth), truth, fail_threshold=0.1)
    assert m.force < 1e-6
    assert m.cpu == pytest.approx(0.3 / truth.q.shape[0] * 1e3)


def test_position_rmse_and_failure_criterion():
    data, truth = short_run("four_bar", "encoder", 0.0, 10, duration=1.5)
    m = evaluate(data.model, _track_from_truth(data, truth, 0.05), truth, fail_threshold=0.1)
    assert m.position == pytest.approx(0.05) and m.position_last_half == pytest.approx(0.05)
    assert not m.failed
    m = evaluate(data.model, _track_from_truth(data, truth, 0.2), truth, fail_threshold=0.1)
    assert m.failed and "last-half position RMSE" in m.reason
    bad = _track_from_truth(data, truth)
    bad.v[3, 0] = np.nan
    m = evaluate(data.model, bad, truth, fail_threshold=0.1)
    assert m.failed and m.reason == "non-finite estimate"


def test_closure_forces_shape():
    data, truth = short_run("four_bar", "encoder", 0.0, 10, duration=1.5)
    f = closure_forces(data.model, truth.q[:3], np.zeros((3, data.model.m)))
    assert f.shape == (3, 1, 3) and np.all(f == 0.0)
