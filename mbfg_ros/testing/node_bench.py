"""`mbfg benchmark --node`: the live estimator node against the estimator it wraps.

Per case a simulated recording (``--node-duration`` s, the sensors of the case's rig config)
is written to a bag; then, on a fresh ROS domain (random ``ROS_DOMAIN_ID``, localhost only),
three processes run at once:

- the ``estimator`` node (:mod:`mbfg_ros.ros.estimator_node`, its default parameters, the wall
  clock: no /clock, as on a live robot);
- the bag player (:mod:`mbfg_ros.ros.timed_bag_player`: the bag player of ``mbfg run replay``
  that starts once the node subscribes and notes when it publishes each message), playing the
  bag once at its recorded rate, every message's stored bytes, so each header stamp is the
  bag's;
- a subscriber (:mod:`mbfg_ros.ros.latency_probe`) recording every estimate on ``~/joint_states``
  (its stamp, publication and receive times) and the node's /diagnostics.

Meanwhile this process samples each process's CPU time (``/proc/<pid>/stat``) ten times a second.
Then it feeds the same bag's readings to the same :class:`~mbfg_ros.estimation.estimator.Estimator`
in this process (as the ``--perf`` harness does: no ROS, the thread's CPU time) for the
estimator-alone cost.

Figures per case (the JSON keys):

- ``node_cpu_per_s``: the node process's CPU seconds per second of data, from the player's start
  of the data to the newest estimate's arrival; ``estimator_cpu_per_s``: the estimator alone on
  the same readings; ``overhead_ratio``: their ratio (what the node's shell costs on top);
  ``estimator_paced_cpu_per_s``: the estimator alone again, fed at the bag's pace (it sleeps
  until the next update's readings are due, as the node's intake does; :func:`estimator_paced`),
  and ``overhead_ratio_paced``: node over that. On a virtual machine the estimator costs
  2-3x more CPU when it sleeps between updates than back to back (cold caches), so the
  back-to-back ratio also counts what waking costs the estimator itself;
  ``machine_paced_factor``: that cost of the machine apart from the estimator, rclpy and Python
  (:mod:`mbfg_ros.testing.machine_pacing`: a fixed piece of native work with a sleep of the
  update period after each, over the same back to back; ``machine_piece_us``,
  ``machine_piece_paced_us``);
- ``e2e_p50_ms``, ``e2e_p99_ms``, ``e2e_max_ms``: sensor stamp to estimate received, per
  estimate. The player publishes the bag's stamps, so a stamp is put on the wall clock through
  the player's schedule: stamp s is due at t0 + (s - the bag's first log time), t0 the
  wall time the player started the data (from its noted publication times: the earliest
  publication minus its due offset). Latency = the time DDS delivered the estimate stamped s
  to the subscriber (``received_timestamp``) minus that due time: the estimator's wait for
  its keyframe's readings, the node, DDS both ways and the player's own lateness (reported
  apart: ``player_late_p99_ms``; ``e2e_sent_p99_ms`` etc. start when the player really sent
  the newest message stamped at or before s instead). ``publish_p99_ms`` etc. end at the
  estimate's publication (``source_timestamp``) instead;
- ``readings_sent`` (in the bag), ``readings_taken`` (the node's input queue), ``dropped``
  (readings the node took but did not use: queue full, the time rules, or refused by the
  estimator as too old, duplicate or not finite; by reason in ``dropped_by_reason``), ``lost``
  (messages the player published that the node never took; ``lost_reported``: the messages
  DDS reported lost to the node's QoS event);
- ``node_cpu_timeline``: the node's CPU seconds in each whole second of data;
- ``player_cpu_per_s`` and ``probe_cpu_per_s``: the other processes' CPU per second of data;
  ``wall_s`` (the whole case, recording and start-up included) beside the CPU seconds;
  ``load_before`` / ``load_after``: the machine's load averages (1, 5, 15 min).

With ``--node-repeat N`` each case runs N times: the case's figures are the median of the runs
(``dropped`` and ``lost`` the largest), every run is kept under ``runs``. Each run's folder
under ``--out`` keeps its bag, the processes' logs and its figures (``result.json``).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mbfg_ros.errors import CliError
from mbfg_ros.ros.processes import CpuSamples
from mbfg_ros.testing.machine_pacing import paced_factor

CASES = ("four_bar", "panda", "fast_crank")
CASE_TEXT = {
    "four_bar": "the benchmark four-bar (config/four_bar.yaml): encoder 1 kHz, load cell 200 Hz, "
                "keyframes 200 Hz; released from its initial pose",
    "panda": "the 7-DOF Franka Panda as ros2_control publishes it (benchmark/rigs/"
             "panda_ros2_control.yaml): one JointState of 7 joints, a WrenchStamped and an Imu "
             "at the flange, all 1 kHz; keyframes 500 Hz; random joint torques",
    "fast_crank": "the fast crank (config/fast_crank.yaml) at ~45 rad/s: encoder 1 kHz, gyro 400 Hz, "
                  "load cell 200 Hz; keyframes at the config's automatic rate",
}
OUTPUTS = ("joint_states", "all")
SETTLE_S = 1.5
"""After the player's last message: done once no estimate came for this long."""


