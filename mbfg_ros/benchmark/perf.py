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

CASES = ("four_bar", "four_bar_1khz", "spatial_rsur", "arm6", "panda")


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
    from mbfg_ros.model.config import load_rig_config
    from mbfg_ros.model.mechanism import Mechanism
    from mbfg_ros.sim.scenario import Scenario
    from mbfg_ros.package_share import config_dir
    cfg_dir = config_dir()
    if name.startswith("four_bar"):
        cfg = load_rig_config(cfg_dir / "four_bar.yaml")
        gyro = load_rig_config(cfg_dir / "four_bar_gyro.yaml").sensors.gyros
        cfg = dataclasses.replace(cfg, sensors=dataclasses.replace(cfg.sensors, gyros=gyro))
        if name == "four_bar_1khz":
            cfg = dataclasses.replace(cfg, estimator=dataclasses.replace(cfg.estimator, keyframe_rate=1000.0))
        return Mechanism(cfg), Scenario()
    if name == "spatial_rsur":
        return Mechanism(load_rig_config(cfg_dir / "spatial_rsur.yaml")), Scenario()
    if name == "arm6":
        return (Mechanism(load_rig_config(cfg_dir / "arm6.yaml")),
                Scenario(input_profile="random", input_amplitude=3.0, input_frequency=0.5, input_start=0.0))
    if name == "panda":
        return (Mechanism(load_rig_config(panda_config())),
                Scenario(input_profile="random", input_amplitude=3.0, input_frequency=0.5, input_start=0.0))
    raise CliError(f"--perf-cases: unknown case '{name}' (cases: {', '.join(CASES)})")


PANDA_URDF = "cmeel.prefix/share/example-robot-data/robots/panda_description/urdf/panda.urdf"


def panda_config(rig: str = "panda.yaml") -> Path:
    """A Panda rig config (``benchmark/rigs/<rig>``) next to a copy of example-robot-data's
    panda.urdf with the finger joints fixed, in a cache directory."""
    import re
    import sysconfig

    from mbfg_ros.estimation.native_code import cache_dir
    src = Path(sysconfig.get_paths()["purelib"]) / PANDA_URDF
    if not src.exists():
        raise CliError("the panda case needs the Panda URDF of example-robot-data: "
                       "pip install -r requirements-bench.txt (make bench-perf and make bench-node do it)")
    out = cache_dir() / "panda"
    out.mkdir(parents=True, exist_ok=True)
    xml = re.sub(r'(<joint name="panda_finger_joint[12]" type=")prismatic(")', r"\1fixed\2", src.read_text())
    xml = re.sub(r"<mimic[^>]*/>", "", xml)
    (out / "panda_arm.urdf").write_text(xml)
    cfg = out / rig
    cfg.write_text((Path(__file__).parent / "rigs" / rig).read_text())
    return cfg


