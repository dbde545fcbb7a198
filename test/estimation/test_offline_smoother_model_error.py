"""The offline smoother with the model-error forces and the log gravity scale in the state: the
same StateLayout blocks as the online estimator, and a gravity error taken up."""
from __future__ import annotations

import dataclasses

import numpy as np

from mbfg_ros.estimation.layout import StateLayout
from mbfg_ros.estimation.offline_smoother import OfflineSmoother, Readings
from mbfg_ros.model.config import ModelErrorConfig
from mbfg_ros.sim.sensors import SensorOptions, synthesize
from support.simulations import config_mechanism, simulated


def test_smooths_with_the_model_error_state_and_a_gravity_error():
    """Truth 2 m/s^2 stronger gravity than the model; smoothing with the model-error forces
    (24 N m per sqrt(s)) and the gravity scale on: the smoothed positions are close to the truth
    and the scale is positive and near the truth's."""
    mech = config_mechanism("four_bar")
    tr = simulated("four_bar", duration=3.0, gravity_error=2.0)
    samples = synthesize(tr, SensorOptions(seed=3))
    readings = Readings()
    for name in {s.sensor for s in samples}:
        mine = [s for s in samples if s.sensor == name]
        readings.sensors[name] = (np.array([s.stamp for s in mine]), np.array([np.atleast_1d(s.value) for s in mine]))
    cfg = dataclasses.replace(mech.config.estimator, model_error=ModelErrorConfig(24.0), estimate_gravity=True)
    res = OfflineSmoother(mech, cfg).smooth(readings)
    lay = StateLayout.for_mechanism(mech, cfg)
    assert res.x.shape[1] == lay.dim and lay.n_e == mech.n
    keep = res.times >= 1.0
    q_true = tr.state_at(res.times[keep], level=0)[0]
    err = res.x[keep][:, mech.dof] - q_true[:, mech.dof]
    assert float(np.sqrt(np.mean(err ** 2))) < 3e-3              # measured 0.97 mrad
    scale = lay.gravity_scales(res.x)
    assert np.all(scale > 0.0)
    assert abs(scale[-1] - (9.81 + 2.0) / 9.81) < 0.1            # measured 1.25 (truth 1.20)