def add_node_arguments(p: argparse.ArgumentParser) -> None:
    """Options of --node (added to the `mbfg benchmark` parser)."""
    g = p.add_argument_group("node benchmark (--node)")
    g.add_argument("--node", action="store_true",
                   help="the live node against its estimator: node CPU, overhead, end-to-end latency, "
                        "readings dropped and lost, over DDS")
    g.add_argument("--node-cases", default=",".join(CASES), metavar="LIST",
                   help=f"comma-separated --node cases (default all: {','.join(CASES)})")
    g.add_argument("--node-duration", type=float, default=20.0, metavar="S",
                   help="seconds of data per --node case (default 20)")
    g.add_argument("--node-repeat", type=int, default=1, metavar="N",
                   help="run each --node case N times (figures: the median; default 1)")
    g.add_argument("--node-outputs", choices=OUTPUTS, default="joint_states",
                   help="the node's outputs subscribed to: joint_states (and /diagnostics; the "
                        "default) or all (every force, dynamic_joint_states, /tf: the node then "
                        "builds them all)")


# ------------------------------------------------------------------------------------------
# cases
@dataclass(frozen=True)
class NodeCase:
    """One case: the rig config the node reads and the simulated scenario of its recording."""
    name: str
    config: Path
    scenario: object          # mbfg_ros.sim.scenario.Scenario


def node_case(name: str) -> NodeCase:
    """The case ``name`` (CliError for an unknown one, or a Panda without its URDF)."""
    from mbfg_ros.package_share import config_dir
    from mbfg_ros.sim.scenario import Scenario
    if name == "four_bar":
        return NodeCase(name, config_dir() / "four_bar.yaml", Scenario())
    if name == "fast_crank":
        # as the config's comment records it: ~45 rad/s, peaks above 70 rad/s
        return NodeCase(name, config_dir() / "fast_crank.yaml",
                        Scenario(input_profile="sine", input_amplitude=2.5, input_offset=2.3,
                                 input_frequency=3.0, input_start=0.0))
    if name == "panda":
        from mbfg_ros.benchmark.perf import panda_config
        return NodeCase(name, panda_config("panda_ros2_control.yaml"),
                        Scenario(input_profile="random", input_amplitude=3.0, input_frequency=0.5,
                                 input_start=0.0))
    raise CliError(f"--node-cases: unknown case '{name}' (cases: {', '.join(CASES)})")


def record_bag(case: NodeCase, duration: float, path: Path) -> dict:
    """Simulate ``case`` for ``duration`` s and write its sensor messages (no truth) to the MCAP
    bag ``path``; the bag writer's summary."""
    from mbfg_ros.io.bag_writer import write_simulation_bag
    from mbfg_ros.model.validation import load_rig
    from mbfg_ros.sim.forward import simulate
    from mbfg_ros.sim.sensors import SensorOptions, synthesize
    mech = load_rig(case.config).mech
    traj = simulate(mech, dataclasses.replace(case.scenario, duration=duration), progress=False)
    samples = synthesize(traj, SensorOptions(seed=1), config_mechanism=mech)
    return write_simulation_bag(path, mech, samples, None, storage="mcap", overwrite=True)


