"""Run the estimator over simulated scenarios and compare with the simulator's ground truth."""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from mbfg_ros.estimation.estimator import Estimator
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.sim.sensors import SensorOptions, synthesize
from support.simulations import config_mechanism, simulated

PI16 = math.pi / 16


@dataclass
class Run:
    mech: Mechanism
    estimator: Estimator
    estimates: list
    trajectory: object
    statuses: list = field(default_factory=list)

    def truth(self, attr: str, times: np.ndarray) -> np.ndarray:
        """Truth of 'q', 'v', 'a' or 'lam' at ``times`` (linear interpolation of the 1 kHz grid)."""
        tr = self.trajectory
        X = getattr(tr, attr)
        return np.stack([np.interp(times, tr.t, X[:, j]) for j in range(X.shape[1])], axis=1)

    def errors(self, attr: str, after: float = 0.0, dof_only: bool = True) -> np.ndarray:
        est = [e for e in self.estimates if e.stamp >= after]
        t = np.array([e.stamp for e in est])
        E = np.array([getattr(e, attr) for e in est])
        T = self.truth(attr, t)
        err = E - T
        return err[:, self.mech.dof] if dof_only else err

    def rmse(self, attr: str, after: float = 1.0) -> np.ndarray:
        e = self.errors(attr, after)
        return np.sqrt(np.mean(e * e, axis=0))


def run_estimator(rig: str, duration: float = 4.0, *, offset: float = PI16, gravity_error: float = 0.0,
                  options: SensorOptions | None = None, estimator_config=None, shuffle: float = 0.0,
                  config_rig: str | None = None, feed=None, **estimator_kwargs) -> Run:
    """Simulate ``rig`` (truth starts ``offset`` rad away from the config's initial DOF values),
    synthesize its sensors and feed them to an Estimator built on the config's (nominal) model.
    ``shuffle`` > 0 perturbs arrival order by up to that many seconds (late samples)."""
    mech = config_mechanism(config_rig or rig)
    traj = simulated(rig, duration=duration, initial_dof_offset=offset, gravity_error=gravity_error)
    samples = synthesize(traj, options or SensorOptions(seed=1), config_mechanism=mech)
    order = [(s.receive, s) for s in samples]
    if shuffle > 0:
        rng = np.random.default_rng(7)
        order = [(r + rng.uniform(0, shuffle), s) for r, s in order]
    order.sort(key=lambda x: x[0])
    est = Estimator(mech, estimator_config, freeze_gc=False, **estimator_kwargs)
    out, statuses = [], []
    for _, s in order:
        if feed is not None:
            feed(est, s)
        statuses.append(est.add_sample(s.sensor, s.stamp, s.value))
        out.extend(est.pop_estimates())
    est.flush()
    out.extend(est.pop_estimates())
    return Run(mech, est, out, traj, statuses)


def with_estimator(mech: Mechanism, **changes):
    return replace(mech.config.estimator, **changes)
