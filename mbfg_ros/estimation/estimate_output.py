"""The online estimator's output side: estimates of closed keyframes waiting to be popped, the
lagged (smoothed) estimates a lag later, each with its actuator efforts and, on request, the
DOF state's marginal covariance. Estimates not yet popped survive a restart. No ROS.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from mbfg_ros.estimation.outputs import Estimate

if TYPE_CHECKING:
    from mbfg_ros.estimation.estimator import Estimator


class EstimateOutput:
    """Filtered and lagged estimates of one Estimator."""

    def __init__(self, est: "Estimator") -> None:
        self.est = est
        self.out: list[Estimate] = []                # filtered, not yet popped
        self.out_lagged: list[Estimate] = []         # lagged, not yet popped
        self.branch_hint: np.ndarray | None = None   # the last estimated q (survives restarts)
        self.restart(0)

    def restart(self, next_key: int) -> None:
        """A new run whose first keyframe is ``next_key`` (the queues are kept)."""
        self.last: Estimate | None = None
        self.last_lagged: Estimate | None = None
        self.lagged_next = next_key                  # next keyframe to emit as lagged

    def estimate_of(self, k: int, x: np.ndarray, lagged: bool = True, cov=None, copy: bool = True) -> Estimate:
        """The Estimate of keyframe k with state x (copied unless ``copy`` is False)."""
        est = self.est
        lay, mech = est.lay, est.mech
        if copy:
            x = x.copy()
        t = est.time(k)
        effort = est.efforts.at(t) if est.efforts else np.zeros(mech.n)
        if lay.n_u:
            effort += mech.B @ x[lay.U]
        return Estimate(t, k, lagged, x, lay, effort, cov)

    def emit(self, k: int, lagged: bool, x: np.ndarray | None = None) -> None:
        """Output the estimate of keyframe k (state x: by default the newest one read)."""
        est = self.est
        if x is None:
            x = est.states.get(k) if not lagged else None
        if x is None:
            x = est.smoother.estimate(k)
        cov = None
        if est.want_covariance and not lagged:
            try:
                P = est.smoother.covariance(k)
                idx = np.concatenate([est.mech.dof, est.mech.n + est.mech.dof])
                cov = P[np.ix_(idx, idx)]
            except RuntimeError:
                cov = None
        e = self.estimate_of(k, x, lagged, cov, copy=False)     # x: a fresh array from ISAM2
        if lagged:
            self.out_lagged.append(e)
            self.last_lagged = e
        else:
            self.out.append(e)
            self.last = e
            self.branch_hint = e.q

    def emit_lagged(self, upto: int) -> None:
        """Emit keyframes lagged_next .. upto (those still in the window) as lagged estimates,
        from an exact back-substitution (ISAM2's own estimates of old keyframes are only
        refreshed while their change exceeds the wildfire threshold)."""
        sm = self.est.smoother
        keys = [k for k in range(self.lagged_next, upto + 1) if k in sm]
        if keys:
            X = sm.exact_estimates(keys)
            for k, x in zip(keys, X):
                self.emit(k, lagged=True, x=x)
        self.lagged_next = max(self.lagged_next, upto + 1)

    def pop(self, lagged: bool = False) -> list[Estimate]:
        """The estimates made since the last call, oldest first."""
        if lagged:
            out, self.out_lagged = self.out_lagged, []
        else:
            out, self.out = self.out, []
        return out

    def smoothed_window(self) -> list[Estimate]:
        """The current smoothed estimates of every keyframe in the window not yet emitted as
        lagged, oldest first (an exact solve of the window)."""
        sm = self.est.smoother
        keys = [k for k in sm.keys if k >= self.lagged_next]
        if not keys:
            return []
        return [self.estimate_of(k, x, True, copy=False) for k, x in zip(keys, sm.exact_estimates(keys))]
