"""Filtered inverse dynamics beside a replay's accuracy (mbfg_ros.replay.baseline_accuracy): the
window rule against the empirically best window, the lag search, and replays of the project's
own 6-DOF arm and four-bar (a closed loop: the dependent joints from the loop equations, the
closure reaction from the least squares) whose summary and JSON carry the baselines and a floor
near zero (the simulator shares the model)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import CONFIG
from mbfg_ros.benchmark.effort_scoring import savgol_derivatives
from mbfg_ros.cli.main import main
from mbfg_ros.replay.baseline_accuracy import lag_and_rmse, rule_window
from mbfg_ros.replay.truth import Series


def _sine(rate: float = 1000.0, noise: float = 1e-4, f: float = 0.5, seconds: float = 5.0):
    rng = np.random.default_rng(5)
    t = np.arange(0.0, seconds, 1.0 / rate)
    w = 2 * np.pi * f
    q = 0.8 * np.sin(w * t)
    return t, q + noise * rng.standard_normal(t.size), -0.8 * w * w * np.sin(w * t)


@pytest.mark.parametrize("noise", [1e-5, 1e-3])
def test_the_rule_window_is_near_the_best_one_for_the_acceleration(noise):
    """On a 0.5 Hz sine the rule's windows score within 1.3x of the best window's acceleration
    RMSE (the best of windows 11-401 tried against the true acceleration)."""
    t, q, a = _sine(noise=noise)
    w = rule_window(t, q[:, None], np.array([noise]))

    def err(window, causal):
        est = savgol_derivatives(t, q, window, 2, causal).a
        ok = np.isfinite(est) & (t > 1.0)
        return float(np.sqrt(np.mean((est[ok] - a[ok]) ** 2)))

    for kind, causal in (("causal", True), ("zero_phase", False)):
        best = min(err(x, causal) for x in (11, 21, 31, 41, 61, 81, 101, 141, 201, 281, 401))
        assert err(w[kind], causal) < 1.3 * best, (kind, w[kind])


def test_the_lag_search_finds_a_delay():
    t = np.arange(0.0, 5.0, 0.005)
    truth = Series(t, np.column_stack([np.sin(3 * t), np.cos(2 * t)]))
    est = np.column_stack([np.sin(3 * (t - 0.012)), np.cos(2 * (t + 0.004))])
    rmse, lag = lag_and_rmse(t, est, truth, t > 0.5, 0.001)
    np.testing.assert_allclose(lag, [12.0, -4.0], atol=0.51)
    assert rmse[0] > 0.02


@pytest.mark.slow
def test_a_replay_with_a_truth_prints_the_baselines(tmp_path, capsys):
    bag = tmp_path / "arm6.mcap"
    assert main(["simulate", str(CONFIG / "arm6.yaml"), "--out", str(bag), "--duration", "2.5", "--input", "random",
                 "--input-amplitude", "3", "--input-frequency", "0.5", "--input-start", "0", "--seed", "1",
                 "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["replay", str(bag), "--config", str(CONFIG / "arm6.yaml"), "--json", str(tmp_path / "r.json"),
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "against filtered inverse dynamics" in out and "causal (rule)" in out
    b = json.loads((tmp_path / "r.json").read_text())["baselines"]
    assert set(b["methods"]) >= {"estimate", "causal_baseline", "zero_phase_baseline", "causal_best", "floor"}
    assert 5 <= b["window_rule"]["causal"] <= 401
    for joint, row in b["methods"]["floor"].items():
        # the project's simulator shares the model: the floor is the interpolation of the truth
        assert row["effort"] < 0.05 * max(1e-3, b["methods"]["causal_baseline"][joint]["effort"] * 20), joint


@pytest.mark.slow
def test_a_closed_loop_gets_its_baseline_from_the_loop_equations(tmp_path, capsys):
    bag = tmp_path / "four_bar.mcap"
    assert main(["simulate", str(CONFIG / "four_bar.yaml"), "--out", str(bag), "--duration", "2.5", "--seed", "1",
                 "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["replay", str(bag), "--config", str(CONFIG / "four_bar.yaml"), "--json", str(tmp_path / "r.json"),
                 "--no-progress"]) == 0
    assert "closure coupler_rocker, reaction force" in capsys.readouterr().out
    m = json.loads((tmp_path / "r.json").read_text())["baselines"]["methods"]
    # the truth's motion through the same least squares gives the truth's reaction: the floor ~0
    assert m["floor"]["closures"]["coupler_rocker"] < 1e-6
    # a 1 deg encoder: the baseline's closure force is far off (measured 18 N), the estimate's not (0.12 N)
    assert m["estimate"]["closures"]["coupler_rocker"] < 0.2 * m["causal_baseline"]["closures"]["coupler_rocker"]
    for joint in ("crank_joint", "coupler_joint", "rocker_joint"):
        assert m["causal_baseline"][joint]["acceleration"] is not None
