"""The batch reference: a whole recording smoothed offline, started from the online estimates.

The benchmark compares the online estimator's lagged estimates with the best the same model can
do seeing every reading at once: the recording's samples go through the online estimator (its
filtered estimates), then through the offline smoother (:mod:`.offline_smoother`: the same
step function, Gauss-Newton over the whole chain with GTSAM) in one window, started from the
online estimates interpolated onto its keyframes instead of its own causal pass (on gyro-only
rigs the online estimator's start search and restarts find the motion; a causal pass from the
config's start may not). No ROS.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from mbfg_ros.estimation.estimator import Estimator
from mbfg_ros.estimation.offline_smoother import OfflineSmoother
from mbfg_ros.estimation.outputs import Estimate
from mbfg_ros.estimation.smoothing_io import Readings, SmoothingOptions, SmoothingResult
from mbfg_ros.model.channels import command_joint
from mbfg_ros.model.config import EstimatorConfig
from mbfg_ros.model.mechanism import Mechanism


@dataclass
class ReferenceSmoothing:
    """The smoothed estimates (one per keyframe of the smoother's grid), the online filtered
    estimates it started from, the smoother's result (windows, costs, iterations) and the number
    of whitened residual rows its cost sums."""
    estimates: list[Estimate]
    online: list[Estimate]
    result: SmoothingResult
    rows: int


def readings_of(samples: Iterable[tuple[str, float, object]]) -> Readings:
    """Samples (sensor or ``command:<joint>``, stamp s, value) as the smoother's arrays."""
    per: dict[str, tuple[list[float], list]] = {}
    for name, stamp, value in samples:
        t, y = per.setdefault(name, ([], []))
        t.append(float(stamp))
        y.append(np.atleast_1d(np.asarray(value, float)))
    out = Readings()
    for name, (t, y) in per.items():
        joint = command_joint(name)
        if joint is not None:
            out.commands[joint] = (np.array(t), np.array(y)[:, 0])
        else:
            out.sensors[name] = (np.array(t), np.array(y))
    return out


def reference_smoothing(mech: Mechanism, samples: Iterable[tuple[str, float, object]],
                        config: EstimatorConfig | None = None, *, max_iterations: int = 30) -> ReferenceSmoothing:
    """Smooth a whole recording (``samples`` as for ``Estimator.add_sample``, in arrival order)
    in one window from the online estimates (module docstring)."""
    samples = list(samples)
    est = Estimator(mech, config, freeze_gc=False)
    online: list[Estimate] = []
    for name, stamp, value in samples:
        est.add_sample(name, stamp, value)
        online.extend(est.pop_estimates())
    est.flush()
    online.extend(est.pop_estimates())
    readings = readings_of(samples)
    probe = OfflineSmoother(mech, config)
    times = probe.keyframe_times(readings)
    span = float(times[-1] - times[0]) if times.size > 1 else 0.0
    options = SmoothingOptions(window=span + 10.0 * probe.h, overlap=0.0, max_iterations=max_iterations,
                               jacobian_mb=1e9)
    sm = OfflineSmoother(mech, config, options)
    x_init = None
    if online:
        t = np.array([e.stamp for e in online])
        X = np.stack([e.x for e in online])
        order = np.argsort(t, kind="stable")
        t, X = t[order], X[order]
        x_init = np.column_stack([np.interp(times, t, X[:, j]) for j in range(X.shape[1])])
    result = sm.smooth(readings, x_init=x_init)
    return ReferenceSmoothing(list(sm.estimates(result, 0, result.x)), online, result,
                              int(result.x.shape[0] * sm.fn_layout.R))
