"""The simulator on the IFToMM benchmark rigs against their references.

- A02, the N-four-bar: on its physical (parallelogram) branch every crank turns by the same angle
  and the couplers translate, so the motion obeys one closed-form equation: with N + 1 cranks of
  inertia m L^2 / 3 about their pivots and N translating couplers of mass m, the energy gives
  I theta'' = -g cos(theta) ((N + 1) m L / 2 + N m L), I = (N + 1) m L^2 / 3 + N m L^2. It is
  integrated here to 1e-13 (its period by quadrature) and the simulator, which integrates all
  2N + 1 joints and the 2N closure rows, must follow it through every horizontal passage, where
  the closure Jacobian loses N of its 2N rows of rank.
- A03, Andrews' squeezer: the reference solution at t = 0.03 s of the IVP test set (Mazzia and
  Magherini, computed with PSIDE at tolerance 1e-14), joint by joint.
- A04, Bricard's mechanism: the key values of the library's figure of the reference point P3
  (x from 1 to -1 at 2.5 s, y up to -0.866, z down to -0.5 at 1.25 s), energy conservation, and
  the redundant closure row.
"""
from __future__ import annotations

import math

import numpy as np
import pinocchio as pin
import pytest
from scipy.integrate import quad, solve_ivp

from mbfg_ros.sim.constrained_dynamics import (PROXIMAL_ITERATIONS, PROXIMAL_MU, REDUNDANT, ConstrainedDynamics,
                                               proximal_weights)
from mbfg_ros.sim.forward import IntegratorOptions, simulate
from mbfg_ros.sim.scenario import Scenario
from support.simulations import config_mechanism

G = 9.81


def reduced_a02(n: int):
    """theta'' = -k g cos(theta) of the parallelogram branch (unit rods), and its k."""
    k = ((n + 1) / 2 + n) / ((n + 1) / 3 + n)
    return k, lambda t, y: [y[1], -k * G * math.cos(y[0])]


@pytest.fixture(scope="module")
def a02_n2():
    return simulate(config_mechanism("iftomm/a02_n2"), Scenario(duration=10.0))


def _check_a02(tr, n: int, passages: int):
    mech = tr.mechanism
    names = mech.joint_names
    cranks = [names.index(f"crank{i}_joint") for i in range(n + 1)]
    couplers = [names.index(f"coupler{i}_joint") for i in range(1, n + 1)]
    q = tr.q
    # the physical branch: every crank at the same angle, the couplers horizontal
    for i in cranks[1:]:
        assert np.max(np.abs(q[:, i] - q[:, cranks[0]])) < 1e-8
    for c in couplers:
        assert np.max(np.abs(q[:, c] + q[:, cranks[0]])) < 1e-8
    # the closed-form motion, B0 = (cos, sin) of crank0
    k, rhs = reduced_a02(n)
    exact = solve_ivp(rhs, (0.0, tr.t[-1]), [math.pi / 2, -1.0], method="DOP853", rtol=1e-13, atol=1e-13,
                      dense_output=True).sol(tr.t)[0]
    theta = q[:, cranks[0]]
    b0_error = np.hypot(np.cos(theta) - np.cos(exact), np.sin(theta) - np.sin(exact))
    assert np.max(b0_error) < 1e-6, np.max(b0_error)
    # every horizontal passage is listed, at the closed form's times (within the output step)
    horizontal = np.flatnonzero(np.diff(np.floor(exact / math.pi)) != 0)
    seen = tr.singular_passages()
    assert len(seen) == len(horizontal) == passages
    np.testing.assert_allclose([t for t, _ in seen], tr.t[horizontal], atol=2e-3)
    assert all(ratio < 2e-3 for _, ratio in seen)
    assert tr.energy_drift() < 1e-6
    assert tr.closure_residual().max() < 1e-8
    return theta, exact


