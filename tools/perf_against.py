"""The speed guard: this tree's estimator against a reference commit's, side by side in one run.

    .venv/bin/python tools/perf_against.py d4669c1                 # or: make bench-against REF=d4669c1
    .venv/bin/python tools/perf_against.py HEAD~3 --cases four_bar,arm6 --rounds 3

Checks REF out in a temporary git worktree and, for REF and for this work tree (or ``--new REV``,
also in a worktree), interleaved round by round (A B, then B A, ...) on the same machine and in
the same venv (``PYTHONPATH`` picks the tree):

- ``mbfg benchmark --perf`` per case (each tree's own harness and case configs): process CPU per
  keyframe, the mean and 99th-percentile keyframe CPU (thread clock);
- ``mbfg replay --out`` (online) and ``mbfg replay --smooth --out`` of one recording, simulated
  once by REF's simulator from REF's config (the older format both trees read): times real time
  (wall and per CPU second) and the estimator's own CPU per second of recording.

It prints each figure (the median over the rounds, the spread beside it) and new / ref, the cost
ratio (above 1: the new code costs more). It also says whether the two online replays' estimates
are identical (the CSV's shared columns), so that a speed-up that moved the estimates shows.
Timings vary between machines (up to 3x) and between runs: compare ratios taken in one run,
never absolute figures taken on different days. Exit status 0; with ``--max-ratio R``, 1 when a
cost ratio exceeds R (for a manual gate; not a unit test: a shared machine makes that flaky).
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PERF_CASES = "four_bar,arm6"


def _git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def _worktree(rev: str, where: Path) -> Path:
    sha = _git("rev-parse", "--verify", f"{rev}^{{commit}}")
    path = where / sha[:10]
    _git("worktree", "add", "--detach", "--force", str(path), sha)
    return path


def _run(tree: Path, args: list[str], log: Path) -> tuple[float, float]:
    """Run ``mbfg ARGS`` with TREE's mbfg_ros; (wall s, CPU s of the process and its children)."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    t0 = time.perf_counter()
    with open(log, "a") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "mbfg_ros.cli.main", *args], cwd=tree, env=env,
                                stdout=fh, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"perf_against: 'mbfg {' '.join(args)}' in {tree} exited {code}; its output is in {log}")
    return wall, usage.ru_utime + usage.ru_stime


def _measure(tree: Path, bag: Path, config: Path, cases: list[str], duration: float, out: Path,
             smooth: bool) -> dict[str, float]:
    """One round of every figure for one tree."""
    log = out / "log.txt"
    fig: dict[str, float] = {}
    for case in cases:
        js = out / f"perf_{case}.json"
        _run(tree, ["benchmark", "--perf", "--perf-cases", case, "--perf-duration", str(duration),
                    "--json", str(js), "--no-progress"], log)
        r = json.loads(js.read_text())[case]
        fig[f"perf {case}: CPU ms / keyframe (process)"] = r["cpu_s"] / max(r["keyframes"], 1) * 1e3
        fig[f"perf {case}: keyframe CPU mean ms"] = r["cpu_mean_ms"]
        fig[f"perf {case}: keyframe CPU p99 ms"] = r["cpu_p99_ms"]
    modes = [("online", ["--csv", str(out / "replay_online.csv")])]     # (its estimates are compared)
    if smooth:
        modes.append(("smooth", ["--smooth"]))
    for mode, extra in modes:
        js, rec = out / f"replay_{mode}.json", out / f"replay_{mode}.mcap.d"
        args = ["replay", str(bag), "--config", str(config), *extra, "--out", str(rec), "--overwrite",
                "--json", str(js), "--no-progress"]
        wall, cpu = _run(tree, args, log)
        r = json.loads(js.read_text())
        fig[f"replay {mode}: x real time (wall)"] = r["realtime_factor"]
        fig[f"replay {mode}: x real time per CPU s"] = r["cpu_realtime_factor"]
        fig[f"replay {mode}: estimator x real time per CPU s"] = r["estimator_cpu_realtime_factor"]
        fig[f"replay {mode}: process CPU s (start-up included)"] = cpu
    return fig


# figures where a larger number is faster (times real time): their cost ratio is ref / new
FASTER_IS_LARGER = "x real time"


def _cost_ratio(name: str, ref: float, new: float) -> float:
    if FASTER_IS_LARGER in name:
        return ref / new if new else float("inf")
    return new / ref if ref else float("inf")


