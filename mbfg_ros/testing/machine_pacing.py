"""What this machine charges for work done at the pace of real time (`mbfg benchmark --node`).

A live node does its work in short pieces with a sleep between them (one ISAM2 update per
keyframe period); a benchmark's back-to-back loop does the same work without the sleeps. On a
virtual machine with shared cores the two cost different CPU time for the same instructions:
after each sleep the caches, TLBs and branch predictors are cold (another guest used the core)
and the core may have clocked down. ``overhead_ratio`` divides the node's CPU by the
back-to-back figure, so it also holds that cost of the machine.

:func:`paced_factor` measures it apart from the estimator, rclpy and Python's interpreter: a
fixed piece of native work (LAPACK's solve of a 60 x 60 system and eight 60 x 60 products, about
0.1 ms back to back, a working set of about 1 MB like the estimator's), timed by the thread's
CPU clock back to back and then with a sleep of ``period`` between pieces; the factor is the
median paced piece over the median back-to-back one (1 on a machine where waking costs
nothing; 1.8-3.7 measured on this project's 2-vCPU KVM guest at a 4 ms period). No ROS.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

SIZE = 60
"""Order of the piece's matrices."""

PRODUCTS = 8
"""Matrix products per piece (each with its own 120 x 120 operand: the piece's working set)."""


@dataclass(frozen=True)
class PacedFactor:
    """The fixed piece's CPU time back to back and paced (us, medians) and their ratio."""
    back_to_back_us: float
    paced_us: float
    period_ms: float

    @property
    def factor(self) -> float:
        return self.paced_us / self.back_to_back_us if self.back_to_back_us > 0 else float("nan")


def _piece():
    """The fixed work: returns a closure doing one piece."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((SIZE, SIZE))
    a = a @ a.T + SIZE * np.eye(SIZE)
    b = rng.standard_normal((SIZE, 20))
    ops = [rng.standard_normal((2 * SIZE, 2 * SIZE))[:SIZE, :SIZE] for _ in range(PRODUCTS)]
    solve = np.linalg.solve

    def piece():
        x = solve(a, b)
        for w in ops:
            x = w @ x
        return x
    return piece


def _cpu_times(piece, n: int, pause: float) -> np.ndarray:
    """Thread CPU time of each of ``n`` pieces (s), ``pause`` s of sleep after each."""
    times = np.empty(n)
    clock, sleep = time.thread_time, time.sleep
    for i in range(n):
        c0 = clock()
        piece()
        times[i] = clock() - c0
        if pause > 0:
            sleep(pause)
    return times


def paced_factor(period: float, pieces: int = 400, rounds: int = 10) -> PacedFactor:
    """The machine's factor at a sleep of ``period`` s between pieces (module docstring): about
    ``pieces`` x ``period`` s of wall time, a few ms of CPU. The two ways alternate in ``rounds``
    blocks (each ``pieces / rounds`` pieces back to back, then as many paced), so that a neighbour
    on the host who comes or goes during the measurement moves both alike."""
    piece = _piece()
    for _ in range(50):                   # warm: the first calls load the BLAS kernels
        piece()
    block = max(1, pieces // rounds)
    hot, paced = [], []
    for _ in range(rounds):
        hot.append(_cpu_times(piece, block, 0.0))
        paced.append(_cpu_times(piece, block, period))
    return PacedFactor(float(np.median(np.concatenate(hot))) * 1e6,
                       float(np.median(np.concatenate(paced))) * 1e6, period * 1e3)
