"""The incremental fixed-lag smoother (GTSAM ISAM2, marginalising as keyframes leave the window)
against a dense least-squares solve of the same factors."""
from __future__ import annotations

import re

import numpy as np
import pytest

from mbfg_ros.estimation.smoother import FixedLagSmoother, SolverFailure

D = 5


def _chain(rng, steps: int, window: int, marginalize_every: int, swaps: bool, late: bool):
    """Random well-posed step factors on a chain; returns the smoother and the newest key."""
    sm = FixedLagSmoother(D, capacity=window + marginalize_every + 8)
    x = rng.standard_normal(D)
    sm.update([sm.factor(0, rng.standard_normal(D), None, np.eye(D) * 3.0)], new_keys=[(0, x)])
    index = {}
    for k in range(1, steps):
        J0 = rng.standard_normal((8, D))
        J1 = rng.standard_normal((8, D)) + 4 * np.eye(8, D)
        x_new = sm.estimate(k - 1) + 0.01 * rng.standard_normal(D)
        x_prev = sm.estimate(k - 1)
        factors = [sm.factor(k, rng.standard_normal(8), J0, J1, x_prev)]
        touched = k - 1
        if late and k > 3 and k % 3 == 0:                   # a late reading on an older step
            j = k - 2
            x0, x1 = sm.estimate(j - 1), sm.estimate(j)
            factors.append(sm.factor(j, rng.standard_normal(1), rng.standard_normal((1, D)),
                                     rng.standard_normal((1, D)), x0, x1))
            touched = j - 1
        idx = sm.update(factors, new_keys=[(k, x_new)], touched=touched)
        index[k] = (idx[0], J0, J1)
        if swaps and k > 4 and k % 4 == 0:                  # relinearize an older step: swap its factor
            j = max(k - 3, sm.keys[0] + 1)
            old, J0j, J1j = index[j]
            x0, x1 = sm.estimate(j - 1), sm.estimate(j)
            new = sm.update([sm.factor(j, rng.standard_normal(8), J0j, J1j, x0, x1)], remove=[old],
                            touched=j - 1)
            index[j] = (new[0], J0j, J1j)
        excess = len(sm) - (window + 1)
        if excess >= marginalize_every:
            first = sm.keys[0]
            sm.marginalize_oldest(excess)
            for kk in range(first, first + excess + 1):
                index.pop(kk, None)
    return sm, steps - 1


@pytest.mark.parametrize("swaps,late", [(False, False), (True, True)])
def test_newest_estimate_equals_a_dense_solve_of_the_window(swaps, late):
    rng = np.random.default_rng(3)
    sm, newest = _chain(rng, 400, window=50, marginalize_every=8, swaps=swaps, late=late)
    assert 51 <= len(sm) < 51 + 8
    assert sm.marginalized == 400 - len(sm)
    dense = sm.dense_solution()
    np.testing.assert_allclose(sm.estimate(newest), dense[-1], rtol=0, atol=1e-9)
    # older keyframes: ISAM2's partial back-substitution stops where a clique's delta changes by
    # less than the wildfire threshold (0.01), so they can be a few thresholds stale in this
    # random problem (measured 0.011); in the estimator's problems far less (their updates
    # decay quickly into the past)
    np.testing.assert_allclose(sm.all_estimates(), dense, rtol=0, atol=0.05)


def test_a_factor_linearized_away_from_theta_is_moved_to_theta():
    """r + J (y - x): the same factor given at two linearization points gives one solution."""
    sm = FixedLagSmoother(2)
    theta = np.array([1.0, 2.0])
    J = np.array([[2.0, 0.0], [0.0, 3.0]])
    target = np.array([1.5, 1.0])
    sm.update([sm.factor(0, J @ (theta - target), None, J)], new_keys=[(0, theta)])
    np.testing.assert_allclose(sm.estimate(0), target, atol=1e-12)
    x = np.array([4.0, -1.0])                      # the same rows, linearized at x
    idx = sm.update([sm.factor(0, J @ (x - target), None, J, None, x)], touched=0)
    np.testing.assert_allclose(sm.estimate(0), target, atol=1e-12)
    assert len(idx) == 1