# ------------------------------------------------------------------------------------------
# measuring
def bag_log_times(bag: Path) -> np.ndarray:
    """Log times (ns) of every message of ``bag`` in the order the bag player publishes them."""
    from rosbags.rosbag2 import Reader
    with Reader(bag) as reader:
        return np.fromiter((log_ns for _, log_ns, _ in reader.messages(connections=reader.connections)),
                           dtype=np.int64)


def player_schedule(published_ns: np.ndarray, log_ns: np.ndarray,
                    rate: float = 1.0) -> tuple[int, np.ndarray]:
    """(t0, lateness): the wall time (ns) the player started the data, t0 = the earliest of
    publication - due offset (every message is published at or after t0 + its offset), and each
    message's lateness (ns) after its due time."""
    if published_ns.shape != log_ns.shape or not published_ns.size:
        raise ValueError(f"the player noted {published_ns.size} publications for {log_ns.size} "
                         "messages of the bag")
    due = ((log_ns - log_ns[0]) / rate).astype(np.int64)
    t0 = int(np.min(published_ns - due))
    return t0, published_ns - due - t0


def latency_figures(prefix: str, ms: np.ndarray) -> dict[str, float]:
    """``<prefix>_p50_ms``, ``_p99_ms``, ``_max_ms``, ``_mean_ms`` of latencies in ms."""
    if not ms.size:
        return {f"{prefix}_{k}_ms": float("nan") for k in ("p50", "p99", "max", "mean")}
    return {f"{prefix}_p50_ms": float(np.percentile(ms, 50)),
            f"{prefix}_p99_ms": float(np.percentile(ms, 99)),
            f"{prefix}_max_ms": float(ms.max()), f"{prefix}_mean_ms": float(ms.mean())}


def latencies(stamp: np.ndarray, source: np.ndarray, received: np.ndarray, log_ns: np.ndarray,
              published: np.ndarray) -> dict[str, float]:
    """Latency figures (ms) of the estimates stamped ``stamp`` (ns), published at ``source`` and
    received at ``received`` (wall ns), for a bag of log times ``log_ns`` whose messages the
    player published at ``published`` (rate 1; the recordings have no transport delay, so a
    message's log time is its stamp): ``e2e_*`` from the stamp's due time on the player's
    schedule to receipt, ``publish_*`` from there to publication, ``dds_*`` publication to
    receipt, ``player_late_*`` the player's lateness per message and ``e2e_sent_*`` from the
    player's real publication of the newest message stamped at or before the estimate."""
    t0, late = player_schedule(published, log_ns)
    due = t0 + (stamp - log_ns[0])
    newest = np.clip(np.searchsorted(log_ns, stamp, side="right") - 1, 0, None)
    sent = np.maximum.accumulate(published)[newest]
    out = latency_figures("e2e", (received - due) * 1e-6)
    out.update(latency_figures("publish", (source - due) * 1e-6))
    out.update(latency_figures("dds", (received - source) * 1e-6))
    out.update(latency_figures("player_late", late * 1e-6))
    out.update(latency_figures("e2e_sent", (received - sent) * 1e-6))
    return out


def _number(text) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        return 0.0


TIME_RULE_DROPS = ("discarded_at_time_jump", "too_old_lagging_sensor", "rejected_stamp")
ESTIMATOR_REFUSALS = ("too_old", "rejected_nonfinite", "rejected_duplicate", "discarded")


def reading_counts(diagnostics: dict[str, dict], messages_sent: int) -> dict:
    """Readings taken, dropped (by reason) and messages lost from the node's final /diagnostics
    (statuses by name without the node prefix: ``input queue``, ``sensor <name>``, ``solver``)."""
    queue = diagnostics.get("input queue", {}).get("values", {})
    sensors = [s["values"] for n, s in diagnostics.items() if n.startswith("sensor ")]
    reasons = {"queue_full": int(_number(queue.get("dropped")))}
    for name in TIME_RULE_DROPS:
        reasons[name] = int(_number(queue.get(f"samples {name}")))
    for what in ESTIMATOR_REFUSALS:
        reasons[what] = sum(int(_number(v.get(what))) for v in sensors)
    late = sum(int(_number(v.get("late"))) for v in sensors)
    received = int(_number(queue.get("messages")))
    solver = diagnostics.get("solver", {}).get("values", {})
    return {"readings_taken": int(_number(queue.get("queued"))), "dropped": sum(reasons.values()),
            "dropped_by_reason": {k: v for k, v in reasons.items() if v},
            "late_used": late, "messages_sent": messages_sent, "messages_received": received,
            "lost": max(messages_sent - received, 0),
            "lost_reported": int(_number(queue.get("lost_in_dds"))),
            "unaccounted_readings": int(_number(queue.get("unaccounted_readings"))),
            "node_keyframes": int(_number(solver.get("keyframes"))),
            "node_update_mean_ms": _number(solver.get("update_mean_ms")),
            "node_update_p99_ms": _number(solver.get("update_p99_ms"))}


def _bag_readings(config: Path, bag: Path):
    """(mech, [(log time ns, readings of one message)], the node's epoch ns) of the bag's sensor
    messages."""
    from mbfg_ros.model.validation import load_rig
    from mbfg_ros.replay.bag_input import SENSOR, BagInput
    mech = load_rig(config).mech
    messages = [(log_ns, payload) for kind, _, log_ns, payload in BagInput(bag, mech, truth=False).records()
                if kind == SENSOR]
    first = next((m[0] for _, m in messages if m), None)
    if first is None:
        raise CliError(f"the bag {bag} holds no reading of the config {config}")
    return mech, messages, (first.stamp_ns // 1_000_000_000) * 1_000_000_000


def estimator_alone(config: Path, bag: Path) -> dict:
    """The bag's readings fed to the node's Estimator (the node's settings, its epoch, one pop
    after each message) in this thread: CPU and wall seconds of the feed (reading the bag not
    counted), the estimator's own per-keyframe CPU times, readings and keyframes."""
    from mbfg_ros.estimation.estimator import Estimator
    mech, messages, epoch = _bag_readings(config, bag)
    messages = [m for _, m in messages]
    est = Estimator(mech, mech.config.estimator)
    add, pop = est.add_sample, est.pop_estimates
    estimates = 0
    w0, c0 = time.perf_counter(), time.thread_time()
    for m in messages:
        for r in m:
            add(r.sensor, (r.stamp_ns - epoch) * 1e-9, r.value)
        estimates += len(pop())
    cpu, wall = time.thread_time() - c0, time.perf_counter() - w0
    timing = est.health.timing
    kf = max(est.health.keyframes, 1)
    return {"estimator_cpu_s": cpu, "estimator_wall_s": wall, "readings_sent": sum(map(len, messages)),
            "estimator_keyframes": est.health.keyframes, "estimator_estimates": estimates,
            "keyframe_rate": est.cfg.keyframe_rate, "estimator_cpu_ms_per_keyframe": cpu / kf * 1e3,
            "estimator_cpu_p50_ms": timing.cpu.percentile(50),
            "estimator_cpu_p99_ms": timing.cpu.percentile(99), "estimator_cpu_max_ms": timing.cpu.max}


def estimator_paced(config: Path, bag: Path) -> dict:
    """The same feed at the bag's pace, as the node gets it: this thread sleeps until the next
    ISAM2 update's readings are all due (each message due at its log time from the start; the
    wake-ups at most one update period apart, as the node's intake ticks), then takes every
    message due. No ROS. Its CPU beside the back-to-back feed's is what waking costs the
    estimator itself on this machine (cold caches after each sleep); node CPU over it is what the
    node's shell costs on top of the estimator it wraps, like for like. As in the node, the
    model-uncertainty search works in the time spare before each wake-up."""
    from mbfg_ros.estimation.estimator import Estimator
    from mbfg_ros.ros.node_intake import NodeIntake
    mech, messages, epoch = _bag_readings(config, bag)
    est = Estimator(mech, mech.config.estimator)
    if est.uncertainty is not None:
        est.uncertainty.background = True
    period = est.keyframes_per_update * est.h
    log0 = messages[0][0]
    due = np.array([(t - log0) * 1e-9 for t, _ in messages])
    stamps = [max((r.stamp_ns for r in m), default=0) for _, m in messages]
    add, pop = est.add_sample, est.pop_estimates
    i, n = 0, len(messages)
    w0, c0 = time.monotonic(), time.thread_time()
    while i < n:
        now = time.monotonic() - w0
        target = est.next_estimate_stamp()
        wake = now + period
        if target is not None:             # the first message past the next update's newest keyframe
            j = i
            while j < n and (stamps[j] - epoch) * 1e-9 <= target:
                j += 1
            if j < n:
                wake = min(wake, due[j])
        est.spare_time(w0 + wake - NodeIntake.SPARE_MARGIN)
        now = time.monotonic() - w0
        if wake > now:
            time.sleep(wake - now)
        now = time.monotonic() - w0
        while i < n and due[i] <= now:
            for r in messages[i][1]:
                add(r.sensor, (r.stamp_ns - epoch) * 1e-9, r.value)
            i += 1
        pop()
    return {"estimator_paced_cpu_s": time.thread_time() - c0,
            "estimator_paced_wall_s": time.monotonic() - w0, "update_period_s": period}


# ------------------------------------------------------------------------------------------
# one run
class CaseFailed(CliError):
    """A process of the case failed or the node did not get through the data in time."""


def _status(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _fail(what: str, *procs) -> CaseFailed:
    tails = []
    for p in procs:
        for name in p.logs:
            lines = p.log_text(name).splitlines()[-15:]
            tails.append(f"--- {name} (exit {p.poll().get(name)}):\n" + "\n".join(lines))
    return CaseFailed(what + ("\n" + "\n".join(tails) if tails else ""))


def run_case(case: NodeCase, duration: float, work: Path, outputs: str = "joint_states",
             say=print) -> dict:
    """One run of ``case`` with ``duration`` s of data in the folder ``work`` (bag, logs); its
    figures (see the module docstring)."""
    from mbfg_ros.io.estimate_messages import OutputNames, output_topics
    from mbfg_ros.model.validation import load_rig
    from mbfg_ros.ros.launch_description import Description, ProcessSpec, estimator_description
    from mbfg_ros.ros.processes import NodeProcesses, ros_environment

    t_case = time.perf_counter()
    load_before = list(os.getloadavg())
    work.mkdir(parents=True, exist_ok=True)
    bag = work / "bag"
    say(f"  recording {duration:g} s of {case.name} ...")
    record_bag(case, duration, bag)
    log_ns = bag_log_times(bag)
    span_s = (int(log_ns[-1]) - int(log_ns[0])) * 1e-9
    mech = load_rig(case.config).mech
    names = OutputNames()
    probe_out = work / "probe.npz"
    probe_status = work / "probe.npz.status.json"
    times_out = work / "published.npy"
    for f in (probe_out, probe_status, times_out):
        f.unlink(missing_ok=True)
    probe_cmd = [sys.executable, "-m", "mbfg_ros.ros.latency_probe", "--estimator", names.namespace,
                 "--out", str(probe_out)]
    if outputs == "all":
        for topic, msgtype in output_topics(mech, names).items():
            if topic not in ("/diagnostics", "/tf_static", names.topic("joint_states")):
                probe_cmd += ["--topic", f"{msgtype}:{topic}"]
    description = estimator_description(str(case.config))
    description.processes.append(ProcessSpec("latency_probe", tuple(probe_cmd)))
    env = ros_environment(work / "logs")
    nodes = NodeProcesses(description, work / "logs", env)
    player = NodeProcesses(Description("player", [], [ProcessSpec(
        "bag_player", (sys.executable, "-m", "mbfg_ros.ros.timed_bag_player", str(bag),
                       "--times", str(times_out)))]), work / "logs", env)
    try:
        nodes.start()
        node_pid = nodes.procs["mbfg_estimator"].pid
        probe_pid = nodes.procs["latency_probe"].pid
        say(f"  starting the node (ROS_DOMAIN_ID {env['ROS_DOMAIN_ID']}) ...")
        end = time.monotonic() + 600.0                   # the first run builds the step function
        while True:
            st = _status(probe_status)
            if st.get("publisher_matched") and st.get("diagnostics_count", 0) >= 1:
                break
            if nodes.exited():
                raise _fail(f"{case.name}: a process exited before the node was up", nodes)
            if time.monotonic() > end:
                raise _fail(f"{case.name}: the node was not up within 600 s", nodes)
            time.sleep(0.1)
        cpu = {"node": CpuSamples(node_pid), "probe": CpuSamples(probe_pid)}
        for c in cpu.values():
            c.sample()
        player.start()
        cpu["player"] = CpuSamples(player.procs["bag_player"].pid)
        say(f"  playing {span_s:.1f} s ...")
        end = time.monotonic() + 600.0 + 3 * duration
        while player.poll()["bag_player"] is None:
            for c in cpu.values():
                c.sample()
            if nodes.exited():
                raise _fail(f"{case.name}: a process exited while the bag played", nodes, player)
            if time.monotonic() > end:
                raise _fail(f"{case.name}: the player did not finish", nodes, player)
            time.sleep(0.1)
        if player.poll()["bag_player"] != 0:
            raise _fail(f"{case.name}: the bag player failed", player)
        # until the node has gone through everything: no new estimate for SETTLE_S and a
        # /diagnostics after that (its counts are then final)
        last_count, since = -1, time.monotonic()
        end = time.monotonic() + 120.0 + 3 * duration
        while True:
            for c in cpu.values():
                c.sample()
            st = _status(probe_status)
            if st.get("estimates", 0) != last_count:
                last_count, since = st.get("estimates", 0), time.monotonic()
            quiet = time.monotonic() - since
            diag_after = st.get("diagnostics_ns", 0) > (st.get("last_estimate_ns") or 0) + SETTLE_S * 1e9
            if quiet >= SETTLE_S and diag_after:
                break
            if nodes.exited():
                raise _fail(f"{case.name}: a process exited after the bag", nodes)
            if time.monotonic() > end:
                raise _fail(f"{case.name}: the node did not settle after the bag", nodes)
            time.sleep(0.1)
        for c in cpu.values():
            c.sample()
        codes = nodes.stop()
    finally:
        player.stop()
        nodes.stop()
    if codes.get("latency_probe") != 0 or not probe_out.exists():
        raise _fail(f"{case.name}: the probe wrote no result (exit {codes.get('latency_probe')})", nodes)
    load_after = list(os.getloadavg())

    if not times_out.exists():
        raise _fail(f"{case.name}: the bag player noted no publication times", player)
    published = np.load(times_out)
    t0, _ = player_schedule(published, log_ns)
    data = np.load(probe_out)
    final = json.loads(str(data["status"]))
    stamp, received = data["stamp"], data["received"]
    t_end = int(received.max()) if received.size else int(published[-1])
    out = {"case": case.name, "duration_s": span_s, "estimates_received": int(stamp.size)}
    alone = estimator_alone(case.config, bag)
    node_cpu = cpu["node"].between(t0, t_end)
    out.update(alone)
    out["node_cpu_s"] = node_cpu
    out["node_cpu_per_s"] = node_cpu / span_s
    out["estimator_cpu_per_s"] = alone["estimator_cpu_s"] / span_s
    out["overhead_ratio"] = (node_cpu / alone["estimator_cpu_s"] if alone["estimator_cpu_s"] > 0
                             else float("nan"))
    say(f"  the estimator alone at the bag's pace ({span_s:.1f} s) ...")
    paced = estimator_paced(case.config, bag)
    out.update(paced)
    out["estimator_paced_cpu_per_s"] = paced["estimator_paced_cpu_s"] / span_s
    out["overhead_ratio_paced"] = (node_cpu / paced["estimator_paced_cpu_s"]
                                   if paced["estimator_paced_cpu_s"] > 0 else float("nan"))
    say(f"  the machine's cost of pacing (a fixed native piece, a sleep of "
        f"{paced['update_period_s'] * 1e3:.1f} ms between) ...")
    machine = paced_factor(paced["update_period_s"])
    out["machine_paced_factor"] = machine.factor
    out["machine_piece_us"] = machine.back_to_back_us
    out["machine_piece_paced_us"] = machine.paced_us
    out.update(latencies(stamp, data["source"], received, log_ns, published))
    out.update(reading_counts(final.get("diagnostics", {}), int(published.size)))
    # the node's CPU in each whole second of data (the start-up transient shows in the first)
    second = 1_000_000_000
    out["node_cpu_timeline"] = [round(cpu["node"].between(t0 + k * second, t0 + (k + 1) * second), 3)
                                for k in range(int(span_s))]
    out["player_cpu_per_s"] = cpu["player"].between(t0, int(published[-1])) / span_s
    out["probe_cpu_per_s"] = cpu["probe"].between(t0, t_end) / span_s
    out["live_wall_s"] = (t_end - t0) * 1e-9
    out["wall_s"] = time.perf_counter() - t_case
    out["outputs"] = outputs
    out["other_outputs_received"] = final.get("topic_counts", {})
    out["load_before"] = load_before
    out["load_after"] = load_after
    out["cpu_count"] = os.cpu_count()
    out["work_dir"] = str(work)
    return out


# ------------------------------------------------------------------------------------------
# report
WORST = ("dropped", "lost", "lost_reported", "unaccounted_readings")


def combine_runs(runs: list[dict]) -> dict:
    """The case's figures over repeated runs: the median of every number (rounded for counts;
    the largest for ``dropped`` and ``lost``), the first run's other entries, and every run
    under ``runs``."""
    out = dict(runs[0])
    if len(runs) > 1:
        for key, value in runs[0].items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                vals = [r[key] for r in runs]
                median = float(np.median(vals))
                out[key] = max(vals) if key in WORST else (
                    int(round(median)) if isinstance(value, int) else median)
        out["load_before"] = runs[0]["load_before"]
        out["load_after"] = runs[-1]["load_after"]
        out["runs"] = runs
    return out


def progress_line(tag: str, r: dict) -> str:
    """One run's figures in a line, its CPU seconds beside its wall time."""
    return (f"{tag}: node {r['node_cpu_s']:.2f} s CPU ({r['node_cpu_per_s']:.3f}/s), estimator "
            f"{r['estimator_cpu_s']:.2f} s ({r['estimator_cpu_per_s']:.3f}/s), x{r['overhead_ratio']:.1f}; "
            f"at the bag's pace {r['estimator_paced_cpu_per_s']:.3f}/s, x{r['overhead_ratio_paced']:.1f}; "
            f"the machine's pacing factor x{r['machine_paced_factor']:.1f}; "
            f"e2e p50 {r['e2e_p50_ms']:.1f} p99 {r['e2e_p99_ms']:.1f} max {r['e2e_max_ms']:.1f} ms; "
            f"{r['readings_taken']} readings taken, {r['dropped']} dropped, {r['lost']} lost; player "
            f"{r['player_cpu_per_s']:.3f}/s; {r['duration_s']:.1f} s of data in {r['live_wall_s']:.1f} s "
            f"wall (the case {r['wall_s']:.0f} s); load {r['load_before'][0]:.2f} -> "
            f"{r['load_after'][0]:.2f}")


def format_row(r: dict) -> str:
    return (f"{r['case']:<11} {r['keyframe_rate']:>6.0f} {r['node_cpu_per_s']:>7.3f} "
            f"{r['estimator_cpu_per_s']:>7.3f} {r['overhead_ratio']:>6.1f} "
            f"{r['estimator_paced_cpu_per_s']:>7.3f} {r['overhead_ratio_paced']:>6.1f} "
            f"{r['machine_paced_factor']:>5.1f} | {r['e2e_p50_ms']:>6.1f} "
            f"{r['e2e_p99_ms']:>6.1f} {r['e2e_max_ms']:>6.1f} | {r['readings_taken']:>7d} "
            f"{r['dropped']:>5d} {r['lost']:>5d} | {r['player_cpu_per_s']:>7.3f} "
            f"{r['player_late_p99_ms']:>6.1f} | "
            f"{r['load_before'][0]:>4.1f}->{r['load_after'][0]:<4.1f}")


def format_table(results: list[dict]) -> str:
    head = (f"{'case':<11} {'kf Hz':>6} {'node/s':>7} {'est/s':>7} {'ratio':>6} {'paced/s':>7} "
            f"{'ratio':>6} {'mach':>5} | {'e2e50':>6} "
            f"{'e2e99':>6} {'e2emax':>6} | {'taken':>7} {'drop':>5} {'lost':>5} | {'player/s':>7} "
            f"{'late99':>6} | load")
    lines = [head, "-" * len(head)]
    for r in results:
        for run in r.get("runs", [r]):
            lines.append(format_row(run))
        if "runs" in r:
            lines.append(format_row(r).replace(r["case"].ljust(11), "  median   ", 1))
    return "\n".join(lines)


EXPLAIN = ("node/s, est/s: CPU seconds per second of data of the node process and of the estimator "
           "alone on the same readings (this process, its thread's CPU time); ratio: node / estimator. "
           "paced/s: the estimator alone fed at the bag's pace (sleeping until the next update's "
           "readings are due, as the node does), and node / that. mach: what this machine charges for "
           "pacing, apart from the estimator: a fixed piece of native work (LAPACK and BLAS, ~0.1 ms) "
           "with a sleep of the update period after each, over the same piece back to back (CPU "
           "time, medians; 1 where waking costs nothing: then ratio and paced ratio agree). "
           "e2e: sensor stamp (put on the wall clock by the player's schedule) to the estimate received "
           "by a subscriber process over DDS, ms (p50, p99, max). taken: readings the node queued; "
           "drop: readings it took but did not use; lost: messages published that it never took. "
           "player/s: the bag player's CPU per second of data; late99: its lateness p99, ms (in e2e). "
           "load: the 1-minute load average before -> after the case.")


def run_node_bench(args: argparse.Namespace) -> int:
    """Run the --node cases and print/write their figures; returns the exit status."""
    if not (args.node_duration > 0):
        raise CliError(f"--node-duration must be positive (value: {args.node_duration})")
    if args.node_repeat < 1:
        raise CliError(f"--node-repeat: at least 1 run per case (value: {args.node_repeat})")
    names = list(dict.fromkeys(c.strip() for c in args.node_cases.split(",") if c.strip()))
    if not names:
        raise CliError("--node-cases: no case given")
    cases = [node_case(n) for n in names]           # validate before any long work
    out_dir = Path(args.out) if getattr(args, "out", None) else (
        Path("out") / "bench_node" / time.strftime("%Y%m%d-%H%M%S"))
    json_path = getattr(args, "json", None)
    quiet = getattr(args, "no_progress", False)
    json_dir = Path(json_path).parent if json_path not in (None, "-") else None
    for option, folder in (("--out", out_dir), ("--json", json_dir)):
        if folder is not None:
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise CliError(f"{option}: cannot create {folder} ({exc.strerror})") from None

    def say(text: str) -> None:
        if not quiet:
            print(text, file=sys.stderr, flush=True)

    w0, c0 = time.perf_counter(), os.times()
    say(f"mbfg benchmark --node: {', '.join(names)}, {args.node_duration:g} s of data each, "
        f"{args.node_repeat} run(s); load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; "
        f"work in {out_dir}/")
    results = []
    for k, case in enumerate(cases):
        runs = []
        for i in range(args.node_repeat):
            tag = f"{case.name} ({k + 1}/{len(cases)}"
            tag += f", run {i + 1}/{args.node_repeat})" if args.node_repeat > 1 else ")"
            say(f"{tag}: {CASE_TEXT[case.name]}")
            work = out_dir / (case.name if args.node_repeat == 1 else f"{case.name}_{i + 1}")
            if work.exists():
                shutil.rmtree(work)
            r = run_case(case, args.node_duration, work, args.node_outputs, say)
            (work / "result.json").write_text(json.dumps(r, indent=2) + "\n")
            runs.append(r)
            # the progress line of the run: CPU beside wall time
            print(progress_line(tag, r), file=sys.stderr, flush=True)
        results.append(combine_runs(runs))
    wall = time.perf_counter() - w0
    c1 = os.times()
    this_cpu = (c1.user - c0.user) + (c1.system - c0.system)
    written = None
    if json_path:
        text = json.dumps({r["case"]: r for r in results}, indent=2)
        if json_path == "-":
            print(text)
        else:
            Path(json_path).write_text(text + "\n")
            written = json_path
    print(format_table(results))
    print(EXPLAIN)
    print(f"{len(results)} case(s) in {wall:.0f} s wall; this process {this_cpu:.0f} s CPU (recording, "
          f"estimator alone); load average now {', '.join(f'{x:.2f}' for x in os.getloadavg())} on "
          f"{os.cpu_count()} CPUs")
    if written:
        print(f"wrote {written}")
    return 0
