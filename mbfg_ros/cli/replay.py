"""`mbfg replay <bag> --config <config.yaml>`: run the estimator over a recording, offline.

Reads a rosbag2 (mcap or sqlite3) or rosbag1 with rosbags (no ROS install needed), feeds the
config's sensor topics to the estimator in header-stamp order as fast as it goes, optionally
writes what the ROS node would publish to a new bag, compares with the simulator's ground truth
when the bag has it, and prints (and writes as JSON / CSV / PNG) what happened.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

from mbfg_ros.errors import CliError, MbfgError
from mbfg_ros.io.bag_writer import STORAGE_PLUGINS, check_output_path
from mbfg_ros.io.estimate_messages import DEFAULT_NAMESPACE, OutputNames
from mbfg_ros.model.validation import load_rig


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("bag", help="the recording: a rosbag2 directory (mcap or sqlite3) or a rosbag1 .bag file")
    p.add_argument("--config", required=True, metavar="YAML", help="mechanism config (URDF + sensors + estimator)")
    p.add_argument("--map", metavar="YAML",
                   help="the recording is a log (CSV, MATLAB .mat, .npz): import it through this mbfg import map "
                        "(into a temporary bag, with --config's sensors) and replay that")
    p.add_argument("--remap", action="append", default=[], metavar="FROM:=TO",
                   help="read the config's topic FROM from the bag's topic TO (repeatable); FROM is a "
                        "sensor topic or a ground-truth topic (/truth/joint_states, "
                        "/truth/forces/<name>, ...: truth recorded by another tool)")
    p.add_argument("--lagged", action="store_true",
                   help="output the smoothed estimates (each keyframe as it leaves the lag window) instead "
                        "of the newest (filtered) ones")
    p.add_argument("--smooth", action="store_true",
                   help="offline smoothing: the whole recording solved as one problem (in overlapping "
                        "windows), the best estimate of what happened; without it, what the node would "
                        "have published")
    p.add_argument("--smooth-window", type=float, default=60.0, metavar="S",
                   help="--smooth: s of keyframes solved together (bounds memory; default 60)")
    p.add_argument("--smooth-overlap", type=float, default=2.0, metavar="S",
                   help="--smooth: s shared by consecutive windows (default 2)")
    p.add_argument("--skip", type=float, default=1.0, metavar="S",
                   help="s after the first reading left out of the RMSE (convergence; default 1)")
    p.add_argument("--reorder-window", type=float, default=None, metavar="S",
                   help="s a reading waits at most (bag log time) for the other topics to put readings "
                        "in stamp order, as the node's reorder_window (default 1)")
    p.add_argument("--max-time-gap", type=float, default=2.0, metavar="S",
                   help="a stamp this far after the newest one is a time jump that resets the estimator, "
                        "as in the ROS node (default 2)")
    p.add_argument("--no-truth", action="store_true", help="ignore ground-truth topics in the bag")
    p.add_argument("--parallel", default="auto", choices=("auto", "on", "off"),
                   help="read and write the bags in their own processes, leaving a core to the estimator "
                        "(auto: for bags over 20 s on 2+ cores; each process takes 1-2 s to start)")
    o = p.add_argument_group("output")
    o.add_argument("--out", metavar="BAG", help="write the estimator's output topics to this new rosbag2")
    o.add_argument("--storage", default="mcap", choices=sorted(STORAGE_PLUGINS), help="--out storage (default mcap)")
    o.add_argument("--overwrite", action="store_true", help="replace an existing bag at --out")
    o.add_argument("--covariance", action="store_true",
                   help="also write the DOF covariance (dof_covariance, and the DOF variances in "
                        "dynamic_joint_states); costs estimator time")
    o.add_argument("--namespace", default=DEFAULT_NAMESPACE, metavar="NS",
                   help=f"output topic namespace, the node's name (default {DEFAULT_NAMESPACE})")
    o.add_argument("--frame-prefix", default="", metavar="P", help="prefix of the TF frame ids (default none)")
    o.add_argument("--plots", metavar="DIR", help="write PNG figures here (turns on the covariance for the "
                                                 "+-3 sigma bands, which costs estimator time)")
    o.add_argument("--csv", metavar="FILE", help="write one row per keyframe (estimates, forces, truth)")
    o.add_argument("--json", metavar="FILE", help="write the summary as JSON to FILE ('-' = stdout)")
    o.add_argument("--no-progress", action="store_true", help="no progress bar (it shows only on a terminal)")


def _file_option(option: str, value: str | None) -> None:
    if not value or value == "-":
        return
    path = Path(value)
    if path.is_dir() or not path.resolve().parent.is_dir():
        raise CliError(f"{option}: cannot write {value!r} (not a file in an existing directory)")


def _validate(args: argparse.Namespace) -> None:
    if not (math.isfinite(args.skip) and args.skip >= 0):
        raise CliError(f"--skip: must be >= 0 s (value: {args.skip:g})")
    if args.smooth and args.lagged:
        raise CliError("--lagged: not with --smooth (smoothing outputs the smoothed estimate of every keyframe)")
    if not (math.isfinite(args.smooth_window) and args.smooth_window > 0):
        raise CliError(f"--smooth-window: must be > 0 s (value: {args.smooth_window:g})")
    if not (math.isfinite(args.smooth_overlap) and 0 <= args.smooth_overlap <= args.smooth_window / 2):
        raise CliError(f"--smooth-overlap: must be >= 0 s and at most half the window (value: {args.smooth_overlap:g})")
    if args.reorder_window is not None and not (math.isfinite(args.reorder_window) and args.reorder_window >= 0):
        raise CliError(f"--reorder-window: must be >= 0 s (value: {args.reorder_window:g})")
    if not (math.isfinite(args.max_time_gap) and args.max_time_gap > 0):
        raise CliError(f"--max-time-gap: must be > 0 s (value: {args.max_time_gap:g})")
    if not args.namespace.startswith("/") or args.namespace.rstrip("/") == "":
        raise CliError(f"--namespace: must be an absolute ROS name such as /mbfg_estimator (value: {args.namespace!r})")
    if not Path(args.bag).exists():
        raise CliError(f"no such bag: {args.bag!r}")
    if args.out:
        try:
            check_output_path(args.out, args.overwrite, option="--out")
        except MbfgError as exc:
            raise CliError(str(exc)) from None
        if Path(args.out).resolve() == Path(args.bag).resolve():
            raise CliError(f"--out: {args.out!r} is the bag being replayed")
    if args.plots:
        p = Path(args.plots)
        if p.exists() and not p.is_dir():
            raise CliError(f"--plots: {args.plots!r} exists and is not a directory")
    _file_option("--csv", args.csv)
    _file_option("--json", args.json)


def run(args: argparse.Namespace) -> int:
    if getattr(args, "map", None):
        return _replay_log(args)
    from mbfg_ros.io import messages as msgs
    from mbfg_ros.replay.bag_input import parse_remap
    from mbfg_ros.replay.metrics import compare
    from mbfg_ros.replay.report import facts, format_summary, write_csv
    from mbfg_ros.replay.residuals import sensor_residuals
    from mbfg_ros.replay.session import ReplayOptions, replay_bag

    _validate(args)
    msgs.typestore()        # start-up, like the imports (0.1 s): not in the replay's own timings
    mech = load_rig(args.config).mech
    remap = parse_remap(args.remap, mech)
    options = ReplayOptions(
        remap=remap, lagged=args.lagged, covariance=args.covariance or bool(args.plots),
        covariance_topics=args.covariance, out=Path(args.out) if args.out else None,
        storage=args.storage, overwrite=args.overwrite,
        names=OutputNames(args.namespace, args.frame_prefix), reorder_window=args.reorder_window,
        max_time_gap=args.max_time_gap,
        truth=not args.no_truth, progress=not args.no_progress and sys.stderr.isatty(),
        processes={"auto": None, "on": True, "off": False}[args.parallel])
    extra: dict = {"mode": "smooth" if args.smooth else "online"}
    if args.smooth:
        from mbfg_ros.estimation.offline_smoother import SmoothingOptions
        from mbfg_ros.replay.smoothing import smooth_bag
        options.covariance = False
        res = smooth_bag(args.bag, mech, options, SmoothingOptions(args.smooth_window, args.smooth_overlap))
        extra["smoothing"] = [vars(w) for w in res.smoothing]
    else:
        res = replay_bag(args.bag, mech, options)
    t0 = time.perf_counter()
    comparison = compare(mech, res.estimates, res.truth, args.skip) if res.truth is not None else None
    if comparison is not None:
        from mbfg_ros.replay.baseline_accuracy import baseline_accuracy
        baselines = baseline_accuracy(mech, res.samples, res.estimates, res.truth, comparison)
        if baselines is not None:
            extra["baselines"] = baselines.as_dict()
    residuals = sensor_residuals(mech, res.layout, res.estimates, res.samples)
    if args.plots:
        from mbfg_ros.replay.plots import write_plots
        files = write_plots(args.plots, res, comparison, residuals)
        extra.update(plots=[str(f) for f in files], plots_dir=str(args.plots))
    if args.csv:
        extra.update(csv=str(args.csv), csv_rows=write_csv(args.csv, res, comparison))
    extra["analysis_time"] = time.perf_counter() - t0
    f = facts(res, comparison, residuals, extra)
    if args.json and args.json != "-":
        Path(args.json).write_text(json.dumps(f, indent=2) + "\n", encoding="utf-8")
    text = json.dumps(f, indent=2) if args.json == "-" else format_summary(f, res, comparison)
    if args.smooth and args.json != "-":
        w = res.smoothing
        longest = max((x.last - x.first + 1 for x in w), default=0) / mech.config.estimator.keyframe_rate
        short = (f"; {args.smooth_window:g} s asked, shortened to keep a window's Jacobians under "
                 f"{SmoothingOptions().jacobian_mb:g} MB" if len(w) > 1 and longest < args.smooth_window - 1.0 else "")
        text += (f"\nSmoothing: {len(w)} window{'s' if len(w) != 1 else ''} of up to {longest:.3g} s "
                 f"(overlap {args.smooth_overlap:g} s{short}), Gauss-Newton iterations {sum(x.iterations for x in w)}, "
                 f"{'all converged' if all(x.converged for x in w) else 'NOT all converged'}; whitened cost "
                 f"{sum(x.initial_cost for x in w):.4g} at the causal start, {sum(x.cost for x in w):.4g} at the end")
    _print(text)
    return 0


def _replay_log(args: argparse.Namespace) -> int:
    """``--map``: import the log into a temporary bag (printing the import's summary), replay it."""
    import tempfile

    from mbfg_ros.cli.import_log import convert, format_import
    _validate(args)
    with tempfile.TemporaryDirectory(prefix="mbfg-import-") as tmp:
        bag = Path(tmp) / Path(args.bag).stem
        result = convert(args.bag, args.map, args.config, bag)
        if args.json != "-":
            _print(format_import(result.facts()))
        return run(argparse.Namespace(**{**vars(args), "bag": str(bag), "map": None}))


def _print(text: str) -> None:
    """Print to stdout; a closed pipe (``| head``) is not an error."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
