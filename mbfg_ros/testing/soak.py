"""``python -m mbfg_ros.testing.soak [--minutes 30]`` (``make soak``): the simulated rig and the
estimator live over DDS for a long run, measuring both processes' memory and whether every
reading the rig published is accounted for at the estimator.

The two nodes run as processes on a private DDS domain (the launch file's description, as
``mbfg demo``); this process watches /diagnostics, the estimates and the truth (the newest
minute only, so the watcher itself stays small) and samples each node's resident memory
(VmRSS) every ``--sample`` seconds. At the end it prints and writes as JSON (``--out``):

- memory: each process's RSS after the first minute and at the end, and its slope (MB/min,
  least squares over the samples after the first minute: start-up and warm-up excluded);
- accounting: per sensor topic the messages the rig published (its end-of-run log line), the
  messages the estimator took (``messages <topic>`` on /diagnostics) and the ones DDS reported
  lost; the node's ``unaccounted_readings`` (0: every queued reading is in exactly one place)
  and, per sensor, received = used + late + too old + rejected + discarded + pending;
- tracking: the crank RMSE over the last 30 s of estimates against the rig's ground truth.

Exit status 0 when both slopes are at most ``--max-slope`` (0.1 MB/min) and every reading is
accounted for; 1 otherwise (the reasons are printed); 2 on bad options.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
from collections import deque
from pathlib import Path

import numpy as np

from mbfg_ros.io.topic_names import resolve_topic

ACCOUNT_KEYS = ("used", "late", "too_old", "rejected_nonfinite", "rejected_duplicate", "discarded", "pending")


def rss_mb(pid: int) -> float | None:
    """Resident memory of process ``pid`` (MB), None once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def slope_mb_per_min(samples: list[tuple[float, float]], after: float = 60.0) -> float | None:
    """Least-squares slope (MB/min) of (s, MB) samples taken after ``after`` s."""
    pts = [(t, m) for t, m in samples if t >= after]
    if len(pts) < 3:
        return None
    t = np.array([p[0] for p in pts]) / 60.0
    m = np.array([p[1] for p in pts])
    return float(np.polyfit(t, m, 1)[0])


class _Watcher:
    """/diagnostics (newest status per name) and the newest minute of estimates and truth."""

    def __init__(self, domain_id: int, namespace: str = "/mbfg_estimator", truth_ns: str = "/truth") -> None:
        from rclpy.qos import QoSProfile, ReliabilityPolicy

        from mbfg_ros.ros.background_node import BackgroundNode
        from mbfg_ros.ros.message_classes import message_class
        self._background = BackgroundNode(domain_id, "mbfg_soak_watcher")
        self.node = self._background.node
        self.lock = threading.Lock()
        self.status: dict[str, tuple[int, str, dict[str, str]]] = {}
        self.estimates: deque = deque(maxlen=12000)        # (stamp ns, q) of the newest minute
        self.truth: deque = deque(maxlen=12000)
        self.estimate_count = 0
        qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
        js = message_class("sensor_msgs/msg/JointState")
        self.node.create_subscription(message_class("diagnostic_msgs/msg/DiagnosticArray"), "/diagnostics",
                                      self._on_diagnostics, 100)
        self.node.create_subscription(js, f"{namespace}/joint_states", self._on_estimate, qos)
        self.node.create_subscription(js, f"{truth_ns}/joint_states", self._on_truth, qos)
        self._background.start()

    @staticmethod
    def _stamp(msg) -> int:
        return msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec

    def _on_diagnostics(self, msg) -> None:
        with self.lock:
            for s in msg.status:
                level = s.level if isinstance(s.level, int) else int.from_bytes(s.level, "little")
                self.status[s.name] = (level, s.message, {kv.key: kv.value for kv in s.values})

    def _on_estimate(self, msg) -> None:
        with self.lock:
            self.estimates.append((self._stamp(msg), np.array(msg.position)))
            self.estimate_count += 1

    def _on_truth(self, msg) -> None:
        with self.lock:
            self.truth.append((self._stamp(msg), np.array(msg.position)))

    def get(self, name: str):
        with self.lock:
            return self.status.get(name)

    def rmse(self, seconds: float = 30.0) -> float | None:
        """Crank (first joint) RMSE over the newest ``seconds`` of estimates (rad)."""
        with self.lock:
            est, tru = list(self.estimates), list(self.truth)
        if len(est) < 10 or len(tru) < 10:
            return None
        et = np.array([e[0] for e in est], float)
        tt = np.array([t[0] for t in tru], float)
        sel = (et >= et[-1] - seconds * 1e9) & (et >= tt[0]) & (et <= tt[-1])
        if not np.any(sel):
            return None
        q = np.array([e[1][0] for e in est])[sel]
        ref = np.interp(et[sel], tt, np.array([t[1][0] for t in tru]))
        err = (q - ref + np.pi) % (2 * np.pi) - np.pi
        return float(np.sqrt(np.mean(err ** 2)))

    def close(self) -> None:
        self._background.close()


