"""The estimator on the IFToMM benchmark rigs (config/iftomm/), replayed from simulated bags with
each config's default settings, against the simulator's truth (README, "IFToMM rigs:
estimation"; the full 10 s table comes from tools/iftomm_table.py).

Tolerances: DOF position RMSE <= 5 mrad and velocity RMSE <= 1 % of its RMS (issue 21), no
whole-turn slip, reset, recovery, re-initialisation or divergence report, every joint within
10 mrad (a branch switch of the N-four-bar moves a crank by radians). Forces: the closure forces
away from the singular passages (where the truth's closure Jacobian keeps its smallest kept
singular value above 10 % of its initial one) within a stated fraction of their RMS.

Bricard's mechanism without a load cell in its loop tracks since every multiplier gets a weak
prior on rigs whose closure rows are redundant everywhere (``noise.multiplier``: the rows leave
a self-stress free, which grew to 1e8 N and locked q); Andrews' squeezer tracks at 2 kHz since the
newest keyframe is refined by Gauss-Newton at a jerk and the integration noise follows the motion;
with its rod gyro alone since its config gives the equations of motion the model's noise (1 mN m,
not the default 1 N m, thirty times its motor torque) and the start search keeps the stretch's
first keyframe.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from conftest import CONFIG
from mbfg_ros.estimation.estimator import Estimator
from mbfg_ros.model.mechanism import Mechanism, load_mechanism
from mbfg_ros.replay.metrics import compare
from mbfg_ros.replay.session import ReplayOptions, replay_bag
from mbfg_ros.sim.forward import simulate
from mbfg_ros.sim.scenario import Scenario
from mbfg_ros.sim.sensors import SensorOptions, synthesize
from support.replay_bags import simulated_bag

pytestmark = pytest.mark.slow


def _rig(name: str) -> Mechanism:
    return load_mechanism(CONFIG / "iftomm" / f"{name}.yaml")


@pytest.fixture(scope="module")
def bags(tmp_path_factory):
    root = tmp_path_factory.mktemp("iftomm")
    return {"a02_n2": simulated_bag(root / "a02_n2", "iftomm/a02_n2", duration=5.5),
            "a04_bricard": simulated_bag(root / "a04", "iftomm/a04_bricard", duration=4.0)}


def _replay(bag, mech):
    res = replay_bag(bag, mech, ReplayOptions(progress=False))
    return res, compare(mech, res.estimates, res.truth, skip=1.0)


def _assert_tracked(res, c, mech, position=5e-3, velocity=0.01, joints=10e-3):
    u = c.used
    j = mech.dof[0]
    r = c.rmse[mech.dof_names[0]]
    v_rms = math.sqrt(np.mean(c.truth_v[u, j] ** 2))
    h = res.health
    assert r["position"] <= position, r
    assert r["velocity"] <= velocity * v_rms, (r, v_rms)
    assert np.nanmax(np.abs(c.error_q[u])) <= joints          # the branch held: every joint
    assert sum(c.turn_slips.values()) == 0
    assert (h.resets, h.recoveries, h.reinitialisations) == (0, 0, 0)
    assert not h.divergence.periods, [p.sensor for p in h.divergence.periods]


def _singular_ratio(mech, q):
    d = mech.create_data()
    s = np.array([np.linalg.svd(mech.closure_position(d, qi)[1], compute_uv=False) for qi in q])
    return (s[:, -1] / s[:, 0]) / (s[0, -1] / s[0, 0])


@pytest.mark.parametrize("config, force_tolerance", [
    ("a02_n2", 0.06),          # the load cell's noise (0.5 N on 12 N) passes into the pin forces
    ("a02_n2_gyro", 0.02),
])
def test_a02_tracks_the_parallelogram_through_every_passage(bags, config, force_tolerance):
    mech = _rig(config)
    res, c = _replay(bags["a02_n2"], mech)
    _assert_tracked(res, c, mech)
    ok = np.all(np.isfinite(c.truth_q), axis=1) & c.used
    ratio = np.full(len(c.t), np.nan)
    ratio[ok] = _singular_ratio(mech, c.truth_q[ok])
    away, near = ok & (ratio > 0.1), ok & (ratio <= 0.1)
    assert near.sum() > 20                                   # the run crosses passages after 1 s
    for name in mech.closure_names:
        err, tru = c.error_forces[name][:, :3], c.truth_forces[name][:, :3]
        rmse = math.sqrt(np.mean(np.sum(err[away] ** 2, axis=1)))
        rms = math.sqrt(np.mean(np.sum(tru[away] ** 2, axis=1)))
        assert rmse <= force_tolerance * rms, (name, rmse, rms)
        # at the passages the rigid model's pin forces grow like 1 / |sin q|: the estimate stays
        # finite and of the truth's order
        est = np.linalg.norm(tru[near] + err[near], axis=1)
        assert np.all(np.isfinite(est)) and np.max(est) < 3 * np.max(np.linalg.norm(tru[near], axis=1)) + 50.0


def test_a04_tracks_and_its_forces_are_right_up_to_the_self_stress(bags):
    """Bricard's loop is statically indeterminate: Phi_q^T has a null vector on the motion, so
    the closure's reaction is determined only up to that self-stress (the truth reports the
    minimum-norm multipliers; only the load cell in the loop sees it). The force error lies
    along the self-stress wrench; off it the estimate is within 2 % of the force's RMS."""
    mech = _rig("a04_bricard")
    res, c = _replay(bags["a04_bricard"], mech)
    _assert_tracked(res, c, mech)
    d = mech.create_data()
    err, tru = c.error_forces["joint6"], c.truth_forces["joint6"]
    off = []
    for i in np.flatnonzero(c.used)[::10]:
        _, J = mech.closure_position(d, c.truth_q[i])
        null = np.linalg.svd(J.T)[2][-1]
        f, t = mech.closure_wrenches_in_frame_b(d, c.truth_q[i], null)[0]
        w = np.concatenate([f, t])
        off.append(err[i] - (err[i] @ w) / (w @ w) * w)
    off = np.array(off)
    rms = math.sqrt(np.mean(np.sum(tru[c.used, :3] ** 2, axis=1)))
    assert math.sqrt(np.mean(np.sum(off[:, :3] ** 2, axis=1))) <= 0.02 * rms


