"""A CasADi function evaluated for a block of inputs in one call (``Function.map``).

Used wherever many keyframes are evaluated at once from numeric arrays: the offline smoother's
step rows and closure projection, the batched forces.
"""
from __future__ import annotations

import casadi as ca


def mapped_function(fn: ca.Function, block: int, threads: int = 1) -> ca.Function:
    """``fn`` evaluated for ``block`` inputs at once (``threads`` > 1: that many threads).

    Keep ``block`` small (tens): building the map takes time that grows faster than the block
    (the arm's step function: 2 ms at 32, 0.28 s at 512) and evaluation is no faster per input
    for larger blocks (4.3 us per arm keyframe at 32, 5.2 at 512: the block's outputs fall out
    of cache)."""
    if threads > 1:
        return fn.map(block, "thread", threads)
    return fn.map(block, "serial")
