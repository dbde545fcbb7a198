"""Motion between two keyframes of a step h seconds long: Hermite bases, q and v at a fraction
of the step (quintic Hermite on q, cubic on v), the rest linear. Works on CasADi and numpy values;
the step function reads sensors stamped between keyframes through it, the replay its residuals."""
from __future__ import annotations

from mbfg_ros.estimation.layout import StateLayout


def hermite(s):
    """Cubic Hermite basis (h00, h10, h01, h11) at the fraction s in [0, 1]."""
    s2 = s * s
    s3 = s2 * s
    return 2 * s3 - 3 * s2 + 1, s3 - 2 * s2 + s, -2 * s3 + 3 * s2, s3 - s2


def quintic(s):
    """Quintic Hermite basis at the fraction s in [0, 1] and its derivative d/ds: the weights of
    (q0, h v0, h^2 a0, q1, h v1, h^2 a1), ((b0, b1, b2, b3, b4, b5), (d0, d1, d2, d3, d4, d5))."""
    s2 = s * s
    s3 = s2 * s
    s4 = s3 * s
    s5 = s4 * s
    b = (1 - 10 * s3 + 15 * s4 - 6 * s5, s - 6 * s3 + 8 * s4 - 3 * s5, 0.5 * s2 - 1.5 * s3 + 1.5 * s4 - 0.5 * s5,
         10 * s3 - 15 * s4 + 6 * s5, -4 * s3 + 7 * s4 - 3 * s5, 0.5 * s3 - s4 + 0.5 * s5)
    d = (-30 * s2 + 60 * s3 - 30 * s4, 1 - 18 * s2 + 32 * s3 - 15 * s4, s - 4.5 * s2 + 6 * s3 - 2.5 * s4,
         30 * s2 - 60 * s3 + 30 * s4, -12 * s2 + 28 * s3 - 15 * s4, 1.5 * s2 - 4 * s3 + 2.5 * s4)
    return b, d


def interpolate_motion(q0, v0, a0, q1, v1, a1, s, h: float):
    """q and v at fraction s of a step of h seconds between the keyframes (q0, v0, a0) and
    (q1, v1, a1): q from the quintic Hermite through both keyframes' q, v and a (error of order
    h^6 q^(6), against h^4 q^(4) / 384 for the cubic Hermite on q and v: on a slider-crank at 80 rad/s
    with 400 Hz keyframes the crank's angle between keyframes of the true motion within 1.1e-5 rad);
    v from the cubic Hermite on v and a. (The quintic's own derivative would make v exact for
    quintic motion too, but it reads the velocity off (q1 - q0) / h: the estimate's q and v agree
    only within the integration noise, and on the five-bar with two coupler gyros that drove the
    gyros 200 sigma off at the start.) Works on CasADi and numpy values (s may be an array
    broadcast against the rest)."""
    (b0, b1, b2, b3, b4, b5), _ = quintic(s)
    h00, h10, h01, h11 = hermite(s)
    q = b0 * q0 + b1 * h * v0 + b2 * h * h * a0 + b3 * q1 + b4 * h * v1 + b5 * h * h * a1
    v = h00 * v0 + h10 * h * a0 + h01 * v1 + h11 * h * a1
    return q, v


def interpolate(lay: StateLayout, x0, x1, s, h: float):
    """The state at fraction s of the step: q from the quintic Hermite of q, v from the cubic
    Hermite of v (:func:`interpolate_motion`), the rest linear. Works on CasADi and numpy values."""
    n = lay.n
    q, v = interpolate_motion(x0[0:n], x0[n:2 * n], x0[2 * n:3 * n], x1[0:n], x1[n:2 * n], x1[2 * n:3 * n], s, h)
    tail = (1 - s) * x0[2 * n:] + s * x1[2 * n:]
    return q, v, tail
