"""The replay's skeleton, shared by the online replay and the smoothing replay: options, the
output side and the result.

:class:`ReplayOutput` takes keyframes as arrays (from the online estimator's estimates or from
the smoother's windows) and does the rest the same way for both: the forces of a block at once
(:class:`~mbfg_ros.estimation.forces_batch.BatchForces`), the log of the run
(:class:`~mbfg_ros.replay.estimate_log.EstimateLog`), and with an output path the node's messages
(:class:`~mbfg_ros.replay.output_batch.OutputWriter` into an
:class:`~mbfg_ros.replay.output_bag.OutputBag`, or a
:class:`~mbfg_ros.replay.pipeline.WriterProcess`) with /diagnostics once per
``diagnostics_period`` of bag time, built from the estimator's status
(:class:`~mbfg_ros.estimation.status.EstimatorStatus`) plus the replay's own status. It keeps the
time spent on forces and outputs; :func:`replay_timings` puts a run's timings together.
"""
from __future__ import annotations

import math
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from mbfg_ros.estimation.forces_batch import BatchForces
from mbfg_ros.estimation.outputs import Estimate, Health, SensorCounts
from mbfg_ros.estimation.status import EstimatorStatus
from mbfg_ros.intake.sensor_health import OK, WARN
from mbfg_ros.intake.stamp_order import REORDER_WINDOW, SILENCE_TIMEOUT
from mbfg_ros.intake.time_jumps import DEFAULT_MAX_TIME_GAP, TimeJumps
from mbfg_ros.io.estimate_messages import OutputNames, diagnostics_message
from mbfg_ros.io.sensor_inputs import InputRouter
from mbfg_ros.io.topic_names import resolve_topic
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.replay.bag_input import BagInput
from mbfg_ros.replay.estimate_log import EstimateLog, EstimateSeries
from mbfg_ros.replay.output_bag import OutputBag
from mbfg_ros.replay.output_batch import OutputWriter, diagnostics_due
from mbfg_ros.replay.pipeline import WriterProcess
from mbfg_ros.replay.residuals import SampleLog
from mbfg_ros.replay.truth import TruthSeries

AUTO_PROCESSES_SECONDS = 20.0
"""With ``processes=None`` (``mbfg replay``'s default), bags holding more than this many seconds
are written in their own process, and read in one too unless they are decoded in bulk (MCAP);
each process takes 1-2 s of CPU to start."""


@dataclass
class ReplayOptions:
    """How to replay. ``out`` None: no output bag. ``covariance``: the estimator computes the DOF
    covariance (needed for the plots' bands; costs time); ``covariance_topics``: write it too.
    ``reorder_window`` and ``silence_timeout`` are the node's parameters of the same names (the
    stamp order across topics, :mod:`mbfg_ros.intake.stamp_order`, on the bag's log time)."""
    remap: dict[str, str] = field(default_factory=dict)
    lagged: bool = False
    covariance: bool = False
    covariance_topics: bool = False
    out: Path | None = None
    storage: str = "mcap"
    overwrite: bool = False
    names: OutputNames = field(default_factory=OutputNames)
    reorder_window: float | None = None       # s; None: the node's default (REORDER_WINDOW)
    silence_timeout: float = SILENCE_TIMEOUT  # s: a topic silent this long is not waited for
    max_time_gap: float = DEFAULT_MAX_TIME_GAP  # s: a stamp this far after the newest is a time jump
    truth: bool = True
    progress: bool = False
    diagnostics_period: float = 1.0           # s of bag time
    processes: bool | None = False            # read/write in own processes; None: long bags on 2+ cores.
                                              # They start with multiprocessing's spawn: a calling
                                              # script needs the ``if __name__ == "__main__":`` guard

    @property
    def window(self) -> float:
        """s: the reorder window in use."""
        return REORDER_WINDOW if self.reorder_window is None else self.reorder_window


