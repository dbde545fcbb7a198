"""tools/perf_against.py, the speed guard: its cost ratios, its comparison of two replays'
estimates, and (slow) one whole run of the work tree against HEAD. No timing is asserted: the
figures are the command's output for a person to read, never a test's verdict."""
from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import ROOT, load_tool


def test_a_cost_ratio_is_above_one_when_the_new_code_costs_more():
    tool = load_tool("perf_against")
    assert tool._cost_ratio("perf four_bar: CPU ms / keyframe (process)", 0.2, 0.3) == pytest.approx(1.5)
    assert tool._cost_ratio("replay online: x real time (wall)", 20.0, 10.0) == pytest.approx(2.0)
    assert tool._cost_ratio("replay smooth: x real time per CPU s", 10.0, 40.0) == pytest.approx(0.25)


def test_two_replays_estimates_are_compared_on_their_shared_columns(tmp_path):
    tool = load_tool("perf_against")
    a, b, c = tmp_path / "a.csv", tmp_path / "b.csv", tmp_path / "c.csv"
    a.write_text("stamp,crank_q,truth_crank_q\n0.1,1.0,1.0\n0.2,2.0,2.0\n")
    b.write_text("stamp,crank_q,new_column,truth_crank_q\n0.1,1.0,7,5\n0.2,2.0,8,5\n")
    c.write_text("stamp,crank_q\n0.1,1.0\n0.2,2.5\n")
    assert tool._csv_diff(a, b).startswith("identical (2 keyframes, 2 shared columns)")
    assert tool._csv_diff(a, c) == "differ: largest |difference| 0.5 in column crank_q (2 shared columns)"
    c.write_text("stamp,crank_q\n0.1,1.0\n")
    assert tool._csv_diff(a, c) == "differ: 2 keyframes (ref) against 1 (new)"


@pytest.mark.slow
def test_the_work_tree_against_head_prints_every_figure_and_identical_estimates(tmp_path):
    """One short round of everything: HEAD in a temporary worktree against the work tree (on a
    clean clone, the same code: the online replays' estimates are identical)."""
    if subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True).returncode != 0:
        pytest.skip("not a git checkout")
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "mbfg_ros"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "perf_against.py"), "HEAD", "--cases", "four_bar",
                          "--perf-duration", "2", "--replay-duration", "4", "--rounds", "1",
                          "--keep", str(tmp_path / "keep")],
                         cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    for figure in ("perf four_bar: CPU ms / keyframe (process)", "replay online: x real time (wall)",
                   "replay smooth: estimator x real time per CPU s"):
        row = next(line for line in lines if line.startswith(figure))
        assert float(row.rsplit("|", 1)[1]) > 0
    if not dirty:
        assert "online replay estimates, ref against new: identical" in out.stdout
    listed = subprocess.run(["git", "worktree", "list"], cwd=ROOT, capture_output=True, text=True).stdout
    assert "perf_against_" not in listed                      # the temporary worktree is gone
