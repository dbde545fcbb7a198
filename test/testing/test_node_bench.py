"""`mbfg benchmark --node`: its figures from known inputs, and a short four-bar run end to end."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from mbfg_ros.testing import node_bench
from mbfg_ros.cli.main import main


def test_player_schedule_recovers_the_start_and_the_lateness():
    log = np.array([0, 0, 1_000_000, 5_000_000, 5_000_000]) + 1_700_000_000_000_000_000
    late = np.array([20_000, 30_000, 10_000, 2_000_000, 2_050_000])
    start = 1_800_000_000_000_000_000
    published = start + (log - log[0]) + late
    t0, lateness = node_bench.player_schedule(published, log)
    assert t0 == start + 10_000                 # the least late message sets the start
    assert lateness.tolist() == (late - 10_000).tolist()
    with pytest.raises(ValueError, match="4 publications for 5 messages"):
        node_bench.player_schedule(published[:4], log)


def test_latencies_from_the_players_schedule_and_its_real_sends():
    """Messages every 1 ms from stamp 0 (log time = stamp); the player starts at wall 10 s and
    sends the message stamped 2 ms 5 ms late; the estimates stamped 1 and 2 ms are published 3
    ms after the due time of the 1 ms stamp and 0.5 ms after the late message, received 0.5 ms
    later."""
    ms = 1_000_000
    log = np.arange(4) * ms + 1_000_000_000
    start = 10_000_000_000
    published = start + np.arange(4) * ms + np.array([0, 0, 5 * ms, 0])
    stamp = np.array([1, 2]) * ms + 1_000_000_000
    source = start + np.array([4 * ms, 7 * ms + ms // 2])
    received = source + ms // 2
    f = node_bench.latencies(stamp, source, received, log, published)
    assert f["e2e_p50_ms"] == pytest.approx(4.75) and f["e2e_max_ms"] == pytest.approx(6.0)
    assert f["publish_max_ms"] == pytest.approx(5.5) and f["dds_max_ms"] == pytest.approx(0.5)
    assert f["player_late_max_ms"] == pytest.approx(5.0)
    # from the real sends: 3.5 ms for the 1 ms estimate, 1 ms after the late 2 ms message
    assert f["e2e_sent_max_ms"] == pytest.approx(3.5) and f["e2e_sent_mean_ms"] == pytest.approx(2.25)


def test_latency_figures():
    f = node_bench.latency_figures("e2e", np.arange(1.0, 101.0))
    assert f["e2e_p50_ms"] == pytest.approx(50.5) and f["e2e_max_ms"] == 100.0
    assert f["e2e_p99_ms"] == pytest.approx(99.01) and f["e2e_mean_ms"] == pytest.approx(50.5)
    assert all(np.isnan(v) for v in node_bench.latency_figures("x", np.zeros(0)).values())


def test_reading_counts_from_the_final_diagnostics():
    diagnostics = {
        "input queue": {"values": {"messages": "990", "queued": "1980", "dropped": "3", "lost_in_dds": "4",
                                   "samples too_old_lagging_sensor": "2", "samples rejected_stamp": "0",
                                   "unaccounted_readings": "0"}},
        "sensor a": {"values": {"too_old": "1", "rejected_duplicate": "5", "late": "7"}},
        "sensor b": {"values": {"too_old": "2", "discarded": "0", "late": "1"}},
        "solver": {"values": {"keyframes": "200", "update_mean_ms": "0.5", "update_p99_ms": "1.5"}},
    }
    c = node_bench.reading_counts(diagnostics, messages_sent=1000)
    assert c["readings_taken"] == 1980 and c["messages_received"] == 990
    assert c["lost"] == 10 and c["lost_reported"] == 4
    assert c["dropped_by_reason"] == {"queue_full": 3, "too_old_lagging_sensor": 2, "too_old": 3,
                                      "rejected_duplicate": 5}
    assert c["dropped"] == 13 and c["late_used"] == 8
    assert c["node_keyframes"] == 200 and c["node_update_p99_ms"] == 1.5
    assert node_bench.reading_counts({}, 5)["lost"] == 5       # no diagnostics: nothing was taken


def _run(case="x", **figures) -> dict:
    """A run's figures as run_case gives them (the table's columns), ``figures`` replacing some."""
    r = {"case": case, "keyframe_rate": 200.0, "node_cpu_per_s": 0.5, "estimator_cpu_per_s": 0.05,
         "overhead_ratio": 10.0, "estimator_paced_cpu_per_s": 0.1, "overhead_ratio_paced": 5.0,
         "machine_paced_factor": 2.0, "e2e_p50_ms": 2.0, "e2e_p99_ms": 9.0, "e2e_max_ms": 30.0,
         "readings_taken": 3000, "dropped": 0, "lost": 0, "player_cpu_per_s": 0.08,
         "player_late_p99_ms": 1.0,
         "load_before": [1.0, 1.0, 1.0], "load_after": [1.5, 1.0, 1.0]}
    r.update(figures)
    return r


def test_repeated_runs_give_the_median_and_the_worst_counts():
    figures = ((0.3, 0, 2999, 1.0), (0.1, 2, 3000, 2.0), (0.2, 0, 3000, 3.0), (0.4, 0, 2998, 1.0))
    runs = [_run(node_cpu_per_s=v, dropped=d, readings_taken=n, load_before=[b, 0, 0],
                 load_after=[b + 1, 0, 0]) for v, d, n, b in figures]
    r = node_bench.combine_runs(runs)
    assert r["node_cpu_per_s"] == pytest.approx(0.25) and r["dropped"] == 2
    assert r["readings_taken"] == 3000 and isinstance(r["readings_taken"], int)    # a count stays one
    assert r["load_before"][0] == 1.0 and r["load_after"][0] == 2.0 and len(r["runs"]) == 4
    assert node_bench.combine_runs(runs[:1]) == runs[0]
    table = node_bench.format_table([r, _run("y")]).splitlines()
    assert len(table) == 2 + 4 + 1 + 1 and table[6].startswith("  median") and table[7].startswith("y ")


@pytest.mark.parametrize("argv, message", [
    (["--node", "--perf"], "--node runs on its own"),
    (["--node", "--node-cases", "six_bar"], "unknown case 'six_bar'"),
    (["--node", "--node-duration", "0"], "--node-duration"),
    (["--node", "--node-repeat", "0"], "--node-repeat"),
])
def test_bad_node_options_print_one_line_and_exit_2(argv, message, capsys):
    assert main(["benchmark", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0]


KEYS = ("node_cpu_per_s", "estimator_cpu_per_s", "overhead_ratio", "estimator_paced_cpu_per_s",
        "overhead_ratio_paced", "machine_paced_factor", "e2e_p50_ms", "e2e_p99_ms",
        "e2e_max_ms", "e2e_sent_p99_ms", "dropped", "lost", "readings_taken", "readings_sent",
        "player_cpu_per_s", "load_before", "load_after")


@pytest.mark.slow
@pytest.mark.ros
def test_node_benchmark_smoke(tmp_path, capsys):
    """A 2.5 s four-bar through the live node: every figure is there and readings were taken
    (no timing is asserted: the machine is shared)."""
    out = tmp_path / "node"
    assert main(["benchmark", "--node", "--node-cases", "four_bar", "--node-duration", "2.5",
                 "--out", str(out), "--json", str(tmp_path / "n.json"), "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert "four_bar (1/1): node " in captured.err                 # the progress line
    assert "e2e99" in captured.out and "four_bar" in captured.out   # the table
    r = json.loads((tmp_path / "n.json").read_text())["four_bar"]
    missing = [k for k in KEYS if k not in r]
    assert not missing, missing
    assert r["readings_sent"] == 2500 + 500                         # 1 kHz encoder + 200 Hz load cell
    assert r["readings_taken"] > 0 and r["estimates_received"] > 0 and r["messages_sent"] == 3000
    assert r["node_cpu_per_s"] > 0 and r["estimator_cpu_per_s"] > 0 and r["estimator_paced_cpu_per_s"] > 0
    assert r["estimator_paced_wall_s"] >= 2.4                      # fed at the bag's pace

    # the player refuses to play to nobody: one line naming the topics, exit 3
    from mbfg_ros.ros.processes import ros_environment
    env = ros_environment(tmp_path / "alone")
    p = subprocess.run([sys.executable, "-m", "mbfg_ros.ros.timed_bag_player", str(out / "four_bar" / "bag"),
                        "--times", str(tmp_path / "t.npy"), "--wait", "0.5"],
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 3, p.stderr
    line = p.stderr.strip().splitlines()[-1]
    assert line.startswith("error: no subscriber on ") and line.endswith(" within 0.5 s"), p.stderr
    assert "/encoders" in line and "/rocker_pin/wrench" in line