def run_case(name: str, duration: float, progress: bool = True) -> dict:
    """Simulate one case and time the estimator over it.

    The harness keeps nothing per keyframe but the stamp and DOF positions in arrays sized at
    the start (for the RMSE); latencies come from the estimator's own whole-run histograms
    (percentiles to within 1.2 %), memory from one RSS sample per second of the recording."""
    from tqdm import tqdm

    from mbfg_ros.estimation.estimator import Estimator
    from mbfg_ros.sim.forward import simulate
    from mbfg_ros.sim.sensors import SensorOptions, synthesize
    mech, scenario = _case(name)
    scenario = dataclasses.replace(scenario, duration=duration)
    t0 = time.perf_counter()
    traj = simulate(mech, scenario, progress=progress)
    samples = [(s.sensor, s.stamp, s.value) for s in synthesize(traj, SensorOptions(seed=1), config_mechanism=mech)]
    sim_wall = time.perf_counter() - t0
    gc.collect()
    t0 = time.perf_counter()
    est = Estimator(mech, freeze_gc=True)
    startup = time.perf_counter() - t0
    kf_rate = est.cfg.keyframe_rate
    cap = int(duration * kf_rate) + 16
    # written through now (np.zeros' pages would be touched, and counted in RSS, as they fill)
    stamps = np.full(cap, np.nan)
    dof_q = np.full((cap, len(mech.dof)), np.nan)
    rss = np.full((int(duration) + 2, 2), np.nan)
    rss[0] = (0.0, _rss_mb())
    n_rss, n_out = 1, 0
    gen2 = gc.get_stats()[2]["collections"]
    bar = tqdm(total=len(samples), desc=f"perf {name}", unit="sample", disable=not progress,
               file=sys.stderr, mininterval=0.5)
    add, pop, dof = est.add_sample, est.pop_estimates, mech.dof
    t0 = time.perf_counter()
    c0 = time.process_time()
    next_check = 1.0
    for i, (sensor, stamp, value) in enumerate(samples):
        add(sensor, stamp, value)
        out = pop()
        if out:
            for e in out:
                if n_out < cap:
                    stamps[n_out] = e.stamp
                    dof_q[n_out] = e.q[dof]
                    n_out += 1
            if stamp >= next_check and n_rss < rss.shape[0]:
                rss[n_rss] = (stamp, _rss_mb())
                n_rss += 1
                next_check += 1.0
        if i % 5000 == 0:
            bar.update(5000 if i else 0)
    est.flush()
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    bar.close()
    gen2 = gc.get_stats()[2]["collections"] - gen2
    timing = est.health.timing
    t = stamps[:n_out]
    q = dof_q[:n_out]
    qt = np.stack([np.interp(t, traj.t, traj.q[:, j]) for j in mech.dof], axis=1)
    sel = t >= min(1.0, duration / 2)
    rs = rss[:n_rss]
    after = rs[:, 0] >= (30.0 if duration >= 60.0 else duration / 4)
    slope = float(np.polyfit(rs[after, 0], rs[after, 1], 1)[0] * 60.0) if after.sum() > 8 else 0.0
    kf = max(est.health.keyframes, 1)
    return {
        "case": name, "duration": duration, "keyframes": est.health.keyframes,
        "keyframe_rate": kf_rate, "samples": len(samples),
        "mean_ms": timing.wall.mean(), "p50_ms": timing.wall.percentile(50),
        "p99_ms": timing.wall.percentile(99), "p999_ms": timing.wall.percentile(99.9),
        "max_ms": timing.wall.max,
        "cpu_mean_ms": timing.cpu.mean(), "cpu_p50_ms": timing.cpu.percentile(50),
        "cpu_p99_ms": timing.cpu.percentile(99), "cpu_p999_ms": timing.cpu.percentile(99.9),
        "cpu_max_ms": timing.cpu.max,
        "realtime_factor": duration / wall, "cpu_realtime_factor": duration / max(cpu, 1e-9),
        "wall_s": wall, "cpu_s": cpu, "simulation_s": sim_wall, "startup_s": startup,
        "cpu_ms_per_keyframe": cpu / kf * 1e3,
        "rss_start_mb": float(rs[0, 1]), "rss_end_mb": float(rs[-1, 1]),
        "rss_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "memory_slope_mb_per_min": slope, "gen2_collections": gen2,
        "relinearizations": est.health.relinearizations, "recoveries": est.health.recoveries,
        "rmse_dof_position": float(np.sqrt(np.mean((q[sel] - qt[sel]) ** 2))),
    }


def format_table(results: list[dict]) -> str:
    head = (f"{'case':<14} {'kf Hz':>6} {'mean':>6} {'p50':>6} {'p99':>6} {'p99.9':>6} {'max':>6} | "
            f"{'cpu':>6} {'cpu99':>6} {'cpumax':>6} | {'x real':>7} {'x cpu':>7} {'start s':>7} "
            f"{'RSS MB':>11} {'MB/min':>6} {'gen2':>4} {'relin':>6} {'RMSE q':>8}")
    lines = [head, "-" * len(head)]
    for r in results:
        lines.append(f"{r['case']:<14} {r['keyframe_rate']:>6.0f} {r['mean_ms']:>6.3f} {r['p50_ms']:>6.3f} "
                     f"{r['p99_ms']:>6.3f} {r['p999_ms']:>6.2f} {r['max_ms']:>6.2f} | "
                     f"{r['cpu_mean_ms']:>6.3f} {r['cpu_p99_ms']:>6.3f} {r['cpu_max_ms']:>6.2f} | "
                     f"{r['realtime_factor']:>7.1f} {r['cpu_realtime_factor']:>7.1f} {r['startup_s']:>7.2f} "
                     f"{r['rss_start_mb']:>4.0f}->{r['rss_end_mb']:<5.0f} {r['memory_slope_mb_per_min']:>6.2f} "
                     f"{r['gen2_collections']:>4d} {r['relinearizations']:>6d} {r['rmse_dof_position']:>8.1e}")
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
    print("ms per keyframe: wall time to close one keyframe (mean, median, 99th, 99.9th percentile, "
          "max) and the estimator thread's CPU time (mean, 99th percentile, max; unaffected by other "
          "load). x real / x cpu: recording length over the wall / process CPU time of feeding all of "
          "it (everything included). start s: building the estimator (its step function). RSS: "
          "resident memory at start -> end, MB/min its slope after the first 30 s; gen2: full "
          "garbage collections while feeding.")
    out = getattr(args, "json", None)
    if out:
        payload = {r["case"]: r for r in results}
        text = json.dumps(payload, indent=2)
        if out == "-":
            print(text)
        else:
            Path(out).write_text(text + "\n")
    return 0
