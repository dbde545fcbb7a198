"""The benchmark tier (not in `make test`): `mbfg benchmark --quick` prints its table.

Run with `pytest -m bench test/benchmark` (or `make bench-quick` for the command alone).
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.bench
def test_quick_benchmark_prints_the_table(request, tmp_path):
    if "bench" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("benchmark tier: select it with -m bench")
    proc = subprocess.run([sys.executable, "-m", "mbfg_ros.cli.main", "benchmark", "--quick",
                           "--jobs", "2", "--no-progress", "--out", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for block in ("four_bar, encoder set", "four_bar, gyro set", "five_bar, encoder set", "five_bar, gyro set"):
        assert block in proc.stdout
    assert "Verdict per cell" in proc.stdout
    assert (tmp_path / "results.json").is_file()
