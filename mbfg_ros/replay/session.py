"""One replay run: a bag's sensor readings through the estimator, as fast as possible.

A reading goes the way it goes in the ROS node, through the intake they share
(:class:`~mbfg_ros.intake.feeder.Feeder`): decoded as the node decodes it
(:class:`~mbfg_ros.replay.bag_input.BagInput`), checked in receive order by the time rules
(:mod:`~mbfg_ros.intake.time_jumps`), put into header-stamp order across topics by the node's rule
(:class:`~mbfg_ros.intake.stamp_order.StampOrder`, with the bag's log time as the clock: a reading
waits while another active topic may still send an older one, at most ``reorder_window``), and
fed to the estimator with stamps relative to an epoch (the first stamp's whole second). On a
time jump the estimator gets what the stamp order holds and finishes it, the era ends, and the
estimator is reset. Every keyframe the estimator closes (with ``lagged``: every
smoothed keyframe leaving the window, and at the end the smoothed window itself) goes to the
output side shared with ``--smooth`` (:class:`~mbfg_ros.replay.replay_output.ReplayOutput`):
forces, the log and, with an output path, the node's messages; /diagnostics once per second of
bag time.

Timings separate the estimator's own time (``add_sample``, ``flush``, popping estimates) from the
replay's: reading and decoding, reordering, truth, forces, building and writing messages.
"""
from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np

from mbfg_ros.errors import MbfgError
from mbfg_ros.estimation.estimator import Estimator
from mbfg_ros.estimation.outputs import Estimate, SensorCounts
from mbfg_ros.estimation.status import EstimatorStatus
from mbfg_ros.intake.feeder import Feeder, TimeJumpEvent
from mbfg_ros.intake.stamp_order import StampOrder, topic_periods_ns
from mbfg_ros.io.sensor_inputs import route_sensors
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.replay.bag_input import SENSOR, BagInput
from mbfg_ros.replay.pipeline import ReaderProcess
from mbfg_ros.replay.replay_output import (Progress, ReplayOptions, ReplayOutput, ReplayResult, replay_timings,
                                           use_processes)
from mbfg_ros.replay.residuals import SampleLog
from mbfg_ros.replay.truth import TruthCollector

__all__ = ["ReplayOptions", "ReplayResult", "OnlineReplay", "replay_bag"]

FORCES_BLOCK = 64
"""Keyframes per call of the forces function (the estimator hands out a few at a time)."""

WRITE_BATCH = 64
"""Keyframes the online replay holds before computing their forces and writing them at once
(fewer when one is due for /diagnostics, which is built as its keyframe arrives)."""


def replay_bag(bag: str | Path, mech: Mechanism, options: ReplayOptions | None = None) -> ReplayResult:
    """Replay ``bag`` through an estimator of ``mech`` (its config's estimator settings)."""
    return OnlineReplay(bag, mech, options).run()