def test_a02_double_four_bar_holds_its_branch_through_ten_passages(a02_n2):
    theta, exact = _check_a02(a02_n2, 2, 10)
    # the library's figure (B0's x displacement and speed over 10 s): x between -1 and 1 m, its
    # speed 1 m/s at the top, up to 1.96 m/s, and down to -sqrt(1 + 4 k g) = -6.84 m/s at the
    # bottom, one turn in 1.94 s (the closed form's period; the library's N = 40 takes 1.97 s)
    k, _ = reduced_a02(2)
    xdot = -np.sin(theta) * a02_n2.v[:, 0]
    assert xdot[0] == pytest.approx(1.0, abs=1e-12)
    assert np.max(xdot) == pytest.approx(1.963, abs=2e-3)
    assert np.min(xdot) == pytest.approx(-math.sqrt(1 + 4 * k * G), abs=2e-3)
    assert math.sqrt(1 + 4 * k * G) == pytest.approx(6.8396, abs=1e-4)
    assert np.min(np.cos(theta)) == pytest.approx(-1.0, abs=1e-4) and np.max(np.cos(theta)) == pytest.approx(1.0, abs=1e-4)
    period = quad(lambda th: 1.0 / math.sqrt(1 + 2 * k * G * (1 - math.sin(th))), 0.0, 2 * math.pi)[0]
    assert period == pytest.approx(1.9425, abs=1e-4)
    passages = [t for t, _ in a02_n2.singular_passages()]
    assert passages[2] - passages[0] == pytest.approx(period, abs=2e-3)
    assert passages[8] - passages[0] == pytest.approx(4 * period, abs=2e-3)
    assert (theta[0] - theta[-1]) / (2 * math.pi) == pytest.approx((exact[0] - exact[-1]) / (2 * math.pi), abs=1e-7)


def test_a02_four_windows_hold_their_branch():
    tr = simulate(config_mechanism("iftomm/a02_n4"), Scenario(duration=3.0))
    _check_a02(tr, 4, 3)


def test_a02_singular_pose_has_bounded_accelerations():
    """Near the horizontal (Phi_q's smallest kept singular values go like the crank angle) the
    proximal multipliers give the branch's acceleration -k g cos(theta), exactly at 10 mrad and
    to 1e-5 at 1 mrad; at the horizontal itself, where Phi_q has lost 2 of its 4 rows of rank
    and the rows left do not determine the motion along the other branch, the accelerations
    stay bounded (the plain KKT solve's multipliers grow like 1 / angle, to 1e15 there)."""
    mech = config_mechanism("iftomm/a02_n2")
    dyn = ConstrainedDynamics(mech)
    k, _ = reduced_a02(2)
    signs = np.array([1, -1, 1, -1, 1])
    v = -6.0 * signs
    for theta, rtol in ((1e-2, 1e-9), (1e-3, 1e-5)):
        a, lam = dyn.accelerations(theta * signs, v)
        np.testing.assert_allclose(a, -k * G * math.cos(theta) * signs, rtol=rtol)
    for theta in (0.0, 1e-9):
        a, lam = dyn.accelerations(theta * signs, v)
        assert np.all(np.isfinite(lam)) and np.max(np.abs(a)) < 2 * k * G


def test_proximal_weights():
    g = np.array([0.0, 1e-17, 1e-12, 1e-9, 1e-4, 1.0])
    w = proximal_weights(g, PROXIMAL_MU, PROXIMAL_ITERATIONS)
    mu = PROXIMAL_MU * g[-1]
    assert w[0] == 0.0 and w[1] == 0.0 and REDUNDANT * g[-1] > 1e-17        # exactly redundant
    assert w[2] == pytest.approx(PROXIMAL_ITERATIONS / mu, rel=1e-3)      # relaxed: bounded by K / mu
    assert w[3] < 1.0 / g[3]
    np.testing.assert_allclose(w[4:], 1.0 / g[4:], rtol=1e-14)              # exact where well conditioned


