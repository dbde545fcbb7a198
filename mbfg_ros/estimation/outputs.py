"""What the estimator reports: per-keyframe estimates, per-sensor counts, solver health."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mbfg_ros.estimation.divergence import DivergenceMonitor
from mbfg_ros.estimation.latency import LatencyRecorder
from mbfg_ros.estimation.layout import StateLayout


@dataclass
class Estimate:
    """The state of one keyframe (filtered = newest, or lagged = smoothed over the window).

    ``x`` is the stacked keyframe state (:mod:`mbfg_ros.estimation.layout`); its parts are views:
    q, v, a (n,): joint positions, velocities, accelerations (rad or m, per s, per s^2);
    lam (m,): closure multipliers; u (n_u,): estimated unknown input efforts; model_error: the
    estimated model-error forces (N m or N, on the coordinates of
    :func:`~mbfg_ros.estimation.layout.model_error_joints`; empty unless enabled); bias: sensor
    biases (gyros rad/s, accelerometers m/s^2); gravity_scale, mass_scale (1 unless estimated). effort (n,): the actuator effort of
    every joint (known inputs + estimated inputs, 0 for passive joints); covariance: marginal
    covariance of [q_dof, v_dof] if asked.
    """
    stamp: float
    keyframe: int
    lagged: bool
    x: np.ndarray
    layout: StateLayout = field(repr=False)
    effort: np.ndarray
    covariance: np.ndarray | None = None

    @property
    def q(self) -> np.ndarray:
        return self.x[:self.layout.n]

    @property
    def v(self) -> np.ndarray:
        n = self.layout.n
        return self.x[n:2 * n]

    @property
    def a(self) -> np.ndarray:
        n = self.layout.n
        return self.x[2 * n:3 * n]

    @property
    def lam(self) -> np.ndarray:
        return self.x[self.layout.L]

    @property
    def u(self) -> np.ndarray:
        return self.x[self.layout.U]

    @property
    def model_error(self) -> np.ndarray:
        return self.x[self.layout.E]

    @property
    def bias(self) -> np.ndarray:
        return self.x[self.layout.B]

    @property
    def gravity_scale(self) -> float:
        return self.layout.gravity_scale(self.x)

    @property
    def mass_scale(self) -> float:
        return self.layout.mass_scale(self.x)


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
    qr_fallback: str = ""                  # where ISAM2's Cholesky elimination failed and QR took over (restarts.py)
    last_reset: str = ""
    timing: LatencyRecorder = field(default_factory=LatencyRecorder)   # time per keyframe
    residual_rms: float = 0.0              # whitened residual RMS of the newest step
    closure_residual: float = 0.0          # max |Phi| at the newest estimate (m or rad)
    relinearizations: int = 0
    gauss_newton_iterations: int = 0       # adaptive refinements of the newest keyframe
    integration_raises: int = 0            # of them, steps whose integration noise rose to their local truncation
    unknown_sensor: int = 0
    divergence: DivergenceMonitor = field(default_factory=DivergenceMonitor)   # rolling innovation test
    reinitialisations: int = 0             # restarts from the encoders (or the start hypotheses) after a divergence
    last_reinitialisation: str = ""
    start_searches: int = 0                # start-hypothesis searches (start_search.py), at start and when lost
    last_start_search: str = ""
    model_scale: float = 1.0               # the scale of the model's uncertainty in use (model_uncertainty.py)
    model_scale_searched: bool = False     # whether the innovations started its search

    def latency(self, cpu: bool = False, whole_run: bool = False) -> tuple[float, float, float]:
        """(mean, p99, max) update time in ms per keyframe (wall, or thread CPU), over the last
        ``timing.window_s`` seconds (default 10), or over the whole run."""
        return self.timing.summary(cpu, whole_run)


def estimate_forces(mech, data, e: Estimate, tau: np.ndarray) -> Forces:
    """Closure reactions (in frame_b), load-cell readings and actuator efforts of an estimate
    whose known input efforts are ``tau`` (n,) (``mech``: the Mechanism, ``data`` its
    MechanismData)."""
    closures = [ClosureForce(c.name, c.frame_b, f, tq) for c, (f, tq) in
                zip(mech.closure_configs, mech.closure_wrenches_in_frame_b(data, e.q, e.lam))]
    cells = {}
    for cell in mech.load_cells:
        cells[cell.config.name] = float(cell.value(mech, data, e.q, e.v, e.a, e.lam, e.u, tau)[0])
    act = set(mech.input_joints) | set(mech.known_input_joints)
    efforts = {name: float(e.effort[mech.index[name]]) for name in mech.joint_names if name in act}
    return Forces(closures, cells, efforts)
