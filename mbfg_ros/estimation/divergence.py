"""Divergence test: a rolling innovation test per sensor.

After each solve the estimator evaluates, at the new estimate, the whitened residual of every
reading of the newest step (|r| / sigma, the RMS over a reading's rows) and hands them here. Per
sensor, the RMS of those residuals over the last ``window`` seconds (default 0.5 s) is the
figure; above ``limit`` sigmas (default 5) with at least ``min_readings`` readings in the window,
the sensor **fails** the test: the estimate does not explain its readings to their noise. The
failing period ends once the RMS of the sensor's recent residuals (the last ``recent`` s, default
0.1 s) is back within the limit as well: it agrees with the estimate again. A healthy estimate
has an RMS near 1. A failing period has a verdict:

- ``strained`` (the default): the sensor is fitted worse than its noise while the estimate is
  consistent otherwise (model error, integration at speed, a noise set too low). The node's
  /diagnostics says WARN naming the likely ``cause``;
- ``lost``: the estimate is lost (a whole-turn slip against an encoder, no sensor agreeing with
  it for a whole window, residuals far beyond the limit for a whole window, a restart): ERROR on
  /diagnostics and ``DIVERGED`` in the replay. The estimator judges this
  (:meth:`DivergenceMonitor.lose`), since it knows the sensors; a period never goes back from lost.

A period may carry a ``note``: what the motion asks of the keyframe rate, with the setting to
change. Periods are kept for the replay's summary and JSON (``start``, ``end`` in the
estimator's time, s; ``peak`` sigmas; ``verdict``, ``cause``, ``note``), the node's /diagnostics
turns them into statuses (:func:`mbfg_ros.intake.sensor_health.divergence_verdicts`).
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

WINDOW = 0.5          # s
LIMIT = 5.0           # sigmas
MIN_READINGS = 5
STRAINED = "strained"
LOST = "lost"
SETTLE = 1.0
"""s after the first reading before the run's fit (:meth:`DivergenceMonitor.run_rms`) counts."""
RECENT = 0.1
"""s: a failing period ends once the RMS of the sensor's recent residuals (this span, at least
``min_readings`` of them) is back within the limit: it agrees with the estimate again. The
window's RMS would hold a burst for up to a window after it (a real rig's 0.2 s jerk at the start
flagged for 0.7 s)."""
HUGE = 1e300
"""sigma^2: a non-finite sum of squared residuals counts as this much."""
KEPT_PERIODS = 10_000
"""The newest periods kept (a node that runs for months stays bounded; ``period_count`` counts all)."""


@dataclass
class DivergencePeriod:
    """A span in which a sensor's rolling residual RMS exceeded the limit (times in s of the
    estimator's time; ``end`` None while open; ``peak`` the largest RMS, sigmas); ``verdict``
    STRAINED or LOST, ``cause`` why (the likely cause, or the evidence of a lost estimate),
    ``note`` advice on the keyframe rate ("" if none)."""
    sensor: str
    start: float
    end: float | None
    peak: float
    verdict: str = STRAINED
    cause: str = ""
    note: str = ""

    @property
    def lost(self) -> bool:
        return self.verdict == LOST

    def as_dict(self) -> dict:
        return {"sensor": self.sensor, "start": self.start, "end": self.end, "peak_sigma": self.peak,
                "verdict": self.verdict, "cause": self.cause, "note": self.note}


class _Window:
    __slots__ = ("entries", "sq", "count")

    def __init__(self) -> None:
        self.entries: deque[tuple[float, float, int]] = deque()
        self.sq = 0.0
        self.count = 0


