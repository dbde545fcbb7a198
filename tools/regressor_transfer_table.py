#!/usr/bin/env python3
"""Prints whether least-squares models identified on some recorded runs explain the other runs'
recorded efforts better than the config's parameters.

A check of what the recordings allow, independent of `mbfg identify`
(:mod:`mbfg_ros.benchmark.regressor_transfer`): the linear-in-parameters model (pinocchio's
joint torque regressor plus armature, viscous and Coulomb friction and offset columns) at the
zero-phase Savitzky-Golay derivatives of each log's encoder positions, the chosen columns fitted
by least squares, each fit scored on the runs it did not see as its normalised effort RMSE over
the config's (the ratio; below 1 the fit explains the run better), per joint. For each set of
columns: fitted on the first log and scored on the others; fitted on each log alone and scored on
the others (mean over all pairs); fitted on all logs but one and scored on that one (leave one
out). The first ``--skip`` s of each log are left out.

Example (the DFKI double pendulum's runs, from the repository root):

    .venv/bin/python tools/regressor_transfer_table.py --config config/double_pendulum.yaml \\
        --map config/double_pendulum.map.yaml --torque shoulder=tau_meas1 --torque elbow=tau_meas2 \\
        sys_id_trajectory_0[0-3].csv sys_id_trajectory_1[23].csv 1*_acrobot_*.csv
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mbfg_ros.benchmark.regressor_transfer import (DRIVE_FIELDS, config_parameters, effort_regressor,  # noqa: E402
                                                   fit_parameters, parameter_names, transfer_ratios)
from mbfg_ros.replay.recorded_torque import add_recorded_run_arguments, recorded_run_inputs, recorded_rows  # noqa: E402


def column_sets(names: list[str]) -> dict[str, list[int]]:
    """The sets of columns fitted: everything, the inertial parameters, each drive field, friction and armature."""
    def of(*fields):
        return [k for k, n in enumerate(names) if n.rsplit(".", 1)[1] in fields]
    inertial = [k for k, n in enumerate(names) if n.rsplit(".", 1)[1] not in DRIVE_FIELDS]
    return {"everything": list(range(len(names))), "inertial parameters": inertial,
            "friction (viscous, Coulomb)": of("viscous", "coulomb"), "armature": of("armature"),
            "offset": of("offset"), "friction and armature": of("viscous", "coulomb", "armature")}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_recorded_run_arguments(p, logs_help="the logs (CSV, .mat, .npz), at least 3",
                               config_help="the rig config (an open chain)")
    args = p.parse_args(argv)
    if len(args.logs) < 3:
        p.error("need at least 3 logs")
    mech, log_map, torque = recorded_run_inputs(args)
    rows = [mech.index[j] for j in torque]
    runs = []
    for log in args.logs:
        r = recorded_rows(log, log_map, mech, torque)
        runs.append(effort_regressor(mech, r.t, r.q, r.recorded, rows, args.skip))
    theta0 = config_parameters(mech)
    joints = " / ".join(torque)
    first = Path(args.logs[0]).stem
    print(f"Effort RMSE of least-squares fits over the config's ({args.config}) on runs the fit did not see, "
          f"{joints} (below 1: better; in brackets how many of the ratios are above 1)")
    print(f"| fitted | on {first}, the others | each run alone, the others | leave one out |")
    print("|---|---|---|---|")
    for label, cols in column_sets(parameter_names(mech)).items():
        single = [transfer_ratios(fit_parameters([runs[i]], theta0, cols), theta0, runs[:i] + runs[i + 1:])
                  for i in range(len(runs))]
        loo = np.vstack([transfer_ratios(fit_parameters(runs[:i] + runs[i + 1:], theta0, cols), theta0, [runs[i]])
                         for i in range(len(runs))])
        alone = np.vstack(single)

        def cell(x):
            return " / ".join(f"{v:.2f}" for v in x.mean(axis=0)) + f" ({int((x > 1).sum())} of {x.size})"
        print(f"| {label} | {cell(single[0])} | {cell(alone)} | {cell(loo)} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
