"""The Gauss-Newton refinement's least-squares solve: LAPACK's gelsy called directly gives what
scipy's lstsq gives, bit for bit (the estimator's estimates must not move)."""
import numpy as np
import scipy.linalg

from mbfg_ros.estimation.linearization import GelsySolver


def test_gelsy_solver_matches_scipy_lstsq_exactly():
    solve = GelsySolver()
    rng = np.random.default_rng(3)
    for m, n in [(20, 12), (40, 28), (27, 27), (5, 8), (60, 21)]:
        for trial in range(6):
            A = rng.standard_normal((m, n)) * 10.0 ** rng.uniform(-6, 6, n)   # badly scaled columns
            if trial % 3 == 0:
                A[:, 1] = 2.0 * A[:, 0]                                         # rank-deficient
            if trial % 2:
                A = np.asfortranarray(A)                                        # (the step's J1 is a transposed view)
            b = rng.standard_normal(m)
            A0, b0 = A.copy(), b.copy()
            x = solve(A, b)
            assert np.array_equal(x, scipy.linalg.lstsq(A, b, lapack_driver="gelsy", check_finite=False)[0])
            assert np.array_equal(A, A0) and np.array_equal(b, b0)              # inputs untouched