class DivergenceMonitor:
    """Rolling whitened-residual RMS per sensor and the diverged periods (module docstring)."""

    def __init__(self, window: float = WINDOW, limit: float = LIMIT, min_readings: int = MIN_READINGS,
                 settle: float = SETTLE, recent: float = RECENT) -> None:
        self.window, self.limit, self.min_readings = float(window), float(limit), int(min_readings)
        self.settle, self.recent = float(settle), min(float(recent), float(window))
        self._first: float | None = None
        self._w: dict[str, _Window] = {}
        self._r: dict[str, _Window] = {}                # the recent residuals (RECENT)
        self.rms: dict[str, float] = {}                 # newest rolling RMS per sensor (sigmas)
        self.open: dict[str, DivergencePeriod] = {}     # sensors failing the test now
        self.periods: deque[DivergencePeriod] = deque(maxlen=KEPT_PERIODS)   # newest, open ones included
        self.period_count = 0                           # every period since the start
        self._run: dict[str, list[float]] = {}          # sensor -> [sum of squares, readings] since the start
        self._raw: dict[str, list[float]] = {}          # the same before the floors
        self.floor: dict[str, float] = {}               # sensor -> the level its residuals are judged against (1)

    def add(self, sensor: str, stamp: float, residuals) -> None:
        """Whitened residuals (sigmas, one per reading) of ``sensor``'s readings near ``stamp``."""
        if isinstance(residuals, np.ndarray):
            residuals = residuals.tolist()         # (Python floats: the same squares, summed in order)
        n = len(residuals)
        if n == 0:
            return
        sq = float(sum([x * x for x in map(float, residuals)]))
        if not math.isfinite(sq):
            sq = HUGE
        if self._first is None:
            self._first = stamp
        f = self.floor.get(sensor, 1.0)
        if stamp >= self._first + self.settle:
            for sums, value in ((self._raw, sq), (self._run, sq / (f * f))):
                acc = sums.get(sensor)
                if acc is None:
                    acc = sums[sensor] = [0.0, 0]
                acc[0] += HUGE if HUGE < value else value          # (as min(value, HUGE))
                acc[1] += n
        sq /= f * f
        rms = self._roll(self._w, sensor, stamp, sq, n, self.window, 0)
        recent = self._roll(self._r, sensor, stamp, sq, n, self.recent, self.min_readings)
        self.rms[sensor] = rms
        p = self.open.get(sensor)
        failing = self._w[sensor].count >= self.min_readings and rms > self.limit
        if failing and (p is not None or recent > self.limit):
            if p is None:
                p = self.open[sensor] = DivergencePeriod(sensor, stamp, None, rms)
                self.periods.append(p)
                self.period_count += 1
            p.peak = max(p.peak, rms)
        if p is not None and (rms <= self.limit or recent <= self.limit):
            p.end = stamp
            del self.open[sensor]

    @staticmethod
    def _roll(windows: dict, sensor: str, stamp: float, sq: float, n: int, span: float, keep: int) -> float:
        """Add a reading's squares to ``sensor``'s rolling window over ``span`` s (the older
        entries kept while fewer than ``keep`` readings would remain): its RMS."""
        w = windows.get(sensor)
        if w is None:
            w = windows[sensor] = _Window()
        entries = w.entries
        entries.append((stamp, sq, n))
        total, count = w.sq + sq, w.count + n
        oldest = stamp - span
        while entries and entries[0][0] <= oldest and count - entries[0][2] >= keep:
            _, s0, n0 = entries.popleft()
            total -= s0
            count -= n0
        if not entries:
            total, count = 0.0, 0
        w.sq, w.count = total, count
        if not count:
            return 0.0
        return math.sqrt((0.0 if total < 0.0 else total) / count)     # (as max(total, 0.0))

    def run_rms(self) -> dict[str, float]:
        """{sensor: whitened residual RMS of every reading tested from ``settle`` s after the
        first on} (sigmas): how well the estimate fitted each sensor over the run, each reading
        at the estimate it was solved in (restarts included; the start-up left out, as the
        replay's RMSE leaves out its first second)."""
        return {s: math.sqrt(sq / n) for s, (sq, n) in self._run.items() if n}

    def calibrate(self, sensors, most: float) -> None:
        """Judge each of ``sensors`` against the residual level it has shown since ``settle``
        (its RMS, sigmas, within [1, ``most``]) instead of 1: a real machine's encoders read what
        their datasheet noise leaves out (:mod:`.model_uncertainty` calls this while it chooses
        the model's uncertainty, after which the levels are held). A level above the limit
        still fails; a later rise by ``limit`` times fails."""
        raw = self._raw
        for name in sensors:                      # (per reading while the search runs: no max/min calls)
            acc = raw.get(name)
            if acc is not None and acc[1]:
                level = math.sqrt(acc[0] / acc[1])
                level = level if level > 1.0 else 1.0             # max(1, level)
                self.floor[name] = most if most < level else level   # min(level, most)

    @property
    def failing(self) -> dict[str, float]:
        """{sensor: rolling RMS (sigmas)} of the sensors failing the test now (either verdict)."""
        return {s: self.rms.get(s, 0.0) for s in self.open}

    @property
    def diverged(self) -> dict[str, float]:
        """{sensor: rolling RMS (sigmas)} of the sensors whose failing period is LOST now."""
        return {s: self.rms.get(s, 0.0) for s, p in self.open.items() if p.lost}

    @property
    def strained(self) -> dict[str, float]:
        """{sensor: rolling RMS (sigmas)} of the sensors fitted worse than their noise now (STRAINED)."""
        return {s: self.rms.get(s, 0.0) for s, p in self.open.items() if not p.lost}

    def seconds_failing(self, sensor: str, stamp: float) -> float:
        """How long ``sensor`` has been failing at ``stamp`` (0 if it is not)."""
        p = self.open.get(sensor)
        return 0.0 if p is None else stamp - p.start

    def sensors_with_readings(self) -> list[str]:
        """The sensors with readings in their window now."""
        return [s for s, w in self._w.items() if w.count]

    def lose(self, sensor: str, why: str) -> None:
        """Judge ``sensor``'s open period LOST (the estimate is lost), with the evidence."""
        p = self.open.get(sensor)
        if p is not None and not p.lost:
            p.verdict, p.cause = LOST, why

    def restart(self, stamp: float | None = None, lost: str = "") -> None:
        """Close the open periods (at ``stamp``, or their last figure's time) and forget the
        windows: after a reset the estimator starts over. ``lost``: the restart's reason, when
        the estimate was lost (the open periods become LOST with it)."""
        for s, p in self.open.items():
            last = self._w[s].entries[-1][0] if s in self._w and self._w[s].entries else p.start
            p.end = stamp if stamp is not None else last
            if lost and not p.lost:
                p.verdict, p.cause = LOST, lost
        self.open.clear()
        self._w.clear()
        self._r.clear()
        self.rms.clear()

    def diverged_at(self, t, verdict: str = LOST) -> np.ndarray:
        """Whether any sensor's period of ``verdict`` covered each time of ``t`` (closed periods
        [start, end], open ones from their start on)."""
        t = np.asarray(t, float)
        out = np.zeros(t.shape, bool)
        for p in self.periods:
            if p.verdict != verdict:
                continue
            end = math.inf if p.end is None else p.end
            out |= (t >= p.start) & (t <= end)
        return out


