"""`mbfg benchmark`: mbfg_ros against the Kalman-filter observers of the observer benchmark
(``--quick`` / ``--full``), the estimator's speed (``--perf``, see mbfg_ros.benchmark.perf), or
the live node against that estimator (``--node``, see mbfg_ros.testing.node_bench).

Runs the grid of :mod:`mbfg_ros.benchmark.grid` (mechanism x sensor set x gravity error x sensor
period x seeds) with every method of :mod:`mbfg_ros.benchmark.methods`, prints the table
(methods x cells, best marked) and the verdict against the best baseline, and writes the JSON,
CSV and figures. Runs go in parallel over ``--jobs`` processes; with ``--out`` every finished run
is appended to DIR/results.jsonl at once, so ``--resume`` continues an interrupted grid.
"""
from __future__ import annotations

import argparse
import math
import signal
import sys
import time
from dataclasses import replace
from pathlib import Path

from mbfg_ros.benchmark import perf
from mbfg_ros.testing import node_bench
from mbfg_ros.errors import CliError

QUICK_METHODS = ("dekf", "error_ekf", "mbfg_default", "mbfg_default_lagged", "mbfg_online", "mbfg_lagged",
                 "mbfg_online_g", "mbfg_lagged_g")
"""--quick leaves out the batch smoother and the UKF (the two costliest; --methods adds them)."""

FULL_SEEDS = 3
"""Runs per cell of --full: seeds 1..3 (the paper used 20; see docs/benchmark/README.md for why;
seed 0 served the exploratory runs behind the estimator settings and is left out)."""


def _list(kind):
    def parse(text: str):
        out = []
        for part in text.replace(",", " ").split():
            try:
                out.append(kind(part))
            except ValueError:
                raise argparse.ArgumentTypeError(f"not a list of {kind.__name__} values: {text!r}") from None
        if not out:
            raise argparse.ArgumentTypeError("an empty list")
        return tuple(out)
    return parse


def add_arguments(p: argparse.ArgumentParser) -> None:
    mode = p.add_argument_group("what to run")
    mode.add_argument("--quick", action="store_true",
                      help="the quick grid: both mechanisms and sensor sets, +1 m/s^2, every 1 and 10 "
                           "steps, 1 seed, 3 s runs, no batch smoother nor UKF (under 2 minutes on 2 cores)")
    mode.add_argument("--full", action="store_true",
                      help=f"the paper's grid: 2 mechanisms x 2 sensor sets x +1/+4 m/s^2 x every 1/5/10/15 "
                           f"steps, {FULL_SEEDS} seeds (1..{FULL_SEEDS}), 10 s runs, every method (hours)")
    perf.add_perf_arguments(p)
    if "--perf" not in p._option_string_actions:
        mode.add_argument("--perf", action="store_true",
                          help="the estimator's speed figures instead (latency, real-time factor, memory)")
    node_bench.add_node_arguments(p)
    g = p.add_argument_group("grid (override the --quick / --full choice)")
    g.add_argument("--mechanisms", type=_list(str), metavar="LIST", help="four_bar, five_bar")
    g.add_argument("--sensors", type=_list(str), metavar="LIST", help="encoder, gyro")
    g.add_argument("--gravity-errors", type=_list(float), metavar="LIST",
                   help="m/s^2 taken off the observers' gravity, e.g. 1,4")
    g.add_argument("--periods", type=_list(int), metavar="LIST",
                   help="a sensor reading every N time steps of 5 ms, e.g. 1,5,10,15")
    g.add_argument("--seeds", type=int, metavar="N", help="runs per cell (sensor-noise seeds)")
    g.add_argument("--duration", type=float, metavar="S", help="simulated seconds per run")
    g.add_argument("--methods", type=_list(str), metavar="LIST",
                   help="dekf, ukf, error_ekf, diekf_pm, cekf, batch, mbfg_online, mbfg_lagged, mbfg_online_g, "
                   "mbfg_lagged_g, mbfg_default, mbfg_default_lagged (the rig's one default configuration)")
    g.add_argument("--fail-threshold", type=float, metavar="RAD",
                   help="a run fails when its DOF position RMSE over the last half exceeds this (default 0.1)")
    g.add_argument("--first-seed", type=int, metavar="K",
                   help="seeds K..K+N-1 (default: 0 for --quick, 1 for --full)")
    g.add_argument("--dynamics-noise", type=float, metavar="NM",
                   help="mbfg_ros dynamics noise without gravity estimation, every cell (default: per set)")
    g.add_argument("--dynamics-noise-g", type=float, metavar="NM",
                   help="mbfg_ros dynamics noise with gravity estimation, every cell (default: per set)")
    g.add_argument("--config-dir", type=Path, metavar="DIR", help="where the benchmark configs are (default config/)")
    o = p.add_argument_group("execution and output")
    o.add_argument("--jobs", type=int, default=1, metavar="N", help="worker processes (default 1)")
    o.add_argument("--out", type=Path, metavar="DIR",
                   help="write results.jsonl (as runs finish), results.json, results.csv, table.txt, "
                        "verdict.md and figures/*.png here; --node: its bags and the processes' logs "
                        "(default out/bench_node/<date-time>)")
    o.add_argument("--resume", action="store_true",
                   help="keep the finished runs of DIR/results.jsonl and run only the missing ones")
    o.add_argument("--json", metavar="FILE", help="write every figure as JSON")
    o.add_argument("--csv", metavar="FILE", help="write every figure as CSV (means and runs)")
    o.add_argument("--no-progress", action="store_true", help="no progress bar")


