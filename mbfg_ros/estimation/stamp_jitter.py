"""A sensor's stamp jitter, measured from its own stamps as they arrive.

A reading stamped t is taken as the rig's state at t; a stamp off by dt makes an error of the
reading's rate of change times dt, which the step function adds to the reading's noise in
quadrature (:func:`~mbfg_ros.estimation.step_function.timing_weights`). Real logs stamp their
rows from a thread's clock: the DFKI double pendulum's control loop stamps each row at the end
of its 2 ms period, after the motors answered (0.04-0.36 ms RMS as its stamps show, up to 0.5 ms
as its encoder readings show at speed), and at 10 rad/s 0.3 ms is 3e-3 rad, thirty times the
encoders' quantisation.

The stamps of a periodic sensor are t_i = i T + n_i with n_i the timing error (standard
deviation sigma). Their second difference n_i - 2 n_{i-1} + n_{i-2} has variance 6 sigma^2
whatever T is; a step that spans m whole periods (a dropped sample, a late cycle) is counted as
its excess over m T. So per stream:

    sigma^2 = EMA over about :data:`SPAN` readings of (d_i - d_{i-1})^2 / 6,
    d_i = dt_i - m_i T,   m_i = max(1, round(dt_i / T)),   T an EMA of the steps near it.

What the stamps cannot show is a reading taken at a varying time within a regular stamp
period; the model's uncertainty (:mod:`.model_uncertainty`) takes that up. No ROS.
"""
from __future__ import annotations

import math

SPAN = 500
"""readings the rolling estimate averages over (1 s at 500 Hz)."""

MIN_STEPS = 20
"""steps a stream needs before its jitter is measured (0 until then)."""

INF = math.inf

MAX_FRACTION = 0.5
"""the measured jitter is held below this fraction of the sensor's period: a stream whose stamps
wander more than that is irregular by design (events), not a jittered periodic one."""


class StampJitter:
    """Rolling standard deviation (s) of one sensor's stamp timing error (module docstring)."""

    def __init__(self, span: int = SPAN) -> None:
        self.rate = 1.0 / span
        self.span = 1.0 / self.rate      # (readings: the running mean's weight is 1 / (steps + 1) up to here)
        self.reset()

    def reset(self) -> None:
        self.last = -math.inf
        self.period = 0.0                # s, the EMA of the steps (0: none yet)
        self.excess = math.nan           # s, the last step's excess over its whole periods
        self.var6 = 0.0                  # EMA of the squared second differences
        self.steps = 0

    def restart(self) -> None:
        """A jump in time: the next stamp starts a new sequence (the statistics stay)."""
        self.last = -math.inf
        self.excess = math.nan

    def add(self, stamp: float) -> None:
        """A new reading's stamp (a stamp not after the last one is ignored). Called per
        reading: plain comparisons instead of max(), the same arithmetic."""
        last = self.last
        dt = stamp - last
        if stamp > last:
            self.last = stamp
        if not 0.0 < dt < INF:                   # (dt positive and finite)
            return
        T = self.period
        if T <= 0:
            self.period = dt
            return
        m = round(dt / T)
        if m < 1:
            m = 1
        d = dt - m * T
        if m == 1 and abs(d) < 0.5 * T:
            T += self.rate * 10 * d                # the period follows the regular steps faster
            self.period = T
        excess = self.excess
        if math.isfinite(excess):                  # (a step before this one)
            steps = self.steps
            r = self.rate if steps > self.span else 1.0 / (steps + 1)
            self.var6 += r * ((d - excess) ** 2 - self.var6)
            self.steps = steps + 1
        self.excess = d

    @property
    def sigma(self) -> float:
        """s, the stamps' timing error (0 before :data:`MIN_STEPS` steps)."""
        if self.steps < MIN_STEPS:
            return 0.0
        v = self.var6
        s = math.sqrt((0.0 if v < 0.0 else v) / 6.0)        # (as max(v, 0), NaN kept)
        cap = MAX_FRACTION * self.period
        return cap if cap < s else s                         # (as min(s, cap))