def published_per_topic(log: str) -> dict[str, int]:
    """The rig's end-of-run counts ("N messages published (/topic n, ...)")."""
    m = re.search(r"messages published \(([^)]*)\)", log)
    if not m:
        return {}
    out = {}
    for part in m.group(1).split(", "):
        topic, _, n = part.rpartition(" ")
        if topic and n.isdigit():
            out[resolve_topic(topic)] = int(n)          # the rig runs at the root namespace here
    return out


def run(args: argparse.Namespace) -> int:
    from mbfg_ros.model.validation import load_rig
    from mbfg_ros.ros.launch_description import default_config, sim_rig_description
    from mbfg_ros.ros.processes import NodeProcesses, ros_environment

    config = args.config or default_config()
    mech = load_rig(config).mech
    duration = args.minutes * 60.0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = ros_environment(out / "logs")
    description = sim_rig_description(config, duration=duration,
                                      rig_parameters={"initial_error": [0.1]})
    sensor_topics = sorted({resolve_topic(s.topic) for s in mech.config.sensors.all()})
    print(f"soak: {mech.config.name}, rig + estimator over DDS for {args.minutes:g} min "
          f"(ROS_DOMAIN_ID {env['ROS_DOMAIN_ID']}, logs in {out / 'logs'})", flush=True)
    watcher = _Watcher(int(env["ROS_DOMAIN_ID"]), truth_ns=(mech.config.truth_namespace or "/truth").rstrip("/"))
    procs = NodeProcesses(description, out / "logs", env)
    memory: dict[str, list[tuple[float, float]]] = {"sim_rig": [], "mbfg_estimator": []}
    problems: list[str] = []
    try:
        procs.start()
        pids = {name: p.pid for name, p in procs.procs.items()}
        start = time.monotonic()
        next_sample, next_print = 0.0, 60.0
        while "sim_rig" not in procs.exited():
            bad = {n: rc for n, rc in procs.exited().items() if n != "sim_rig"}
            if bad:
                raise RuntimeError(f"{', '.join(bad)} exited early ({bad}):\n"
                                   + procs.log_text(next(iter(bad)))[-2000:])
            now = time.monotonic() - start
            if now >= next_sample:
                for name, pid in pids.items():
                    mb = rss_mb(pid)
                    if mb is not None:
                        memory[name].append((now, mb))
                next_sample += args.sample
            if now >= next_print:
                next_print += 60.0
                q = watcher.get("/mbfg_estimator: input queue")
                print(f"  {now / 60:5.1f} min: rig {memory['sim_rig'][-1][1]:.1f} MB, estimator "
                      f"{memory['mbfg_estimator'][-1][1]:.1f} MB, estimates {watcher.estimate_count}, "
                      f"waiting {q[2].get('waiting', '?') if q else '?'}", flush=True)
            if now > duration + 600:
                raise RuntimeError("the rig did not finish within 10 min of its duration")
            time.sleep(0.5)
        if procs.exited()["sim_rig"] != 0:
            problems.append(f"the rig exited with status {procs.exited()['sim_rig']}")
        published = published_per_topic(procs.log_text("sim_rig"))
        # wait until the estimator has taken and processed everything
        end = time.monotonic() + 180
        while time.monotonic() < end:
            q = watcher.get("/mbfg_estimator: input queue")
            if q and all(int(q[2].get(f"messages {t}", -1)) + int(q[2].get(f"lost {t}", 0)) >= published.get(t, 0)
                         for t in sensor_topics) and q[2].get("waiting") == "0" and q[2].get("reordering") == "0":
                break
            time.sleep(0.5)
        time.sleep(2.5)                      # the next diagnostics, with everything fed
        queue = (watcher.get("/mbfg_estimator: input queue") or (0, "", {}))[2]
        sensors = {name.split(": sensor ", 1)[1]: values for name, (_, _, values) in watcher.status.items()
                   if ": sensor " in name}
        rmse = watcher.rmse()
    finally:
        procs.stop()
        watcher.close()
    facts = _figures(args, memory, published, queue, sensors, sensor_topics, rmse, problems)
    (out / "soak.json").write_text(json.dumps(facts, indent=2) + "\n")
    _print(facts)
    return 0 if facts["pass"] else 1