SLIP_RADIANS = 1.0
"""rad: an angle encoder whose rolling residual RMS is this far from the estimate shows a lost
estimate (a whole-turn slip is 2 pi), not a strained fit."""
LOST_SIGMAS = 4.0
"""A sensor failing for a whole window at more than this many times the limit (20 sigma by
default) shows a lost estimate: a tracked fast rig's gyro peaks at 5-11 sigma, a lost one's
stays at 30-400."""
LIKELY_CAUSE = ("model error, integration at speed, or a noise set too low (`mbfg tune` estimates the "
                "noises from a recording)")


class LossJudge:
    """Judges the failing periods of a DivergenceMonitor for the estimator: LOST when an angle
    encoder is SLIP_RADIANS off, when every sensor with readings fails at once for a whole window
    (none agrees with the estimate; two sensors at least), or when the only sensor with readings
    fails at more than LOST_SIGMAS times the limit for a whole window (an encoder by these two
    only once its residual level is known, ``judge``); else STRAINED (another sensor agrees
    with the estimate) with its likely cause. An open
    period gets the keyframe-rate note of ``speed_note()`` when it opens and once per window while
    it lasts (the speed seen so far grows; "" keeps the last note)."""

    def __init__(self, encoder_radians: dict[str, float], encoders=None) -> None:
        """``encoder_radians``: {angle encoder name: its noise sigma, rad}; ``encoders``: every
        encoder's name (default the angle encoders)."""
        self.encoder_radians = encoder_radians
        self.encoders = frozenset(encoder_radians if encoders is None else encoders)
        self._noted: dict[int, float] = {}            # period -> when its note was last taken

    def judge(self, mon: DivergenceMonitor, stamp: float, speed_note, encoder_levels: bool = True) -> None:
        """Judge ``mon``'s open periods at ``stamp``. ``encoder_levels``: whether the encoders'
        residual levels are known (False while :mod:`.model_uncertainty` still judges whether
        their noises are right, or sets the floors it found: an encoder is then judged lost
        only by a slip, as the rest is the level the datasheet noise left out)."""
        if not mon.open:
            return
        reading = set(mon.sensors_with_readings())
        none_agree = bool(reading) and reading <= set(mon.open)
        # none has agreed for a whole window: every sensor with readings failing that long
        none_for_window = none_agree and all(stamp - mon.open[s].start >= mon.window for s in reading)
        for name, p in list(mon.open.items()):
            last = self._noted.get(id(p))
            if last is None or stamp - last >= mon.window:     # a note per window while it lasts
                if len(self._noted) > 4 * KEPT_PERIODS:
                    self._noted = {id(q): self._noted.get(id(q), stamp) for q in mon.open.values()}
                self._noted[id(p)] = stamp
                p.note = speed_note() or p.note
            if p.lost:
                continue
            rms = mon.rms.get(name, 0.0)
            whole = stamp - p.start >= mon.window
            judged = encoder_levels or name not in self.encoders
            sigma = self.encoder_radians.get(name)
            radians = None if sigma is None else rms * mon.floor.get(name, 1.0) * sigma
            if radians is not None and radians > SLIP_RADIANS:
                mon.lose(name, f"{radians:.2f} rad from the estimate (a whole-turn slip, or lost)")
            elif none_for_window and judged and len(reading) >= 2:
                mon.lose(name, "no sensor agrees with the estimate: " + ", ".join(sorted(reading)))
            elif none_agree and whole and judged and rms > LOST_SIGMAS * mon.limit:
                mon.lose(name, f"above {LOST_SIGMAS * mon.limit:g} sigma for {mon.window:g} s, the only sensor")
            elif not p.cause:
                p.cause = LIKELY_CAUSE


def test_step(mon: DivergenceMonitor, check, layout, streams, taken: list[int], stamp: float) -> None:
    """Hand the whitened residuals of a step's readings to ``mon``: ``check`` the step function
    (CompiledRows) just evaluated at the new estimate, ``layout`` its StepLayout, ``streams``
    the measuring streams and ``taken`` how many readings of each the step took, ``stamp`` the
    step's keyframe time (s)."""
    absr = None
    for b, s, c in zip(layout.blocks, streams, taken):
        if c:
            if absr is None:
                absr = check.abs.tolist()          # (Python floats, the same values)
            mon.add(s.name, stamp, absr[b.readings.start:b.readings.start + c])
