"""Aggregation, best marking, verdicts, the terminal table and the JSON / CSV files."""
from __future__ import annotations

import csv
import json

import pytest

from mbfg_ros.benchmark.report import (best, headline_markdown, summarize, table, verdict_markdown, verdict_text,
                                       verdicts, write_csv, write_json)


def _run(key_period, seed, figures):
    cell = {"mechanism": "four_bar", "sensors": "gyro", "gravity_error": 4.0, "period": key_period}
    methods = {}
    for m, (pos, failed) in figures.items():
        methods[m] = {"position": pos, "velocity": 2 * pos, "acceleration": 3 * pos, "force": 1.0,
                      "position_last_half": pos, "cpu": 1.5, "failed": failed,
                      "reason": "diverged: x" if failed else "", "held": 0,
                      "info": {"gravity_scale": 1.6} if m.endswith("_g") else {}}
    return {"cell": cell, "key": f"four_bar/gyro/g+4/p{key_period}", "seed": seed, "samples": 10,
            "wall": 1.0, "methods": methods}


RECORDS = [
    _run(1, 0, {"dekf": (0.02, False), "ukf": (0.01, False), "mbfg_online": (0.005, False),
                "mbfg_online_g": (0.5, True)}),
    _run(1, 1, {"dekf": (0.04, False), "ukf": (0.03, True), "mbfg_online": (0.007, False),
                "mbfg_online_g": (0.002, False)}),
    _run(15, 0, {"dekf": (1.0, True), "ukf": (2.0, True), "mbfg_online": (0.05, False),
                 "mbfg_online_g": (0.04, False)}),
]


def test_summary_leaves_failed_runs_out_of_the_mean_and_best_needs_no_failure():
    ss = summarize(RECORDS)
    by = {(s.key, s.method): s for s in ss}
    dekf = by[("four_bar/gyro/g+4/p1", "dekf")]
    assert dekf.runs == 2 and dekf.failures == 0 and dekf.mean["position"] == pytest.approx(0.03)
    ukf = by[("four_bar/gyro/g+4/p1", "ukf")]
    assert ukf.failures == 1 and ukf.mean["position"] == pytest.approx(0.01) and not ukf.ok
    assert ukf.reasons == {"diverged": 1}
    b = best(ss, "position")
    assert b["four_bar/gyro/g+4/p1"] == "mbfg_online"      # ukf is lower but failed once
    assert b["four_bar/gyro/g+4/p15"] == "mbfg_online_g"


def test_verdicts_compare_with_the_best_baseline_that_never_failed():
    rows = {r["key"]: r for r in verdicts(summarize(RECORDS))}
    r1 = rows["four_bar/gyro/g+4/p1"]
    assert r1["best_baseline"] == "dekf"
    v = r1["variants"]["mbfg_online"]
    assert v["beats"] and v["ratio"] == pytest.approx(0.03 / 0.006)
    assert not r1["variants"]["mbfg_online_g"]["beats"]
    r15 = rows["four_bar/gyro/g+4/p15"]
    assert r15["best_baseline"] is None and r15["variants"]["mbfg_online"]["beats"]
    text = verdict_text(list(rows.values()))
    assert "every baseline failed" in text and "x5.00" in text
    md = verdict_markdown(list(rows.values()))
    assert "**0.006 (x5.00)**" in md and "all failed (DEKF 1/1, UKF 1/1)" in md


def test_table_marks_best_and_failures():
    text = table(summarize(RECORDS))
    assert "four_bar, gyro set, gravity error +4 m/s^2" in text
    assert "FAIL" in text and " F1" in text and "*" in text
    lines = [ln for ln in text.splitlines() if ln.startswith("mbfg online ")]
    assert lines and "0.006*" in lines[0]


def test_json_and_csv_hold_every_figure(tmp_path):
    ss = summarize(RECORDS)
    write_json(tmp_path / "r.json", {"seeds": [0, 1]}, RECORDS, ss, {"wall_time": 3.0})
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["wall_time"] == 3.0 and len(doc["runs"]) == 3 and doc["verdicts"]
    assert {s["method"] for s in doc["summary"]} == {"dekf", "ukf", "mbfg_online", "mbfg_online_g"}
    write_csv(tmp_path / "r.csv", RECORDS, ss)
    rows = list(csv.DictReader((tmp_path / "r.csv").open()))
    assert {r["level"] for r in rows} == {"mean", "run"}
    assert sum(r["level"] == "run" for r in rows) == 12
    mean_best = [r for r in rows if r["level"] == "mean" and r["best_position"] == "1"]
    assert {r["method"] for r in mean_best} == {"mbfg_online", "mbfg_online_g"}


def test_headline_holds_the_default_to_position_and_velocity_and_its_lag_to_the_batch():
    recs = [_run(1, 0, {"dekf": (0.02, False), "ukf": (0.01, False), "batch": (0.004, False),
                        "mbfg_default": (0.008, False), "mbfg_default_lagged": (0.0042, False)})]
    recs[0]["methods"]["ukf"]["velocity"] = 0.012        # ukf: best velocity, below the default's 0.016
    rows = verdicts(summarize(recs))
    x = rows[0]["variants"]["mbfg_default"]
    assert x["beats"] and not x["beats_both"]
    assert rows[0]["variants"]["mbfg_default_lagged"]["to_batch"] == pytest.approx(1.05)
    md = headline_markdown(rows)
    assert "**no**" in md and "0 of 1 cells" in md and "Lagged within 1.1x of the batch reference: 1 of 1" in md
