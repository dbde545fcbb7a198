"""What a replay prints and writes: the facts (JSON), the summary text and the per-keyframe CSV.

JSON keys: ``bag``, ``config``, ``rig``, ``duration`` (s of sensor time), ``keyframes``,
``realtime_factor`` (duration / wall time of the whole replay: reading, estimating, writing),
``estimator_realtime_factor`` (duration / the estimator's own wall time), ``cpu_realtime_factor``
and ``estimator_cpu_realtime_factor`` (the same per CPU second: less sensitive to a busy
machine), ``wall_time``, ``cpu_time`` (all processes), ``timings`` (s per stage), ``eras`` (stamp spans between time jumps), ``topics`` (per topic: type, messages, per-sensor
counts, problems, readings out of stamp order), ``counts`` (per sensor: received, used, late,
too_old, rejected, rejected_nonfinite, rejected_duplicate, downweighted, discarded, unaccounted =
received minus every outcome, rate; and dropped before the estimator by the time-jump rules:
rejected_stamp, stale, too_old_lagging), ``problems`` (per topic: reason -> messages, including
the messages a damaged bag held but that could not be read), ``damage`` (regions: where a bag
is damaged; truncated; unknown_loss), ``missing_topics``, ``time_jumps``, ``health`` (keyframes,
recoveries, resets, last ones, qr_fallback (where ISAM2's Cholesky elimination failed and QR took
over), relinearizations, gauss_newton_iterations (online: the adaptive
refinements of the newest keyframe), start_searches, last_start_search, model_scale (the scale
of the model's uncertainty in use at the end, :mod:`mbfg_ros.estimation.model_uncertainty`), latency_ms
mean/p99/max), ``gauss_newton_iterations`` (``--smooth``: the smoother's iterations over every
window; null online), ``eras_not_estimated`` (``--smooth``: eras without a finite reading of any
sensor), ``diverged`` (spans in which a sensor failed the divergence test while the estimate was
lost: sensor, start, end (null: to the end), peak_sigma, verdict, cause, note; s of the
estimator's time like the CSV's ``stamp``), ``strained`` (the same for spans in which a sensor
was fitted worse than its noise while the estimate held), ``divergence_test`` (window_s,
limit_sigma), ``fit_sigma`` ({sensor: RMS after the first second of each reading's whitened
residual at the estimate it was solved in, sigmas}),
``truth``, ``skip``,
``rmse`` ({joint: {position, velocity, acceleration[, effort]}}; angles unwrapped),
``turn_slips`` ({angular joint: whole-turn slips}), ``startup`` ({joint: position_max,
velocity_max}: the largest errors in the skipped start), ``effort_compared`` (what the effort RMSE
compares), ``rmse_forces`` ({closure:
{force_x .. torque_z}}, {load cell: {reading}}), ``residuals`` (per sensor), ``output``.
Missing values are null.
"""
from __future__ import annotations

import csv
import math
import re
from pathlib import Path

import numpy as np

from mbfg_ros.replay.metrics import COMPONENTS, Comparison, consistency, significant_components
from mbfg_ros.replay.residuals import Residuals, load_cell_unit
from mbfg_ros.replay.session import ReplayResult


def _num(x):
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _truth_problems(res: ReplayResult) -> list[str]:
    """Why ground truth the user asked for could not be used (never silently): a remapped truth
    topic the bag does not hold, joint states without the config's joints."""
    out = [f"{src} (read as {topic} by --remap) is not in the bag: that truth is not scored"
           for topic, src in res.input.truth_missing]
    if res.truth_unmatched:
        out.append(f"{res.truth_unmatched} joint-state messages of the truth lack some of the config's "
                   f"joints ({', '.join(res.mech.joint_names)}) and were not used")
    return out


