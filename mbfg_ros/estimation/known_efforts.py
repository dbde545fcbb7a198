"""Known input efforts: the commands of ``actuation: known`` joints, as the estimator holds them.

Commands arrive as samples ``command:<joint>`` (N m or N) at any stamps and in any order; the
effort at a time is linear between the two commands around it and held beyond them. Commands
older than twice the lag (at least 0.2 s) before the newest are forgotten, the two newest kept.
No ROS.
"""
from __future__ import annotations

import bisect

import numpy as np

from mbfg_ros.model.channels import COMMAND_PREFIX


class KnownEfforts:
    """The commands of every known-input joint (joint index -> sorted stamps and efforts)."""

    def __init__(self, n: int, joint_names: list[str], lag: float) -> None:
        self.n = n
        self.joint_names = joint_names
        self.horizon = 2.0 * max(lag, 0.1)
        self._t: dict[int, list[float]] = {}
        self._y: dict[int, list[float]] = {}

    def __bool__(self) -> bool:
        """Whether any command has arrived."""
        return bool(self._t)

    def clear(self) -> None:
        self._t.clear()
        self._y.clear()

    def add(self, j: int, stamp: float, effort: float) -> None:
        """A command of joint index j: ``effort`` from ``stamp`` on (s)."""
        ts = self._t.setdefault(j, [])
        ys = self._y.setdefault(j, [])
        i = bisect.bisect(ts, stamp)
        ts.insert(i, stamp)
        ys.insert(i, effort)
        horizon = stamp - self.horizon
        while len(ts) > 2 and ts[1] < horizon:
            ts.pop(0)
            ys.pop(0)

    def at(self, stamp: float) -> np.ndarray:
        """(n,) the known efforts at ``stamp`` (zero on joints without commands)."""
        tau = np.zeros(self.n)
        for j, ts in self._t.items():
            if ts:
                tau[j] = float(np.interp(stamp, ts, self._y[j]))
        return tau

    def at_many(self, stamps: np.ndarray) -> np.ndarray:
        """(len(stamps), n) the known efforts at each stamp."""
        tau = np.zeros((stamps.size, self.n))
        for j, ts in self._t.items():
            if ts:
                tau[:, j] = np.interp(stamps, ts, self._y[j])
        return tau

    def fill(self, p: np.ndarray, layout, streams, t_k: float, h: float) -> None:
        """Write the known efforts of step (t_k - h, t_k] into its parameters p: at the keyframe
        and at the readings of the sensors that need them (``layout``: the StepLayout;
        ``streams``: the measuring streams, each with how many readings the step ``taken``)."""
        if layout.tau is not None:
            p[layout.tau] = self.at(t_k)
        for b, s in zip(layout.blocks, streams):
            if b.tau and s.taken:
                V = b.view(p)[:s.taken]
                V[:, 1 + s.dim:] = self.at_many(t_k - h + V[:, 0] * h)

    def samples_until(self, t1: float) -> list[tuple[str, float, float]]:
        """The commands up to ``t1`` as samples (``command:<joint>``, stamp, effort)."""
        out = []
        for j, ts in self._t.items():
            name = COMMAND_PREFIX + self.joint_names[j]
            out += [(name, t, y) for t, y in zip(ts, self._y[j]) if t <= t1]
        return out
