"""Readings that arrive after their keyframe closed, for the online estimator.

A reading stamped in a step the estimator has already linearised is added as a factor of its
own, linearised at the two keyframes' current estimates (or, while its step waits for its
group's ISAM2 update, at the step's linearisation points) and counted ``late``; one older than
the window, or before the run's first keyframe, is counted ``too_old``; one whose residual is not
finite ``rejected_nonfinite``. No ROS.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from mbfg_ros.estimation.sensor_streams import SensorStream
from mbfg_ros.estimation.step_function import LinearizationError

if TYPE_CHECKING:
    from mbfg_ros.estimation.estimator import Estimator


def reading_factor(est: "Estimator", s: SensorStream, stamp: float, value, k: int, x0: np.ndarray,
                   x1: np.ndarray, new_key: bool = False, shift_x0: bool = True):
    """The factor of one reading of stream s in step k, linearised at (x0, x1); ``new_key``:
    keyframe k is being added (x1 becomes its theta); ``shift_x0`` False: so is k-1."""
    i = est.measuring.index(s)
    tau = est.efforts.at(stamp) if est.fn.reading_layouts[i].blocks[0].tau else None
    r, J0, J1 = est.linearizer.reading(i, s, (stamp - est.time(k - 1)) / est.h, value, tau, x0, x1)
    return est.smoother.factor(k, r, J0, J1, x0 if shift_x0 else None, None if new_key else x1)


def add_late(est: "Estimator", s: SensorStream, stamp: float, value) -> str:
    """Add a reading stamped at or before the newest closed keyframe; returns late, too_old or
    rejected_nonfinite (counted)."""
    sch = est.schedule
    k = sch.keyframe_of(stamp)
    window_start = est.smoother.keys[0] if est.smoother.keys else sch.k0
    if k - 1 < window_start or k > sch.closed or (k == sch.k0 and not est.smoother.keys):
        s.counts.too_old += 1
        return "too_old"
    group = {g.k: g for g in est.group}
    try:
        if k in group:                   # its step waits in the group: linearise at its points
            f = reading_factor(est, s, stamp, value, k, est.states[k - 1], est.states[k], new_key=True,
                               shift_x0=k - 1 not in group)
            group[k].factors.append(f)
            group[k].extra.append((s, stamp, value))
            s.counts.used += 1
            return "late"
        x0, x1 = est.smoother.estimate(k - 1), est.smoother.estimate(k)
        f = reading_factor(est, s, stamp, value, k, x0, x1)
    except LinearizationError:
        s.counts.rejected_nonfinite += 1
        return "rejected_nonfinite"
    est.late.append((k, f))
    s.counts.late += 1
    return "late"
