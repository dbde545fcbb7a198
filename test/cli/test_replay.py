"""`mbfg replay`: a simulated bag end to end (summary, JSON, CSV, plots, output bag) and bad input."""
from __future__ import annotations

import csv
import json

import pytest

from conftest import CONFIG
from support.replay_bags import simulated_bag
from mbfg_ros.cli.main import main
from mbfg_ros.io import messages as msgs
from mbfg_ros.io.bag_reader import bag_topics, read_bag

FOUR_BAR = str(CONFIG / "four_bar.yaml")


@pytest.fixture(scope="module")
def bag(tmp_path_factory):
    return simulated_bag(tmp_path_factory.mktemp("cli_replay") / "fb", "four_bar", 2.0)


@pytest.fixture(scope="module")
def full_run(bag, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli_replay_out")
    out, plots, table, js = tmp / "out", tmp / "plots", tmp / "kf.csv", tmp / "r.json"
    import io
    from contextlib import redirect_stdout
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = main(["replay", str(bag), "--config", FOUR_BAR, "--out", str(out), "--plots", str(plots),
                   "--csv", str(table), "--json", str(js), "--covariance", "--skip", "0.5"])
    return rc, buf.getvalue(), out, plots, table, json.loads(js.read_text())


def test_summary_json_and_exit_status(full_run):
    rc, text, _, _, _, facts = full_run
    assert rc == 0
    assert "x real time" in text and "estimator alone" in text
    assert "Accuracy against the ground truth (RMSE over" in text and "the first 0.5 s skipped" in text
    assert "crank_encoder" in text and "Residuals" in text
    for joint in ("crank_joint", "coupler_joint", "rocker_joint"):
        row = facts["rmse"][joint]
        assert set(row) == {"position", "velocity", "acceleration"}
        assert 0 < row["position"] < 5e-3 and 0 < row["velocity"] < 2e-2 and 0 < row["acceleration"] < 0.15
    assert facts["rmse_forces"]["coupler_rocker"]["force_x"] < 1.0
    assert facts["rmse_forces"]["rocker_pin_load"]["reading"] < 1.0
    assert facts["realtime_factor"] > 0 and facts["estimator_realtime_factor"] >= facts["realtime_factor"]
    assert facts["estimator_cpu_realtime_factor"] >= facts["cpu_realtime_factor"] > 0
    assert "CPU time:" in text
    assert abs(facts["duration"] - 1.999) < 1e-9 and facts["keyframes"] == 401
    assert facts["skip"] == 0.5 and facts["truth"] is True and facts["rmse_samples"] > 250
    assert facts["counts"]["crank_encoder"]["used"] == 2000 and facts["counts"]["crank_encoder"]["topic"] == "/encoders"
    assert facts["topics"]["/rocker_pin/wrench"]["used"] == 400 and facts["problems"] == {}
    assert facts["health"]["resets"] == 0 and set(facts["health"]["latency_ms"]) == {"mean", "p99", "max"}
    assert set(facts["timings"]) >= {"total", "estimator", "read_sensors", "truth", "forces", "outputs", "cpu"}
    assert facts["residuals"]["crank_encoder"]["samples"] == 2000
    k = facts["consistency"]["crank_joint"]                 # the covariance against the truth
    assert set(facts["consistency"]) == {"crank_joint"} and k["samples"] == facts["rmse_samples"]
    assert 0.3 < k["position"] < 2.0 and 0.3 < k["velocity"] < 2.0 and 0.5 < k["position_within_2_sigma"] <= 1.0
    assert "published DOF sigmas against the errors" in text
    assert f"crank_joint  position {k['position']:.2f} ({100 * k['position_within_2_sigma']:.1f} %)" in text


def test_output_bag_with_covariance_topics(full_run):
    _, _, out, _, _, facts = full_run
    topics = bag_topics(out)
    assert topics["/mbfg_estimator/dynamic_joint_states"]["count"] == 401
    first = next(iter(read_bag(out, topics=["/mbfg_estimator/dynamic_joint_states"]))).msg
    var = msgs.joint_values(first, "position_variance", ["crank_joint"])
    assert var is not None and 0 < var[0] < 1.0                  # rad^2, the DOF's own variance
    assert msgs.joint_values(first, "position_variance", ["coupler_joint"]) is None   # not a DOF
    assert topics["/mbfg_estimator/dof_covariance"]["type"] == "std_msgs/msg/Float64MultiArray"
    assert facts["output"]["topics"] == topics


def test_plots_and_csv(full_run):
    _, _, _, plots, table, facts = full_run
    names = sorted(p.name for p in plots.iterdir())
    assert names == ["dof_crank_joint.png", "errors.png", "forces.png", "joints.png", "residuals.png"]
    for p in plots.iterdir():
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and 5_000 < p.stat().st_size < 400_000
    with open(table, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 401 == facts["csv_rows"]
    assert float(rows[0]["stamp"]) == 0.0 and float(rows[0]["stamp_abs"]) == 1.7e9
    assert {"q_crank_joint", "a_rocker_joint", "coupler_rocker_force_x", "rocker_pin_load", "std_q_crank_joint",
            "true_q_crank_joint", "true_coupler_rocker_force_x", "true_rocker_pin_load"} <= set(rows[0])


def test_without_truth_plots_estimates_and_residuals(tmp_path, capsys):
    bag = simulated_bag(tmp_path / "nt", "four_bar", 1.0, truth=False)
    assert main(["replay", str(bag), "--config", FOUR_BAR, "--plots", str(tmp_path / "p"), "--lagged",
                 "--json", "-"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert facts["truth"] is False and facts["rmse"] == {} and facts["lagged"] is True
    assert facts["keyframes"] == 201
    names = sorted(p.name for p in (tmp_path / "p").iterdir())
    assert names == ["dof_crank_joint.png", "forces.png", "joints.png", "residuals.png"]


def run_error(capsys, *args) -> str:
    assert main(["replay", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err
    return err


def test_bad_input_gives_one_line(tmp_path, bag, capsys):
    assert "no such bag: " in run_error(capsys, str(tmp_path / "none"), "--config", FOUR_BAR)
    assert "four_bar_nope.yaml" in run_error(capsys, str(bag), "--config", str(CONFIG / "four_bar_nope.yaml"))
    (tmp_path / "exists").mkdir()
    (tmp_path / "exists" / "x.txt").write_text("x")
    assert "exists already" in run_error(capsys, str(bag), "--config", FOUR_BAR, "--out", str(tmp_path / "exists"))
    assert "--remap: expected FROM:=TO" in run_error(capsys, str(bag), "--config", FOUR_BAR, "--remap", "/a")
    assert "--skip" in run_error(capsys, str(bag), "--config", FOUR_BAR, "--skip", "-1")
    assert "--json" in run_error(capsys, str(bag), "--config", FOUR_BAR, "--json", str(tmp_path))
    msg = run_error(capsys, str(bag), "--config", str(CONFIG / "four_bar_gyro.yaml"))
    assert "none of the sensor topics" in msg and "/coupler/imu" in msg and "/encoders" in msg and "--remap" in msg


@pytest.mark.parametrize("parallel", ["off", pytest.param("on", marks=pytest.mark.slow)])
def test_sigterm_during_replay_out_leaves_no_half_written_bag(tmp_path_factory, parallel):
    """Audit case 6: SIGTERM (a job runner's kill) while --out is written used to leave an .mcap
    without metadata.yaml; now it is handled like Ctrl-C: the partial output is removed (or,
    if the signal came after the bag was closed, the bag is complete)."""
    import signal
    import subprocess
    import sys
    import time
    tmp = tmp_path_factory.mktemp(f"sigterm_{parallel}")
    bag = simulated_bag(tmp / "long", "four_bar", 8.0)
    out = tmp / "out"
    proc = subprocess.Popen([sys.executable, "-m", "mbfg_ros.cli.main", "replay", str(bag), "--config",
                             FOUR_BAR, "--out", str(out), "--no-progress", "--no-truth",
                             "--parallel", parallel], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    end = time.monotonic() + 120
    while not (out.is_dir() and any(out.glob("*.mcap"))):      # the writer is writing
        assert proc.poll() is None and time.monotonic() < end, proc.communicate()
        time.sleep(0.01)
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert "Traceback" not in stderr, stderr
    if proc.returncode != 0:
        assert proc.returncode == 143 and "terminated (SIGTERM)" in stderr, (proc.returncode, stderr)
    # a valid bag or none: the partial output is removed, unless the bag had been closed
    # before the signal came (the replay ended, or it was tearing down)
    if proc.returncode == 0 or out.exists():
        assert (out / "metadata.yaml").is_file() and bag_topics(out), sorted(p.name for p in out.iterdir())
