"""`mbfg replay --smooth`: the recording solved offline as one smoothing problem.

The bag is read as the online replay reads it (:class:`~mbfg_ros.replay.bag_input.BagInput`),
its readings checked in receive order by the time rules of :mod:`~mbfg_ros.intake.time_jumps`
(in bulk: an era ends at a jump), every reading of an era is collected into arrays, and each era
is smoothed by :class:`~mbfg_ros.estimation.offline_smoother.OfflineSmoother` window by window;
each window's settled keyframes go to the output side the online replay uses
(:class:`~mbfg_ros.replay.replay_output.ReplayOutput`: forces, the log and, with an output path,
the node's messages; /diagnostics once per second of bag time, from the counts and health kept
here). The result is a :class:`~mbfg_ros.replay.replay_output.ReplayResult`, so the report,
plots, CSV and JSON are the online replay's. No reordering is needed (the arrays are sorted), no
covariance is computed (plots have no band, as for ``--lagged``).
"""
from __future__ import annotations

import math
import time
from collections import Counter
from pathlib import Path

import numpy as np

from mbfg_ros.errors import MbfgError
from mbfg_ros.estimation.offline_smoother import NoFiniteReadings, OfflineSmoother, Readings, SmoothingOptions
from mbfg_ros.estimation.outputs import Health, SensorCounts
from mbfg_ros.estimation.smoothing_scale import online_scale
from mbfg_ros.estimation.status import EstimatorStatus
from mbfg_ros.intake.time_jumps import TimeJumps, lagging_limit
from mbfg_ros.model.channels import command_joint
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.replay.bag_input import BagInput, InputBatch
from mbfg_ros.replay.replay_output import ReplayOptions, ReplayOutput, ReplayResult, replay_timings, use_processes
from mbfg_ros.replay.residuals import SampleLog
from mbfg_ros.replay.truth import TruthCollector


def read_eras(inp: BagInput, jumps: TimeJumps, health: Health,
              truth: TruthCollector | None) -> list[dict[str, tuple[np.ndarray, np.ndarray]]]:
    """Every reading of the bag per era (a time jump starts one) and sensor: stamps (N,) int64
    ns and values (N, k), in the order the online replay feeds them (the time-jump rules applied
    in bulk: :meth:`~mbfg_ros.intake.time_jumps.TimeJumps.check_block`); the truth into ``truth``."""
    eras_raw: list[dict[str, tuple[list, list]]] = [{}]

    def keep(sensor: str, ts: np.ndarray, ys: np.ndarray) -> None:
        tl, yl = eras_raw[-1].setdefault(sensor, ([], []))
        tl.append(ts)
        yl.append(ys)

    perf = time.perf_counter
    for block in inp.batches():
        _read_block(block, jumps, health, eras_raw, keep)
        t0 = perf()
        for topic, _, payload in block.truth if truth is not None else ():
            truth.add(topic, payload)
        inp.time_truth += perf() - t0
    return [{s: (np.concatenate(tl), np.concatenate(yl)) for s, (tl, yl) in era.items()} for era in eras_raw]


def _read_block(block: InputBatch, jumps: TimeJumps, health: Health, eras_raw: list, keep) -> None:
    """The readings of one block, checked for time jumps in arrival order, kept per era and
    sensor in the order they are fed (as the online replay feeds them)."""
    entry, row, _ = block.merged()
    if not entry.size:
        return
    rows = [rr for _, rr, _ in block.sensors]
    names = [rr.sensor for rr in rows]
    topics = [topic for topic, _, _ in block.sensors]
    stamps = block.reading_stamps(entry, row)
    events = jumps.check_block(topics, names, entry, stamps,
                               lambda i: (names[entry[i]], int(stamps[i]), rows[entry[i]].value[row[i]]))
    for kind, x in events:
        if kind == "jump":
            eras_raw.append({})
            health.resets += 1
            health.last_reset = jumps.jumps[-1].reason
        elif kind == "released":
            for sensor, t, y in x:
                keep(sensor, np.array([t], np.int64), np.asarray(y, float).reshape(1, -1))
        elif x.size == entry.size and len(set(names)) == len(names):
            for rr in rows:                   # all fed in order, one entry per sensor
                keep(rr.sensor, rr.stamp_ns, rr.value)
        else:
            e, r = entry[x], row[x]
            for sensor in dict.fromkeys(names):
                ks = [k for k, n in enumerate(names) if n == sensor]
                sel = np.flatnonzero(np.isin(e, ks))
                if not sel.size:
                    continue
                values = np.concatenate([rows[k].value for k in ks])       # this sensor's entries
                base = np.zeros(len(rows), np.int64)
                base[ks] = np.cumsum([0] + [len(rows[k].value) for k in ks])[:-1]
                keep(sensor, stamps[x[sel]], values[base[e[sel]] + r[sel]])


