"""What the offline smoother takes and gives: its options, a recording's readings as arrays, the
windows it solved and the smoothed states, and Estimate objects of smoothed keyframes made on
demand. No ROS.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from mbfg_ros.estimation.layout import StateLayout
from mbfg_ros.estimation.outputs import Estimate


@dataclass(frozen=True)
class SmoothingOptions:
    """How to smooth. ``window``/``overlap``: s of keyframes solved together / shared by
    consecutive windows; ``max_iterations`` Gauss-Newton iterations per window, ending early
    when the cost falls by less than ``tolerance`` (relative), or when the new cost is within
    ``tolerance`` of what the linearisation predicted (so another step could gain no more). The
    default 1e-3 is below the statistical spread of the cost itself (about sqrt(2 / rows),
    3e-3 for a four-bar minute), so further iterations would not change the estimate beyond its
    own uncertainty; ``threads``: threads of the mapped step function (1: serial);
    ``jacobian_mb``: a window is shortened so that its Jacobians take at most this many MB (the
    smoother's largest array; GTSAM holds a copy): 24 s windows for the 6-DOF arm instead of
    60 s, as fast and half the memory (60 s windows took 1 GB, and a run whose memory the kernel
    first had to reclaim from the file cache was 1.5x slower), while a four-bar's 60 s take 48 MB."""
    window: float = 60.0
    overlap: float = 2.0
    max_iterations: int = 10
    tolerance: float = 1e-3
    threads: int = 1
    jacobian_mb: float = 128.0

    def check(self) -> None:
        if not (math.isfinite(self.window) and self.window > 0):
            raise ValueError(f"smoothing window must be > 0 s (value: {self.window:g})")
        if not (math.isfinite(self.overlap) and 0 <= self.overlap < self.window):
            raise ValueError(f"smoothing overlap must be >= 0 s and below the window (value: {self.overlap:g})")
        if not (math.isfinite(self.jacobian_mb) and self.jacobian_mb > 0):
            raise ValueError(f"smoothing: jacobian_mb must be > 0 (value: {self.jacobian_mb:g})")
        if self.max_iterations < 1 or self.threads < 1:
            raise ValueError("smoothing: max_iterations and threads must be >= 1")


@dataclass
class Readings:
    """The readings of one run, per config sensor name: (stamps (N,) s, values (N, dim)); known
    input efforts per joint name: (stamps, efforts (N,)). Any order; NaN/Inf and duplicate
    stamps are dropped and counted (:attr:`SmoothingResult.rejected`)."""
    sensors: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    commands: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)


class NoFiniteReadings(ValueError):
    """:meth:`OfflineSmoother.windows` got no finite reading of any of the config's sensors
    (nothing to smooth); ``rejected``: per sensor (not finite, duplicate stamp), as
    :attr:`SmoothingResult.rejected`."""

    def __init__(self, rejected: dict[str, tuple[int, int]]) -> None:
        super().__init__("no finite readings of any of the config's sensors")
        self.rejected = rejected


@dataclass
class WindowReport:
    first: int                  # first and last keyframe of the window (0-based)
    last: int
    iterations: int
    initial_cost: float         # sum of squared whitened residuals at the initialisation
    cost: float                 # at the solution
    converged: bool


@dataclass
class SolvedWindow:
    """A window at its solution, as :attr:`~.offline_smoother.OfflineSmoother.window_solved`
    gets it: its first keyframe, states X (K, D), step parameters P (K, P), prior (mean,
    square-root information) on X[0], the rows of X it settles (``settled``); the step
    function that linearised it is the smoother's."""
    first: int
    X: np.ndarray
    P: np.ndarray
    prior: tuple[np.ndarray, np.ndarray]
    settled: slice


@dataclass
class SmoothingResult:
    t0: float                   # s: stamp of keyframe 0 (the earliest reading)
    h: float                    # s between keyframes
    x: np.ndarray               # (K, D) the smoothed states
    used: dict[str, int]        # readings used per sensor (and command:<joint>)
    rejected: dict[str, tuple[int, int]]   # per sensor: (not finite, duplicate stamp)
    windows: list[WindowReport]
    timings: dict[str, float]   # s (wall): causal, linearize, solve, total
    cpu: float                  # s of process CPU
    efforts: object = None      # t (N,) s -> (N, n): the known input efforts (linear between commands)

    @property
    def times(self) -> np.ndarray:
        return self.t0 + self.h * np.arange(self.x.shape[0])


class SmoothedEstimates(Sequence):
    """Estimate objects of smoothed keyframes, made on demand (a batch of outputs needs only the
    few that /diagnostics reports; the states stay arrays)."""

    def __init__(self, t: np.ndarray, keyframes: np.ndarray, X: np.ndarray, effort: np.ndarray,
                 layout: StateLayout) -> None:
        self.t, self.keyframes, self.X, self.effort, self.layout = t, keyframes, X, effort, layout

    def __len__(self) -> int:
        return int(self.t.size)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return Estimate(float(self.t[i]), int(self.keyframes[i]), True, self.X[i], self.layout, self.effort[i])