def _consistency(res: ReplayResult, comparison: Comparison | None) -> dict:
    """Per DOF joint, :func:`~mbfg_ros.replay.metrics.consistency` as plain data ({} without a
    truth or without published standard deviations)."""
    k = consistency(res.mech, res.estimates, comparison) if comparison is not None else None
    return {j: {"position": _num(d.position_ratio), "velocity": _num(d.velocity_ratio),
                "position_within_2_sigma": _num(d.position_coverage),
                "velocity_within_2_sigma": _num(d.velocity_coverage), "samples": d.samples}
            for j, d in (k or {}).items()}


def facts(res: ReplayResult, comparison: Comparison | None, residuals: dict[str, Residuals],
          extra: dict | None = None) -> dict:
    """Everything the summary says, as JSON-ready data."""
    mech, inp = res.mech, res.input
    counts = {}
    sensor_topic = {}
    for topic, st in inp.stats.items():
        for s in st.sensors:
            sensor_topic[s] = topic
    for name, c in res.counts.items():
        dropped = res.jumps.by_sensor.get(name, {})
        counts[name] = {"topic": sensor_topic.get(name), "received": c.received, "used": c.used,
                        "late": c.late, "too_old": c.too_old, "rejected": c.rejected,
                        "rejected_nonfinite": c.rejected_nonfinite,
                        "rejected_duplicate": c.rejected_duplicate, "downweighted": c.downweighted,
                        "discarded": c.discarded,
                        # dropped before the estimator by the time-jump rules (not in received)
                        "rejected_stamp": dropped.get("rejected", 0), "stale": dropped.get("stale", 0),
                        "too_old_lagging": dropped.get("too_old", 0),
                        "unaccounted": (c.received - c.used - c.late - c.too_old - c.rejected
                                        - c.discarded - c.pending),
                        "rate": _num(c.rate())}
    problems = inp.problems()
    topics = {}
    for topic, st in inp.stats.items():
        entry = {"type": st.msgtype, "role": st.role, "in_bag": st.in_bag, "messages": st.messages,
                 "problems": problems.get(topic, {})}
        if st.role == "sensor":
            entry.update({"config_topic": st.config_topic, "expected_types": list(st.expected),
                          "sensors": list(st.sensors), "readings": st.readings,
                          "out_of_order": res.out_of_order.get(topic, 0),
                          "stale": res.jumps.stale.get(topic, 0),
                          "rejected_stamp": res.jumps.rejected.get(topic, 0)})
            for key in ("used", "late", "too_old", "rejected", "downweighted"):
                entry[key] = sum(counts[s][key] for s in st.sensors if s in counts)
            entry["too_old"] += res.jumps.too_old.get(topic, 0)    # a sensor lagging the others
        topics[topic] = entry
    h = res.health
    mean, p99, mx = h.latency(whole_run=True)
    out = {
        "bag": str(res.bag), "config": str(mech.config.source or ""), "rig": mech.config.name,
        "lagged": res.options.lagged, "covariance": res.options.covariance,
        "duration": res.duration, "epoch": res.epoch_ns / 1e9, "keyframes": len(res.estimates),
        "eras": [{"from": a, "to": b} for a, b in res.eras],
        "realtime_factor": _num(res.realtime_factor),
        "estimator_realtime_factor": _num(res.estimator_realtime_factor),
        "cpu_realtime_factor": _num(res.duration / res.cpu_time) if res.cpu_time > 0 else None,
        "estimator_cpu_realtime_factor": _num(res.duration / res.timings["estimator_cpu"])
        if res.timings["estimator_cpu"] > 0 else None,
        "wall_time": res.timings["total"], "cpu_time": res.cpu_time,
        "timings": {k: v for k, v in res.timings.items()},
        "reorder_window": res.reorder_window,
        "topics": topics, "counts": counts, "problems": problems,
        "missing_topics": [s.topic for s in inp.missing],
        "truth_problems": _truth_problems(res),
        "damage": {"regions": list(inp.damage.regions), "truncated": inp.damage.truncated,
                   "unknown_loss": inp.damage.unknown_loss},
        "time_jumps": [{"topic": j.topic, "sensor": j.sensor, "direction": j.direction,
                        "from": (j.from_ns - res.epoch_ns) / 1e9, "to": (j.to_ns - res.epoch_ns) / 1e9,
                        "reason": j.reason} for j in res.jumps.jumps],
        "health": {"keyframes": h.keyframes, "recoveries": h.recoveries, "resets": h.resets,
                   "last_recovery": h.last_recovery or None, "last_reset": h.last_reset or None,
                   "qr_fallback": h.qr_fallback or None,
                   "relinearizations": h.relinearizations, "residual_rms": _num(h.residual_rms),
                   "gauss_newton_iterations": h.gauss_newton_iterations, "start_searches": h.start_searches,
                   "last_start_search": h.last_start_search or None, "model_scale": h.model_scale,
                   "latency_ms": {"mean": mean, "p99": p99, "max": mx}},
        # the rolling innovation test (mbfg_ros.estimation.divergence): spans in which a sensor's
        # whitened residual RMS over divergence_window s exceeded divergence_sigma, with the
        # estimate lost (diverged) or holding (strained)
        "diverged": [p.as_dict() for p in h.divergence.periods if p.lost],
        "strained": [p.as_dict() for p in h.divergence.periods if not p.lost],
        "gauss_newton_iterations": sum(w.iterations for w in res.smoothing) if res.smoothing is not None else None,
        "eras_not_estimated": res.eras_not_estimated,
        "reinitialisations": h.reinitialisations, "last_reinitialisation": h.last_reinitialisation or None,
        "divergence_test": {"window_s": h.divergence.window, "limit_sigma": h.divergence.limit},
        "truth": comparison is not None,
        "skip": comparison.skip if comparison is not None else None,
        "rmse_samples": comparison.samples if comparison is not None else 0,
        "rmse": {j: {k: _num(v) for k, v in row.items()} for j, row in comparison.rmse.items()}
        if comparison is not None else {},
        "rmse_forces": {f: {k: _num(v) for k, v in row.items()} for f, row in comparison.rmse_forces.items()}
        if comparison is not None else {},
        # the published DOF standard deviations against the errors (with the covariance on):
        # error / sigma RMS (1 when honest, above 1 the sigma claims too much) and the share of
        # errors within two sigmas (0.954 for Gaussian errors), over the compared keyframes
        "consistency": _consistency(res, comparison),
        # angular joints: how often the estimate's whole-turn count against the truth changed
        "turn_slips": dict(comparison.turn_slips) if comparison is not None else {},
        "startup": {j: {k: _num(v) for k, v in row.items()} for j, row in comparison.startup.items()}
        if comparison is not None else {},
        "effort_compared": "actuator effort (known + estimated inputs, without friction) vs the truth's "
                           "joint_states effort",
        "residuals": {name: r.summary() for name, r in residuals.items()},
        # each reading's whitened residual at the estimate it was solved in (the divergence
        # test's figures), RMS over the run: how well the estimator fitted each sensor
        "fit_sigma": {name: _num(v) for name, v in h.divergence.run_rms().items()},
        "output": res.output,
    }
    if res.truth is not None and res.truth.repeated:
        out["truth_repeated_stamps"] = dict(res.truth.repeated)
    out.update(extra or {})
    return out


