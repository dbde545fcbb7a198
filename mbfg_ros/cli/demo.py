"""``mbfg demo``: the four-bar rig and the estimator live over DDS, with figures and plots.

It starts the ``sim_rig`` and ``estimator`` nodes of the sim_rig launch description as two
processes on a private ROS domain (so it never disturbs another ROS graph), watches them from
this process (:class:`~mbfg_ros.ros.output_monitor.OutputMonitor`), prints a live table every
second, then a summary, and writes plots (DOF angle, DOF velocity and one estimated closure
force against the truth) and ``summary.json`` into ``--out`` (default ``out/demo``).

The rig starts ``--initial-error`` rad away from the config's initial pose, so the estimator
(which starts at the config's pose) has to converge first; errors are reported over the
estimates stamped at least ``--settle`` s after the first one.

Live columns: per-sensor rates (messages per second the estimator received, from
/diagnostics), the estimator's input queue, its solver update time (mean / p99 over the recent
keyframes), the end-to-end latency (sensor header stamp to the estimate's arrival here, wall
clock, over the last second) and the RMSE so far against the truth.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

from mbfg_ros.errors import CliError
from mbfg_ros.termination import terminate_as_interrupt


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default="", help="mechanism config (default: config/four_bar.yaml)")
    p.add_argument("--duration", type=float, default=20.0, help="rig time to run (s)")
    p.add_argument("--initial-error", type=float, default=0.15,
                   help="rad (or m) the rig starts away from the config's initial DOF values")
    p.add_argument("--settle", type=float, default=2.0,
                   help="s after the first estimate excluded from the final errors (convergence)")
    p.add_argument("--out", default="out/demo", help="folder of the plots and summary.json")
    p.add_argument("--force", default="", help="closure whose force is plotted (default: the first)")
    p.add_argument("--no-plots", action="store_true", help="skip the plots")
    p.add_argument("--catch-up", type=float, default=15.0,
                   help="s to wait after the rig's run for the estimator to process the rest")


def _deg(x: float) -> float:
    return math.degrees(x)


def _fmt(x: float, spec: str = ".2f", width: int = 7) -> str:
    return f"{'-':>{width}}" if x is None or not np.isfinite(x) else f"{x:{width}{spec}}"


class _Rates:
    """Received-message rates per sensor from consecutive /diagnostics counts."""

    def __init__(self) -> None:
        self.last: dict[str, tuple[float, int]] = {}
        self.rate: dict[str, float] = {}

    def update(self, statuses) -> None:
        for name, st in statuses.items():
            try:
                received = int(st.values.get("received", "0"))
            except ValueError:
                continue
            prev = self.last.get(name)
            if prev is not None and st.received > prev[0]:
                self.rate[name] = (received - prev[1]) / (st.received - prev[0])
            if prev is None or st.received > prev[0]:
                self.last[name] = (st.received, received)


def run(args: argparse.Namespace) -> int:
    from mbfg_ros.model.validation import load_rig
    from mbfg_ros.ros.launch_description import default_config, sim_rig_description
    from mbfg_ros.ros.output_monitor import MonitorThread
    from mbfg_ros.ros.processes import CpuSamples, NodeProcesses, ros_environment

    if not args.duration > 0:
        raise CliError(f"--duration must be positive (value: {args.duration})")
    config = args.config or default_config()
    if not Path(config).is_file():
        raise CliError(f"--config: no such file (value: {config!r})")
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(f"--out: cannot create {out} ({exc.strerror})") from None
    mech = load_rig(config).mech
    if not mech.dof_names:
        raise CliError(f"{config}: the mechanism has no degree of freedom to show")
    force = args.force or (mech.closure_names[0] if mech.closure_names else "")
    if force and force not in mech.closure_names:
        raise CliError(f"--force: unknown closure {force!r} (closures: {', '.join(mech.closure_names)})")
    dof = mech.dof_names[0]
    j = mech.index[dof]
    angular = next((x.type for x in mech.urdf.tree if x.name == dof), "") in ("revolute", "continuous")
    unit, scale = ("deg", math.degrees(1.0)) if angular else ("mm", 1e3)

    log_dir = out / "logs"
    env = ros_environment(log_dir)
    description = sim_rig_description(config, duration=args.duration,
                                       rig_parameters={"initial_error": [args.initial_error],
                                                       "wait_for_truth": True})
    procs = NodeProcesses(description, log_dir, env)
    terminate_as_interrupt()          # also when run() is called without mbfg's main
    sensors = [s.name for s in mech.config.sensors.all()]
    print(f"mbfg demo: {mech.config.name} ({mech.n} joints, DOF {', '.join(mech.dof_names)}), "
          f"{args.duration:g} s live over DDS (ROS_DOMAIN_ID {env['ROS_DOMAIN_ID']}, localhost)")
    print(f"  rig:       sim_rig node, starts {args.initial_error:g} {'rad' if angular else 'm'} away "
          "from the config's pose; sensors " + ", ".join(
              f"{s.name} {s.rate:g} Hz" for s in mech.config.sensors.all()))
    print(f"  estimator: estimator node (mbfg_estimator), keyframes "
          f"{mech.config.estimator.keyframe_rate:g} Hz, lag {mech.config.estimator.lag:g} s")
    print(f"  logs:      {log_dir}/")
    load_before = list(os.getloadavg())
    load = load_before[0]
    if load > 0.75 * (os.cpu_count() or 1):
        print(f"  note:      this machine is busy (load average {load:.1f} on {os.cpu_count()} "
              "cores): the nodes share it, so the live figures may lag real time")
    print("  starting the nodes (about 5 s) ...", flush=True)

    # what the table and the plots need (no TF, accelerations, covariance: the estimator does
    # not build outputs nobody subscribes to)
    watched = ("joint_states", "/diagnostics") + tuple(f"forces/{force}" for force in [force] if force)
    monitor_thread = MonitorThread(mech, int(env["ROS_DOMAIN_ID"]), outputs=watched)
    m = monitor_thread.monitor
    own_cpu = CpuSamples(os.getpid())       # this process: the monitor, the table, the plots
    own_cpu.sample()
    rates = _Rates()
    start = time.monotonic()
    header = ("  time  " + " ".join(f"{s[:14]:>14}" for s in sensors) + "  queue  update ms   e2e ms"
              f"    {dof[:10]} {unit}   vel {unit}/s" + (f"  {force[:12]} N" if force else ""))
    sub = ("   [s]  " + " ".join(f"{'[msg/s]':>14}" for _ in sensors) + "         mean/p99  mean/p99"
           "        RMSE        RMSE" + ("         RMSE" if force else ""))
    printed_header = False
    try:
        procs.start()
        rig_done = None
        behind = 0.0
        while True:
            time.sleep(1.0)
            own_cpu.sample()
            exited = procs.exited()
            bad = {n: c for n, c in exited.items() if c != 0 or n != "sim_rig"}
            if bad:
                raise CliError(f"{', '.join(bad)} stopped (exit {', '.join(map(str, bad.values()))}); "
                               f"see {log_dir}/\n" + _tail(procs))
            if not m.estimates:
                if time.monotonic() - start > 120:
                    raise CliError(f"no estimate after 120 s; see {log_dir}/\n" + _tail(procs))
                continue
            if not printed_header:
                print(header)
                print(sub)
                printed_header = True
            rates.update(m.sensor_status())
            print(_row(m, sensors, rates, j, scale, force, args.settle), flush=True)
            if "sim_rig" in exited:
                rig_done = rig_done or time.monotonic()
                caught_up = (m.truth and m.estimates and m.estimates[-1][0] >= m.truth[-1][0] - 0.1e9)
                if caught_up or time.monotonic() - rig_done > args.catch_up:
                    behind = (m.truth[-1][0] - m.estimates[-1][0]) * 1e-9 if not caught_up else 0.0
                    break
    except KeyboardInterrupt:
        print("\ninterrupted: stopping the nodes", file=sys.stderr)
    finally:
        own_cpu.sample()
        codes = procs.stop()
        time.sleep(0.2)
        monitor_thread.close()
    summary = _summary(m, mech, j, scale, unit, force, args, codes, log_dir)
    summary["behind_at_end_s"] = behind
    summary["load_average"] = list(os.getloadavg())
    summary["load_average_before"] = load_before
    summary["cpu"] = _cpu(m, {**procs.cpu, "mbfg demo": own_cpu})
    summary["log_warnings"] = _log_warnings(procs, (m.truth[-1][0] if m.truth else time.time_ns()) * 1e-9)
    _print_summary(summary, dof, unit, force)
    if behind > 0:
        print(f"  note: the estimator was still {behind:.1f} s behind the rig when the demo "
              f"stopped waiting (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} "
              "cores); the figures cover the estimates it published")
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    if not args.no_plots and m.estimates:
        paths = _plots(m, mech, j, scale, unit, dof, force, out)
        print("Plots: " + ", ".join(str(p) for p in paths))
    print(f"Results in {out}/ (summary.json, plots, logs/)")
    return 0


def _tail(procs, lines: int = 8) -> str:
    out = []
    for name in procs.logs:
        text = procs.log_text(name).splitlines()[-lines:]
        out += [f"  [{name}] {ln}" for ln in text]
    return "\n".join(out)


def _cpu(m, cpu: dict) -> dict | None:
    """Each process's CPU while the rig ran (cores: CPU s per s from the first to the last truth
    stamp, which are wall-clock times) and over its whole life (s); None without truth."""
    if len(m.truth) < 2:
        return None
    t0, t1 = m.truth[0][0], m.truth[-1][0]
    cores = {name: c.between(t0, t1) / ((t1 - t0) * 1e-9) for name, c in cpu.items()}
    return {"window_s": (t1 - t0) * 1e-9, "cores": cores, "total_cores": sum(cores.values()),
            "cpu_s": {name: c.total for name, c in cpu.items()}}


def _log_warnings(procs, end_s: float) -> dict[str, list[str]]:
    """{process: its log's WARN and ERROR lines logged until ``end_s`` (wall clock s: the rig's
    last stamp; after it the estimator rightly finds its sensors silent)}."""
    out = {}
    for name in procs.logs:
        lines = []
        for ln in procs.log_text(name).splitlines():
            if "[WARN]" not in ln and "[ERROR]" not in ln:
                continue
            try:                                  # "[WARN] [1795704617.206748885] [node]: ..."
                logged = float(ln.split("[")[2].split("]")[0])
            except (IndexError, ValueError):
                logged = 0.0
            if logged <= end_s:
                lines.append(ln)
        if lines:
            out[name] = lines
    return out


def _row(m, sensors, rates, j, scale, force, settle) -> str:
    q = m.node_status("input queue")
    s = m.node_status("solver")
    waiting = int(q.values.get("waiting", 0)) + int(q.values.get("reordering", 0)) if q else 0
    upd_mean = float(s.values.get("update_mean_ms", "nan")) if s else float("nan")
    upd_p99 = float(s.values.get("update_p99_ms", "nan")) if s else float("nan")
    a = m.arrays()
    lat = (a["est_wall_ns"] - a["est_stamp_ns"]) * 1e-6
    recent = lat[a["est_wall_ns"] >= a["est_wall_ns"][-1] - 1_000_000_000] if lat.size else lat
    e2e_mean = float(np.mean(recent)) if recent.size else float("nan")
    e2e_p99 = float(np.percentile(recent, 99)) if recent.size else float("nan")
    err = m.tracking(after=settle)
    name = m.mech.joint_names[j]
    q_rmse = err.get(name, {}).get("q_rmse", float("nan")) * scale
    v_rmse = err.get(name, {}).get("v_rmse", float("nan")) * scale
    t = a["est_t"][-1] if a["est_t"].size else 0.0
    cols = [f"{t:6.1f}  "] + [f"{rates.rate.get(sn, float('nan')):14.0f}" for sn in sensors]
    row = " ".join(cols) + f"  {waiting:5d}  {_fmt(upd_mean, '.1f', 4)}/{_fmt(upd_p99, '.0f', 4)}" \
        f"  {_fmt(e2e_mean, '.0f', 4)}/{_fmt(e2e_p99, '.0f', 3)}    {_fmt(q_rmse, '.3f', 8)}    {_fmt(v_rmse, '.3f', 8)}"
    if force:
        f_rmse, _ = m.force_rmse(force, settle)
        row += f"    {_fmt(f_rmse, '.2f', 9)}"
    return row


def _percentiles(x: np.ndarray) -> dict | None:
    """mean, p50, p99, max and count of latencies (ms), None without any."""
    if not x.size:
        return None
    return {"mean": float(np.mean(x)), "p50": float(np.percentile(x, 50)), "p99": float(np.percentile(x, 99)),
            "max": float(np.max(x)), "samples": int(x.size)}


def _summary(m, mech, j, scale, unit, force, args, codes, log_dir) -> dict:
    err = m.tracking(after=args.settle)
    lat = m.latency_ms(after=args.settle)
    s = m.node_status("solver")
    q = m.node_status("input queue")
    out = {
        "config": str(args.config or "config/four_bar.yaml"), "duration": args.duration,
        "initial_error": args.initial_error, "settle": args.settle,
        "estimates": len(m.estimates), "truth_samples": len(m.truth),
        "rmse": {name: {"position": e["q_rmse"], "velocity": e["v_rmse"], "max_position": e["q_max"],
                        "samples": e["samples"]} for name, e in err.items()},
        "end_to_end_latency_ms": _percentiles(lat),
        "rig_lateness_ms": _percentiles(m.truth_latency_ms(after=args.settle)),
        "solver": dict(s.values) if s else None, "input_queue": dict(q.values) if q else None,
        "sensors": {k: dict(v.values) for k, v in m.sensor_status().items()},
        "exit_codes": codes, "logs": str(log_dir),
    }
    if force:
        f_rmse, f_rms = m.force_rmse(force, args.settle)
        out["force"] = {"closure": force, "rmse_N": f_rmse, "rms_truth_N": f_rms}
    return out


def _print_summary(s: dict, dof: str, unit: str, force: str) -> None:
    print()
    print(f"Summary ({s['estimates']} estimates; errors after the first {s['settle']:g} s):")
    for name, e in s["rmse"].items():
        print(f"  {name:>16}: position RMSE {e['position']:.4g} rad, velocity RMSE "
              f"{e['velocity']:.4g} rad/s ({e['samples']} estimates)")
    if force and "force" in s:
        f = s["force"]
        print(f"  {force:>16}: force RMSE {f['rmse_N']:.3g} N (true force RMS {f['rms_truth_N']:.3g} N)")
    lat = s["end_to_end_latency_ms"]
    if lat:
        print(f"  end-to-end latency (sensor stamp -> estimate received over DDS): mean "
              f"{lat['mean']:.1f} ms, p50 {lat['p50']:.1f} ms, p99 {lat['p99']:.1f} ms, max {lat['max']:.1f} ms")
    late = s.get("rig_lateness_ms")
    if late:
        print(f"    the rig's own lateness (truth stamp -> truth received over DDS): p50 {late['p50']:.1f} ms, "
              f"p99 {late['p99']:.1f} ms")
    if s["solver"]:
        sv = s["solver"]
        print(f"  solver: {sv.get('keyframes')} keyframes, update mean {float(sv.get('update_mean_ms', 0)):.2f} ms, "
              f"p99 {float(sv.get('update_p99_ms', 0)):.2f} ms; recoveries {sv.get('recoveries')}, "
              f"resets {sv.get('resets')}")
    q = s["input_queue"]
    if q:
        print(f"  input: {q.get('messages')} messages, {q.get('processed')} readings processed, "
              f"{q.get('dropped')} dropped, {q.get('lost_in_dds', 0)} lost in DDS")
    cpu = s.get("cpu")
    if cpu:
        print(f"  CPU while the rig ran ({cpu['window_s']:.1f} s): " + ", ".join(
            f"{name} {c:.2f}" for name, c in cpu["cores"].items()) + f" = {cpu['total_cores']:.2f} cores; "
            "over each process's life " + ", ".join(f"{name} {c:.1f} s" for name, c in cpu["cpu_s"].items())
            + f"; load average (1, 5, 15 min) {' '.join(f'{x:.2f}' for x in s['load_average_before'])} "
            f"before, {' '.join(f'{x:.2f}' for x in s['load_average'])} after, on {os.cpu_count()} cores")
    warnings = s.get("log_warnings") or {}
    print("  warnings in the logs while the rig ran: " + ("none" if not warnings else "; ".join(
        f"{name} {len(lines)} (first: {lines[0].strip()[:160]})" for name, lines in warnings.items())))


def _plots(m, mech, j, scale, unit, dof, force, out: Path) -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    a = m.arrays()
    paths = []
    angular = unit == "deg"
    tq = a["truth_q"][:, j] * scale
    eq = a["est_q"][:, j] * scale
    if angular and a["truth_t"].size and a["est_t"].size:
        # show the estimate on the truth's turn (the encoder factor is wrap-safe)
        ref = np.interp(a["est_t"], a["truth_t"], tq)
        eq = eq - 360.0 * np.round((eq - ref) / 360.0)
    for key, title, truth, est, ylabel in (
            ("dof_angle", f"{dof}: position", tq, eq, f"{dof} [{unit}]"),
            ("dof_velocity", f"{dof}: velocity", a["truth_v"][:, j] * scale, a["est_v"][:, j] * scale,
             f"{dof} velocity [{unit}/s]")):
        fig, (ax, ax2) = plt.subplots(2, 1, figsize=(9, 5.5), sharex=True,
                                      gridspec_kw={"height_ratios": [3, 1]})
        ax.plot(a["truth_t"], truth, "k-", lw=2.5, alpha=0.35, label="truth (/truth)")
        ax.plot(a["est_t"], est, "C0-", lw=1.0, label="estimate (/mbfg_estimator)")
        ax.set_ylabel(ylabel)
        ax.set_title(f"mbfg demo, {mech.config.name} - {title}")
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper right")
        if a["truth_t"].size > 1 and a["est_t"].size:
            inside = (a["est_t"] >= a["truth_t"][0]) & (a["est_t"] <= a["truth_t"][-1])
            err = est[inside] - np.interp(a["est_t"][inside], a["truth_t"], truth)
            ax2.plot(a["est_t"][inside], err, "C3-", lw=0.8)
        ax2.axhline(0.0, color="k", lw=0.5)
        ax2.set_ylabel(f"error [{unit}{'' if key == 'dof_angle' else '/s'}]")
        ax2.set_xlabel("time since the first estimate [s]")
        ax2.grid(True, alpha=0.3)
        fig.tight_layout()
        path = out / f"{key}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    if force:
        et, ef, tt, tf = m.force_series(force)
        fig, ax = plt.subplots(figsize=(9, 4))
        for i, c in enumerate("xyz"):
            peak = float(np.max(np.abs(tf[:, i]))) if tf.size else 0.0
            if peak > 1e-6:
                ax.plot(tt, tf[:, i], "-", color=f"C{i}", lw=2.0, alpha=0.4, label=f"truth F{c}")
                ax.plot(et, ef[:, i], "--", color=f"C{i}", lw=1.0, label=f"estimate F{c}")
        frame = next((c.frame_b for c in mech.closure_configs if c.name == force), "")
        ax.set_xlabel("time since the first estimate [s]")
        ax.set_ylabel(f"force on {frame}, in {frame} [N]")
        ax.set_title(f"mbfg demo, {mech.config.name} - closure {force}: reaction force")
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper right", ncol=2)
        fig.tight_layout()
        path = out / f"force_{force}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths
