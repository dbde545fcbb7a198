"""One replay run: a bag's sensor readings through the estimator, as fast as possible.

The readings are decoded as the ROS node decodes them (:class:`~mbfg_ros.replay.bag_input.BagInput`),
checked for time jumps as the ROS node checks them (:mod:`~mbfg_ros.io.time_jumps`: on a jump the
estimator finishes what it has and is reset), put back into header-stamp order over a bounded
horizon (:class:`~mbfg_ros.replay.stamp_order.StampOrder`; default the config's ``sensor_wait`` +
50 ms) and fed to the estimator with stamps relative to an epoch (the first stamp's whole second,
so float seconds keep sub-microsecond precision). Every
keyframe the estimator closes (with ``lagged``: every smoothed keyframe leaving the window, and
at the end the smoothed window itself) is logged with its forces and, with an output path,
written as the node's messages; /diagnostics once per second of bag time.

Timings separate the estimator's own time (``add_sample``, ``flush``, popping estimates) from the
replay's: reading and decoding, reordering, truth, forces, building and writing messages.
"""
from __future__ import annotations

import math
import os
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mbfg_ros.errors import MbfgError
from mbfg_ros.estimation.estimator import Estimator
from mbfg_ros.estimation.forces_batch import BatchForces
from mbfg_ros.estimation.outputs import Estimate, Health, SensorCounts
from mbfg_ros.estimation.status import EstimatorStatus
from mbfg_ros.io.estimate_messages import OutputNames, diagnostics_message
from mbfg_ros.io.sensor_health import OK, WARN
from mbfg_ros.io.sensor_inputs import InputRouter, Reading
from mbfg_ros.io.topic_names import resolve_topic
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.replay.bag_input import SENSOR, BagInput
from mbfg_ros.replay.estimate_log import EstimateLog, EstimateSeries
from mbfg_ros.replay.output_bag import OutputBag
from mbfg_ros.replay.output_batch import OutputWriter, diagnostics_due
from mbfg_ros.replay.pipeline import ReaderProcess, WriterProcess
from mbfg_ros.replay.residuals import SampleLog
from mbfg_ros.replay.stamp_order import StampOrder
from mbfg_ros.io.time_jumps import DEFAULT_MAX_TIME_GAP, TimeJumps, lagging_limit
from mbfg_ros.replay.truth import TruthCollector, TruthSeries

FORCES_BLOCK = 64
"""Keyframes per call of the forces function (the estimator hands out a few at a time)."""

WRITE_BATCH = 64
"""Keyframes the online replay holds before computing their forces and writing them at once
(fewer when one is due for /diagnostics, which is built as its keyframe arrives)."""

REORDER_MARGIN = 0.05
"""s added to the config's sensor_wait for the default reorder horizon."""

AUTO_PROCESSES_SECONDS = 20.0
"""With ``processes=None`` (``mbfg replay``'s default), bags holding more than this many seconds
are written in their own process, and read in one too unless they are decoded in bulk (MCAP);
each process takes 1-2 s of CPU to start."""


@dataclass
class ReplayOptions:
    """How to replay. ``out`` None: no output bag. ``covariance``: the estimator computes the DOF
    covariance (needed for the plots' bands; costs time); ``covariance_topics``: write it too."""
    remap: dict[str, str] = field(default_factory=dict)
    lagged: bool = False
    covariance: bool = False
    covariance_topics: bool = False
    out: Path | None = None
    storage: str = "mcap"
    overwrite: bool = False
    names: OutputNames = field(default_factory=OutputNames)
    reorder_window: float | None = None       # s; None: sensor_wait + REORDER_MARGIN
    max_time_gap: float = DEFAULT_MAX_TIME_GAP  # s: a stamp this far after the newest is a time jump
    truth: bool = True
    progress: bool = False
    diagnostics_period: float = 1.0           # s of bag time
    processes: bool | None = False            # read/write in own processes; None: long bags on 2+ cores.
                                              # They start with multiprocessing's spawn: a calling
                                              # script needs the ``if __name__ == "__main__":`` guard


