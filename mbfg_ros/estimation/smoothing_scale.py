"""The model-uncertainty scale for the offline smoother: the one the online estimator holds.

The online estimator chooses one factor on ``noise.dynamics``, ``noise.input_random_walk`` and
``model_error.random_walk`` from its innovations over a run's first seconds
(:mod:`.model_uncertainty`). The offline smoother (``mbfg replay --smooth``) used the noises as
configured, so on a rig whose noises are loose for its model it smoothed with noises the online
estimator had rejected: on a simulated double pendulum with an identified model, the online
search held 0.032 and the lagged effort error fell to 0.08-0.10 of the unidentified config's,
while the smoothed one, at scale 1, only to 0.54-0.70.

:func:`online_scale` feeds a recording's readings in stamp order to an online estimator of the
same config until its search holds a scale (at ``SETTLE`` s when the innovations start none, at
``model_uncertainty.seconds`` s after the start when they do) and returns it: the same rule, on
the same readings, as the filtered and lagged estimates of that recording. The truth is never
used. No ROS.
"""
from __future__ import annotations

import numpy as np

from mbfg_ros.estimation.estimator import Estimator
from mbfg_ros.model.config import EstimatorConfig
from mbfg_ros.model.mechanism import Mechanism


def online_scale(mech: Mechanism, cfg: EstimatorConfig,
                 readings: dict[str, tuple[np.ndarray, np.ndarray]]) -> tuple[float, bool]:
    """(scale, searched): the model-uncertainty scale an online estimator of ``mech`` with
    ``cfg`` holds on ``readings`` (per sensor or ``command:<joint>`` channel: stamps (N,) s and
    values (N, dim)), and whether its innovations started a search. 1.0 and False when the
    config does not adapt it; the best scale so far when the readings end before it is held."""
    if not cfg.model_uncertainty.adapt:
        return 1.0, False
    est = Estimator(mech, cfg, freeze_gc=False)
    u = est.uncertainty
    if u is None:
        return 1.0, False
    names, stamps, rows, values = [], [], [], []
    for i, (name, (t, y)) in enumerate(readings.items()):
        t = np.asarray(t, float).reshape(-1)
        names.append(name)
        values.append(np.asarray(y, float).reshape(t.size, -1))
        stamps.append(t)
        rows.append(np.column_stack([np.full(t.size, i), np.arange(t.size)]))
    if not names:
        return 1.0, False
    t_all = np.concatenate(stamps)
    idx = np.concatenate(rows)
    ok = np.isfinite(t_all)
    t_all, idx = t_all[ok], idx[ok]
    for j in np.argsort(t_all, kind="stable"):
        s, r = idx[j]
        est.add_sample(names[s], float(t_all[j]), values[s][r])
        if not u.active:
            break
    return est.model_scale, u.searched