def _unit(mech, j: int) -> tuple[str, str, str, str]:
    if mech.angular[j]:
        return "rad", "rad/s", "rad/s^2", "N m"
    return "m", "m/s", "m/s^2", "N"


def _g(x, unit: str = "") -> str:
    if x is None:
        return "n/a"
    return f"{x:.3g}" + (f" {unit}" if unit else "")


def _kind(f: dict) -> str:
    if f.get("mode") == "smooth":
        return "smoothed (offline, whole recording)"
    return "smoothed (lagged)" if f["lagged"] else "filtered"


def strongest_notes(notes: list[str]) -> list[str]:
    """The keyframe-rate notes of several spans of one sensor, each kind once: notes that differ
    only in their numbers are one kind, of which the one advising the highest keyframe rate is kept
    (the spans' notes are taken as the motion went: repeating each would print the same advice
    with other numbers once per span)."""
    kinds: dict[str, tuple[float, str]] = {}
    for note in notes:
        if not note:
            continue
        kind = re.sub(r"[0-9.]+", "#", note)
        rates = [float(x) for x in re.findall(r"keyframe_rate: ([0-9.]+)", note)]
        rate = max(rates) if rates else 0.0
        if kind not in kinds or rate > kinds[kind][0]:
            kinds[kind] = (rate, note)
    return sorted(note for _, note in kinds.values())