@dataclass
class ReplayResult:
    bag: Path
    mech: Mechanism
    options: ReplayOptions
    input: BagInput
    order: StampOrder
    jumps: TimeJumps
    estimates: EstimateSeries
    truth: TruthSeries | None
    samples: SampleLog
    counts: dict[str, SensorCounts]
    health: Health
    layout: object                       # the estimator's StateLayout (for residuals)
    epoch_ns: int
    eras: list[tuple[float, float]]      # s (relative to the epoch): first and last stamp of the
                                         # readings used, per era (eras are split by time jumps)
    timings: dict[str, float]            # s: total (wall), read_sensors, truth, estimator, forces,
                                         # outputs, other (reordering, bookkeeping); cpu (this process),
                                         # estimator_cpu; with processes: reader_process, writer_process
                                         # (their busy wall time), reader_cpu, writer_cpu
    output: dict | None                  # the output bag's summary
    reorder_window: float
    truth_unmatched: int = 0             # truth joint-state messages without the config's joints
    smoothing: list | None = None        # --smooth: per window the smoother's WindowReport (keyframes,
                                         # Gauss-Newton iterations, costs, converged); None online
    eras_not_estimated: int = 0          # --smooth: eras with no finite reading of any sensor (their
                                         # readings counted as not finite): nothing smoothed there

    @property
    def duration(self) -> float:
        """s of sensor time replayed: first to last reading's stamp, summed over the eras."""
        return sum(max(0.0, b - a) for a, b in self.eras)

    @property
    def first_stamp(self) -> float:
        return self.eras[0][0] if self.eras else 0.0

    @property
    def realtime_factor(self) -> float:
        w = self.timings["total"]
        return self.duration / w if w > 0 else math.inf

    @property
    def estimator_realtime_factor(self) -> float:
        w = self.timings["estimator"]
        return self.duration / w if w > 0 else math.inf

    @property
    def cpu_time(self) -> float:
        """s of CPU of every process of the replay (this one, and the reader and writer if used)."""
        t = self.timings
        return t["cpu"] + t.get("reader_cpu", 0.0) + t.get("writer_cpu", 0.0)