@dataclass
class ReplayResult:
    """One replay run (online or smoothed)."""
    bag: Path
    mech: Mechanism
    options: ReplayOptions
    input: BagInput
    out_of_order: Counter                # topic -> readings fed after a newer one (beyond the reorder window)
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
    reorder_window: float                # s (0 for --smooth: its readings are sorted as arrays)
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


def use_processes(opt: ReplayOptions, mech: Mechanism, inp: BagInput) -> bool:
    """Whether to read and write in their own processes (needs the config file to load there)."""
    if opt.processes is False or mech.config.source is None:
        return False
    if opt.processes:
        return True
    return (os.cpu_count() or 1) >= 2 and inp.span_seconds() > AUTO_PROCESSES_SECONDS


class Progress:
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


class ReplayOutput:
    """The output side of a replay (see the module docstring); a context manager around the
    output bag. ``problems()``: the bag's problems so far, ``out_of_order`` and ``jumps``: the
    intake's counts (the replay's own /diagnostics status reads them when it is built)."""

    def __init__(self, bag: str | Path, mech: Mechanism, opt: ReplayOptions, inp: BagInput, sym, *,
                 parallel: bool, problems: Callable[[], dict], out_of_order: Counter, jumps: TimeJumps,
                 covariance: bool = False, forces_block: int | None = None, mode: str | None = None) -> None:
        self.mech, self.opt, self.inp = mech, opt, inp
        self.problems, self.out_of_order, self.jumps = problems, out_of_order, jumps
        self.log = EstimateLog(mech)
        self.forces = BatchForces(mech, sym) if forces_block is None else BatchForces(mech, sym, block=forces_block)
        self.clock = {"forces": 0.0, "outputs": 0.0}      # s (wall)
        self.next_diagnostics = -math.inf          # s: a keyframe at or past it gets /diagnostics
        # the bag's topic of each config topic (resolved at the root, then --remap)
        self.topic_names = {t: opt.remap.get(resolve_topic(t), resolve_topic(t)) for t in InputRouter(mech).topics}
        self.out = None
        self.writer: OutputWriter | None = None
        if opt.out is not None:
            custom = {"mbfg.replay_of": str(Path(bag).resolve()), "mbfg.rig": mech.config.name}
            if mode:
                custom["mbfg.mode"] = mode
            if parallel:
                self.out = WriterProcess(opt.out, mech.config.source, opt.names, covariance=covariance,
                                         storage=opt.storage, overwrite=opt.overwrite, custom_data=custom)
            else:
                self.out = OutputBag(opt.out, mech, opt.names, covariance=covariance, storage=opt.storage,
                                     overwrite=opt.overwrite, custom_data=custom)
            # the node's messages in batches when the templates are exact (not with the covariance topics)
            self.writer = OutputWriter(self.out, mech, opt.names, batch=not covariance)

    def __enter__(self) -> "ReplayOutput":
        if self.out is not None:
            self.out.__enter__()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        return self.out.__exit__(exc_type, exc, tb) if self.out is not None else False

    def due(self, t: float) -> bool:
        """Whether a keyframe at ``t`` s gets /diagnostics (only with an output bag)."""
        return self.writer is not None and t >= self.next_diagnostics

    # ------------------------------------------------------------------------------------------
    def add(self, epoch_ns: int, t: np.ndarray, keyframe: np.ndarray, era: int, X: np.ndarray,
            effort: np.ndarray, tau: np.ndarray, layout, std: np.ndarray | None,
            rows: Callable[[], Sequence[Estimate]], status: Callable[[Estimate], EstimatorStatus]) -> None:
        """N keyframes of one era: times ``t`` (N,) s since ``epoch_ns``, their ``keyframe``
        indexes, states ``X`` (N, layout width), actuator ``effort`` and known efforts ``tau``
        (N, n), DOF standard deviations ``std`` (N, 2 g; None: unknown). Their forces are computed
        and logged; with an output bag their messages are written, built from ``rows()`` (their
        Estimates, asked for only then) where needed, and /diagnostics after each keyframe due,
        from ``status(row)`` (the estimator's status when it is built)."""
        clock, perf = self.clock, time.perf_counter
        t0 = perf()
        n = layout.n
        q, v, a = X[:, :n], X[:, n:2 * n], X[:, 2 * n:3 * n]
        F, T, cells = self.forces(q, v, a, X[:, layout.L], X[:, layout.U], tau)     # one mapped call
        t1 = perf()
        clock["forces"] += t1 - t0
        self.log.add_arrays(t, keyframe, era, X, effort, std, F, T, cells, layout)
        if self.writer is not None:
            estimates = rows()
            stamps = epoch_ns + np.round(np.asarray(t, float) * 1e9).astype(np.int64)
            due, self.next_diagnostics = diagnostics_due(t, self.next_diagnostics, self.opt.diagnostics_period)

            def diagnostic(i: int):
                st = status(estimates[i])
                now = st.estimate.stamp if st.estimate is not None else estimates[i].stamp
                return diagnostics_message(self.mech, st, now, int(stamps[i]), self.opt.names.namespace,
                                           extra=[self.replay_status(estimates[i].stamp)],
                                           topic_names=self.topic_names)
            self.writer.write(stamps, (q, v, a, effort, F, T, cells), estimates,
                              lambda: self.forces.as_forces(estimates, F, T, cells), due, diagnostic)
        clock["outputs"] += perf() - t1

    def finish(self) -> None:
        """Write what the writer holds (before the output bag closes)."""
        if self.writer is not None:
            t0 = time.perf_counter()
            self.writer.flush()
            self.clock["outputs"] += time.perf_counter() - t0

    def replay_status(self, stamp: float) -> tuple:
        """The replay's own status for /diagnostics (name, level, message, values) at ``stamp`` s."""
        inp, jumps = self.inp, self.jumps
        problems = sum(sum(c.values()) for c in self.problems().values())
        level = WARN if (problems or jumps.jumps or inp.missing) else OK
        message = "ok" if level == OK else "; ".join(
            m for m in (f"{problems} messages with problems" if problems else "",
                        f"{len(jumps.jumps)} time jumps" if jumps.jumps else "",
                        f"missing topics: {', '.join(s.topic for s in inp.missing)}" if inp.missing else "") if m)
        return ("replay", level, message, {"bag": str(inp.path), "bag_time": stamp,
                                           "out_of_order_readings": sum(self.out_of_order.values()),
                                           "stale_readings": sum(jumps.stale.values()),
                                           "rejected_stamp": sum(jumps.rejected.values())})

    def summary(self) -> dict | None:
        return self.out.summary() if self.out is not None else None


def replay_timings(total: float, cpu: float, read_sensors: float, truth: float, estimator: float,
                   estimator_cpu: float, output: ReplayOutput, reader=None, inp: BagInput | None = None) -> dict[str, float]:
    """A run's timings (s, see :class:`ReplayResult`): the output side's forces and outputs (the
    wait for a writer process at the end included), ``other`` the rest of ``total``; with a
    reader process (``reader``, reading ``inp``) its busy time and CPU."""
    out = output.out
    writer_wait = out.wait if isinstance(out, WriterProcess) else 0.0
    timings = {"total": total, "read_sensors": read_sensors, "truth": truth, "estimator": estimator,
               "forces": output.clock["forces"], "outputs": output.clock["outputs"] + writer_wait}
    timings["other"] = max(0.0, total - sum(v for k, v in timings.items() if k != "total"))
    timings["cpu"] = cpu
    timings["estimator_cpu"] = estimator_cpu
    if reader is not None:
        timings["reader_process"] = inp.time_sensors + inp.time_truth
        timings["reader_cpu"] = reader.cpu
    if isinstance(out, WriterProcess):
        timings["writer_process"] = out.busy
        timings["writer_cpu"] = out.cpu
    return timings
