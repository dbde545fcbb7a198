"""Measured cost of the model's residual + Jacobian evaluations (`mbfg check --timing`)."""
from __future__ import annotations

import time

import numpy as np

from mbfg_ros.model.mechanism import Mechanism


def best_us(fn, repeat: int = 5, number: int = 300) -> float:
    """Best-of-``repeat`` mean time of ``fn()`` in microseconds (the best run is the one least
    disturbed by other load on the machine)."""
    fn()
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t0) / number)
    return best * 1e6


def model_costs(mech: Mechanism, q: np.ndarray, v: np.ndarray) -> list[tuple[str, float]]:
    """(what, microseconds per call) of each residual + Jacobian kind at the state (q, v)."""
    d = mech.create_data()
    rng = np.random.default_rng(0)
    a = rng.standard_normal(mech.n)
    lam = rng.standard_normal(mech.m)
    u = np.zeros(mech.n_u)
    out = []
    if mech.m:
        out.append((f"closures, all {mech.m} rows at position + velocity + acceleration level, "
                    "with the multiplier Hessian", best_us(lambda: mech.closures(d, q, v, a, lam))))
        out.append((f"closures, position level only ({mech.m} rows)", best_us(lambda: mech.closure_position(d, q))))
        c = mech.closures(d, q, v, a, lam)
        out.append(("dynamics residual + Jacobians (given the closure evaluation)",
                    best_us(lambda: mech.inverse_dynamics(d, q, v, a, lam, None, u, closure=c, parameters=False))))
    out.append(("dynamics residual + Jacobians (standalone)",
                best_us(lambda: mech.inverse_dynamics(d, q, v, a, lam, None, u, parameters=False))))
    for g in mech.gyros:
        out.append((f"gyro {g.config.name} ({len(g.rows)} axis{'' if len(g.rows) == 1 else 'es'})",
                    best_us(lambda g=g: g.evaluate(mech, d, q, v))))
    for cell in mech.load_cells:
        out.append((f"load cell {cell.config.name} ({cell.config.measures})",
                    best_us(lambda cell=cell: cell.evaluate(mech, d, q, v, a, lam, u, np.zeros(mech.n)),
                             number=100 if cell.config.measures == "joint" else 300)))
    return out
