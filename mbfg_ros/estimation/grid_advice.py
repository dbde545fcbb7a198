"""What the motion asks of the keyframe grid, for the divergence reports' notes.

When a sensor starts failing the divergence test the report says, where it applies, what to
change: the DOF speed the encoders' readings in the window show (10 ms differences; else the
estimate's own DOF speed) against the rate :func:`~mbfg_ros.model.speed.needed_keyframe_rate`
asks for it ("encoders show 72 rad/s: set mechanism.top_speed: 72 (keyframe_rate auto) or
keyframe_rate: 400"), or a motion rougher than the integration noise allows (the velocity rows'
truncation the estimate shows, :meth:`IntegrationNoise.roughness`, above :data:`ROUGH_FACTOR`
times the default noise: "set keyframe_rate: 800"). No ROS.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from mbfg_ros.model.speed import needed_keyframe_rate

if TYPE_CHECKING:
    from mbfg_ros.estimation.estimator import Estimator

ROUGH_FACTOR = 2.0
"""A note advises a finer grid when the velocity rows' truncation the estimate shows exceeds the
default integration noise by this factor."""
ROUGH_MARGIN = 1.5
"""The finer grid advised is this times the one at which the RMS truncation would meet the noise
(the truncation peaks at dead centres: on a slider-crank at 20-78 rad/s whose RMS truncation at
400 Hz was 2.7 times the noise, 600 Hz fitted its gyro at 2.0 sigma, 800 Hz at 1.13)."""
SPEED_BASELINE = 0.01
"""s: encoder readings this far apart give the speed (a quantisation step does not count)."""


def encoder_speed(series: dict[str, tuple[list[float], list[float], bool]]) -> float | None:
    """The fastest speed over differences of at least SPEED_BASELINE s of each encoder's
    readings ({name: (stamps, values, wraps)}; a single-turn encoder's values are unwrapped),
    rad/s or m/s; None without enough readings."""
    best = None
    for t, q, wraps in series.values():
        if len(t) < 3:
            continue
        t, q = np.array(sorted(zip(t, q))).T
        if wraps:
            q = np.unwrap(q)
        step = max(1, int(round(SPEED_BASELINE / max(float(np.median(np.diff(t))), 1e-6))))
        if step >= t.size:
            continue
        dt = t[step:] - t[:-step]
        ok = dt > 0
        if ok.any():
            w = float(np.abs((q[step:] - q[:-step])[ok] / dt[ok]).max())
            best = w if best is None else max(best, w)
    return best


def grid_note(speed: float | None, source: str, rate: float, positions_sensed: bool, roughness: float) -> str:
    """The note for a failing period ("" when the grid suffices): ``speed`` (rad/s) as ``source``
    shows it ("encoders show", "the estimate shows") against the keyframe ``rate`` (Hz), else
    the motion's ``roughness`` (IntegrationNoise.roughness)."""
    if speed is not None:
        need = needed_keyframe_rate(speed, positions_sensed)
        if need > rate + 1e-9:
            return (f"{source} {speed:.0f} rad/s: set mechanism.top_speed: {math.ceil(speed)} (keyframe_rate auto) or "
                    f"keyframe_rate: {need:g}")
    if roughness > ROUGH_FACTOR:
        finer = 50.0 * math.ceil(ROUGH_MARGIN * rate * roughness ** (1.0 / 3.0) / 50.0)
        return (f"the motion is {roughness:.1f} times rougher than the integration noise at {rate:g} Hz allows "
                f"(velocity rows' truncation; a heavy link on a light crank swings its speed within a turn): "
                f"set keyframe_rate: {finer:g}")
    return ""


def window_note(est: "Estimator") -> str:
    """The note of a failing period of ``est``: the DOF speed its DOF encoders' readings in the
    window show (else its estimate's), against its keyframe rate, else its motion's roughness."""
    names = est.restarts.dof_encoders
    series = {n: ([], [], est.mech.encoders[est.gate.sensors[n].index].wraps) for n in names}
    for kk in list(est.smoother.keys)[1:]:
        for s, stamp, value in est.step_readings(est.records.parameters(kk), est.time(kk - 1)):
            if s.name in series:
                series[s.name][0].append(stamp)
                series[s.name][1].append(float(value))
    src, w = "encoders show", encoder_speed(series)
    if w is None:
        X = est.smoother.all_estimates() if len(est.smoother) else None
        if X is None or not len(X):
            return ""
        src, w = "the estimate shows", float(np.abs(X[:, est.lay.V][:, est.mech.dof]).max())
    return grid_note(w, src, est.cfg.keyframe_rate, est.mech.dof_positions_sensed, est.integration.roughness())