class OnlineReplay:
    """One run of the online estimator over a bag (see the module docstring): :meth:`run` once."""

    def __init__(self, bag: str | Path, mech: Mechanism, options: ReplayOptions | None = None) -> None:
        self.t_start, self.cpu_start = time.perf_counter(), time.process_time()
        self.bag, self.mech = Path(bag), mech
        opt = self.opt = options or ReplayOptions()
        inp = self.input = BagInput(bag, mech, opt.remap, truth=opt.truth)
        est = self.estimator = Estimator(mech, lagged=opt.lagged, covariance=opt.covariance)
        routes = inp.router.routes
        self.order = StampOrder(topic_periods_ns(mech, {t: route_sensors(r) for t, r in routes.items()}),
                                opt.window, opt.silence_timeout)
        self.feeder = Feeder(est, self.order, opt.max_time_gap, before_reset=self._end_era,
                             after_reset=self._new_era, on_sample=self._sample)
        self.truth = TruthCollector(mech) if opt.truth else None
        self.samples = SampleLog()
        self.era = 0
        self.eras: list[tuple[float, float]] = []     # s: first and last stamp used, per era
        self._first, self._last = math.inf, -math.inf
        parallel = use_processes(opt, mech, inp)
        # a bag decoded in bulk (MCAP) is read here unless asked (cheaper than starting a process)
        self.reader = (ReaderProcess(inp, self.truth, mech.config.source)
                       if parallel and (opt.processes is True or not inp.bulk) else None)
        problems = (lambda: self.reader.problems) if self.reader is not None else inp.problems
        self.output = ReplayOutput(bag, mech, opt, inp, est.fn.sym, parallel=parallel, problems=problems,
                                   out_of_order=self.order.out_of_order, jumps=self.feeder.time_jumps,
                                   covariance=opt.covariance_topics, forces_block=FORCES_BLOCK)
        # keyframes are held (with their known efforts, taken as they come) until WRITE_BATCH of
        # them or one due for /diagnostics, then their forces are computed, logged and written at
        # once; the diagnostics are built as their keyframe arrives
        self._pending: list[tuple[Estimate, np.ndarray]] = []
        # (wall clocks only per call: a CPU clock read is a system call, 1-2 us, more than a
        # queued sample costs; the estimator's CPU is its own per-keyframe account, health.timing)
        self.estimator_time = 0.0                      # s outside add_sample (the feeder's)

    # ------------------------------------------------------------------------------------------
    def run(self) -> ReplayResult:
        """Replay the bag; raises MbfgError when nothing could be estimated."""
        inp, feeder = self.input, self.feeder
        push, release, feed = feeder.push, feeder.release, feeder.feed
        progress = Progress(self.opt.progress)
        perf = time.perf_counter
        try:
            with self.output:
                for kind, topic, log_ns, payload in (self.reader.records() if self.reader else inp.records()):
                    if kind == SENSOR:
                        for r in payload:
                            push(topic, r.sensor, r.stamp_ns, r.value, log_ns)
                        feed(release(log_ns))
                        self._emit()
                    else:
                        t0 = perf()
                        self.truth.add(topic, payload)
                        inp.time_truth += perf() - t0
                    progress.update(inp, log_ns)
                feed(feeder.drain())
                self._end_era()
                if self._first <= self._last:
                    self.eras.append((self._first, self._last))
                if not len(self.output.log):
                    raise MbfgError(_nothing_estimated(inp, self.estimator))
                self.output.finish()
        finally:
            progress.close()
            if self.reader is not None:
                self.reader.close()
        return self._result()

    def _sample(self, sensor: str, t: float, value, status: str) -> None:
        """After each add_sample: a reading the estimator takes is kept for the residuals."""
        if status == "queued" or status == "late":
            self.samples.add(sensor, t, value, self.era)
            if t < self._first:
                self._first = t
            if t > self._last:
                self._last = t

    def _emit(self) -> None:
        """Take the estimates the estimator closed (lagged ones with ``lagged``)."""
        t0 = time.perf_counter()
        est = self.estimator
        filtered = est.pop_estimates()
        lagged = est.pop_lagged() if self.opt.lagged else None
        self.estimator_time += time.perf_counter() - t0
        self._write(lagged if self.opt.lagged else filtered)

    def _write(self, rows: list[Estimate]) -> None:
        if rows:
            t0 = time.perf_counter()
            self._pending.extend((e, self.estimator.efforts.at(e.stamp)) for e in rows)
            self.output.clock["forces"] += time.perf_counter() - t0
            if any(self.output.due(e.stamp) for e in rows) or len(self._pending) >= WRITE_BATCH:
                self._flush()

    def _flush(self) -> None:
        """Hand the keyframes held to the output side (forces, log, messages)."""
        if not self._pending:
            return
        rows = [e for e, _ in self._pending]
        tau = np.stack([tk for _, tk in self._pending])
        self._pending = []
        g = len(self.mech.dof)
        std = np.full((len(rows), 2 * g), np.nan)
        for i, e in enumerate(rows):
            if e.covariance is not None:
                std[i] = np.sqrt(np.maximum(np.diag(e.covariance), 0.0))
        est = self.estimator
        self.output.add(self.feeder.epoch_ns, np.array([e.stamp for e in rows]), np.array([e.keyframe for e in rows]),
                        self.era, np.stack([e.x for e in rows]), np.stack([e.effort for e in rows]), tau, est.lay,
                        std, lambda: rows, lambda row: EstimatorStatus.of(est))

    def _end_era(self, jump: TimeJumpEvent | None = None) -> None:
        """Close every keyframe the data reaches (the end of the bag, or before the estimator is
        reset for a time jump) and write them; with ``lagged``, the smoothed window too."""
        est = self.estimator
        t0 = time.perf_counter()
        est.flush()
        tail = est.smoothed_window() if self.opt.lagged and est.started else []
        self.estimator_time += time.perf_counter() - t0
        self._emit()
        self._flush()
        if self.opt.lagged:
            done = self.output.log.last_keyframe if len(self.output.log) else -1
            self._write([e for e in tail if e.keyframe > done])
            self._flush()

    def _new_era(self, jump: TimeJumpEvent) -> None:
        """After the estimator was reset for a jump the time rules found: a new era (the
        estimator's own restarts keep the era)."""
        if not jump.by_rules:
            return
        if self._first <= self._last:
            self.eras.append((self._first, self._last))
        self._first, self._last = math.inf, -math.inf
        self.era += 1
        self.output.next_diagnostics = -math.inf

    def _result(self) -> ReplayResult:
        inp, est, reader = self.input, self.estimator, self.reader
        if reader is None:
            read, truth_time = inp.time_sensors, inp.time_truth
        else:
            read, truth_time = reader.wait, 0.0
        timings = replay_timings(time.perf_counter() - self.t_start, time.process_time() - self.cpu_start,
                                 read, truth_time, self.feeder.estimator_time + self.estimator_time,
                                 est.health.timing.cpu.total / 1e3, self.output, reader, inp)
        epoch = self.feeder.epoch_ns or 0
        return ReplayResult(
            bag=self.bag, mech=self.mech, options=self.opt, input=inp, out_of_order=self.order.out_of_order,
            jumps=self.feeder.time_jumps, estimates=self.output.log.series(),
            truth=self.truth.series(epoch) if self.truth is not None else None, samples=self.samples,
            counts={k: SensorCounts(**vars(v)) for k, v in est.counts().items()}, health=est.health,
            layout=est.lay, epoch_ns=epoch, eras=self.eras, timings=timings, output=self.output.summary(),
            reorder_window=self.opt.window, truth_unmatched=self.truth.unmatched if self.truth is not None else 0)


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
