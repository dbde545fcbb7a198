#!/usr/bin/env python3
"""Consistency table of the example rigs (issue 21, "honest uncertainty"): each rig simulated
(10 s, its scenario below), replayed with the DOF covariance (filtered estimates, default
settings), and per DOF joint the RMS of error / published standard deviation and the share of
errors within two standard deviations, for positions and velocities (the first second skipped;
mbfg_ros.replay.metrics.consistency), with the RMSE. Usage, from the repository root:

    .venv/bin/python tools/consistency_table.py [--out DIR] [--duration S] [--set KEY=VALUE ...] [RIG ...]

RIG: the names below (default all); ``--out`` keeps the simulated bags there (default: a
temporary directory); ``--set`` changes a field of every rig's config for the replay (not the
simulation), a dotted path and a YAML value, e.g. ``--set estimator.model_uncertainty.trigger=0``
(the model-uncertainty search forced on; the config's own checks apply). A rig's scenario is its
`mbfg simulate` arguments; ``+model_error`` rows simulate a truth whose coupler is 10 % heavier
than the config says (a model error of the size the default dynamics noise stands for);
``+disturbance`` rows a truth pushed by the error the default ``noise.dynamics`` stands for (a
white force of 1 N m on every joint at the default 200 Hz keyframe rate, ``--disturbance 1``).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mbfg_ros.cli.main import main as mbfg  # noqa: E402
import yaml  # noqa: E402

from mbfg_ros.errors import MbfgError  # noqa: E402
from mbfg_ros.model.config import parse_rig_config  # noqa: E402
from mbfg_ros.model.mechanism import Mechanism  # noqa: E402
from mbfg_ros.model.yaml_reader import load_yaml_file  # noqa: E402
from mbfg_ros.replay.metrics import compare, consistency  # noqa: E402
from mbfg_ros.replay.session import ReplayOptions, replay_bag  # noqa: E402

FAST = ["--input", "sine", "--input-amplitude", "2.5", "--input-offset", "2.3", "--input-frequency", "3",
        "--input-start", "0", "--truth-rate", "1000"]
LONG = ["--input", "sine", "--input-amplitude", "10", "--input-offset", "24", "--input-frequency", "1",
        "--input-start", "0", "--truth-rate", "1000"]
HEAVY = ["--mass-error", "coupler2=1.1"]
SHAKEN = ["--disturbance", "1.0"]        # the default noise.dynamics, at the default keyframe rate
RIGS = {                                   # name: (config, mbfg simulate arguments)
    "four_bar": ("four_bar", []),
    "four_bar_gyro": ("four_bar_gyro", []),
    "five_bar": ("five_bar", []),
    "five_bar_gyro": ("five_bar_gyro", []),
    "five_bar_branch": ("five_bar_branch", []),
    "five_bar_branch_gyro": ("five_bar_branch_gyro", []),
    "five_bar+model_error": ("five_bar", HEAVY),
    "five_bar_gyro+model_error": ("five_bar_gyro", HEAVY),
    "five_bar_branch+model_error": ("five_bar_branch", HEAVY),
    "five_bar_branch_gyro+model_error": ("five_bar_branch_gyro", HEAVY),
    "four_bar+disturbance": ("four_bar", SHAKEN),
    "five_bar+disturbance": ("five_bar", SHAKEN),
    "five_bar_gyro+disturbance": ("five_bar_gyro", SHAKEN),
    "five_bar_branch+disturbance": ("five_bar_branch", SHAKEN),
    "five_bar_branch_gyro+disturbance": ("five_bar_branch_gyro", SHAKEN),
    "slider_crank": ("slider_crank", []),
    "fast_crank": ("fast_crank", FAST),
    "long_crank": ("long_crank", LONG),
    "spatial_rsur": ("spatial_rsur", []),
    "arm6": ("arm6", []),
}


def with_settings(cfg: Path, settings: list[str]) -> Mechanism:
    """The rig of config file ``cfg`` with each ``KEY=VALUE`` of ``settings`` set (a dotted path
    into the YAML document, the value parsed as YAML)."""
    data = load_yaml_file(cfg)
    for item in settings:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"--set {item!r}: expected KEY=VALUE, e.g. estimator.model_uncertainty.trigger=0")
        node = data
        *path, last = key.split(".")
        for part in path:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise SystemExit(f"--set {item!r}: {part} is not a mapping in {cfg}")
        node[last] = yaml.safe_load(value)
    return Mechanism(parse_rig_config(data, source=cfg))


def row(name: str, out: Path, duration: float, settings: list[str] = ()) -> list[str]:
    config, extra = RIGS[name]
    cfg = ROOT / "config" / f"{config}.yaml"
    bag = out / name.replace("+", "_")
    with contextlib.redirect_stdout(io.StringIO()):
        if not bag.exists():
            assert mbfg(["simulate", str(cfg), "--out", str(bag), "--duration", str(duration), "--no-progress",
                         *extra]) == 0
    mech = with_settings(cfg, list(settings))
    res = replay_bag(bag, mech, ReplayOptions(covariance=True, progress=False))
    c = compare(mech, res.estimates, res.truth, skip=1.0)
    k = consistency(mech, res.estimates, c)
    lines = []
    for joint, d in k.items():
        r = c.rmse[joint]
        lines.append(f"| {name} | {joint} | {d.position_ratio:.2f} | {d.velocity_ratio:.2f} | "
                     f"{100 * d.position_coverage:.1f} | {100 * d.velocity_coverage:.1f} | "
                     f"{r['position'] * 1e3:.3g} | {r['velocity']:.3g} | {c.turn_slips[joint]} |")
    return lines


def run(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rigs", nargs="*", choices=[[], *RIGS], default=[], metavar="RIG")
    ap.add_argument("--out", type=Path, help="keep the simulated bags in this directory")
    ap.add_argument("--duration", type=float, default=10.0, help="simulated seconds (default 10)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a config field for the replays, e.g. estimator.model_uncertainty.trigger=0 (repeatable)")
    args = ap.parse_args(argv)
    rigs = args.rigs or list(RIGS)
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        print("| rig | DOF | position error / sigma (RMS) | velocity | position within 2 sigma (%) | velocity | "
              "position RMSE (mrad, mm) | velocity RMSE (rad/s, m/s) | slips |")
        print("|---|---|---|---|---|---|---|---|---|")
        for name in rigs:
            try:
                lines = row(name, out, args.duration, args.set)
            except MbfgError as exc:              # a --set the config refuses: its one line
                print(f"error: {exc}", file=sys.stderr)
                return 2
            for line in lines:
                print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(run())