def test_a_poisoned_update_gives_a_solver_failure():
    sm = FixedLagSmoother(2)
    sm.update([sm.factor(0, np.zeros(2), None, np.eye(2))], new_keys=[(0, np.zeros(2))])
    sm.poison()
    with pytest.raises(SolverFailure):
        sm.update([sm.factor(1, np.zeros(2), np.eye(2), np.eye(2))], new_keys=[(1, np.zeros(2))])
        sm.estimate(1)


def _bayes_tree_is_a_chain(sm: FixedLagSmoother, path) -> bool:
    """Every clique of ISAM2's Bayes tree holds consecutive keyframes and is conditioned on the
    next one only: the oldest keyframe is a leaf (``marginalizeLeaves`` on anything else
    crashes the process)."""
    sm.isam.saveGraph(str(path))
    for label in re.findall(r'label="([^"]*)"', path.read_text()):
        frontal, _, separator = label.partition(":")
        keys = [int(x) for x in re.findall(r"x(\d+)", frontal)]
        after = [int(x) for x in re.findall(r"x(\d+)", separator)]
        if sorted(keys) != list(range(min(keys), max(keys) + 1)) or after not in ([], [max(keys) + 1]):
            return False
    return True


def test_updates_deep_in_the_window_keep_the_oldest_keyframe_a_leaf(tmp_path):
    """Late readings up to 25 keyframes back and relinearised steps anywhere in the window: an
    update that re-eliminates 65 % of the keys makes ISAM2 reorder all of them (a batch step),
    where keys without a chronological group used to be ordered by COLAMD and the oldest
    keyframe could end up inside the tree (the ros2_control example's live run crashed in
    marginalizeLeaves). After every update the tree is a chain; marginalising goes on."""
    rng = np.random.default_rng(3)
    sm = FixedLagSmoother(D, capacity=128)

    def step(k, x0, x1=None, rows=D + 3):
        return sm.factor(k, rng.standard_normal(rows), rng.standard_normal((rows, D)),
                         rng.standard_normal((rows, D)) + 4 * np.eye(rows, D), x0, x1)
    sm.update([sm.factor(0, rng.standard_normal(D), None, np.eye(D))], new_keys=[(0, np.zeros(D))])
    index = {}
    for k in range(1, 200):
        factors, touched = [step(k, sm.estimate(k - 1))], k - 1
        for _ in range(rng.integers(0, 3)):                       # late readings
            j = k - 1 - int(rng.integers(0, min(25, k - sm.keys[0] - 1) + 1))
            if j - 1 >= sm.keys[0]:
                factors.append(step(j, sm.estimate(j - 1), sm.estimate(j), rows=3))
                touched = min(touched, j - 1)
        index[k] = sm.update(factors, new_keys=[(k, sm.estimate(k - 1))], touched=touched)[0]
        if rng.random() < 0.3 and len(sm) > 10:                   # relinearise 1-3 steps anywhere
            steps = sorted({int(x) for x in rng.integers(sm.keys[0] + 1, k + 1, size=rng.integers(1, 4))})
            new = sm.update([step(j, sm.estimate(j - 1), sm.estimate(j)) for j in steps],
                            remove=[index[j] for j in steps], touched=steps[0] - 1)
            index.update(zip(steps, new))
        assert _bayes_tree_is_a_chain(sm, tmp_path / "tree.dot"), k
        if len(sm) - 61 >= 4:
            sm.marginalize_oldest(len(sm) - 61)
    assert sm.marginalized == 200 - len(sm) > 100
    np.testing.assert_allclose(sm.estimate(199), sm.dense_solution()[-1], rtol=0, atol=1e-9)
