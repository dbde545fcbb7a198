"""`mbfg benchmark --perf`: the estimator's update latency, real-time factor and memory.

Cases (each a simulated recording, ``--perf-duration`` long, started on the truth's initial pose
so that steady-state tracking is measured; convergence is measured by the tests):

- ``four_bar``: the benchmark four-bar with an encoder (1 kHz), a gyro (400 Hz) and a load cell
  (200 Hz); keyframes 200 Hz, lag 1 s;
- ``four_bar_1khz``: the same with keyframes at 1 kHz;
- ``spatial_rsur``: the spatial example (encoder, 3-axis gyro with bias, load cell), 200 Hz;
- ``arm6``: a 6-DOF arm (six encoders at 1 kHz, a 3-axis gyro, six estimated joint torques)
  driven by random torques, 200 Hz.

Per case: update latency per keyframe (mean, p99, max; the time the estimator spends closing a
keyframe, ``Health.update_ms``), the real-time factor (recording length / wall time to feed all
of it, everything included), resident memory at the start, at the end and its slope over the run
(flat = no growth), and the DOF position RMSE against the truth as a sanity check.
"""
from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import resource
import sys
import time
from pathlib import Path

import numpy as np

from mbfg_ros.errors import CliError

CASES = ("four_bar", "four_bar_1khz", "spatial_rsur", "arm6")
ROOT = Path(__file__).resolve().parent.parent.parent


def add_perf_arguments(p: argparse.ArgumentParser) -> None:
    """Options of --perf (added to the `mbfg benchmark` parser)."""
    p.add_argument("--perf-duration", type=float, default=60.0, metavar="S",
                   help="length of each --perf recording in seconds (default 60)")
    p.add_argument("--perf-cases", default=",".join(CASES), metavar="LIST",
                   help=f"comma-separated --perf cases (default all: {','.join(CASES)})")


def _rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[1])
    return pages * resource.getpagesize() / 2 ** 20


def _case(name: str):
    """(mechanism, scenario) of a case."""
    from mbfg_ros.model.config import SensorsConfig, load_rig_config
    from mbfg_ros.model.mechanism import Mechanism
    from mbfg_ros.sim.scenario import Scenario
    cfg_dir = ROOT / "config"
    if name.startswith("four_bar"):
        cfg = load_rig_config(cfg_dir / "four_bar.yaml")
        gyro = load_rig_config(cfg_dir / "four_bar_gyro.yaml").sensors.gyros
        cfg = dataclasses.replace(cfg, sensors=SensorsConfig(cfg.sensors.encoders, gyro, cfg.sensors.load_cells))
        if name == "four_bar_1khz":
            cfg = dataclasses.replace(cfg, estimator=dataclasses.replace(cfg.estimator, keyframe_rate=1000.0))
        return Mechanism(cfg), Scenario()
    if name == "spatial_rsur":
        return Mechanism(load_rig_config(cfg_dir / "spatial_rsur.yaml")), Scenario()
    if name == "arm6":
        return (Mechanism(load_rig_config(cfg_dir / "arm6.yaml")),
                Scenario(input_profile="random", input_amplitude=3.0, input_frequency=0.5, input_start=0.0))
    raise CliError(f"--perf-cases: unknown case '{name}' (cases: {', '.join(CASES)})")


