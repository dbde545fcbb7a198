"""The ground truth an estimator is compared with, at a chosen rate.

Per sample: every joint's position, velocity, acceleration and applied actuator effort (known
plus unknown input; zero for passive joints; friction is not included), the reaction wrench of
every closure on frame_b's body (expressed IN frame_b, at its origin), and every load cell's
true (noise-free) reading.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.sim.sensors import sample_times

if TYPE_CHECKING:        # a type only: reading a bag's truth topics then needs no scipy.integrate
    from mbfg_ros.sim.forward import Trajectory

DEFAULT_TRUTH_RATE = 200.0
"""Hz, the default rate of the ground truth (the estimator's default keyframe rate)."""


@dataclass
class GroundTruth:
    """Ground truth samples (N of them).

    Attributes:
        t: (N,) s from the start of the run.
        joint_names: the n joints (Mechanism.joint_names order).
        q, v, a: (N, n) rad or m, rad/s or m/s, rad/s^2 or m/s^2.
        effort: (N, n) applied actuator effort per joint, N m or N.
        closure_names, closure_frames: the closures and their frame_b (where wrenches act).
        closure_force, closure_torque: (N, n_closures, 3) the closure's reaction on frame_b's
            body, in frame_b coordinates, at frame_b's origin (N, N m).
        load_cell_names, load_cell_frames: the load cells and the frame of each one's axis.
        load_cell_axes: (n_cells, 3) unit axes in those frames; load_cell_components: force|torque.
        load_cells: (N, n_cells) the true readings (N or N m).
    """
    t: np.ndarray
    joint_names: list[str]
    q: np.ndarray
    v: np.ndarray
    a: np.ndarray
    effort: np.ndarray
    closure_names: list[str]
    closure_frames: list[str]
    closure_force: np.ndarray
    closure_torque: np.ndarray
    load_cell_names: list[str]
    load_cell_frames: list[str]
    load_cell_axes: np.ndarray
    load_cell_components: list[str]
    load_cells: np.ndarray


def closure_wrench_in_frame_b(mech: Mechanism, data, k: int, q: np.ndarray,
                              lam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Closure k's reaction on frame_b's body at frame_b's origin, in frame_b (N, N m), from
    the multipliers ``lam`` (all m of them) at ``q``; ``data`` is the Mechanism's scratch."""
    f, t = mech.closure_wrench(data, k, q, lam)
    fid = mech.frame_id(mech.closure_configs[k].frame_b)
    R = mech.frame_placement(data, q, fid).rotation
    return R.T @ f, R.T @ t


def ground_truth(trajectory: Trajectory, rate: float | None = DEFAULT_TRUTH_RATE) -> GroundTruth:
    """The truth at t_k = k / rate (k = 0 .. while below the duration), or on the trajectory's
    own grid when ``rate`` is None."""
    mech = trajectory.mechanism
    if rate is None:
        t = trajectory.t.copy()
        q, v, a, lam, tau, u = (trajectory.q, trajectory.v, trajectory.a, trajectory.lam,
                                trajectory.tau, trajectory.u)
    else:
        t = sample_times(trajectory.duration, rate)
        q, v, a, lam, tau, u = trajectory.state_at(t)
    d = mech.create_data()
    N, nc, ncell = t.size, len(mech.closure_configs), len(mech.load_cells)
    force = np.zeros((N, nc, 3))
    torque = np.zeros((N, nc, 3))
    for i in range(N):
        for k in range(nc):
            force[i, k], torque[i, k] = closure_wrench_in_frame_b(mech, d, k, q[i], lam[i])
    cells = np.zeros((N, ncell))
    for i in range(N):
        for k in range(ncell):
            cells[i, k] = mech.load_cells[k].value(mech, d, q[i], v[i], a[i], lam[i], u[i], tau[i])[0]
    return GroundTruth(
        t=t, joint_names=list(mech.joint_names), q=q.copy(), v=v.copy(), a=a.copy(),
        effort=tau + u @ mech.B.T,
        closure_names=list(mech.closure_names),
        closure_frames=[c.frame_b for c in mech.closure_configs],
        closure_force=force, closure_torque=torque,
        load_cell_names=[c.config.name for c in mech.load_cells],
        load_cell_frames=[c.header_frame(mech) for c in mech.load_cells],
        load_cell_axes=np.array([c.axis for c in mech.load_cells]).reshape(ncell, 3),
        load_cell_components=[c.config.component for c in mech.load_cells],
        load_cells=cells)
