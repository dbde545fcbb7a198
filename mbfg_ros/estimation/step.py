"""One step of the graph: the factors between keyframes k-1 and k, stacked into one linear factor."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


class LinearizationError(RuntimeError):
    """A factor produced a non-finite residual or Jacobian."""


@dataclass
class TaggedFactor:
    """A factor with the sensor samples it uses (for the per-sensor counts)."""
    factor: object
    samples: list


@dataclass
class Step:
    """The factors of one step (k-1, k); ``x0``/``x1`` are where its linear factor was made,
    ``index`` is that factor's index in ISAM2 (-1 when not in ISAM2) and ``unary`` marks the
    first step of a run (no previous keyframe)."""
    k: int
    factors: list
    index: int = -1
    x0: np.ndarray | None = None
    x1: np.ndarray | None = None
    unary: bool = False


def linearize_step(factors: list, x0: np.ndarray | None, x1: np.ndarray,
                   reweight: bool = True) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """Stack the whitened rows of a step's factors: (r, J0, J1); J0 is None for a unary step."""
    rs, J0s, J1s = [], [], []
    for tf in factors:
        f = tf.factor
        if getattr(f, "robust", False):
            r, J0, J1 = f.linearize(x0 if x0 is not None else x1, x1, reweight)
        else:
            r, J0, J1 = f.linearize(x0, x1)
        rs.append(r)
        J1s.append(J1)
        J0s.append(J0 if J0 is not None else np.zeros_like(J1))
    r = np.concatenate(rs)
    J1 = np.vstack(J1s)
    J0 = np.vstack(J0s) if x0 is not None else None
    if not (math.isfinite(r @ r) and math.isfinite(J1.sum())):
        raise LinearizationError("a factor's residual or Jacobian is not finite")
    return r, J0, J1
