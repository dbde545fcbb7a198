"""The compiled step function against the numeric mechanism model (pinocchio) and against finite
differences of itself.

Rows are checked one by one against an independent numeric evaluation: the integration formula,
``Mechanism.closures`` and ``Mechanism.inverse_dynamics`` at x1, and every sensor model of
``Mechanism`` at the state interpolated to the reading's stamp; the Jacobians [J0 J1] against
central differences.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from mbfg_ros.estimation.layout import StateLayout, model_error_joints
from mbfg_ros.estimation.sensor_streams import GAUSSIAN_MEAN_ABS
from mbfg_ros.estimation.step_function import StepFunction
from mbfg_ros.estimation.step_interpolation import interpolate
from mbfg_ros.model.assembly import initial_state
from mbfg_ros.model.config import ModelErrorConfig
from mbfg_ros.model.mechanism import Mechanism
from support.simulations import config_mechanism

RIGS = ["four_bar", "four_bar_gyro", "five_bar", "slider_crank", "spatial_rsur", "arm6", "pendulum",
        "four_bar_imu", "four_bar_imu_bias"]


def _variant(name: str, **estimator) -> Mechanism:
    """An example rig with other estimator settings; ``four_bar_imu_bias``: four_bar_imu whose
    gyro and accelerometer biases are estimated (states after the other sensors')."""
    if name == "four_bar_imu_bias":
        cfg = config_mechanism("four_bar_imu").config
        s = cfg.sensors
        s = dataclasses.replace(s, gyros=tuple(dataclasses.replace(g, bias_sigma=0.01, bias_instability=1e-3)
                                               for g in s.gyros),
                                accelerometers=tuple(dataclasses.replace(a, bias_sigma=0.1, bias_instability=0.01)
                                                     for a in s.accelerometers))
        mech = Mechanism(dataclasses.replace(cfg, sensors=s))
    else:
        mech = config_mechanism(name)
    if not estimator:
        return mech
    cfg = mech.config
    return Mechanism(dataclasses.replace(cfg, estimator=dataclasses.replace(cfg.estimator, **estimator)))


def _state(mech: Mechanism, lay: StateLayout, rng) -> np.ndarray:
    q, _ = initial_state(mech, mech.create_data())
    x = lay.pack(q + 0.05 * rng.standard_normal(mech.n), rng.standard_normal(mech.n),
                 rng.standard_normal(mech.n), rng.standard_normal(mech.m),
                 rng.standard_normal(lay.n_u), 0.01 * rng.standard_normal(lay.n_b), 1.1, 0.9,
                 e=10.0 * rng.standard_normal(lay.n_e))
    if lay.n_r:
        x[lay.R] = 10.0 * rng.standard_normal(lay.n_r)
    return x


def _readings(fn: StepFunction, mech: Mechanism, x0, x1, rng, noise: float):
    """Fill p: in each sensor's slots a few readings (the rest unused), values = model + noise
    (``noise`` in sensor sigmas)."""
    L, lay, h = fn.layout, fn.lay, fn.h
    d = mech.create_data()
    p = L.empty_parameters()
    if L.tau is not None:
        p[L.tau] = rng.standard_normal(mech.n)
    expect = []
    for b in L.blocks:
        res = b.sensor
        used = max(1, b.slots - 1)
        for j in range(used):
            s = float(rng.uniform(0.05, 1.0))
            q, v, tail = interpolate(lay, x0, x1, s, h)
            z = np.concatenate([q, v, tail])
            a, lam, u = z[lay.A], z[lay.L], z[lay.U]
            tau = rng.standard_normal(mech.n) if b.tau else np.zeros(mech.n)
            model = res.model                                # the kind's numeric (pinocchio) model
            full = model.value(mech, d, q, v, a, lam, u, tau, lay.gravity_scale(z))
            if res.bias is not None:                         # a bias on the measured axes
                full[model.rows] += z[lay.B][res.bias]
            pred = model.measured(full)
            y = full + noise * res.sigma * rng.standard_normal(res.dim)
            if getattr(model, "wraps", False):               # a single-turn encoder's reading
                y = y + 2 * math.pi
            V = b.view(p)
            V[j, 0] = s
            V[j, 1:1 + res.dim] = y
            if b.tau:
                V[j, 1 + res.dim:] = tau
            e = model.difference(model.measured(y) - pred)
            expect.append((b.rows.start + j * res.rows, e / res.sigma))
    return p, expect


@pytest.mark.parametrize("rig", RIGS)
def test_rows_equal_the_numeric_model(rig):
    mech = _variant(rig)
    cfg = mech.config.estimator
    lay = StateLayout.for_mechanism(mech, cfg)
    h = 1.0 / cfg.keyframe_rate
    fn = StepFunction(mech, cfg, lay, h)
    rng = np.random.default_rng(5)
    x0 = _state(mech, lay, rng)
    x1 = _state(mech, lay, rng)
    p, expect = _readings(fn, mech, x0, x1, rng, noise=0.0)
    r, _, _ = fn.step(x0, x1, p)
    r = r.copy()
    nz, n, m = cfg.noise, mech.n, mech.m
    # integration (trapezoidal)
    q0, v0, a0 = x0[:n], x0[n:2 * n], x0[2 * n:3 * n]
    q1, v1, a1 = x1[:n], x1[n:2 * n], x1[2 * n:3 * n]
    np.testing.assert_allclose(r[:n], (q1 - q0 - 0.5 * h * (v0 + v1)) / nz.integration_position, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(r[n:2 * n], (v1 - v0 - 0.5 * h * (a0 + a1)) / nz.integration_velocity, rtol=1e-9, atol=1e-9)
    d = mech.create_data()
    L = fn.layout
    row = L.head
    if m:
        c = mech.closures(d, q1, v1, a1)
        np.testing.assert_allclose(r[row:row + m], c.phi / nz.closure_position, rtol=1e-9, atol=1e-6)
        np.testing.assert_allclose(r[row + m:row + 2 * m], c.phid / nz.closure_velocity, rtol=1e-9, atol=1e-6)
        np.testing.assert_allclose(r[row + 2 * m:row + 3 * m], c.phidd / nz.closure_acceleration, rtol=1e-9, atol=1e-6)
        row += 3 * m
    tau = p[L.tau] if L.tau is not None else np.zeros(n)
    dyn = mech.inverse_dynamics(d, q1, v1, a1, x1[lay.L], tau, x1[lay.U], lay.gravity_scale(x1),
                                lay.mass_scale(x1), parameters=False)
    np.testing.assert_allclose(r[row:row + n], dyn.r / nz.dynamics, rtol=1e-9, atol=1e-9)
    for start, e in expect:
        np.testing.assert_allclose(r[start:start + e.size], e, rtol=1e-9, atol=1e-9)
    # unused slots give zero rows
    used = np.zeros(L.R, bool)
    used[:row + n] = True
    for start, e in expect:
        used[start:start + e.size] = True
    assert np.all(r[~used] == 0.0)


@pytest.mark.parametrize("rig,estimator", [
    ("four_bar", {}), ("four_bar_gyro", {"estimate_gravity": True}), ("five_bar", {}),
    ("slider_crank", {}), ("spatial_rsur", {}), ("arm6", {}), ("pendulum", {}),
    ("four_bar", {"estimate_mass_link": "coupler", "integrator": "euler"}),
    ("four_bar", {"model_error": ModelErrorConfig(30.0)}),
    ("five_bar_gyro", {"model_error": ModelErrorConfig(3.0, 1.0), "estimate_gravity": True}),
    ("arm6", {"model_error": ModelErrorConfig(10.0)}),
    ("four_bar_imu", {}), ("four_bar_imu_bias", {"estimate_gravity": True}),
    ("arm6", {"input_model": "integrated"}), ("arm6", {"input_model": "jerk"}),
    ("fast_crank", {"input_model": "jerk", "model_error": ModelErrorConfig(10.0)}),
])
def test_jacobians_equal_finite_differences(rig, estimator):
    mech = _variant(rig, **estimator)
    cfg = mech.config.estimator
    lay = StateLayout.for_mechanism(mech, cfg)
    fn = StepFunction(mech, cfg, lay, 1.0 / cfg.keyframe_rate)
    rng = np.random.default_rng(11)
    x0 = _state(mech, lay, rng)
    x1 = _state(mech, lay, rng)
    p, _ = _readings(fn, mech, x0, x1, rng, noise=0.5)        # residuals < 3 sigma: robust weights 1
    r, J0, J1 = fn.step(x0, x1, p)
    J = np.hstack([J0, J1]).copy()
    X = np.concatenate([x0, x1])
    D = lay.dim
    num = np.zeros_like(J)
    for i in range(2 * D):
        eps = 1e-6 * max(1.0, abs(X[i]))
        Xp, Xm = X.copy(), X.copy()
        Xp[i] += eps
        Xm[i] -= eps
        rp = fn.step(Xp[:D], Xp[D:], p)[0].copy()
        rm = fn.step(Xm[:D], Xm[D:], p)[0].copy()
        num[:, i] = (rp - rm) / (2 * eps)
    scale = np.maximum(np.abs(J).max(axis=1, keepdims=True), 1.0)
    np.testing.assert_allclose(J / scale, num / scale, rtol=0, atol=2e-6)


def test_interpolation_is_exact_for_quintics_in_q_and_cubics_in_v():
    """q from the quintic Hermite through both keyframes' q, v and a (exact for quintic q); v
    from the cubic Hermite on v and a (exact for quartic q)."""
    mech = config_mechanism("pendulum")
    lay = StateLayout.for_mechanism(mech, mech.config.estimator)
    h = 0.01
    c = np.array([0.3, -1.2, 2.0, 5.0, -40.0, 900.0])    # q(t) = sum c_i t^i

    def truth(t):
        return (sum(ci * t ** i for i, ci in enumerate(c)),
                sum(i * ci * t ** (i - 1) for i, ci in enumerate(c) if i),
                sum(i * (i - 1) * ci * t ** (i - 2) for i, ci in enumerate(c) if i > 1))
    x0 = lay.pack(*[np.full(mech.n, v) for v in truth(0.0)])
    x1 = lay.pack(*[np.full(mech.n, v) for v in truth(h)])
    for s in (0.0, 0.25, 0.5, 0.9, 1.0):
        q, v, tail = interpolate(lay, x0, x1, s, h)
        tq, tv, ta = truth(s * h)
        assert q[0] == pytest.approx(tq, abs=1e-12)
        assert tail[0] == pytest.approx((1 - s) * truth(0.0)[2] + s * truth(h)[2], abs=1e-12)   # a: linear
    quartic = c.copy()
    quartic[5] = 0.0
    c[:] = quartic
    x0 = lay.pack(*[np.full(mech.n, v) for v in truth(0.0)])
    x1 = lay.pack(*[np.full(mech.n, v) for v in truth(h)])
    for s in (0.0, 0.25, 0.5, 0.9, 1.0):
        q, v, tail = interpolate(lay, x0, x1, s, h)
        assert v[0] == pytest.approx(truth(s * h)[1], abs=1e-10)


def test_the_integration_noise_is_a_parameter_of_the_step():
    """The rows are whitened by the sigmas in p (StepLayout.integration; by default the config's,
    raised at top speed), so the online estimator can set them per step."""
    mech = config_mechanism("pendulum")
    cfg = mech.config.estimator
    lay = StateLayout.for_mechanism(mech, cfg)
    h = 1.0 / cfg.keyframe_rate
    fn = StepFunction(mech, cfg, lay, h)
    L = fn.layout
    rng = np.random.default_rng(3)
    x0, x1 = _state(mech, lay, rng), _state(mech, lay, rng)
    p = L.empty_parameters()
    n = mech.n
    np.testing.assert_allclose(p[L.integration], [cfg.noise.integration_position] * n + [cfg.noise.integration_velocity] * n)
    r_default = fn.step(x0, x1, p)[0][:2 * n].copy()
    p[L.integration] = np.concatenate([np.full(n, 2 * cfg.noise.integration_position),
                                       np.full(n, 10 * cfg.noise.integration_velocity)])
    r = fn.step(x0, x1, p)[0][:2 * n]
    np.testing.assert_allclose(r[:n], r_default[:n] / 2, rtol=1e-12)
    np.testing.assert_allclose(r[n:], r_default[n:] / 10, rtol=1e-12)


def test_random_walk_rows_of_the_slow_states():
    """spatial_rsur estimates a gyro bias: its random walk row is (b1 - b0) / (sigma sqrt(h))."""
    mech = config_mechanism("spatial_rsur")
    cfg = mech.config.estimator
    lay = StateLayout.for_mechanism(mech, cfg)
    h = 1.0 / cfg.keyframe_rate
    fn = StepFunction(mech, cfg, lay, h)
    rng = np.random.default_rng(2)
    x0, x1 = _state(mech, lay, rng), _state(mech, lay, rng)
    r, J0, J1 = fn.step(x0, x1, fn.layout.empty_parameters())
    rows = slice(2 * mech.n, fn.layout.head)
    sig = np.array([max(g.bias_instability, 1e-9) for g, sl in zip(mech.sensors, lay.bias_slices)
                    if sl is not None for _ in range(sl.stop - sl.start)])
    assert rows.stop - rows.start == sig.size > 0
    np.testing.assert_allclose(r[rows], (x1[lay.B] - x0[lay.B]) / (sig * math.sqrt(h)), rtol=1e-12)


@pytest.mark.parametrize("model", ["integrated", "jerk"])
def test_the_inputs_rates_rows(model):
    """With rates, the inputs' own walk rows are zero, the rates walk, and over the step u (or the
    input joints' accelerations) integrates them: residual / (w sqrt(h^3 / 12)), w the walk."""
    mech = _variant("fast_crank", input_model=model)
    cfg = mech.config.estimator
    lay = StateLayout.for_mechanism(mech, cfg)
    assert lay.n_r == lay.n_u == 1 and lay.R.stop == lay.dim
    h = 1.0 / cfg.keyframe_rate
    fn = StepFunction(mech, cfg, lay, h)
    rng = np.random.default_rng(4)
    x0, x1 = _state(mech, lay, rng), _state(mech, lay, rng)
    r, _, _ = fn.step(x0, x1, fn.layout.empty_parameters())
    walk = 2 * mech.n                                   # the first walk row: u's
    w = cfg.noise.jerk_walk if model == "jerk" else cfg.noise.input_rate_walk
    assert abs(r[walk]) < 0.011 * abs(x1[lay.U][0] - x0[lay.U][0]) / (cfg.noise.input_random_walk * math.sqrt(h))
    np.testing.assert_allclose(r[walk + lay.R.start - lay.slow.start], (x1[lay.R] - x0[lay.R]) / (w * math.sqrt(h)),
                               rtol=1e-12)
    moved = (mech.B.T @ (x1[lay.A] - x0[lay.A])) if model == "jerk" else x1[lay.U] - x0[lay.U]
    expect = (moved - 0.5 * h * (x0[lay.R] + x1[lay.R])) / (w * math.sqrt(h ** 3 / 12.0))
    np.testing.assert_allclose(r[fn.layout.head - lay.n_r:fn.layout.head], expect, rtol=1e-10)
    assert lay.prior_sigmas(mech, cfg)[lay.R][0] == (cfg.noise.prior_jerk if model == "jerk" else cfg.noise.prior_input_rate)


@pytest.mark.parametrize("rig,joints", [("four_bar", [0, 1, 2]), ("five_bar", [0, 2])])
def test_model_error_forces(rig, joints):
    """estimator.model_error: one generalised force per DOF coordinate (per joint on a rig with
    load cells: four_bar), a random walk of the configured sigma, subtracted in those
    coordinates' equations of motion only; a prior of its own."""
    mech = _variant(rig, model_error=ModelErrorConfig(25.0, 7.0), estimate_gravity=True)
    cfg = mech.config.estimator
    lay = StateLayout.for_mechanism(mech, cfg)
    assert list(model_error_joints(mech)) == joints and lay.n_e == len(joints)
    assert lay.E.start == lay.U.stop and lay.B.start == lay.E.stop
    h = 1.0 / cfg.keyframe_rate
    fn = StepFunction(mech, cfg, lay, h)
    off = StepFunction(mech, dataclasses.replace(cfg, model_error=ModelErrorConfig()),
                       StateLayout.for_mechanism(mech, dataclasses.replace(cfg, model_error=ModelErrorConfig())), h)
    rng = np.random.default_rng(3)
    x0, x1 = _state(mech, lay, rng), _state(mech, lay, rng)
    p = fn.layout.empty_parameters()
    r = fn.step(x0, x1, p)[0].copy()
    # the walk rows of e: (e1 - e0) / (sigma sqrt(h))
    rows = slice(2 * mech.n + lay.E.start - lay.slow.start, 2 * mech.n + lay.E.stop - lay.slow.start)
    np.testing.assert_allclose(r[rows], (x1[lay.E] - x0[lay.E]) / (25.0 * math.sqrt(h)), rtol=1e-12)
    # the equations of motion: the same as without the state, minus e on the DOF rows
    keep = np.r_[0:lay.E.start, lay.E.stop:lay.dim]
    r_off = off.step(x0[keep], x1[keep], off.layout.empty_parameters())[0].copy()
    dyn = slice(fn.layout.head + fn.layout.closure_rows, fn.layout.head + fn.layout.closure_rows + mech.n)
    dyn_off = slice(off.layout.head + off.layout.closure_rows, off.layout.head + off.layout.closure_rows + mech.n)
    expect = r_off[dyn_off].copy()
    expect[joints] -= x1[lay.E] / cfg.noise.dynamics
    np.testing.assert_allclose(r[dyn], expect, rtol=1e-10, atol=1e-10)
    sig = lay.prior_sigmas(mech, cfg)
    assert np.all(sig[lay.E] == 7.0)


def test_scales_are_held_as_logarithms():
    """The gravity and mass scales are stored as log s, log mu: any state gives a positive scale."""
    mech = _variant("four_bar", estimate_gravity=True, estimate_mass_link="coupler")
    lay = StateLayout.for_mechanism(mech, mech.config.estimator)
    x = lay.pack(np.zeros(3), np.zeros(3), np.zeros(3), s=0.6, mu=1.5)
    assert x[lay.S][0] == pytest.approx(math.log(0.6)) and x[lay.MU][0] == pytest.approx(math.log(1.5))
    assert lay.gravity_scale(x) == pytest.approx(0.6) and lay.mass_scale(x) == pytest.approx(1.5)
    x[lay.S] = -30.0
    assert lay.gravity_scale(x) > 0.0
    np.testing.assert_allclose(lay.gravity_scales(np.stack([x, x])), np.exp(-30.0))


@pytest.mark.parametrize("loss,threshold,expect", [("huber", 3.0, 3.0 / 6.0), ("cauchy", 3.0, 1.0 / (1.0 + 4.0)),
                                                   ("none", 3.0, 1.0)])
def test_robust_weight_of_an_outlier(loss, threshold, expect):
    """A 6 sigma encoder reading: its rows are scaled by sqrt(w) (IRLS), w judged against the
    sensor's innovation scale (a scale of 2 makes 6 sigma an inlier for Huber)."""
    base = config_mechanism("four_bar")
    cfg = dataclasses.replace(base.config.estimator,
                              robust_loss=dataclasses.replace(base.config.estimator.robust_loss, type=loss,
                                                              threshold=threshold))
    mech = Mechanism(dataclasses.replace(base.config, estimator=cfg))
    lay = StateLayout.for_mechanism(mech, cfg)
    fn = StepFunction(mech, cfg, lay, 1.0 / cfg.keyframe_rate)
    b = fn.layout.block("crank_encoder")
    x = lay.pack(np.array([1.0, 0.2, 0.3]), np.zeros(3), np.zeros(3))
    sigma = b.sensor.sigma
    for scale, w in ((1.0, expect), (2.0, 1.0 if loss == "huber" else 1.0 / (1.0 + 1.0) if loss == "cauchy" else 1.0)):
        p = fn.layout.empty_parameters()
        p[b.mean_abs] = scale * GAUSSIAN_MEAN_ABS
        b.view(p)[0, :2] = 1.0, 1.0 + 6 * sigma
        r, _, J1 = fn.step(x, x, p)
        assert fn.step.abs[b.readings.start] == pytest.approx(6.0)
        assert fn.step.weight[b.readings.start] == pytest.approx(w)
        assert r[b.rows.start] == pytest.approx(6.0 * math.sqrt(w))
        assert J1[b.rows.start, 0] == pytest.approx(-math.sqrt(w) / sigma)


def test_native_code_gives_the_virtual_machines_numbers():
    """The step function compiled to native code (when a C compiler is at hand) computes what
    CasADi's virtual machine computes."""
    from mbfg_ros.estimation.native_code import compiler
    if compiler() is None:
        pytest.skip("no C compiler here: the estimator runs on CasADi's virtual machine")
    mech = config_mechanism("spatial_rsur")
    cfg = mech.config.estimator
    lay = StateLayout.for_mechanism(mech, cfg)
    vm = StepFunction(mech, cfg, lay, 1.0 / cfg.keyframe_rate, native_code=False)
    nat = StepFunction(mech, cfg, lay, 1.0 / cfg.keyframe_rate, native_code=True)
    assert vm.step.compiled is None and nat.step.compiled is not None
    rng = np.random.default_rng(4)
    x0, x1 = _state(mech, lay, rng), _state(mech, lay, rng)
    p, _ = _readings(vm, mech, x0, x1, rng, noise=2.0)
    a = [v.copy() for v in vm.step(x0, x1, p)] + [vm.step.stats.copy()]
    b = [v.copy() for v in nat.step(x0, x1, p)] + [nat.step.stats.copy()]
    for u, w in zip(a, b):
        np.testing.assert_allclose(u, w, rtol=1e-12, atol=1e-12)


def test_multipliers_get_a_weak_prior_only_where_the_closure_rows_are_redundant_everywhere():
    """Bricard's mechanism (five closure rows of rank 4 at every pose): rows lam / noise.multiplier
    hold the self-stress the closures leave free; the four-bar (independent rows) has none."""
    from conftest import CONFIG
    from mbfg_ros.model.mechanism import load_mechanism
    bricard = load_mechanism(CONFIG / "iftomm" / "a04_bricard_gyro.yaml")
    for mech, rows in ((bricard, bricard.m), (config_mechanism("four_bar"), 0)):
        cfg = mech.config.estimator
        lay = StateLayout.for_mechanism(mech, cfg)
        fn = StepFunction(mech, cfg, lay, 1.0 / cfg.keyframe_rate)
        L = fn.layout
        assert L.multiplier_rows == rows
        if rows:
            rng = np.random.default_rng(2)
            x0, x1 = _state(mech, lay, rng), _state(mech, lay, rng)
            r = fn.step(x0, x1, L.empty_parameters())[0]
            start = L.dynamics_start + L.dynamics_rows
            np.testing.assert_allclose(r[start:start + rows], x1[lay.L] / cfg.noise.multiplier, rtol=1e-12)
