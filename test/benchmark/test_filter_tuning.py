"""The toolkit's filter tuning and its two mappings to a discrete Q."""
from __future__ import annotations

import numpy as np
import pytest

from mbfg_ros.benchmark.observers.tuning import DEG, FilterTuning, transition_matrix


def test_paper_mapping_is_white_noise_on_position_and_velocity():
    Q = FilterTuning().process_noise(2, 0.005)
    np.testing.assert_allclose(np.diag(Q), 0.005 * np.array([DEG ** 2] * 2 + [(50 * DEG) ** 2] * 2))
    assert np.count_nonzero(Q - np.diag(np.diag(Q))) == 0


def test_van_loan_mapping_matches_the_closed_form():
    dt, q1, q2 = 0.005, (50 * DEG) ** 2, (100 * DEG) ** 2
    Q = FilterTuning(mapping="van_loan").process_noise(1, dt)
    expected = np.array([[q1 * dt + q2 * dt ** 3 / 3, q2 * dt ** 2 / 2], [q2 * dt ** 2 / 2, q2 * dt]])
    np.testing.assert_allclose(Q, expected, rtol=1e-9)


def test_initial_covariance_and_transition():
    P = FilterTuning().initial_covariance(2)
    np.testing.assert_allclose(np.diag(P), [(5 * DEG) ** 2] * 4)
    F = transition_matrix(1, 0.005)
    np.testing.assert_allclose(F, [[1.0, 0.005], [0.0, 1.0]])
    with pytest.raises(ValueError, match="mapping"):
        FilterTuning(mapping="nope")