# the IVP test set's reference at t = 0.03 s: (position rad, velocity rad/s) per joint
ANDREWS_REFERENCE = {
    "beta": (0.1581077119629904e2, 0.1139920302151208e4),
    "theta": (-0.1575637105984298e2, -0.1424379294994111e4),
    "gamma": (0.4082224013073101e-1, 0.1103291221937134e2),
    "phi": (-0.5347301163226948, 0.1929337464421385e2),
    "delta": (0.5244099658805304, 0.5735699284790808),
    "omega": (0.5347301163226948, -0.1929337464421385e2),
    "epsilon": (0.1048080741042263e1, 0.3231791658026955),
}


def test_a03_andrews_squeezer_matches_the_test_sets_reference():
    tr = simulate(config_mechanism("iftomm/a03_andrews"),
                  Scenario(duration=0.03, input_profile="step", input_amplitude=0.033, input_start=0.0),
                  options=IntegratorOptions(output_rate=10000.0))
    names = tr.mechanism.joint_names
    for name, (q_ref, v_ref) in ANDREWS_REFERENCE.items():
        i = names.index(name)
        assert tr.q[-1, i] == pytest.approx(q_ref, abs=1e-8), name
        assert tr.v[-1, i] == pytest.approx(v_ref, rel=1e-7, abs=1e-6), name
    # the library's accuracy criterion: T + V - E0 - tau (beta - beta0) = 0 (the spring's energy
    # in V; the motor's work tau (beta - beta0) with the constant torque)
    beta = tr.q[:, names.index("beta")]
    E = tr.energy()
    balance = E - E[0] - 0.033 * (beta - beta[0])
    assert np.max(np.abs(balance)) < 1e-9 * E[-1]
    np.testing.assert_allclose(tr.work_done(), 0.033 * (beta - beta[0]), atol=1e-12)
    assert tr.energy_drift() < 1e-9 and tr.closure_residual().max() < 1e-10


def test_a04_bricard_follows_the_librarys_figure_with_its_redundant_row():
    tr = simulate(config_mechanism("iftomm/a04_bricard"), Scenario(duration=2.6),
                  options=IntegratorOptions(output_rate=500.0))
    mech = tr.mechanism
    d = mech.model.createData()
    p3, lib = mech.frame_id("p3"), mech.frame_id("library_frame")
    P = []
    for qi in tr.q:
        pin.framesForwardKinematics(mech.model, d, qi)
        P.append(d.oMf[lib].actInv(d.oMf[p3]).translation.copy())       # the library's frame
    P = np.array(P)
    np.testing.assert_allclose(P[0], [1.0, -1.0, 0.0], atol=1e-12)
    k = int(np.argmin(P[:, 0]))
    assert P[k, 0] == pytest.approx(-1.0, abs=1e-5) and tr.t[k] == pytest.approx(2.5, abs=0.02)
    assert np.max(P[:, 1]) == pytest.approx(-math.cos(math.pi / 6), abs=1e-6)
    assert np.min(P[:, 2]) == pytest.approx(-0.5, abs=1e-6)
    assert tr.t[int(np.argmin(P[:, 2]))] == pytest.approx(1.25, abs=0.02)
    assert tr.energy_drift() < 1e-9 and tr.closure_residual().max() < 1e-10
    assert tr.singular_passages() == []
    # one closure row is redundant all along: the multipliers are the minimum-norm ones (no
    # component on the Jacobian's null space), as Mechanism.forward_dynamics gives them
    md = mech.create_data()
    for i in (100, 700):
        _, J = mech.closure_position(md, tr.q[i])
        _, s, Vt = np.linalg.svd(J.T)
        assert s[-1] < 1e-12 * s[0]
        assert abs(Vt[-1] @ tr.lam[i]) < 1e-9 * np.linalg.norm(tr.lam[i])
        _, lam_ref = mech.forward_dynamics(md, tr.q[i], tr.v[i])
        np.testing.assert_allclose(tr.lam[i], lam_ref, atol=1e-8 * np.linalg.norm(lam_ref))