def smooth_bag(bag: str | Path, mech: Mechanism, options: ReplayOptions | None = None,
               smoothing: SmoothingOptions | None = None) -> ReplayResult:
    """Smooth ``bag`` offline with ``mech``'s estimator settings (``options.lagged`` and
    ``options.covariance`` do not apply)."""
    opt = options or ReplayOptions()
    t_start, cpu_start = time.perf_counter(), time.process_time()
    perf, cpu = time.perf_counter, time.process_time
    inp = BagInput(bag, mech, opt.remap, truth=opt.truth)
    smoother = OfflineSmoother(mech, options=smoothing)
    cfg, lay = smoother.cfg, smoother.lay
    jumps = TimeJumps(max_time_gap=opt.max_time_gap, max_lag=lagging_limit(cfg.lag))
    truth = TruthCollector(mech) if opt.truth else None
    counts: dict[str, SensorCounts] = {}
    health = Health()

    # 1. read: every reading per era, checked by the time rules, into arrays
    eras_raw = read_eras(inp, jumps, health, truth)
    stamps = [int(v[0].min()) for era in eras_raw for v in era.values() if len(v[0])]
    if not stamps:
        raise MbfgError(f"nothing could be estimated from {str(bag)!r}: no usable sensor reading")
    epoch = (min(stamps) // 1_000_000_000) * 1_000_000_000
    # the model uncertainty's scale: the online estimator's, from the first era's readings (a
    # held scale stays over the online estimator's resets too)
    t0, c0 = perf(), cpu()
    first = next(era for era in eras_raw if any(len(v[0]) for v in era.values()))
    smoother.model_scale, health.model_scale_searched = online_scale(
        mech, cfg, {name: ((ts - epoch) * 1e-9, ys) for name, (ts, ys) in first.items()})
    health.model_scale = smoother.model_scale
    clock_scale = (perf() - t0, cpu() - c0)

    samples = SampleLog()
    # a writer process only with --parallel on: the smoothed keyframes come after the solve, so
    # writing cannot overlap it, and writing in bulk (0.1 s a four-bar minute) costs less than
    # starting that process (0.8 s of CPU)
    parallel = opt.processes is True and use_processes(opt, mech, inp)
    output = ReplayOutput(bag, mech, opt, inp, smoother.fn.sym, parallel=parallel, problems=inp.problems,
                          out_of_order=Counter(), jumps=jumps, mode="smooth")
    clock = {"estimator": clock_scale[0], "estimator_cpu": clock_scale[1]}
    eras: list[tuple[float, float]] = []
    key_offset = 0
    windows = []
    not_estimated = 0                             # eras without a finite reading of any sensor
    with output:
        for era, raw in enumerate(eras_raw):
            readings = _era_readings(raw, epoch, era, counts, samples)
            raw.clear()                           # (the stamps go; the values stay as views)
            if not readings.sensors:
                continue
            t0, c0 = perf(), cpu()
            gen = smoother.windows(readings)
            result = None
            while True:
                try:
                    k_first, X, result = next(gen)
                except StopIteration:
                    break
                except NoFiniteReadings as exc:   # every reading of the era NaN/Inf: nothing to smooth
                    _count_outcomes(counts, {}, exc.rejected)
                    not_estimated += 1
                    break
                clock["estimator"] += perf() - t0
                clock["estimator_cpu"] += cpu() - c0
                ks = np.arange(k_first, k_first + X.shape[0])
                ts = result.t0 + result.h * ks
                tau = result.efforts(ts)
                effort = tau + X[:, lay.U] @ mech.B.T if lay.n_u else tau
                output.add(epoch, ts, ks + key_offset, era, X, effort, tau, lay, None,
                           lambda: smoother.estimates(result, k_first, X, key_offset),
                           lambda row: EstimatorStatus(counts, health, row, cfg.keyframe_rate))
                health.keyframes += X.shape[0]
                t0, c0 = perf(), cpu()
            clock["estimator"] += perf() - t0
            clock["estimator_cpu"] += cpu() - c0
            if result is None:
                continue
            _count_outcomes(counts, result.used, result.rejected)
            first, last = math.inf, -math.inf
            for sensor, (tt, _) in readings.sensors.items():
                tt = tt[np.isfinite(tt)]
                if tt.size:
                    first, last = min(first, float(tt.min())), max(last, float(tt.max()))
            if first <= last:
                eras.append((first, last))
            windows += result.windows
            key_offset += result.windows[-1].last + 1
        if not len(output.log):
            raise MbfgError(f"nothing could be estimated from {str(bag)!r}: no finite sensor reading")
        output.finish()
    timings = replay_timings(perf() - t_start, cpu() - cpu_start, inp.time_sensors, inp.time_truth,
                             clock["estimator"], clock["estimator_cpu"], output)
    return ReplayResult(
        bag=Path(bag), mech=mech, options=opt, input=inp, out_of_order=output.out_of_order, jumps=jumps,
        estimates=output.log.series(), truth=truth.series(epoch) if truth is not None else None,
        samples=samples, counts=counts, health=health, layout=lay, epoch_ns=epoch, eras=eras,
        timings=timings, output=output.summary(), reorder_window=0.0,
        truth_unmatched=truth.unmatched if truth is not None else 0, smoothing=windows,
        eras_not_estimated=not_estimated)


def _era_readings(raw: dict[str, tuple[np.ndarray, np.ndarray]], epoch: int, era: int,
                  counts: dict[str, SensorCounts], samples: SampleLog) -> Readings:
    """One era's readings for the smoother (s since ``epoch``), counted as received per sensor
    (with their first and last finite stamps) and their finite ones kept for the residuals."""
    readings = Readings()
    for sensor, (ts, ys) in raw.items():
        t = (ts - epoch) * 1e-9
        y = ys.reshape(t.size, -1)
        joint = command_joint(sensor)
        if joint is not None:
            readings.commands[joint] = (t, y)
        else:
            readings.sensors[sensor] = (t, y)
        c = counts.setdefault(sensor, SensorCounts())
        c.received += t.size
        ok = np.isfinite(t) & np.all(np.isfinite(y.reshape(t.size, -1)), axis=1)
        if ok.any():
            lo, hi = float(t[ok].min()), float(t[ok].max())
            c.first_stamp = lo if c.first_stamp is None else min(c.first_stamp, lo)
            c.last_stamp = hi if c.last_stamp is None else max(c.last_stamp, hi)
        samples.extend(sensor, t[ok], y[ok], era)
    return readings


def _count_outcomes(counts: dict[str, SensorCounts], used: dict[str, int],
                    rejected: dict[str, tuple[int, int]]) -> None:
    """Add an era's outcomes to the per-sensor counts: readings used, and (every sensor the
    smoother cleaned, also one left without a finite reading) not finite and duplicate."""
    for name, n_used in used.items():
        counts[name].used += n_used
    for name, (bad, dup) in rejected.items():
        c = counts[name]
        c.rejected_nonfinite += bad
        c.rejected_duplicate += dup