def test_a04_gyro_alone_tracks(bags):
    mech = _rig("a04_bricard_gyro")
    res, c = _replay(bags["a04_bricard"], mech)
    _assert_tracked(res, c, mech)


@pytest.mark.parametrize("config, position, settled", [
    ("a03_andrews", 5e-3, 5e-3),
    # the gyro alone: the first keyframe, at rest, is 62 mrad off (the gyro reads nothing there and
    # the integration noise top_speed raises ties it loosely to the next); 9.3 mrad RMSE from the
    # start, 4.4 after the first millisecond
    ("a03_andrews_gyro", 12e-3, 5e-3),
])
def test_a03_andrews_squeezer_tracks(config, position, settled):
    """The 0.03 s motion (the crank reaches 1140 rad/s) at the 2 kHz maximum, fed directly; with
    the crank encoder, rod gyro and load cell, and with the rod gyro alone (lost before its
    config's dynamics noise and the start search's probes keeping the stretch's first keyframe)."""
    mech = _rig(config)
    tr = simulate(mech, Scenario(duration=0.03, input_profile="step", input_amplitude=0.033, input_start=0.0))
    est = Estimator(mech, freeze_gc=False)
    out = []
    for s in sorted(synthesize(tr, SensorOptions(seed=1)), key=lambda s: s.stamp):
        est.add_sample(s.sensor, s.stamp, s.value)
        out += est.pop_estimates()
    est.flush()
    out += est.pop_estimates()
    b = mech.index["beta"]
    t = np.array([e.stamp for e in out])
    q, v, *_ = tr.state_at(t)
    err = np.array([e.q[b] for e in out]) - q[:, b]
    verr = np.array([e.v[b] for e in out]) - v[:, b]
    assert est.health.recoveries == 0
    assert np.max(np.abs(err)) < 0.5                      # no slip
    assert math.sqrt(np.mean(err ** 2)) <= position
    assert math.sqrt(np.mean(err[t >= 1e-3] ** 2)) <= settled
    assert math.sqrt(np.mean(verr ** 2)) <= 0.01 * math.sqrt(np.mean(v[:, b] ** 2))


def test_a02_n4_gyro_alone_holds_the_branch(tmp_path):
    """Four windows, the middle crank's gyro alone, 3 s (three passages)."""
    bag = simulated_bag(tmp_path / "a02_n4", "iftomm/a02_n4", duration=3.0)
    mech = _rig("a02_n4_gyro")
    res, c = _replay(bag, mech)
    _assert_tracked(res, c, mech)
