"""`mbfg import <log> --map <map.yaml> --out <bag>`: a CSV, MATLAB or NumPy log to a rosbag2.

The map names the time column and which columns are which sensor's readings of a rig config
(:mod:`mbfg_ros.io.log_map`); the bag holds the sensor messages ``mbfg replay`` and the node
read, stamped with the log's own time (:mod:`mbfg_ros.io.log_import`). Prints what was written
per sensor: samples, repeated rows dropped, NaN cells, same-stamp rows, gaps, rate and jitter.
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from mbfg_ros.errors import CliError, MbfgError
from mbfg_ros.io.bag_writer import STORAGE_PLUGINS, check_output_path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("log", help="the log: CSV (.csv, .txt, .tsv, .dat; a header row), MATLAB .mat (up to v7) or .npz")
    p.add_argument("--map", required=True, metavar="YAML",
                   help="the mapping file: time column and unit, which columns are which sensor's readings")
    p.add_argument("--out", required=True, metavar="BAG", help="the rosbag2 to write")
    p.add_argument("--config", metavar="YAML", help="the rig config (default: the map's `config`)")
    p.add_argument("--storage", default="mcap", choices=sorted(STORAGE_PLUGINS), help="bag storage (default mcap)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing bag at --out")
    p.add_argument("--json", metavar="FILE", help="write the summary as JSON to FILE ('-' = stdout)")


def load_map_and_rig(map_path: str, config: str | None):
    """(LogMap, Rig): the map, and the rig of ``config`` or else of the map's ``config``."""
    from mbfg_ros.io.log_map import load_log_map
    from mbfg_ros.model.validation import load_rig
    log_map = load_log_map(map_path)
    if config is None and log_map.config is None:
        raise CliError(f"{map_path}: the map names no config (config: rig.yaml); give --config")
    return log_map, load_rig(config if config is not None else log_map.config)


def convert(log: str, map_path: str, config: str | None, out: str | Path, *, storage: str = "mcap",
            overwrite: bool = False):
    """Import ``log`` to the bag ``out``: returns the LogImport (its ``bag`` is the bag's summary)."""
    from mbfg_ros.io.log_import import import_log
    log_map, rig = load_map_and_rig(map_path, config)
    return import_log(log, log_map, rig.mech, out, storage=storage, overwrite=overwrite)


def _ms(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x * 1e3:.3f}"


def format_import(f: dict) -> str:
    """The import's facts (LogImport.facts) as text for a person."""
    delim = f" (delimiter {f['delimiter']!r})" if f.get("delimiter") else ""
    lines = [f"Imported {f['source']}: {f['format']}{delim}, {f['rows']} rows, "
             f"{f['duration']:.3f} s of log time (stamps {f['first_stamp']:.6f} to {f['last_stamp']:.6f} s)"
             + (f", {f['rows_without_time']} rows without a time (skipped)" if f["rows_without_time"] else "")]
    lines.append(f"  {'sensor':<22} {'topic':<20} {'written':>8} {'repeats':>8} {'NaN':>6} "
                 f"{'same t':>6} {'gaps':>5} {'largest':>9} {'rate Hz':>9} {'jitter ms':>9}")
    for name, c in f["channels"].items():
        rate = "-" if c["rate"] is None else f"{c['rate']:.2f}"
        largest = f"{c['largest_gap']:.4f} s" if c["gaps"] else "-"
        lines.append(f"  {name:<22} {c['topic']:<20} {c['written']:>8} {c['repeats']:>8} {c['nan']:>6} "
                     f"{c['same_stamp']:>6} {c['gaps']:>5} {largest:>9} {rate:>9} {_ms(c['jitter']):>9}")
    for name, c in f["channels"].items():
        if c["gaps"]:
            starts = ", ".join(f"{t:.3f}" for t in c["gap_starts"])
            more = ", ..." if c["gaps"] > len(c["gap_starts"]) else ""
            lines.append(f"Gap: {name}: {c['gaps']} steps longer than the map's gap_factor x its median period, "
                         f"starting at {starts}{more} s (after the first row); the largest {c['largest_gap']:.4f} s")
    if f["unmapped"]:
        lines.append(f"Not in the log (no column mapped): {', '.join(f['unmapped'])}")
    if f.get("bag"):
        b = f["bag"]
        lines.append(f"Wrote {len(b['topics'])} topics, {b['messages']} messages, {b['duration']:.3f} s: "
                     + ", ".join(f"{t} ({v['count']})" for t, v in b["topics"].items()))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    if args.json and args.json != "-" and (Path(args.json).is_dir() or not Path(args.json).resolve().parent.is_dir()):
        raise CliError(f"--json: cannot write {args.json!r} (not a file in an existing directory)")
    try:
        check_output_path(args.out, args.overwrite, option="--out")
    except MbfgError as exc:
        raise CliError(str(exc)) from None
    result = convert(args.log, args.map, args.config, args.out, storage=args.storage, overwrite=args.overwrite)
    facts = result.facts()
    facts["output"] = str(args.out)
    if args.json and args.json != "-":
        Path(args.json).write_text(json.dumps(facts, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(facts, indent=2) if args.json == "-" else format_import(facts) + f"\nBag: {args.out}")
    return 0
