"""The published standard deviations against simulated truth (issue 21, "honest uncertainty"):
replayed with the DOF covariance, the DOF errors over their published sigmas (RMS, first second
skipped; mbfg_ros.replay.metrics.consistency) where the motion is hard:

- the long crank (config/long_crank.yaml, all sensors, automatic 400 Hz) at its dead centres,
  where a step refined by Gauss-Newton gets its integration noise raised to its own local
  truncation (estimation/integration_noise.py): 0.97 / 0.90 on 3 s (before: 1.71 / 3.09);
- the five-bar whose motion passes its branch changes (config/five_bar_branch.yaml), where the
  relinearization threshold falls near singular poses (estimation/relinearization.py): not
  overconfident (0.82 / 0.85 on the positions over 4 s; before: 0.82 / 1.69). Its model is
  exact, so its velocity sigmas are conservative (0.55: any dynamics noise does that to an exact
  model; see the README's "Published uncertainty");
- the five-bar whose truth carries the error its ``noise.dynamics`` stands for (``mbfg simulate
  --disturbance 1``: a white force of 1 N m on every joint at the 200 Hz keyframe rate): there the
  sigmas are what they claim, positions and velocities alike (0.98 / 1.00 and 0.96 / 0.91 on 6 s,
  seed 1; 0.87-1.15 over seeds 1-3): the covariance is computed right when the model's noise is
  the truth's.
"""
from __future__ import annotations

import contextlib
import io

import pytest

from mbfg_ros.cli.main import main
from mbfg_ros.replay.metrics import compare, consistency
from mbfg_ros.replay.session import ReplayOptions, replay_bag
from support.simulations import config_mechanism, config_path

pytestmark = pytest.mark.slow

CRANKS = ("crank1_joint", "crank2_joint")          # the five-bars' DOFs
LONG = ["--input", "sine", "--input-amplitude", "10", "--input-offset", "24", "--input-frequency", "1",
        "--input-start", "0", "--truth-rate", "1000", "--seed", "1"]


def _bag(tmp_path_factory, rig: str, duration: float, *extra: str):
    path = tmp_path_factory.mktemp(rig) / rig
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["simulate", str(config_path(rig)), "--out", str(path), "--duration", str(duration),
                     "--no-progress", *extra]) == 0
    return path


def _assert_covered(k: dict, joints: tuple[str, ...], position: tuple[float, float],
                    velocity: tuple[float, float], coverage: float) -> None:
    """Each joint's error / sigma RMS within the bounds (lo, hi) and at least ``coverage`` of its
    errors within two sigmas, positions and velocities."""
    for joint in joints:
        d = k[joint]
        assert position[0] <= d.position_ratio <= position[1] and velocity[0] <= d.velocity_ratio <= velocity[1], d
        assert d.position_coverage >= coverage and d.velocity_coverage >= coverage, d


def _replay(rig: str, bag):
    mech = config_mechanism(rig)
    res = replay_bag(bag, mech, ReplayOptions(covariance=True, progress=False))
    c = compare(mech, res.estimates, res.truth, skip=1.0)
    return consistency(mech, res.estimates, c), c, res


@pytest.fixture(scope="module")
def long_bag(tmp_path_factory):
    return _bag(tmp_path_factory, "long_crank", 3.0, *LONG)


@pytest.fixture(scope="module")
def disturbed_bag(tmp_path_factory):
    return _bag(tmp_path_factory, "five_bar", 6.0, "--disturbance", "1.0", "--seed", "1")


@pytest.fixture(scope="module")
def branch_bag(tmp_path_factory):
    return _bag(tmp_path_factory, "five_bar_branch", 4.0)


def test_the_long_cranks_dead_centres_are_covered(long_bag):
    k, c, res = _replay("long_crank", long_bag)
    _assert_covered(k, ("crank_joint",), (0.8, 1.25), (0.8, 1.25), 0.93)
    assert res.health.integration_raises > 0 and c.turn_slips["crank_joint"] == 0
    assert c.rmse["crank_joint"]["position"] <= 0.6e-3 and c.rmse["crank_joint"]["velocity"] <= 0.08, c.rmse


def test_the_branch_five_bar_is_not_overconfident(branch_bag):
    k, c, res = _replay("five_bar_branch", branch_bag)
    _assert_covered(k, CRANKS, (0.6, 1.25), (0.45, 1.25), 0.95)
    for joint in CRANKS:
        assert c.rmse[joint]["position"] <= 3e-3 and c.turn_slips[joint] == 0, c.rmse


def test_a_five_bar_disturbed_as_its_noise_says_is_covered(disturbed_bag):
    k, c, res = _replay("five_bar", disturbed_bag)
    _assert_covered(k, CRANKS, (0.75, 1.3), (0.75, 1.3), 0.9)
    assert all(c.turn_slips[joint] == 0 for joint in CRANKS), c.turn_slips