def _options(args: argparse.Namespace):
    from mbfg_ros.benchmark.grid import FULL, QUICK, check_options
    from mbfg_ros.benchmark.methods import METHODS
    if args.quick and args.full:
        raise CliError("--quick and --full: choose one")
    base = QUICK if args.quick else FULL
    methods = QUICK_METHODS if args.quick else tuple(METHODS)
    count = len(base.seeds) if args.quick else FULL_SEEDS
    changes = {}
    for name, field in (("mechanisms", "mechanisms"), ("sensors", "sensor_sets"),
                        ("gravity_errors", "gravity_errors"), ("periods", "periods")):
        value = getattr(args, name)
        if value is not None:
            changes[field] = tuple(dict.fromkeys(value))
    if args.methods is not None:
        for m in args.methods:
            if m not in METHODS:
                raise CliError(f"--methods: unknown method {m!r} (known: {', '.join(METHODS)})")
        methods = tuple(m for m in METHODS if m in args.methods)
    if args.seeds is not None:
        if args.seeds < 1:
            raise CliError(f"--seeds: at least 1 run per cell (value: {args.seeds})")
        count = args.seeds
    first = args.first_seed if args.first_seed is not None else (0 if args.quick else 1)
    if first < 0:
        raise CliError(f"--first-seed: seeds are >= 0 (value: {first})")
    seeds = tuple(range(first, first + count))
    if args.duration is not None:
        if not (math.isfinite(args.duration) and args.duration > 0):
            raise CliError(f"--duration: must be a positive number of seconds (value: {args.duration:g})")
        changes["duration"] = args.duration
    if args.fail_threshold is not None:
        changes["fail_threshold"] = args.fail_threshold
    if args.dynamics_noise is not None:
        changes["dynamics_noise"] = args.dynamics_noise
    if args.dynamics_noise_g is not None:
        changes["dynamics_noise_g"] = args.dynamics_noise_g
    if args.config_dir is not None:
        changes["config_dir"] = args.config_dir
    options = replace(base, methods=methods, seeds=seeds, **changes)
    check_options(options)
    return options


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _writable_dir(option: str, path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(f"{option}: cannot create {path} ({exc.strerror})") from None
    if not path.is_dir():
        raise CliError(f"{option}: {path} is not a directory")


def run(args: argparse.Namespace) -> int:
    if args.node:
        if args.quick or args.full or args.perf:
            raise CliError("--node runs on its own: leave out --quick / --full / --perf")
        return node_bench.run_node_bench(args)
    if args.perf:
        if args.quick or args.full:
            raise CliError("--perf runs on its own: leave out --quick / --full")
        return perf.run_perf(args)
    if not (args.quick or args.full):
        raise CliError("choose --quick (a few minutes at most), --full (the paper's grid, hours), --perf "
                       "or --node")
    if args.jobs < 1:
        raise CliError(f"--jobs: at least 1 worker (value: {args.jobs})")
    if args.resume and args.out is None:
        raise CliError("--resume needs --out DIR (the results file to continue)")
    options = _options(args)
    args.json = Path(args.json) if args.json else None
    args.csv = Path(args.csv) if args.csv else None
    for option, path in (("--out", args.out), ("--json", args.json.parent if args.json else None),
                         ("--csv", args.csv.parent if args.csv else None)):
        if path is not None:
            _writable_dir(option, path)

    from mbfg_ros.benchmark.figures import write_figures
    from mbfg_ros.benchmark.report import (headline_markdown, summarize, table, verdict_markdown, verdict_text,
                                           verdicts, write_csv, write_json)
    from mbfg_ros.benchmark.runner import run_grid

    n_runs = len(options.cells()) * len(options.seeds)
    print(f"mbfg benchmark: {len(options.cells())} cells x {len(options.seeds)} seed(s) = {n_runs} runs of "
          f"{options.duration:g} s, methods: {', '.join(options.methods)}; {args.jobs} job(s)", flush=True)
    t0 = time.perf_counter()
    results = args.out / "results.jsonl" if args.out else None
    previous = signal.signal(signal.SIGTERM, _interrupt)   # stop the workers too on `kill`
    try:
        records = run_grid(options, jobs=args.jobs, results=results, resume=args.resume,
                           progress=not args.no_progress)
    finally:
        signal.signal(signal.SIGTERM, previous)
    wall = time.perf_counter() - t0
    summaries = summarize(records)
    text = table(summaries) + verdict_text(verdicts(summaries))
    print(text)
    extra = {"wall_time": wall, "jobs": args.jobs}
    written = []
    if args.out:
        write_json(args.out / "results.json", options.describe(), records, summaries, extra)
        write_csv(args.out / "results.csv", records, summaries)
        (args.out / "table.txt").write_text(text)
        rows = verdicts(summaries)
        parts = []
        if any("mbfg_default" in r["variants"] for r in rows):
            parts += ["# Headline: the rig's one configuration, like with like\n", headline_markdown(rows),
                      "\n# Every mbfg_ros variant against the best filter (position)\n"]
        (args.out / "verdict.md").write_text("".join(parts) + verdict_markdown(rows))
        written += [args.out / "results.json", args.out / "results.csv", args.out / "table.txt",
                    args.out / "verdict.md"]
        written += write_figures(summaries, args.out / "figures")
    if args.json:
        write_json(args.json, options.describe(), records, summaries, extra)
        written.append(args.json)
    if args.csv:
        write_csv(args.csv, records, summaries)
        written.append(args.csv)
    failed = sum(r["failed"] for rec in records for r in rec["methods"].values())
    print(f"{len(records)} runs, {failed} failed method runs, wall time {wall:.1f} s", flush=True)
    for path in written:
        print(f"wrote {path}")
    sys.stdout.flush()
    return 0
