"""The long crank (config/long_crank.yaml): a motor-driven slider-crank whose 5 kg slider swings
the crank between 20 and 78 rad/s within every turn, the shape of an independent recording the
estimator lost when it was sensed by its rod gyro alone (issue 21). Simulated with
``mbfg simulate`` and replayed:

- the rod gyro alone, at the automatic keyframe rate (800 Hz: no encoder on the DOF) and at
  1 kHz, from the config's start and from a start 1 rad off with the velocity unknown (the start
  hypotheses, estimation/start_search.py);
- a lost estimate without encoders (started at the config's pose turning the wrong way) comes
  back from the start hypotheses instead of staying lost;
- all three sensors: no lost period at the automatic rate (400 Hz); at the finer grid the
  divergence note asks for on this rough motion (800 Hz), every sensor fitted within 1.3 sigma; a
  too-low explicit rate named in the first report with the speed and the setting to change.

Measured on 3 s runs (the first second skipped): gyro alone 0.6-1.0 mrad, motor torque 4.5-6.5 %
of its RMS, no slip.
"""
from __future__ import annotations

import contextlib
import dataclasses
import io

import numpy as np
import pytest

from mbfg_ros.cli.main import main
from mbfg_ros.model.config import SensorsConfig
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.replay.metrics import compare
from mbfg_ros.replay.session import ReplayOptions, replay_bag
from support.simulations import config_mechanism, config_path

pytestmark = pytest.mark.slow

SIMULATE = ["--input", "sine", "--input-amplitude", "10", "--input-offset", "24", "--input-frequency", "1",
            "--input-start", "0", "--truth-rate", "1000", "--no-progress", "--seed", "1"]


def _simulate(path, duration: float, *extra: str):
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["simulate", str(config_path("long_crank")), "--out", str(path), "--duration", str(duration),
                     *SIMULATE, *extra]) == 0
    return path


@pytest.fixture(scope="module")
def bag(tmp_path_factory):
    return _simulate(tmp_path_factory.mktemp("long") / "long_crank", 3.0)


@pytest.fixture(scope="module")
def bag_off(tmp_path_factory):
    """The rig starts 1 rad ahead of the config's pose."""
    return _simulate(tmp_path_factory.mktemp("long_off") / "long_crank", 3.0, "--initial-error", "1.0")


def _rig(sensors: str = "all", **estimator) -> Mechanism:
    base = config_mechanism("long_crank")
    s = base.config.sensors
    sets = {"all": s, "gyro": SensorsConfig(gyros=s.gyros)}
    cfg = dataclasses.replace(base.config, sensors=sets[sensors])
    velocity = estimator.pop("initial_velocity", None)
    if velocity is not None:
        cfg = dataclasses.replace(cfg, initial=dataclasses.replace(cfg.initial, velocities={"crank_joint": velocity}))
    if estimator:
        cfg = dataclasses.replace(cfg, estimator=dataclasses.replace(cfg.estimator, **estimator))
    return Mechanism(cfg)


def score(mech: Mechanism, res, skip: float = 1.0) -> dict:
    """Crank position RMSE (rad), motor torque RMSE relative to its RMS, slips, lost periods."""
    c = compare(mech, res.estimates, res.truth, skip=skip)
    j = mech.index["crank_joint"]
    rms = float(np.sqrt(np.nanmean(c.truth_effort[c.used, j] ** 2)))
    return {"position": c.rmse["crank_joint"]["position"], "effort": c.rmse["crank_joint"]["effort"] / rms,
            "slips": c.turn_slips["crank_joint"], "speed": float(np.max(c.truth_v[c.used, j])),
            "lost": [(p.sensor, round(p.start, 3), p.cause) for p in res.health.divergence.periods if p.lost],
            "searches": res.health.start_searches, "last_search": res.health.last_start_search}


def test_the_gyro_alone_gets_the_finer_automatic_grid():
    assert _rig("gyro").config.estimator.keyframe_rate == 800.0
    assert _rig("all").config.estimator.keyframe_rate == 400.0


@pytest.mark.parametrize("rate", ["auto", 1000.0])
def test_the_gyro_alone_tracks(bag, rate):
    mech = _rig("gyro") if rate == "auto" else _rig("gyro", keyframe_rate=rate)
    res = replay_bag(bag, mech, ReplayOptions(progress=False))
    s = score(mech, res)
    assert s["speed"] >= 70.0, s
    assert s["position"] <= 5e-3 and s["effort"] <= 0.10 and s["slips"] == 0, s
    assert not s["lost"], s


def test_the_gyro_alone_finds_its_start(bag_off):
    """A start 1 rad off with the crank's speed unknown (0 in the config): the start hypotheses
    find the motion before the first keyframe closes."""
    mech = _rig("gyro", initial_velocity=0.0)
    res = replay_bag(bag_off, mech, ReplayOptions(progress=False))
    s = score(mech, res)
    assert s["searches"] == 1 and s["last_search"].startswith("start: best of"), s
    assert s["position"] <= 5e-3 and s["effort"] <= 0.10 and s["slips"] == 0, s


def test_a_lost_estimate_without_encoders_comes_back(bag):
    """Started at the config's pose with the velocity unknown and no start search
    (``initial_pose: config``) the estimate settles on the crank turning backwards, which the rod
    gyro alone almost cannot tell apart; the divergence test judges it lost and the estimator
    restarts from the best start hypothesis."""
    mech = _rig("gyro", initial_velocity=0.0, initial_pose="config")
    res = replay_bag(bag, mech, ReplayOptions(progress=False))
    s = score(mech, res, skip=1.5)
    assert res.health.reinitialisations >= 1 and "start hypotheses" in res.health.last_reinitialisation, s
    assert s["lost"] and s["lost"][0][1] < 1.0, s
    assert s["position"] <= 5e-3 and s["slips"] == 0, s


def test_all_sensors_hold_without_a_lost_period(bag):
    mech = _rig("all")
    res = replay_bag(bag, mech, ReplayOptions(progress=False))
    s = score(mech, res)
    assert s["position"] <= 5e-3 and s["slips"] == 0 and not s["lost"], s


def test_at_the_finer_grid_every_sensor_is_fitted_to_its_noise(bag):
    """The divergence note asks for 800 Hz on this rig (the motion is rougher than top_speed
    implies); there every sensor's whitened residual RMS is within 1.3 sigma."""
    mech = _rig("all", keyframe_rate=800.0)
    res = replay_bag(bag, mech, ReplayOptions(progress=False))
    assert not [p for p in res.health.divergence.periods if p.lost]
    # each reading's whitened residual at the estimate it was solved in (the divergence test's
    # figures, the replay's "Fit" line): a filtered estimate between keyframes is two solves apart
    fits = res.health.divergence.run_rms()
    assert set(fits) == {"crank_encoder", "rod_gyro", "wrist_pin_load"} and max(fits.values()) <= 1.3, fits


def test_a_too_low_keyframe_rate_is_named_with_the_speed(bag):
    """At 100 Hz (0.8 rad per keyframe at top speed) the estimate is lost at once; the first
    report names the speed the encoders show and the settings that would hold it."""
    mech = _rig("all", keyframe_rate=100.0, keyframe_rate_auto=False)
    res = replay_bag(bag, mech, ReplayOptions(progress=False))
    first = res.health.divergence.periods[0]
    assert first.lost and first.start < 0.5, first.as_dict()
    assert "encoders show" in first.note and "mechanism.top_speed" in first.note, first.as_dict()
    assert float(first.note.rsplit("keyframe_rate: ", 1)[1]) >= 350, first.as_dict()
