"""A recording of an open-chain rig made by an independent physics engine (MuJoCo), with its truth:

    .venv/bin/python tools/mujoco_recording.py config/panda_mujoco.yaml --out /tmp/panda.mcap
    .venv/bin/mbfg replay /tmp/panda.mcap --config config/panda_mujoco.yaml

The engine takes the config's URDF and its joints' armature, viscous and Coulomb friction (as
dof_armature, dof_damping, dof_frictionloss); a computed-torque controller tracks 0.1-0.5 Hz sines;
the encoders are sampled at their rates with their noise (mbfg_ros.sim.mujoco_rigs). The bag is
written by the project's own writer (the one `mbfg simulate` uses), with the truth topics, so
`mbfg replay` scores the estimate and the filtered-inverse-dynamics baselines against it.
Prints the check of the truth: the engine's own inverse dynamics against the applied torques, and
the model's (pinocchio's) inverse dynamics of the true motion (the floor).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from mbfg_ros.benchmark.effort_scoring import inverse_dynamics_effort
from mbfg_ros.io.bag_writer import write_simulation_bag
from mbfg_ros.model.mechanism import load_mechanism
from mbfg_ros.sim.mujoco_rigs import TrackingScenario, engine_inverse_dynamics, simulate_tracking


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("config", type=Path)
    ap.add_argument("--out", type=Path, required=True, help="the rosbag2 (mcap) to write")
    ap.add_argument("--duration", type=float, default=18.0, help="s (default 18)")
    ap.add_argument("--seed", type=int, default=1, help="the encoders' noise seed (default 1)")
    ap.add_argument("--overwrite", action="store_true")
    args = ap.parse_args(argv)
    mech = load_mechanism(args.config)
    truth, samples = simulate_tracking(mech, TrackingScenario(duration=args.duration, seed=args.seed))
    write_simulation_bag(args.out, mech, samples, truth, overwrite=args.overwrite)
    engine = engine_inverse_dynamics(mech, truth)
    model = inverse_dynamics_effort(mech, truth.q, truth.v, truth.a)
    rms = lambda x: np.sqrt(np.mean(x ** 2, axis=0))        # noqa: E731
    print(f"wrote {args.out}: {truth.t[-1]:.2f} s, {len(samples)} encoder readings")
    print("  joint  torque RMS  engine ID error  model ID error (the floor)")
    for j, name in enumerate(mech.joint_names):
        print(f"  {name}  {rms(truth.effort)[j]:.4g} N m  {rms(engine - truth.effort)[j]:.2g}  "
              f"{rms(model - truth.effort)[j]:.2g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
