"""The DOF speeds a recording shows (``mbfg check --bag``), read as the replay reads a bag.

The bag's encoder readings come through :class:`~mbfg_ros.replay.bag_input.BagInput` (the
input router decodes them exactly as the node and ``mbfg replay`` do: JointState by joint name,
header stamps, ``remap`` from config topic to bag topic); the speed rule is
:mod:`mbfg_ros.model.speed`'s to judge (what a speed asks of the keyframe rate).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from mbfg_ros.estimation.stamp_jitter import StampJitter
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.replay.bag_input import SENSOR, BagInput

SPEED_STEP = 0.01
"""s between the readings whose difference gives a speed (longer than one sample of noise)."""

SPEED_PERCENTILE = 99.9
"""Percentile of |dq/dt| taken as the top speed (a noise spike does not count)."""


def top_speed_from_bag(mech: Mechanism, bag: str | Path, remap: dict[str, str] | None = None) -> dict:
    """The DOF speeds a recording shows: per encoder on a DOF joint, the largest |dq/dt| over
    10 ms differences of its finite readings (a 99.9th percentile), in rad/s or m/s, and its
    stamps' jitter as the estimator measures it (:mod:`mbfg_ros.estimation.stamp_jitter`) with
    what it costs: the position error it makes at the encoder's RMS speed, and that error over
    the encoder's noise. Returns {"top_speed": max or None, "encoders": {name: speed},
    "readings": {name: count}, "jitter": {name: {"jitter_s", "rms_speed", "error",
    "over_noise"}}, "problem": text or None}."""
    encs = {e.config.name: e for e in mech.encoders if e.config.joint in mech.dof_names}
    if not encs:
        return {"top_speed": None, "encoders": {}, "readings": {},
                "problem": "no encoder measures a DOF: the top speed cannot be read from a recording"}
    inp = BagInput(bag, mech, remap, truth=False)
    data: dict[str, tuple[list, list]] = {name: ([], []) for name in encs}
    for kind, _, _, readings in inp.records():
        if kind != SENSOR:
            continue
        for r in readings:
            if r.sensor in data:
                data[r.sensor][0].append(r.stamp_ns)
                data[r.sensor][1].append(float(r.value[0]))
    speeds, counts, jitter = {}, {}, {}
    for name, (stamps, values) in data.items():
        t = (np.asarray(stamps, np.int64) - (stamps[0] if stamps else 0)) * 1e-9
        q = np.asarray(values, float)
        ok = np.isfinite(q)
        t, q = t[ok], q[ok]
        counts[name] = int(t.size)
        if t.size < 3:
            continue
        o = np.argsort(t, kind="stable")
        t, q = t[o], q[o]
        if encs[name].wraps:
            q = np.unwrap(q)
        step = max(1, int(round(SPEED_STEP / max(float(np.median(np.diff(t))), 1e-6))))
        dt = t[step:] - t[:-step]
        ok = dt > 0
        if ok.sum() < 2:
            continue
        rate = np.abs((q[step:] - q[:-step])[ok] / dt[ok])
        speeds[name] = float(np.percentile(rate, SPEED_PERCENTILE))
        stamps_of = StampJitter()
        for ti in t:
            stamps_of.add(float(ti))
        rms = float(np.sqrt(np.mean(rate * rate)))
        err = stamps_of.sigma * rms
        jitter[name] = {"jitter_s": stamps_of.sigma, "rms_speed": rms, "error": err,
                        "over_noise": err / encs[name].config.noise if encs[name].config.noise > 0 else None}
    top = max(speeds.values()) if speeds else None
    topics = sorted(t for t, st in inp.stats.items() if set(st.sensors) & set(encs))
    return {"top_speed": top, "encoders": speeds, "readings": counts, "jitter": jitter,
            "problem": None if speeds else "the recording holds too few encoder readings on the DOF joints "
                                           f"(topics {', '.join(topics)})"}
