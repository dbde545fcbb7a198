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
    p.add_argument("--bag", metavar="BAG", help="a recording of the rig: read its top DOF speed from the "
                   "encoders and state the keyframe rate it needs (and warn if the config's is lower)")


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
    if args.bag:
        _bag_speed(args, facts)
    if args.json == "-":
        print(json.dumps(facts, indent=2))
        return 0
    print(format_summary(facts))
    if args.timing:
        print("Cost per call (residual + Jacobians, best of 5 runs):")
        for what, us in facts["timing_us"].items():
            print(f"  {us:8.1f} us  {what}")
    if args.bag:
        b = facts["bag_speed"]
        if b["top_speed"] is None:
            print(f"Recording {args.bag}: {b['problem']}")
        else:
            print(f"Recording {args.bag}: top DOF speed {b['top_speed']:.1f} (99.9th percentile of 10 ms "
                  f"differences; {', '.join(f'{n} {v:.1f}' for n, v in b['encoders'].items())}): needs keyframes "
                  f"at {b['needed_keyframe_rate']:g} Hz or faster")
            if b.get("warning"):
                print(f"WARNING: {b['warning']}")
        for name, j in b.get("jitter", {}).items():
            cost = f", {j['over_noise']:.1f} times its noise" if j["over_noise"] is not None else ""
            print(f"  {name}: stamp jitter {j['jitter_s'] * 1e3:.3f} ms RMS; at its RMS speed {j['rms_speed']:.2g} "
                  f"that is {j['error']:.2g} of position error{cost} (added to each reading's noise: "
                  f"estimator.stamp_jitter)")
    if args.json:
        Path(args.json).write_text(json.dumps(facts, indent=2) + "\n")
    return 0


def _bag_speed(args: argparse.Namespace, facts: dict) -> None:
    """facts["bag_speed"]: the recording's top DOF speed and the keyframe rate it needs."""
    from mbfg_ros.model.mechanism import load_mechanism
    from mbfg_ros.model.speed import needed_keyframe_rate, rad_per_keyframe
    from mbfg_ros.replay.recording_speed import top_speed_from_bag
    mech = load_mechanism(args.config)
    b = top_speed_from_bag(mech, args.bag)
    rate = mech.config.estimator.keyframe_rate
    if b["top_speed"] is not None:
        need = needed_keyframe_rate(b["top_speed"], mech.dof_positions_sensed)
        b["needed_keyframe_rate"] = need
        if rate < need - 1e-9:
            b["warning"] = (f"keyframe_rate {rate:g} Hz is below the {need:g} Hz this recording needs "
                            f"({rad_per_keyframe(mech.dof_positions_sensed):g} rad per keyframe at {b['top_speed']:.0f} rad/s): set "
                            f"mechanism.top_speed: {b['top_speed']:.0f} (keyframe_rate auto) or keyframe_rate: {need:g}")
    facts["bag_speed"] = b
