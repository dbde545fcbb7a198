"""What the inputs did over the last seconds, so that /diagnostics tells the truth now and its
warnings clear when their cause is gone (no ROS imports; the estimator node uses it).

:class:`RollingCounts` keeps snapshots of cumulative counters (taken at each diagnostics tick,
steady clock) over a rolling window of ``window`` seconds and gives their increase over it.
:class:`SensorHealth` judges each sensor over that window:

- **not usable**: readings arrived but none was usable (all NaN/Inf, duplicate stamps, out-of-line
  stamps, too old...): WARN with the reasons and counts;
- **unusable messages**: its topic's messages arrive but none holds a reading for it (e.g. a
  JointState without the joint's position): WARN with the decoder's reason;
- **partly unused**: more than ``unused_limit`` (10 %) of the readings that arrived were not used:
  WARN with the reasons;
- **loss**: fewer readings arrived than the configured rate gives for the stamps they span
  (``loss_limit``, 5 %): WARN, lost in transport or the rig publishes slower. Judged per window,
  so a burst elsewhere in the run cannot hide it; ``missing_total`` adds up the shortfall of each
  diagnostics step in which it exceeded 2 % and 2 readings (an estimate of the readings lost in
  the whole run).

Nothing is judged on cumulative totals, so a warning clears once its cause has been gone for a
window.

:func:`divergence_verdicts` turns the estimator's rolling innovation test
(:class:`~mbfg_ros.estimation.divergence.DivergenceMonitor`) into ERROR (lost) or WARN (strained) verdicts naming the
sensor and the figure; they beat every WARN above.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

WINDOW = 5.0
"""s: the default rolling window (the node's ``health_window``)."""

OK, WARN, ERROR = 0, 1, 2
"""Levels of a verdict: those of diagnostic_msgs/DiagnosticStatus (which /diagnostics publishes)."""


class RollingCounts:
    """Snapshots of cumulative counters over the last ``window`` s (see the module docstring)."""

    def __init__(self, window: float = WINDOW) -> None:
        self.window = float(window)
        self._snaps: deque[tuple[float, dict[str, float]]] = deque()

    def clear(self) -> None:
        """Forget every snapshot (after a time jump: stamps before and after do not compare)."""
        self._snaps.clear()

    def update(self, now: float, values: dict[str, float]) -> None:
        """Add the counters' values at ``now`` (s, a steady clock)."""
        self._snaps.append((now, dict(values)))
        # keep the newest snapshot at or before the window's start as the base
        while len(self._snaps) >= 2 and self._snaps[1][0] <= now - self.window:
            self._snaps.popleft()

    @property
    def span(self) -> float:
        """s between the base and the newest snapshot (0 with fewer than two)."""
        return self._snaps[-1][0] - self._snaps[0][0] if len(self._snaps) >= 2 else 0.0

    def delta(self, key: str) -> float:
        """The counter's increase over the window (0 when unknown)."""
        if len(self._snaps) < 2:
            return 0.0
        return self._snaps[-1][1].get(key, 0.0) - self._snaps[0][1].get(key, 0.0)

    def last_step(self, key: str) -> float:
        """The counter's increase since the previous snapshot."""
        if len(self._snaps) < 2:
            return 0.0
        return self._snaps[-1][1].get(key, 0.0) - self._snaps[-2][1].get(key, 0.0)

    def keys(self, prefix: str = "") -> list[str]:
        return [k for k in (self._snaps[-1][1] if self._snaps else {}) if k.startswith(prefix)]


@dataclass(frozen=True)
class SensorFigures:
    """Cumulative figures of one sensor: readings that ``arrived`` at the node, ``usable`` ones
    (used, late, or pending for the estimator), each reason a reading was not used, and the
    newest stamp (s) of the readings that arrived in time order (usable or not: the span the
    configured rate is judged over)."""
    arrived: int
    usable: int
    reasons: dict[str, int]
    duplicates: int
    last_stamp: float | None


class SensorHealth:
    """Per-sensor verdicts over a rolling window (see the module docstring)."""

    def __init__(self, rates: dict[str, float], topics: dict[str, str], window: float = WINDOW,
                 unused_limit: float = 0.1, loss_limit: float = 0.05) -> None:
        self.rates = dict(rates)
        self.topics = dict(topics)
        self.counts = RollingCounts(window)
        self.unused_limit = unused_limit
        self.loss_limit = loss_limit
        self.missing_total: dict[str, float] = {}

    def update(self, now: float, sensors: dict[str, SensorFigures],
               unusable: dict[str, dict[str, int]]) -> None:
        """Snapshot at ``now`` (s, steady clock): each sensor's figures and, per topic, the
        messages the decoder could not use by reason."""
        values: dict[str, float] = {}
        for name, f in sensors.items():
            values[f"{name}|arrived"] = f.arrived
            values[f"{name}|usable"] = f.usable
            values[f"{name}|duplicates"] = f.duplicates
            values[f"{name}|stamp"] = f.last_stamp if f.last_stamp is not None else float("nan")
            for reason, n in f.reasons.items():
                values[f"{name}|reason|{reason}"] = n
        for topic, reasons in unusable.items():
            for reason, n in reasons.items():
                values[f"{topic}|unusable|{reason}"] = n
        self.counts.update(now, values)
        for name in sensors:                     # the shortfall of this step, for missing_total
            short, _ = self._shortfall(name, step=True)
            if short is not None and short > max(2.0, 0.02 * self._expected(name, step=True)):
                self.missing_total[name] = self.missing_total.get(name, 0.0) + short

    # ------------------------------------------------------------------------------------------
    def restart(self) -> None:
        """Start the windows again (the stamps jumped: spans across the jump mean nothing)."""
        self.counts.clear()

    def _stamp_span(self, name: str, step: bool) -> float:
        d = self.counts.last_step(f"{name}|stamp") if step else self.counts.delta(f"{name}|stamp")
        return d if d == d and d > 0 else 0.0    # NaN (no stamp yet) or backwards -> 0

    def _expected(self, name: str, step: bool = False) -> float:
        return self.rates.get(name, 0.0) * self._stamp_span(name, step)

    def _shortfall(self, name: str, step: bool = False) -> tuple[float | None, float]:
        """(expected - arrived readings with distinct stamps, expected) over the window (or the
        last step); None when the stamps did not advance enough to judge."""
        expected = self._expected(name, step)
        if expected < 10:
            return None, expected
        get = self.counts.last_step if step else self.counts.delta
        arrived = get(f"{name}|arrived") - get(f"{name}|duplicates")
        return expected - arrived, expected

    def window_values(self, name: str) -> dict[str, object]:
        """/diagnostics values of the window: readings arrived and used, rate, missing share."""
        c = self.counts
        out: dict[str, object] = {"window_s": round(c.span, 3),
                                  "arrived_in_window": int(c.delta(f"{name}|arrived")),
                                  "usable_in_window": int(c.delta(f"{name}|usable"))}
        span = self._stamp_span(name, False)
        if span > 0:
            out["rate_in_window_hz"] = round((c.delta(f"{name}|arrived") - c.delta(f"{name}|duplicates")) / span, 2)
        short, expected = self._shortfall(name)
        if short is not None:
            out["missing_in_window"] = f"{100 * max(0.0, short) / expected:.1f} %"
        if name in self.rates:
            out["missing_total_estimate"] = int(round(self.missing_total.get(name, 0.0)))
        return out

    def verdicts(self) -> dict[str, tuple[int, str]]:
        """{sensor: (WARN, why)} for every sensor with a problem in the window."""
        out: dict[str, tuple[int, str]] = {}
        c = self.counts
        if c.span <= 0:
            return out
        w = f"in the last {c.span:.0f} s"
        for key in c.keys():
            if not key.endswith("|arrived"):
                continue
            name = key[:-len("|arrived")]
            arrived = c.delta(f"{name}|arrived")
            usable = c.delta(f"{name}|usable")
            reasons = {k.split("|", 2)[2]: int(c.delta(k)) for k in c.keys(f"{name}|reason|")}
            reasons = {r: n for r, n in reasons.items() if n > 0}
            why = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items(), key=lambda x: -x[1]))
            topic = self.topics.get(name, "")
            unusable = {k.split("|", 2)[2]: int(c.delta(k)) for k in c.keys(f"{topic}|unusable|")} if topic else {}
            unusable = {r: n for r, n in unusable.items() if n > 0}
            if arrived > 0 and usable <= 0:
                out[name] = (WARN, f"none of its {int(arrived)} readings {w} was usable: {why}")
            elif arrived <= 0 and unusable:
                out[name] = (WARN, f"messages on {topic} arrive but none holds a usable reading {w}: "
                                   + ", ".join(f"{n} x {r}" for r, n in unusable.items()))
            elif arrived > 0 and arrived - usable > self.unused_limit * arrived:
                out[name] = (WARN, f"{int(arrived - usable)} of its {int(arrived)} readings {w} "
                                   f"not used: {why}")
            else:
                short, expected = self._shortfall(name)
                if short is not None and short > self.loss_limit * expected:
                    out[name] = (WARN, f"{100 * short / expected:.0f} % of the readings its configured "
                                       f"{self.rates[name]:g} Hz gives are missing {w} (lost in "
                                       "transport, or the rig publishes slower)")
        return out


def divergence_verdicts(monitor) -> dict[str, tuple[int, str]]:
    """{sensor: (level, why)} for every sensor failing the estimator's divergence test now
    (``monitor``: :class:`~mbfg_ros.estimation.divergence.DivergenceMonitor`): ERROR when the
    estimate is lost (the period's verdict), WARN when the sensor is only fitted worse than its
    noise, naming the likely cause; either with the period's keyframe-rate note."""
    out: dict[str, tuple[int, str]] = {}
    for name, p in monitor.open.items():
        rms = monitor.rms.get(name, 0.0)
        figure = (f"whitened residual RMS {rms:.1f} sigma over the last {monitor.window:g} s (limit "
                  f"{monitor.limit:g} sigma), since {p.start:.3f} s")
        note = f"; {p.note}" if p.note else ""
        if p.lost:
            out[name] = (ERROR, f"diverged: {figure}; the estimate is lost ({p.cause}){note}")
        else:
            out[name] = (WARN, f"fitted worse than its noise: {figure}, while the estimate holds; likely "
                               f"{p.cause or 'a model error'}{note}")
    return out