def format_summary(f: dict, res: ReplayResult, comparison: Comparison | None = None) -> str:
    """The human-readable summary of a replay (``f`` from :func:`facts`)."""
    mech = res.mech
    t = f["timings"]
    lines = [f"Replayed {f['bag']} with {Path(f['config']).name or f['rig']}: {f['duration']:.2f} s of sensor "
             f"data, {f['keyframes']} {_kind(f)} keyframes in "
             f"{f['wall_time']:.2f} s: {_g(f['realtime_factor'])}x real time "
             f"(estimator alone {_g(f['estimator_realtime_factor'])}x)"]
    lines.append(f"  wall time: estimator {t['estimator']:.2f} s, reading + decoding {t['read_sensors']:.2f} s, "
                 f"truth {t['truth']:.2f} s, forces {t['forces']:.2f} s, output messages {t['outputs']:.2f} s, "
                 f"other {t['other']:.2f} s")
    procs = ""
    if "reader_cpu" in t or "writer_cpu" in t:
        procs = (f" (this process {t['cpu']:.2f} s, reader {t.get('reader_cpu', 0.0):.2f} s, "
                 f"writer {t.get('writer_cpu', 0.0):.2f} s)")
    lines.append(f"  CPU time: {f['cpu_time']:.2f} s{procs}, estimator {t['estimator_cpu']:.2f} s: "
                 f"{_g(f['cpu_realtime_factor'])}x real time per CPU second (estimator alone "
                 f"{_g(f['estimator_cpu_realtime_factor'])}x)")
    rows = [("topic", "sensor", "messages", "received", "used", "late", "too_old", "rejected", "downweighted")]
    for topic, e in f["topics"].items():
        if e["role"] != "sensor":
            continue
        first = True
        for s in e["sensors"] or ["-"]:
            c = f["counts"].get(s, {})
            rows.append((topic if first else "", s, str(e["messages"]) if first else "",
                         *(str(c.get(k, "")) for k in ("received", "used", "late", "too_old", "rejected",
                                                      "downweighted"))))
            first = False
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines.append("Sensor topics:")
    for r in rows:
        lines.append("  " + "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
    truth_topics = [tp for tp, e in f["topics"].items() if e["role"] == "truth"]
    if truth_topics:
        lines.append(f"Ground truth: {len(truth_topics)} topics ({sum(f['topics'][tp]['messages'] for tp in truth_topics)} messages)")
    for problem in f["truth_problems"]:
        lines.append(f"Truth: {problem}")
    for topic in f["missing_topics"]:
        st = res.input.stats[topic]
        lines.append(f"Missing: {topic} ({', '.join(st.sensors)}) is not in the bag; the estimator ran without it"
                     + (f" (config topic {st.config_topic})" if st.config_topic != topic else ""))
    damage = f["damage"]
    for region in damage["regions"][:10]:
        lines.append(f"Damaged bag: {region}")
    if len(damage["regions"]) > 10:
        lines.append(f"Damaged bag: ... and {len(damage['regions']) - 10} more damaged places")
    if damage["unknown_loss"]:
        lines.append("Damaged bag: it ends early and states no message counts: how many messages "
                     "followed the end is unknown")
    for topic, reasons in f["problems"].items():
        for reason, n in reasons.items():
            lines.append(f"Problem: {topic}: {n} message{'s' if n != 1 else ''}: {reason}")
    for topic, e in f["topics"].items():
        if e.get("out_of_order"):
            lines.append(f"Out of order: {topic}: {e['out_of_order']} readings older than ones already fed "
                         f"(beyond the {f['reorder_window']:.3g} s reorder window; see late / too_old)")
    for j in f["time_jumps"]:
        lines.append(f"Time jump: {j['topic']}: {j['reason']} (from {j['from']:.3f} s to {j['to']:.3f} s): "
                     "the estimator finished what it had and was reset")
    for topic, e in f["topics"].items():
        if e.get("rejected_stamp"):
            lines.append(f"Rejected stamps: {topic}: {e['rejected_stamp']} readings stamped out of line "
                         "with the rest (an isolated stamp back or ahead that did not persist; not a "
                         "time jump, the estimator went on)")
    for topic, e in f["topics"].items():
        if e.get("stale"):
            lines.append(f"Stale: {topic}: {e['stale']} readings dropped after a time jump, until the sensor's "
                         "stamps fitted the new time")
    for name, c in f["counts"].items():
        if c["rejected_nonfinite"]:
            lines.append(f"Rejected: {name}: {c['rejected_nonfinite']} readings not finite (NaN/Inf)")
        if c["rejected_duplicate"]:
            lines.append(f"Rejected: {name}: {c['rejected_duplicate']} readings with a duplicate stamp")
        if c["unaccounted"]:
            lines.append(f"Unaccounted: {name}: {c['unaccounted']} readings the estimator received but neither "
                         "used nor counted as late, too old, rejected or discarded")
        if c["discarded"]:
            lines.append(f"Discarded: {name}: {c['discarded']} readings queued when a reset or a failed "
                         "recovery restarted the estimator")
    h = f["health"]
    lat = h["latency_ms"]
    solver = (f"{f['gauss_newton_iterations']} Gauss-Newton iterations" if f.get("gauss_newton_iterations") is not None
              else f"{h['relinearizations']} relinearizations, {h.get('gauss_newton_iterations', 0)} Gauss-Newton "
                   "refinements of the newest keyframe")
    lines.append(f"Estimator: {h['keyframes']} keyframes, {h['recoveries']} recoveries, {h['resets']} resets, "
                 f"{solver}; update mean {lat['mean']:.2f} ms, p99 {lat['p99']:.2f} ms, max {lat['max']:.2f} ms")
    if f.get("eras_not_estimated"):
        n = f["eras_not_estimated"]
        lines.append(f"Not estimated: {n} era{'s' if n != 1 else ''} (between time jumps) without a finite reading "
                     "of any sensor: nothing to smooth there (the readings are counted as not finite)")
    if h["last_recovery"]:
        lines.append(f"  last recovery: {h['last_recovery']}")
    if h.get("qr_fallback"):
        lines.append(f"  ISAM2 eliminates by QR since {h['qr_fallback']} (Cholesky judged it indeterminate)")
    if f.get("reinitialisations"):
        lines.append(f"  re-initialised {f['reinitialisations']} times after a lost estimate; last "
                     f"{f['last_reinitialisation']}")
    if h.get("start_searches"):
        lines.append(f"  start hypotheses searched {h['start_searches']} times; last {h['last_start_search']}")
    if h.get("model_scale", 1.0) != 1.0:
        lines.append(f"  model uncertainty scaled by {h['model_scale']:.3g} (chosen from the innovations)")
    test = f"{f['divergence_test']['window_s']:g} s above {f['divergence_test']['limit_sigma']:g} sigma"
    for d in f.get("diverged", []):
        end = "the end" if d["end"] is None else f"{d['end']:.3f} s"
        note = f"; {d['note']}" if d.get("note") else ""
        lines.append(f"DIVERGED: {d['sensor']}: whitened residual RMS over {test} from {d['start']:.3f} s to "
                     f"{end} (peak {d['peak_sigma']:.1f} sigma): the estimate was lost ({d.get('cause', '')}){note}")
    strained = f.get("strained", [])
    for name in sorted({d["sensor"] for d in strained}):
        mine = [d for d in strained if d["sensor"] == name]
        notes = strongest_notes([d.get("note", "") for d in mine])
        spans = f"{len(mine)} span{'s' if len(mine) != 1 else ''}"
        lines.append(f"WARN: {name} fitted worse than its noise while the estimate held: whitened residual RMS over "
                     f"{test} in {spans} ({sum((d['end'] if d['end'] is not None else f['duration']) - d['start'] for d in mine):.2f} s in all, "
                     f"peak {max(d['peak_sigma'] for d in mine):.1f} sigma); likely {mine[0].get('cause') or 'a model error'}"
                     + (f"; {'; '.join(notes)}" if notes else ""))
    if h["last_reset"]:
        lines.append(f"  last reset: {h['last_reset']}")
    if f["truth"]:
        lines.append(f"Accuracy against the ground truth (RMSE over {f['rmse_samples']} keyframes, the first "
                     f"{f['skip']:g} s skipped):")
        rows = [("joint", "position", "velocity", "acceleration", "effort")]
        for j, name in enumerate(mech.joint_names):
            r = f["rmse"][name]
            u = _unit(mech, j)
            rows.append((name, _g(r["position"], u[0]), _g(r["velocity"], u[1]), _g(r["acceleration"], u[2]),
                         _g(r["effort"], u[3]) if "effort" in r else ""))
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        for r in rows:
            lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
        if f.get("startup"):
            u0 = {name: _unit(mech, j) for j, name in enumerate(mech.joint_names)}
            lines.append(f"  start-up (the skipped first {f['skip']:g} s), largest errors: " + ", ".join(
                f"{j} {_g(r['position_max'], u0[j][0])}, {_g(r['velocity_max'], u0[j][1])}"
                for j, r in f["startup"].items() if r["position_max"] is not None and j in mech.dof_names))
        if f.get("turn_slips"):
            lines.append("  angles compared unwrapped; whole-turn slips: " + ", ".join(
                f"{j} {n}" + (" (SLIPPED)" if n else "") for j, n in f["turn_slips"].items())
                + "; effort: actuator effort without friction vs the truth's joint_states effort")
        if f.get("baselines"):
            from mbfg_ros.replay.baseline_accuracy import summary_lines
            lines += summary_lines(f, mech, bool(f.get("lagged")) or f.get("mode") == "smooth")
        if f.get("consistency"):
            lines.append("  published DOF sigmas against the errors (error / sigma RMS: 1 when honest, above 1 they "
                         "claim too much; in brackets the share within 2 sigma, 95.4 % for Gaussian errors):")
            width = max(len(j) for j in f["consistency"])
            for j, r in f["consistency"].items():
                lines.append(f"    {j:<{width}}  position {r['position']:.2f} ({100 * r['position_within_2_sigma']:.1f} %)"
                             f"  velocity {r['velocity']:.2f} ({100 * r['velocity_within_2_sigma']:.1f} %)")
        for name, row in f["rmse_forces"].items():
            if "reading" in row:
                k = [c.config.name for c in mech.load_cells].index(name)
                lines.append(f"  load cell {name}: {_g(row['reading'], load_cell_unit(mech, k))}")
                continue
            keep = significant_components(comparison, name) if comparison is not None else range(6)
            parts = ", ".join(f"{COMPONENTS[k]} {_g(row[COMPONENTS[k]], 'N' if k < 3 else 'N m')}" for k in keep)
            lines.append(f"  closure {name} (in its frame_b): {parts or 'all components ~0'}")
    elif res.options.truth:
        lines.append("Accuracy: the bag has no ground truth (topics under "
                     f"{mech.config.truth_namespace or '/truth'}, or mapped to them with "
                     "--remap TRUTH_TOPIC:=BAG_TOPIC); estimates and residuals only")
    if f["residuals"]:
        parts = []
        for name, r in f["residuals"].items():
            if not r.get("samples"):
                continue
            rs = ", ".join(f"{a} {s:.2f}" for a, s in zip(r["axes"], r["rms_sigma"]))
            parts.append(f"{name} {rs} sigma")
        lines.append("Residuals (RMS of measured - predicted at the output estimates, in noise sigmas): " + "; ".join(parts))
    if f.get("fit_sigma"):
        lines.append("Fit (each reading's whitened residual at the estimate it was solved in, RMS after the first second): "
                     + "; ".join(f"{name} {v:.2f} sigma" for name, v in f["fit_sigma"].items() if v is not None))
    if f["output"] is not None:
        o = f["output"]
        lines.append(f"Wrote {res.options.out} ({res.options.storage}): {o['messages']} messages on "
                     f"{len(o['topics'])} topics")
    if f.get("plots"):
        lines.append(f"Plots: {len(f['plots'])} PNG files in {f['plots_dir']}")
    if f.get("csv"):
        lines.append(f"CSV: {f['csv']} ({f['csv_rows']} rows)")
    return "\n".join(lines)


def write_csv(path: str | Path, res: ReplayResult, comparison: Comparison | None) -> int:
    """One row per keyframe: stamp (s, relative to ``epoch``), absolute stamp, keyframe, q, v, a,
    effort per joint, closure force/torque (frame_b), load cells, ``diverged`` (1 while a sensor
    failed the divergence test), DOF std if known, and the truth
    at the stamp (``true_*``) when present. Returns the number of rows."""
    mech, e = res.mech, res.estimates
    cols: list[tuple[str, np.ndarray]] = [("stamp", e.t), ("stamp_abs", e.t + res.epoch_ns / 1e9),
                                          ("keyframe", e.keyframe.astype(float))]
    for key, arr in (("q", e.q), ("v", e.v), ("a", e.a), ("effort", e.effort)):
        cols += [(f"{key}_{j}", arr[:, i]) for i, j in enumerate(mech.joint_names)]
    for i, name in enumerate(mech.closure_names):
        cols += [(f"{name}_{COMPONENTS[k]}", e.closure_force[:, i, k]) for k in range(3)]
        cols += [(f"{name}_{COMPONENTS[3 + k]}", e.closure_torque[:, i, k]) for k in range(3)]
    for i, c in enumerate(mech.load_cells):
        cols.append((c.config.name, e.load_cells[:, i]))
    cols.append(("diverged", res.health.divergence.diverged_at(e.t).astype(float)))
    if np.isfinite(e.std).any():
        g = len(mech.dof)
        cols += [(f"std_q_{j}", e.std[:, i]) for i, j in enumerate(mech.dof_names)]
        cols += [(f"std_v_{j}", e.std[:, g + i]) for i, j in enumerate(mech.dof_names)]
    if comparison is not None:
        c = comparison
        for key, arr in (("q", c.truth_q), ("v", c.truth_v), ("a", c.truth_a), ("effort", c.truth_effort)):
            if arr is not None:
                cols += [(f"true_{key}_{j}", arr[:, i]) for i, j in enumerate(mech.joint_names)]
        for name, arr in c.truth_forces.items():
            if arr.shape[1] == 6:
                cols += [(f"true_{name}_{COMPONENTS[k]}", arr[:, k]) for k in range(6)]
            else:
                cols.append((f"true_{name}", arr[:, 0]))
    data = np.column_stack([c[1] for c in cols]) if len(e) else np.zeros((0, len(cols)))
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow([c[0] for c in cols])
        for row in data:
            w.writerow([repr(float(x)) if np.isfinite(x) else "" for x in row])
    return int(data.shape[0])