def run_case(name: str, duration: float, progress: bool = True) -> dict:
    """Simulate one case and time the estimator over it."""
    from tqdm import tqdm

    from mbfg_ros.estimation.estimator import Estimator
    from mbfg_ros.sim.forward import simulate
    from mbfg_ros.sim.sensors import SensorOptions, synthesize
    mech, scenario = _case(name)
    scenario = dataclasses.replace(scenario, duration=duration)
    t0 = time.perf_counter()
    traj = simulate(mech, scenario, progress=progress)
    samples = synthesize(traj, SensorOptions(seed=1), config_mechanism=mech)
    sim_wall = time.perf_counter() - t0
    gc.collect()
    est = Estimator(mech, freeze_gc=True)
    rss = [(0.0, _rss_mb())]
    stamps: list[float] = []           # only what the RMSE needs: keeping whole estimates would
    dof_q: list[np.ndarray] = []       # grow the process by ~1 kB per keyframe and hide a leak
    bar = tqdm(total=len(samples), desc=f"perf {name}", unit="sample", disable=not progress,
               file=sys.stderr, mininterval=0.5)
    t0 = time.perf_counter()
    c0 = time.process_time()
    next_check = 1.0
    for i, s in enumerate(samples):
        est.add_sample(s.sensor, s.stamp, s.value)
        out = est.pop_estimates()
        if out:
            stamps.append(out[-1].stamp)
            dof_q.append(out[-1].q[mech.dof])
            if s.stamp >= next_check:
                rss.append((s.stamp, _rss_mb()))
                next_check += 1.0
        if i % 2000 == 0:
            bar.update(2000 if i else 0)
    est.flush()
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    bar.close()
    lat = np.fromiter(est.health.update_ms, float)
    t = np.array(stamps)
    q = np.array(dof_q)
    qt = np.stack([np.interp(t, traj.t, traj.q[:, j]) for j in mech.dof], axis=1)
    sel = t >= min(1.0, duration / 2)
    rs = np.array(rss)
    slope = float(np.polyfit(rs[len(rs) // 4:, 0], rs[len(rs) // 4:, 1], 1)[0] * 60.0) if len(rs) > 8 else 0.0
    return {
        "case": name, "duration": duration, "keyframes": est.health.keyframes,
        "keyframe_rate": mech.config.estimator.keyframe_rate if name != "four_bar_1khz" else 1000.0,
        "samples": len(samples),
        "mean_ms": float(lat.mean()), "p99_ms": float(np.percentile(lat, 99)),
        "p50_ms": float(np.percentile(lat, 50)), "max_ms": float(lat.max()),
        "realtime_factor": duration / wall, "wall_s": wall, "simulation_s": sim_wall,
        "cpu_ms_per_keyframe": cpu / max(est.health.keyframes, 1) * 1e3,
        "cpu_realtime_factor": duration / max(cpu, 1e-9),
        "rss_start_mb": float(rs[0, 1]), "rss_end_mb": float(rs[-1, 1]),
        "rss_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "memory_slope_mb_per_min": slope,
        "relinearizations": est.health.relinearizations, "rebuilds": est.smoother.rebuilds,
        "recoveries": est.health.recoveries,
        "rmse_dof_position": float(np.sqrt(np.mean((q[sel] - qt[sel]) ** 2))),
    }


def format_table(results: list[dict]) -> str:
    head = (f"{'case':<14} {'kf Hz':>6} {'mean ms':>8} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} "
            f"{'x real':>7} {'cpu/kf':>7} {'RSS MB':>13} {'MB/min':>7} {'relin':>6} {'RMSE q':>8}")
    lines = [head, "-" * len(head)]
    for r in results:
        lines.append(f"{r['case']:<14} {r['keyframe_rate']:>6.0f} {r['mean_ms']:>8.3f} {r['p50_ms']:>7.3f} "
                     f"{r['p99_ms']:>7.3f} {r['max_ms']:>7.2f} {r['realtime_factor']:>7.1f} "
                     f"{r['cpu_ms_per_keyframe']:>7.3f} "
                     f"{r['rss_start_mb']:>6.0f}->{r['rss_end_mb']:<6.0f} {r['memory_slope_mb_per_min']:>7.2f} "
                     f"{r['relinearizations']:>6d} {r['rmse_dof_position']:>8.1e}")
    return "\n".join(lines)


def run_perf(args: argparse.Namespace) -> int:
    """Run the --perf cases and print/write their figures; returns the exit status."""
    if args.perf_duration <= 0:
        raise CliError(f"--perf-duration must be positive (got {args.perf_duration})")
    names = [c.strip() for c in args.perf_cases.split(",") if c.strip()]
    results = []
    for name in names:
        _case(name)                                    # validate before any long work
    for name in names:
        results.append(run_case(name, args.perf_duration, progress=not getattr(args, "no_progress", False)))
        print(format_table(results[-1:]).splitlines()[-1], file=sys.stderr)
    print(format_table(results))
    print("latency: wall time to close one keyframe (mean / median / 99th percentile / max); "
          "x real: recording length over wall time; cpu/kf: process CPU time per keyframe (ms, "
          "everything included; unaffected by other load); RSS: resident memory at start -> end.")
    out = getattr(args, "json", None)
    if out:
        payload = {r["case"]: r for r in results}
        text = json.dumps(payload, indent=2)
        if out == "-":
            print(text)
        else:
            Path(out).write_text(text + "\n")
    return 0
