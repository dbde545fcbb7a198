"""`mbfg tune <bag> --config <config.yaml> [--out tuned.yaml]`: noise settings from a recording.

A thin face over :mod:`mbfg_ros.replay.tuning` (no ground truth is read): replays the bag with
trial noise settings, prints each sensor's whitened innovation RMS before and after and the
noises it changed, and writes a copy of the config with the tuned noises.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from mbfg_ros.errors import CliError
from mbfg_ros.model.validation import load_rig


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("bag", help="the recording: a rosbag2 directory (mcap or sqlite3) or a rosbag1 .bag file")
    p.add_argument("--config", required=True, metavar="YAML", help="mechanism config whose noises are tuned")
    p.add_argument("--out", metavar="YAML",
                   help="where to write the tuned config (default: <config>.tuned.yaml beside the config)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    p.add_argument("--remap", action="append", default=[], metavar="FROM:=TO",
                   help="read the config's topic FROM from the bag's topic TO (repeatable)")
    p.add_argument("--tolerance", type=float, default=0.05,
                   help="accepted |whitened innovation RMS - 1| per sensor (default 0.05)")
    p.add_argument("--max-runs", type=int, default=30, metavar="N", help="replays at most (default 30)")
    p.add_argument("--skip", type=float, default=1.0, metavar="S",
                   help="s after the first reading left out of the statistics (default 1)")
    p.add_argument("--search", metavar="NAMES",
                   help="comma-separated process noises to search (default: dynamics, integration_velocity "
                        "and the random walks of the rig's slow states)")
    p.add_argument("--json", metavar="FILE", help="write the result as JSON to FILE ('-' = stdout)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (it shows only on a terminal)")


def _validate(args: argparse.Namespace) -> Path:
    if not Path(args.bag).exists():
        raise CliError(f"no such bag: {args.bag!r}")
    if not (math.isfinite(args.tolerance) and 0 < args.tolerance < 1):
        raise CliError(f"--tolerance: must be between 0 and 1 (value: {args.tolerance:g})")
    if args.max_runs < 1:
        raise CliError(f"--max-runs: must be at least 1 (value: {args.max_runs})")
    if not (math.isfinite(args.skip) and args.skip >= 0):
        raise CliError(f"--skip: must be >= 0 s (value: {args.skip:g})")
    config = Path(args.config)
    out = Path(args.out) if args.out else config.with_name(config.stem + ".tuned.yaml")
    if out.exists() and not args.overwrite:
        raise CliError(f"--out: {str(out)!r} exists (use --overwrite to replace it)")
    if out.is_dir() or not out.resolve().parent.is_dir():
        raise CliError(f"--out: cannot write {str(out)!r} (not a file in an existing directory)")
    if out.exists() and out.resolve() == config.resolve():
        raise CliError(f"--out: {str(out)!r} is the config being tuned; write the tuned one elsewhere")
    if args.json and args.json != "-":
        j = Path(args.json)
        if j.is_dir() or not j.resolve().parent.is_dir():
            raise CliError(f"--json: cannot write {args.json!r} (not a file in an existing directory)")
    return out


OVERFIT = 0.5
"""A sensor whose residual at the estimate is below this many sigmas is reported as over-fitted."""


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def facts(res, out: Path, changed: list[str]) -> dict:
    """The result as plain data (the --json output)."""
    def ev(e) -> dict:
        return {"sensors": {n: {"kind": s.kind, "unit": s.unit, "noise": s.sigma, "innovation_rms": s.rms,
                                "innovation_mean": s.mean, "whitened_rms": s.whitened,
                                "whitened_rms_at_estimate": s.whitened_at_estimate, "samples": s.samples}
                            for n, s in e.sensors.items()},
                "process": dict(e.settings.process), "log_likelihood": e.log_likelihood}
    return {"before": ev(res.before), "after": ev(res.after), "runs": res.runs, "wall_time": res.wall_time,
            "converged": res.converged, "searched": list(res.searched), "output": str(out), "changed": changed}


def format_summary(res, out: Path, changed: list[str]) -> str:
    b, a = res.before, res.after
    lines = [f"Tuned in {res.runs} replays, {res.wall_time:.1f} s wall time"
             + ("" if res.converged else " (NOT converged: a sensor is still outside the tolerance; "
                                         "raise --max-runs or check the sensor)"),
             "Sensors (whitened = RMS / noise of the innovations: reading - prediction from the keyframe "
             "before it; at estimate: of reading - the estimate that used it, as `mbfg replay` reports):",
             f"  {'sensor':<20} {'noise before':>13} {'whitened':>9} {'noise after':>13} {'whitened':>9} "
             f"{'at estimate':>12}  unit"]
    for name, sb in b.sensors.items():
        sa = a.sensors[name]
        lines.append(f"  {name:<20} {_fmt(sb.sigma):>13} {sb.whitened:>9.3f} {_fmt(sa.sigma):>13} "
                     f"{sa.whitened:>9.3f} {sa.whitened_at_estimate:>12.3f}  {sb.unit}")
    for name, sa in a.sensors.items():
        if sa.whitened_at_estimate < OVERFIT:
            lines.append(f"  note: at the estimate {name} is at {sa.whitened_at_estimate:.2f} sigma: the estimate "
                         "follows its noise (over-fitted; the model is loose: a model error the dynamics noise "
                         "absorbs; an `unknown` actuation on a DOF joint can absorb it instead)")
    lines.append("Process noises (searched: " + ", ".join(res.searched) + "):")
    for name, vb in b.settings.process.items():
        lines.append(f"  {name:<20} {_fmt(vb):>13} -> {_fmt(a.settings.process[name])}")
    lines.append(f"Log-likelihood of the innovations: {b.log_likelihood:.1f} -> {a.log_likelihood:.1f}")
    lines.append(f"Wrote {out} ({len(changed)} fields changed: {', '.join(changed)})")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from mbfg_ros.replay.bag_input import parse_remap
    from mbfg_ros.replay.tuning import TuningOptions, tune, write_tuned_config

    out = _validate(args)
    mech = load_rig(args.config).mech
    search = tuple(s.strip() for s in args.search.split(",") if s.strip()) if args.search else None
    opt = TuningOptions(tolerance=args.tolerance, max_runs=args.max_runs, skip=args.skip,
                        remap=parse_remap(args.remap, mech), search=search,
                        progress=not args.no_progress and sys.stderr.isatty())
    res = tune(args.bag, mech, opt)
    note = (f"Noises tuned by `mbfg tune {Path(args.bag).name}` from {Path(args.config).name} "
            f"({res.runs} replays; whitened innovation RMS " +
            ", ".join(f"{n} {s.whitened:.2f}" for n, s in res.after.sensors.items()) + ").")
    changed = write_tuned_config(args.config, out, res.after.settings, note)
    load_rig(out)          # the written file must load as the tuned rig
    f = facts(res, out, changed)
    if args.json and args.json != "-":
        Path(args.json).write_text(json.dumps(f, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(f, indent=2) if args.json == "-" else format_summary(res, out, changed), flush=True)
    return 0 if res.converged else 1
