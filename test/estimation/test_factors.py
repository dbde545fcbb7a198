"""Every factor's Jacobians (through the interpolation between keyframes) against finite
differences, and the pieces they are built from."""
from __future__ import annotations

import math

import numpy as np
import pytest

from conftest import mechanism
from mbfg_ros.estimation.estimator import Estimator
from mbfg_ros.estimation.factors import (EncoderBatchFactor, GyroFactor, KeyframeFactor,
                                         LoadCellFactor, PriorFactor, RandomWalkFactor,
                                         robust_weight)
from mbfg_ros.estimation.interpolation import Interpolant
from mbfg_ros.model.config import RobustLossConfig
from support.finite_differences import assert_jacobian, jacobian


def _factors(name: str, estimate_gravity: bool = False):
    import dataclasses
    mech = mechanism(name)
    cfg = dataclasses.replace(mech.config.estimator, estimate_gravity=estimate_gravity)
    est = Estimator(mech, cfg, freeze_gc=False)
    lay, d = est.lay, est.data
    rng = np.random.default_rng(2)
    x0, x1 = rng.standard_normal(lay.dim), rng.standard_normal(lay.dim)
    loss = RobustLossConfig("none", 3.0)
    fs = [("integration", est._integration, False), ("keyframe", KeyframeFactor(mech, d, lay, cfg, rng.standard_normal(mech.n)), False)]
    if not est._random_walk.empty:
        fs.append(("random walk", est._random_walk, False))
    for k in range(len(mech.gyros)):
        fs.append((f"gyro {k}", GyroFactor(mech, d, lay, k, Interpolant.at(0.37, est.h), rng.standard_normal(3), loss), True))
    for k in range(len(mech.load_cells)):
        fs.append((f"load cell {k}", LoadCellFactor(mech, d, lay, k, Interpolant.at(0.61, est.h), 1.5, np.zeros(mech.n), loss), True))
    if mech.encoders:
        fs.append(("encoders", EncoderBatchFactor(lay, est.h, [mech.encoders[0].index] * 3, [0.1, 0.5, 1.0],
                                                  [0.3, 0.4, 0.5], [0.02] * 3, [True] * 3, loss), True))
    return fs, x0, x1


@pytest.mark.parametrize("name", ["four_bar", "four_bar_gyro", "five_bar_gyro", "slider_crank", "spatial_rsur"])
def test_factor_jacobians(name):
    fs, x0, x1 = _factors(name, estimate_gravity=(name == "four_bar"))
    for label, f, robust in fs:
        kw = {"reweight": False} if robust else {}
        r, J0, J1 = f.linearize(x0, x1, **kw)
        assert_jacobian(J1, jacobian(lambda x: f.linearize(x0, x, **kw)[0], x1), f"{name} {label} dx1")
        if J0 is not None:
            assert_jacobian(J0, jacobian(lambda x: f.linearize(x, x1, **kw)[0], x0), f"{name} {label} dx0")


def test_hermite_interpolation_is_exact_for_cubics():
    """q(t) cubic with q' = v: the Hermite form reproduces it between keyframes."""
    mech = mechanism("four_bar")
    est = Estimator(mech, freeze_gc=False)
    lay, h = est.lay, 0.005
    c = np.array([0.3, -1.0, 2.0, 5.0])            # q(t) = c0 + c1 t + c2 t^2 + c3 t^3
    q = lambda t: c[0] + c[1] * t + c[2] * t * t + c[3] * t ** 3  # noqa: E731
    v = lambda t: c[1] + 2 * c[2] * t + 3 * c[3] * t * t          # noqa: E731
    a = lambda t: 2 * c[2] + 6 * c[3] * t                         # noqa: E731
    x0 = lay.pack(np.full(3, q(0)), np.full(3, v(0)), np.full(3, a(0)))
    x1 = lay.pack(np.full(3, q(h)), np.full(3, v(h)), np.full(3, a(h)))
    for s in (0.0, 0.25, 0.5, 0.9, 1.0):
        z = Interpolant.at(s, h).interpolate(lay, x0, x1)
        assert z[lay.Q][0] == pytest.approx(q(s * h), abs=1e-14)
        assert z[lay.A][0] == pytest.approx(a(s * h), abs=1e-12)
        # v is a quadratic, the Hermite on (v, a) is exact for it too
        assert z[lay.V][0] == pytest.approx(v(s * h), abs=1e-12)


def test_encoder_residual_wraps_angles():
    mech = mechanism("four_bar")
    est = Estimator(mech, freeze_gc=False)
    lay = est.lay
    f = EncoderBatchFactor(lay, est.h, [0], [1.0], [math.pi - 0.01], [0.01], [True], RobustLossConfig("none", 3))
    x = lay.pack(np.array([-math.pi + 0.01, 0, 0]), np.zeros(3), np.zeros(3))
    r, _, _ = f.linearize(x, x, reweight=False)
    assert r[0] == pytest.approx(-2.0, abs=1e-9)         # -0.02 rad, not 2 pi - 0.02


def test_prior_and_random_walk():
    mech = mechanism("spatial_rsur")
    est = Estimator(mech, freeze_gc=False)
    lay = est.lay
    sig = np.full(lay.dim, np.inf)
    sig[lay.Q] = 0.5
    p = PriorFactor(np.zeros(lay.dim), sig)
    r, J0, J1 = p.linearize(None, np.ones(lay.dim))
    np.testing.assert_allclose(r, 2.0)
    assert J0 is None and J1.shape == (mech.n, lay.dim)
    rw = RandomWalkFactor(lay, 0.005, np.full(lay.slow.stop - lay.slow.start, 0.1))
    assert not rw.empty                                 # the gyro bias random walk


def test_robust_weights():
    huber = RobustLossConfig("huber", 3.0)
    cauchy = RobustLossConfig("cauchy", 3.0)
    assert robust_weight(2.0, huber) == 1.0
    assert robust_weight(6.0, huber) == pytest.approx(0.5)
    assert robust_weight(6.0, huber, scale=2.0) == 1.0  # judged against the innovation scale
    assert robust_weight(3.0, cauchy) == pytest.approx(0.5)
    assert robust_weight(10.0, RobustLossConfig("none", 3.0)) == 1.0
