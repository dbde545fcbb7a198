#!/usr/bin/env python3
"""Prints how well the estimated joint torques match a torque recorded on a real rig.

For each log (CSV, .mat, .npz) it imports the log through the map (``mbfg import``), replays it
with the config filtered and lagged (``mbfg replay``, the estimator as the node runs it), and
scores the estimated effort of each joint given with ``--torque JOINT=COLUMN`` against that
column of the log, as the normalised RMSE (RMSE / RMS of the recorded torque; 1.0 is what an
estimate of zero scores), beside the inverse-dynamics baselines of the same model on the
imported encoder positions: causal and zero-phase Savitzky-Golay derivatives
(:mod:`mbfg_ros.benchmark.effort_scoring`), the seconds each joint's encoder was flagged by the
divergence test (either verdict) and judged lost (``DIVERGED``), and its residual RMS. The
first ``--skip`` s of each log are left out.

Example (the double pendulum's fixtures, from the repository root):

    .venv/bin/python tools/recorded_torque_table.py --config config/double_pendulum.yaml \\
        --map config/double_pendulum.map.yaml --torque shoulder=tau_meas1 --torque elbow=tau_meas2 \\
        test/fixtures/double_pendulum/*.csv
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mbfg_ros.benchmark.effort_scoring import METHODS  # noqa: E402
from mbfg_ros.replay.recorded_torque import (add_recorded_run_arguments, recorded_run_inputs,  # noqa: E402
                                             score_recorded_run)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_recorded_run_arguments(p)
    args = p.parse_args(argv)
    mech, log_map, torque = recorded_run_inputs(args)
    heads = ["filtered", "lagged", "causal SG + ID", "zero-phase SG + ID"]
    print(f"Normalised torque RMSE (RMSE / RMS of the recorded torque; 1.0 = an estimate of zero), "
          f"{args.config}, the first {args.skip:g} s skipped")
    print("| run | joint | recorded RMS (N m) | " + " | ".join(heads) + " | diverged (s of run) | lost (s) | residual (sigma) |")
    print("|---|---|---|" + "---|" * len(heads) + "---|---|---|")
    for log in args.logs:
        s = score_recorded_run(log, log_map, mech, torque, args.skip)
        for k, joint in enumerate(s.joints):
            enc = next((e.config.name for e in mech.encoders if e.config.joint == joint), "")
            print(f"| {Path(log).stem} ({s.span:.1f} s) | {joint} | {s.recorded_rms[k]:.3f} | "
                  + " | ".join(f"{s.scores[m][k]:.2f}" for m in METHODS)
                  + f" | {s.diverged.get(enc, 0.0):.2f} | {s.lost.get(enc, 0.0):.2f}"
                  + f" | {s.residual_sigmas.get(enc, float('nan')):.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
