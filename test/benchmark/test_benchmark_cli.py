"""`mbfg benchmark`: option errors, and a tiny grid end to end (table, JSON, CSV, figures)."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from mbfg_ros.cli.main import main


@pytest.mark.parametrize("argv, message", [
    ([], "choose --quick"),
    (["--quick", "--full"], "choose one"),
    (["--quick", "--methods", "dekf,kalman"], "unknown method 'kalman'"),
    (["--quick", "--mechanisms", "six_bar"], "unknown mechanism 'six_bar'"),
    (["--quick", "--periods", "0"], "--periods"),
    (["--quick", "--jobs", "0"], "--jobs"),
    (["--quick", "--seeds", "0"], "--seeds"),
    (["--quick", "--gravity-errors", "12"], "--gravity-errors"),
    (["--quick", "--resume"], "--resume needs --out"),
    (["--quick", "--duration", "-1"], "--duration"),
    (["--quick", "--dynamics-noise", "0"], "--dynamics-noise"),
])
def test_bad_options_print_one_line_and_exit_2(argv, message, capsys):
    assert main(["benchmark", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0]


def test_unwritable_output_is_named(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["benchmark", "--quick", "--out", str(blocker / "sub")]) == 2
    assert "--out" in capsys.readouterr().err


def test_tiny_grid_end_to_end(tmp_path, capsys):
    out = tmp_path / "bench"
    argv = ["benchmark", "--quick", "--mechanisms", "four_bar", "--sensors", "encoder",
            "--periods", "10", "--duration", "0.6", "--methods", "dekf,error_ekf,mbfg_online",
            "--out", str(out), "--json", str(tmp_path / "x.json"), "--no-progress"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "four_bar, encoder set, gravity error +1 m/s^2" in text
    assert "DEKF" in text and "errorEKF" in text and "mbfg online" in text and "Verdict" in text
    doc = json.loads((out / "results.json").read_text())
    assert len(doc["runs"]) == 1 and set(doc["runs"][0]["methods"]) == {"dekf", "error_ekf", "mbfg_online"}
    assert doc["options"]["duration"] == 0.6
    assert (tmp_path / "x.json").is_file() and (out / "results.csv").is_file()
    assert (out / "figures" / "rmse_four_bar_encoder_g1.png").stat().st_size < 100_000
    assert (out / "figures" / "cpu.png").is_file()
    # --resume keeps the finished run and runs nothing new
    assert main([*argv, "--resume"]) == 0
    assert "1 runs" in capsys.readouterr().out
    assert len((out / "results.jsonl").read_text().splitlines()) == 1


def test_resume_adds_methods_to_finished_runs(tmp_path):
    from mbfg_ros.benchmark.grid import GridOptions
    from mbfg_ros.benchmark.runner import run_grid
    results = tmp_path / "results.jsonl"
    base = GridOptions(mechanisms=("five_bar",), sensor_sets=("encoder",), gravity_errors=(1.0,),
                       periods=(10,), seeds=(0,), duration=0.5)
    run_grid(replace(base, methods=("dekf",)), results=results, progress=False)
    recs = run_grid(replace(base, methods=("dekf", "error_ekf")), results=results, resume=True,
                    progress=False)
    assert set(recs[0]["methods"]) == {"dekf", "error_ekf"}
    merged = json.loads(results.read_text().splitlines()[-1])
    assert set(merged["methods"]) == {"dekf", "error_ekf"}
    # asking for fewer methods reports only those and keeps the file whole
    recs = run_grid(replace(base, methods=("error_ekf",)), results=results, resume=True, progress=False)
    assert set(recs[0]["methods"]) == {"error_ekf"}
    assert set(json.loads(results.read_text().splitlines()[-1])["methods"]) == {"dekf", "error_ekf"}
