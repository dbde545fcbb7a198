"""What the estimator reports: per-keyframe estimates, per-sensor counts, solver health."""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Estimate:
    """The state of one keyframe (filtered = newest, or lagged = smoothed over the window).

    q, v, a (n,): joint positions, velocities, accelerations (rad or m, per s, per s^2);
    lam (m,): closure multipliers; u (n_u,): estimated unknown input efforts; effort (n,): the
    actuator effort of every joint (known inputs + estimated inputs, 0 for passive joints);
    bias: gyro biases (rad/s); covariance: marginal covariance of [q_dof, v_dof] if asked.
    """
    stamp: float
    keyframe: int
    lagged: bool
    q: np.ndarray
    v: np.ndarray
    a: np.ndarray
    lam: np.ndarray
    u: np.ndarray
    effort: np.ndarray
    bias: np.ndarray
    gravity_scale: float = 1.0
    mass_scale: float = 1.0
    covariance: np.ndarray | None = None
    x: np.ndarray | None = None          # the stacked keyframe state


@dataclass
class ClosureForce:
    """A closure's reaction on frame_b's body, expressed in frame_b at its origin (N, N m)."""
    name: str
    frame: str
    force: np.ndarray
    torque: np.ndarray


@dataclass
class Forces:
    """Forces derived from an estimate (computed on demand: ``Estimator.forces``)."""
    closures: list[ClosureForce]
    load_cells: dict[str, float]          # the estimated reading of every load cell (N or N m)
    efforts: dict[str, float]             # actuator effort per actuated joint


@dataclass
class SensorCounts:
    """Every sample of a sensor ends in exactly one of: used, late (used, arrived after its
    keyframe closed), too_old (dropped: older than the window, or stamped before the run
    started), rejected (not finite, or a duplicate stamp), discarded (queued when a reset or a
    failed recovery restarted the estimator), or pending (queued for a keyframe not yet closed);
    ``downweighted`` counts used samples the robust loss treated as outliers."""
    received: int = 0
    used: int = 0
    late: int = 0
    too_old: int = 0
    discarded: int = 0
    rejected_nonfinite: int = 0
    rejected_duplicate: int = 0
    downweighted: int = 0
    pending: int = 0
    first_stamp: float | None = None
    last_stamp: float | None = None

    @property
    def rejected(self) -> int:
        return self.rejected_nonfinite + self.rejected_duplicate

    def rate(self) -> float:
        """Mean rate over the received stamps (Hz)."""
        if self.first_stamp is None or self.last_stamp is None or self.last_stamp <= self.first_stamp:
            return 0.0
        return (self.received - 1) / (self.last_stamp - self.first_stamp)


@dataclass
class Health:
    """Solver health figures (the node publishes them on /diagnostics)."""
    keyframes: int = 0
    recoveries: int = 0
    resets: int = 0
    last_recovery: str = ""
    last_reset: str = ""
    update_ms: deque = field(default_factory=lambda: deque(maxlen=100000))       # wall time per keyframe
    update_cpu_ms: deque = field(default_factory=lambda: deque(maxlen=100000))   # thread CPU time per keyframe
    residual_rms: float = 0.0              # whitened residual RMS of the newest step
    closure_residual: float = 0.0          # max |Phi| at the newest estimate (m or rad)
    relinearizations: int = 0
    unknown_sensor: int = 0

    def latency(self, cpu: bool = False) -> tuple[float, float, float]:
        """(mean, p99, max) update time in ms over the recent keyframes (wall, or thread CPU)."""
        times = self.update_cpu_ms if cpu else self.update_ms
        if not times:
            return 0.0, 0.0, 0.0
        t = np.fromiter(times, float)
        return float(t.mean()), float(np.percentile(t, 99)), float(t.max())
