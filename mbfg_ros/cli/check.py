"""`mbfg check <config.yaml>`: validate a rig and print a summary a person can read."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from mbfg_ros.model.summary import summarize, format_summary


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="mechanism config (YAML)")
    p.add_argument("--json", metavar="FILE", help="also write the facts as JSON to FILE ('-' = stdout)")
    p.add_argument("--timing", action="store_true",
                   help="also measure the cost (us per call) of each residual + Jacobian kind at the "
                        "initial pose (numeric model) and of the estimator's compiled step function "
                        "(best of 5 runs)")


def run(args: argparse.Namespace) -> int:
    facts = summarize(args.config)
    if args.timing:
        import numpy as np

        from mbfg_ros.estimation.step_function import step_costs
        from mbfg_ros.model.mechanism import load_mechanism
        from mbfg_ros.model.timing import model_costs
        mech = load_mechanism(args.config)
        q = np.asarray(facts["initial_q"])
        v = np.linspace(0.5, -0.5, mech.n)
        facts["timing_us"] = {what: round(us, 2) for what, us in model_costs(mech, q, v) + step_costs(mech, q, v)}
    if args.json == "-":
        print(json.dumps(facts, indent=2))
        return 0
    print(format_summary(facts))
    if args.timing:
        print("Cost per call (residual + Jacobians, best of 5 runs):")
        for what, us in facts["timing_us"].items():
            print(f"  {us:8.1f} us  {what}")
    if args.json:
        Path(args.json).write_text(json.dumps(facts, indent=2) + "\n")
    return 0