def _figures(args, memory, published, queue, sensors, sensor_topics, rmse, problems) -> dict:
    facts: dict = {"minutes": args.minutes, "max_slope_mb_per_min": args.max_slope, "memory": {},
                   "topics": {}, "sensors": {}, "crank_rmse_last_30s": rmse}
    for name, samples in memory.items():
        after = [m for t, m in samples if t >= 60.0]
        facts["memory"][name] = {"rss_after_1_min_mb": after[0] if after else None,
                                 "rss_end_mb": samples[-1][1] if samples else None,
                                 "slope_mb_per_min": slope_mb_per_min(samples), "samples": len(samples)}
        slope = facts["memory"][name]["slope_mb_per_min"]
        if slope is None:
            problems.append(f"{name}: too few memory samples after the first minute for a slope")
        elif slope > args.max_slope:
            problems.append(f"{name}: memory grows {slope:.3f} MB/min (limit {args.max_slope:g})")
    if not published:
        problems.append("the rig's end-of-run counts are missing from its log")
    for topic in sensor_topics:
        sent = published.get(topic)
        took = int(queue.get(f"messages {topic}", 0))
        lost = int(queue.get(f"lost {topic}", 0))
        facts["topics"][topic] = {"published": sent, "taken_by_the_estimator": took, "lost_in_dds": lost}
        if sent is not None and took + lost != sent:
            problems.append(f"{topic}: the rig published {sent}, the estimator took {took} and DDS "
                            f"reported {lost} lost: {sent - took - lost} unaccounted")
    unaccounted = queue.get("unaccounted_readings")
    facts["unaccounted_readings"] = None if unaccounted is None else int(unaccounted)
    if unaccounted != "0":
        problems.append(f"the estimator's unaccounted_readings is {unaccounted}")
    for name, v in sensors.items():
        counts = {k: int(v.get(k, 0)) for k in ("received", *ACCOUNT_KEYS)}
        counts["balance"] = counts["received"] - sum(counts[k] for k in ACCOUNT_KEYS)
        facts["sensors"][name] = counts
        if counts["balance"]:
            problems.append(f"{name}: received {counts['received']} but the outcomes add up to "
                            f"{counts['received'] - counts['balance']}")
    for key in ("dropped", "samples rejected_stamp", "samples discarded_at_time_jump",
                "samples too_old_lagging_sensor", "samples held_out_of_line"):
        facts[key.replace(" ", "_")] = int(queue.get(key, 0))
    facts["problems"] = problems
    facts["pass"] = not problems
    return facts


def _print(f: dict) -> None:
    print(f"soak: {f['minutes']:g} min")
    for name, m in f["memory"].items():
        slope = "n/a" if m["slope_mb_per_min"] is None else f"{m['slope_mb_per_min']:+.3f} MB/min"
        print(f"  memory {name:<15} after 1 min {m['rss_after_1_min_mb'] or 0:7.1f} MB, end "
              f"{m['rss_end_mb'] or 0:7.1f} MB, slope {slope} ({m['samples']} samples)")
    for topic, t in f["topics"].items():
        print(f"  {topic:<22} published {t['published']}, taken by the estimator "
              f"{t['taken_by_the_estimator']}, lost in DDS {t['lost_in_dds']}")
    for name, c in f["sensors"].items():
        print(f"  {name:<22} received {c['received']} = used {c['used']} + late {c['late']} + too old "
              f"{c['too_old']} + rejected {c['rejected_nonfinite'] + c['rejected_duplicate']} + discarded "
              f"{c['discarded']} + pending {c['pending']} (balance {c['balance']})")
    print(f"  unaccounted readings at the node: {f['unaccounted_readings']}; queue drops {f['dropped']}; "
          f"time rules: rejected stamps {f['samples_rejected_stamp']}, stale "
          f"{f['samples_discarded_at_time_jump']}, lagging {f['samples_too_old_lagging_sensor']}")
    rmse = f["crank_rmse_last_30s"]
    print(f"  crank RMSE over the last 30 s: {'n/a' if rmse is None else f'{rmse:.2e} rad'}")
    print("soak: PASS" if f["pass"] else "soak: FAIL\n  " + "\n  ".join(f["problems"]))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mbfg_ros.testing.soak", description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=30.0, help="rig time (default 30)")
    p.add_argument("--config", default="", help="mechanism config (default: the four-bar)")
    p.add_argument("--out", default="build/soak", help="where the logs and soak.json go")
    p.add_argument("--sample", type=float, default=5.0, help="s between memory samples (default 5)")
    p.add_argument("--max-slope", type=float, default=0.1, help="MB/min allowed after the first minute")
    args = p.parse_args(argv)
    if not (args.minutes >= 2.0 and args.sample > 0):
        print("soak: --minutes must be at least 2 (the slope excludes the first one), --sample > 0",
              file=sys.stderr)
        return 2
    from mbfg_ros.termination import terminate_as_interrupt
    terminate_as_interrupt()
    try:
        return run(args)
    except KeyboardInterrupt:
        print("soak: interrupted", file=sys.stderr)
        return 130
    except RuntimeError as exc:
        print(f"soak: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