def _csv_diff(a: Path, b: Path) -> str:
    """How far the two online replays' estimates are apart (shared numeric columns)."""
    def read(p: Path) -> tuple[list[str], list[list[str]]]:
        with open(p) as fh:
            rows = list(csv.reader(fh))
        return rows[0], rows[1:]
    ha, ra = read(a)
    hb, rb = read(b)
    if len(ra) != len(rb):
        return f"differ: {len(ra)} keyframes (ref) against {len(rb)} (new)"
    shared = [c for c in ha if c in hb and not c.startswith("truth")]
    ia, ib = [ha.index(c) for c in shared], [hb.index(c) for c in shared]
    worst, where = 0.0, ""
    for x, y in zip(ra, rb):
        for c, i, j in zip(shared, ia, ib):
            if x[i] == y[j]:
                continue
            try:
                d = abs(float(x[i]) - float(y[j]))
            except ValueError:
                d = float("inf")
            if d > worst or not where:
                worst, where = d, c
    if not where:
        return f"identical ({len(ra)} keyframes, {len(shared)} shared columns)"
    return f"differ: largest |difference| {worst:.3g} in column {where} ({len(shared)} shared columns)"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("ref", help="the reference commit (any git revision)")
    p.add_argument("--new", metavar="REV", help="compare this revision instead of the work tree")
    p.add_argument("--cases", default=PERF_CASES, help=f"mbfg benchmark --perf cases (default {PERF_CASES})")
    p.add_argument("--perf-duration", type=float, default=20.0, metavar="S", help="s per perf case (default 20)")
    p.add_argument("--replay-config", default="config/four_bar.yaml", metavar="PATH",
                   help="the replayed rig's config, a path in REF's tree (default config/four_bar.yaml)")
    p.add_argument("--replay-duration", type=float, default=60.0, metavar="S",
                   help="s of the replayed recording (default 60)")
    p.add_argument("--no-smooth", action="store_true", help="leave out the --smooth replay")
    p.add_argument("--rounds", type=int, default=2, help="rounds of both trees, alternating (default 2)")
    p.add_argument("--keep", metavar="DIR", help="keep the outputs (logs, JSON, CSV) here")
    p.add_argument("--max-ratio", type=float, metavar="R", help="exit 1 when a cost ratio exceeds R")
    args = p.parse_args(argv)
    cases = [c for c in args.cases.split(",") if c]
    with tempfile.TemporaryDirectory(prefix="perf_against_") as tmp:
        work = Path(args.keep) if args.keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        trees = {"ref": _worktree(args.ref, Path(tmp))}
        trees["new"] = _worktree(args.new, Path(tmp)) if args.new else ROOT
        try:
            label = {k: _git("rev-parse", "--short", "HEAD", cwd=v) for k, v in trees.items()}
            if trees["new"] == ROOT and _git("status", "--porcelain", "--untracked-files=no"):
                label["new"] += "+changes"                # the work tree differs from its HEAD
            config = trees["ref"] / args.replay_config
            bag = work / "recording"
            print(f"perf_against: ref {label['ref']} against new {label['new']}; simulating the {args.replay_duration:g} s "
                  f"recording of {args.replay_config} (ref's simulator)", file=sys.stderr)
            _run(trees["ref"], ["simulate", str(config), "--out", str(bag), "--duration", str(args.replay_duration),
                                "--seed", "1", "--overwrite", "--no-progress"], work / "simulate.log")
            rounds: dict[str, list[dict[str, float]]] = {"ref": [], "new": []}
            for k in ("ref", "new"):        # warm-up: native code caches, bytecode (not counted)
                _measure(trees[k], bag, config, cases[:1], 2.0, _mkdir(work / f"warm_{k}"), smooth=False)
            for r in range(args.rounds):
                order = ("ref", "new") if r % 2 == 0 else ("new", "ref")
                for k in order:
                    print(f"perf_against: round {r + 1}/{args.rounds}, {k} ({label[k]})", file=sys.stderr)
                    rounds[k].append(_measure(trees[k], bag, config, cases, args.perf_duration,
                                              _mkdir(work / f"{k}_{r}"), smooth=not args.no_smooth))
            same = _csv_diff(work / "ref_0" / "replay_online.csv", work / "new_0" / "replay_online.csv")
        finally:
            for k, v in trees.items():
                if v != ROOT:
                    subprocess.run(["git", "worktree", "remove", "--force", str(v)], cwd=ROOT, capture_output=True)
        worst = _print_table(rounds, label, args)
        print(f"online replay estimates, ref against new: {same}")
    if args.max_ratio is not None and worst > args.max_ratio:
        print(f"perf_against: a cost ratio of {worst:.2f} exceeds --max-ratio {args.max_ratio}", file=sys.stderr)
        return 1
    return 0


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _print_table(rounds: dict[str, list[dict[str, float]]], label: dict[str, str], args) -> float:
    names = list(rounds["ref"][0])
    w = max(len(n) for n in names)
    head = f"{'figure':<{w}} | {'ref ' + label['ref']:>22} | {'new ' + label['new']:>22} | cost new/ref"
    print(head)
    print("-" * len(head))
    worst = 0.0
    for n in names:
        a = [r[n] for r in rounds["ref"]]
        b = [r[n] for r in rounds["new"]]
        ma, mb = statistics.median(a), statistics.median(b)
        ratio = _cost_ratio(n, ma, mb)
        worst = max(worst, ratio)
        print(f"{n:<{w}} | {_spread(ma, a):>22} | {_spread(mb, b):>22} | {ratio:.2f}")
    print(f"(median over {args.rounds} rounds, min-max in brackets; perf cases {args.perf_duration:g} s, "
          f"replays of {args.replay_duration:g} s of {args.replay_config}; cost above 1: the new code costs more)")
    return worst


def _spread(mid: float, xs: list[float]) -> str:
    return f"{mid:.4g} [{min(xs):.3g}-{max(xs):.3g}]" if len(xs) > 1 else f"{mid:.4g}"


if __name__ == "__main__":
    sys.exit(main())