class _Progress:
    """tqdm bar over the bag's log time (bag seconds; the rate is bag s per wall s)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.bar = None
        self.done = 0.0
        self.start_ns = 0

    def update(self, inp: BagInput, log_ns: int) -> None:
        if not self.enabled:
            return
        if self.bar is None:
            from tqdm import tqdm
            self.start_ns = inp.start_ns or log_ns
            total = max(((inp.end_ns or log_ns) - self.start_ns) / 1e9, 1e-9)
            self.bar = tqdm(total=round(total, 3), unit=" bag s", desc="replay", leave=False,
                            file=sys.stderr, mininterval=0.2,
                            bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.1f}/{total:.1f} bag s "
                                       "[{elapsed}<{remaining}, {rate_noinv_fmt}]")
        now = (log_ns - self.start_ns) / 1e9
        if now - self.done >= 0.1:
            self.bar.update(now - self.done)
            self.done = now

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def use_processes(opt: ReplayOptions, mech: Mechanism, inp: BagInput) -> bool:
    """Whether to read and write in their own processes (needs the config file to load there)."""
    if opt.processes is False or mech.config.source is None:
        return False
    if opt.processes:
        return True
    return (os.cpu_count() or 1) >= 2 and inp.span_seconds() > AUTO_PROCESSES_SECONDS


def replay_bag(bag: str | Path, mech: Mechanism, options: ReplayOptions | None = None) -> ReplayResult:
    """Replay ``bag`` through an estimator of ``mech`` (its config's estimator settings)."""
    opt = options or ReplayOptions()
    t_start, cpu_start = time.perf_counter(), time.process_time()
    inp = BagInput(bag, mech, opt.remap, truth=opt.truth)
    est = Estimator(mech, lagged=opt.lagged, covariance=opt.covariance)
    cfg = est.cfg
    window = opt.reorder_window if opt.reorder_window is not None else cfg.sensor_wait + REORDER_MARGIN
    order = StampOrder(horizon=window)
    jumps = TimeJumps(max_time_gap=opt.max_time_gap, max_lag=lagging_limit(cfg.lag))
    truth = TruthCollector(mech) if opt.truth else None
    log = EstimateLog(mech)
    samples = SampleLog()
    node_name = opt.names.namespace      # the node's fully qualified name, as the node's own
    # the bag's topic of each config topic (resolved at the root, then --remap)
    bag_topic_names = {t: opt.remap.get(resolve_topic(t), resolve_topic(t))
                       for t in InputRouter(mech).topics}
    parallel = use_processes(opt, mech, inp)
    # a bag decoded in bulk (MCAP) is read here unless asked (cheaper than starting a process)
    reader = (ReaderProcess(inp, truth, mech.config.source)
              if parallel and (opt.processes is True or not inp.bulk) else None)
    out = None
    if opt.out is not None:
        custom = {"mbfg.replay_of": str(Path(bag).resolve()), "mbfg.rig": mech.config.name}
        if parallel:
            out = WriterProcess(opt.out, mech.config.source, opt.names, covariance=opt.covariance_topics,
                                storage=opt.storage, overwrite=opt.overwrite, custom_data=custom)
        else:
            out = OutputBag(opt.out, mech, opt.names, covariance=opt.covariance_topics, storage=opt.storage,
                            overwrite=opt.overwrite, custom_data=custom)
    batch_forces = BatchForces(mech, est.fn.sym, block=FORCES_BLOCK)
    # the node's messages in batches when the templates are exact (not with the covariance topics)
    writer = OutputWriter(out, mech, opt.names, batch=not opt.covariance_topics) if out is not None else None
    # (wall clocks only per call: a CPU clock read is a system call, 1-2 us, more than a queued
    # sample costs; the estimator's CPU is its own per-keyframe account, health.timing)
    clock = {"estimator": 0.0, "forces": 0.0, "outputs": 0.0}
    state = {"epoch": None, "first": math.inf, "last": -math.inf, "next_diag": -math.inf, "era": 0}
    eras: list[tuple[float, float]] = []
    perf = time.perf_counter
    add_sample = est.add_sample
    progress = _Progress(opt.progress)
    problems_now = (lambda: reader.problems) if reader is not None else inp.problems

    def feed(reading: Reading) -> None:
        if state["epoch"] is None:
            state["epoch"] = (reading.stamp_ns // 1_000_000_000) * 1_000_000_000
        t = (reading.stamp_ns - state["epoch"]) * 1e-9
        t0 = perf()
        status = add_sample(reading.sensor, t, reading.value)
        clock["estimator"] += perf() - t0
        if status == "queued" or status == "late":
            samples.add(reading.sensor, t, reading.value, state["era"])
            if t < state["first"]:
                state["first"] = t
            if t > state["last"]:
                state["last"] = t

    # keyframes are held (with their known efforts, taken as they come) until WRITE_BATCH of them
    # or one due for /diagnostics, then their forces are computed, logged and written at once; the
    # diagnostics are built as their keyframe arrives, as before
    pending: list[tuple[Estimate, np.ndarray]] = []
    pending_due: list[int] = []

    def write(rows: list[Estimate]) -> None:
        if rows:
            t0 = perf()
            base = len(pending)
            pending.extend((e, est.known_efforts(e.stamp)) for e in rows)
            if writer is not None:
                due, state["next_diag"] = diagnostics_due([e.stamp for e in rows], state["next_diag"],
                                                          opt.diagnostics_period)
                pending_due.extend(base + i for i in due)
            clock["forces"] += perf() - t0
        if pending and (pending_due or len(pending) >= WRITE_BATCH):
            flush()

    def flush() -> None:
        if not pending:
            return
        t0 = perf()
        rows = [e for e, _ in pending]
        X = np.stack([e.x for e in rows])
        lay, n = est.lay, est.lay.n
        q, v, a = X[:, :n], X[:, n:2 * n], X[:, 2 * n:3 * n]
        tau = np.stack([tk for _, tk in pending])
        F, T, cells = batch_forces(q, v, a, X[:, lay.L], X[:, lay.U], tau)     # one mapped call
        clock["forces"] += perf() - t0
        t1 = perf()
        log.add_rows(rows, F, T, cells, state["era"])
        if writer is not None:
            stamps = np.array([state["epoch"] + int(round(e.stamp * 1e9)) for e in rows], np.int64)

            def diagnostic(i: int):
                now = est.estimate().stamp if est.estimate() is not None else rows[i].stamp
                return diagnostics_message(mech, EstimatorStatus.of(est), now, int(stamps[i]), node_name,
                                           extra=[_replay_status(inp, problems_now(), order, jumps, rows[i].stamp)],
                                           topic_names=bag_topic_names)
            writer.write(stamps, (q, v, a, np.stack([e.effort for e in rows]), F, T, cells), rows,
                         lambda: batch_forces.as_forces(rows, F, T, cells), list(pending_due), diagnostic)
        pending.clear()
        pending_due.clear()
        clock["outputs"] += perf() - t1

    def emit() -> None:
        t0 = perf()
        filtered = est.pop_estimates()
        lagged = est.pop_lagged() if opt.lagged else None
        clock["estimator"] += perf() - t0
        write(lagged if opt.lagged else filtered)

    def finish_era() -> None:
        """Feed what the reorder buffer holds and close every keyframe the data reaches (the end
        of the bag, or before a time jump); with ``lagged``, the smoothed window too."""
        for _, r in order.drain():
            feed(r)
        t0 = perf()
        est.flush()
        tail = est.smoothed_window() if opt.lagged and est.started else []
        clock["estimator"] += perf() - t0
        emit()
        flush()
        if opt.lagged:
            done = log.last_keyframe if len(log) else -1
            write([e for e in tail if e.keyframe > done])
            flush()

    try:
        with out if out is not None else nullcontext():
            for kind, topic, log_ns, payload in (reader.records() if reader else inp.records()):
                if kind == SENSOR:
                    for reading in payload:
                        verdict = jumps.check(topic, reading.sensor, reading.stamp_ns, (topic, reading))
                        if verdict in ("stale", "too_old", "held"):
                            continue
                        if verdict == "jump":
                            finish_era()
                            est.reset(jumps.jumps[-1].reason)
                            order.restart()
                            if state["first"] <= state["last"]:
                                eras.append((state["first"], state["last"]))
                            state.update(first=math.inf, last=-math.inf, era=state["era"] + 1,
                                         next_diag=-math.inf)
                        # readings held until their new time persisted go first
                        for held_topic, held in (*jumps.released(), (topic, reading)):
                            for _, r in order.push(held_topic, held):
                                feed(r)
                    emit()
                else:
                    t0 = perf()
                    truth.add(topic, payload)
                    inp.time_truth += perf() - t0
                progress.update(inp, log_ns)
            finish_era()
            if state["first"] <= state["last"]:
                eras.append((state["first"], state["last"]))
            if not len(log):
                raise MbfgError(_nothing_estimated(inp, est))
            if writer is not None:
                t1 = perf()
                writer.flush()
                clock["outputs"] += perf() - t1
    finally:
        progress.close()
        if reader is not None:
            reader.close()
    total = time.perf_counter() - t_start
    if reader is None:
        read, truth_time = inp.time_sensors, inp.time_truth
    else:
        read, truth_time = reader.wait, 0.0
    writer_wait = out.wait if isinstance(out, WriterProcess) else 0.0
    timings = {"total": total, "read_sensors": read, "truth": truth_time, "estimator": clock["estimator"],
               "forces": clock["forces"], "outputs": clock["outputs"] + writer_wait}
    timings["other"] = max(0.0, total - sum(v for k, v in timings.items() if k != "total"))
    timings["cpu"] = time.process_time() - cpu_start
    timings["estimator_cpu"] = est.health.timing.cpu.total / 1e3
    if reader is not None:
        timings["reader_process"] = inp.time_sensors + inp.time_truth
        timings["reader_cpu"] = reader.cpu
    if isinstance(out, WriterProcess):
        timings["writer_process"] = out.busy
        timings["writer_cpu"] = out.cpu
    epoch = state["epoch"] or 0
    return ReplayResult(
        bag=Path(bag), mech=mech, options=opt, input=inp, order=order, jumps=jumps, estimates=log.series(),
        truth=truth.series(epoch) if truth is not None else None, samples=samples,
        counts={k: SensorCounts(**vars(v)) for k, v in est.counts().items()}, health=est.health,
        layout=est.lay, epoch_ns=epoch, eras=eras,
        timings=timings, output=out.summary() if out is not None else None, reorder_window=window,
        truth_unmatched=truth.unmatched if truth is not None else 0)


def _replay_status(inp: BagInput, problems_now: dict, order: StampOrder, jumps: TimeJumps, stamp: float):
    """The replay's own status for /diagnostics (name, level, message, values)."""
    problems = sum(sum(c.values()) for c in problems_now.values())
    late = sum(order.out_of_order.values())
    level = WARN if (problems or jumps.jumps or inp.missing) else OK
    message = "ok" if level == OK else "; ".join(
        m for m in (f"{problems} messages with problems" if problems else "",
                    f"{len(jumps.jumps)} time jumps" if jumps.jumps else "",
                    f"missing topics: {', '.join(s.topic for s in inp.missing)}" if inp.missing else "") if m)
    return ("replay", level, message, {"bag": str(inp.path), "bag_time": stamp,
                                       "out_of_order_readings": late,
                                       "stale_readings": sum(jumps.stale.values()),
                                       "rejected_stamp": sum(jumps.rejected.values())})


def _nothing_estimated(inp: BagInput, est: Estimator) -> str:
    counts = est.counts()
    received = sum(c.received for c in counts.values())
    if not received:
        probs = inp.problems()
        why = "; ".join(f"{t}: " + ", ".join(f"{r} ({n})" for r, n in c.items()) for t, c in probs.items())
        return (f"nothing could be estimated from {str(inp.path)!r}: no usable sensor reading"
                + (f" ({why})" if why else ""))
    parts = ", ".join(f"{name}: {c.received} received, {c.rejected_nonfinite} not finite, "
                      f"{c.rejected_duplicate} duplicates" for name, c in counts.items() if c.received)
    return f"nothing could be estimated from {str(inp.path)!r}: no keyframe was closed ({parts})"
