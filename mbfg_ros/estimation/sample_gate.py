"""The estimator's sample gate: what a reading must pass before it reaches a keyframe.

Per sample: the sensor must be known (else counted on the estimator's health as
``unknown_sensor``), its values finite and of the sensor's size (else ``rejected_nonfinite``),
its stamp new for that sensor (else ``rejected_duplicate``). A stamp before the window
(``back_limit``) is held back: an isolated one becomes ``too_old`` once the next reading is in
line again; JUMP_CONFIRM such readings in a row are a jump backwards (a looping bag, a clock
reset) and the caller restarts with them. Every count lives on the sensor's SensorCounts. No ROS.
"""
from __future__ import annotations

import math

from mbfg_ros.estimation.outputs import SensorCounts
from mbfg_ros.estimation.sensor_streams import SensorStream

JUMP_CONFIRM = 3               # readings in a row older than the window make a jump backwards


class SampleGate:
    """Checks and counts the samples of the streams ``sensors`` (name -> SensorStream)."""

    def __init__(self, sensors: dict[str, SensorStream]) -> None:
        self.sensors = sensors
        self.back_limit = -math.inf          # a stamp before this is out of the window
        self.held: list[tuple[str, float, object]] = []   # readings before it, until a jump is confirmed

    def restart(self) -> None:
        """A new run: nothing is out of the window, nothing held."""
        self.back_limit = -math.inf
        self.held = []

    def admit(self, sensor: str, stamp: float, value) -> tuple[SensorStream, object] | str:
        """The admitted sample as (its stream, its value: a float for one-value sensors), or why
        not, a str: unknown_sensor, rejected_nonfinite, rejected_duplicate (counted; the caller
        counts unknown sensors on its health). Called once per reading: plain float checks, no
        objects made for an admitted reading but the tuple."""
        s = self.sensors.get(sensor)
        if s is None:
            return "unknown_sensor"
        c = s.counts
        c.received += 1
        isfinite = math.isfinite
        try:
            if s.dim == 1:
                y = float(value[0]) if hasattr(value, "__getitem__") else float(value)
                ok = isfinite(y) and isfinite(stamp)
            else:
                y = value
                ok = len(value) == s.dim and isfinite(stamp)
                if ok:
                    for x in value:               # (stops at the first non-finite value)
                        if not isfinite(float(x)):
                            ok = False
                            break
        except (TypeError, ValueError, IndexError):
            ok = False
        if not ok:
            c.rejected_nonfinite += 1
            return "rejected_nonfinite"
        if s.is_duplicate(stamp):
            c.rejected_duplicate += 1
            return "rejected_duplicate"
        return s, y

    def hold(self, sensor: str, stamp: float, value) -> list | None:
        """A reading stamped before the window: None while held (fewer than JUMP_CONFIRM in a
        row), else the held readings (sensor, stamp, value), oldest first, a jump backwards."""
        self.held.append((sensor, stamp, value))
        if len(self.held) < JUMP_CONFIRM:
            return None
        held, self.held = self.held, []
        return held

    def in_line(self) -> None:
        """A reading in the window: readings held before it were isolated, too old."""
        if self.held:
            for name, _, _ in self.held:
                self.sensors[name].counts.too_old += 1
            self.held = []

    @staticmethod
    def note_stamp(s: SensorStream, stamp: float) -> None:
        """An accepted reading's stamp in its sensor's first/last stamps and run."""
        c = s.counts
        if c.first_stamp is None or stamp < c.first_stamp:
            c.first_stamp = stamp
        if c.last_stamp is None or stamp > c.last_stamp:
            c.last_stamp = stamp
        if stamp > s.run_last:
            s.run_last = stamp

    def counts(self, measuring: list[SensorStream], pending: list[int]) -> dict[str, SensorCounts]:
        """Every sensor's counts, with the readings still pending (queued per measuring stream,
        ``pending``, and held back)."""
        for s, n in zip(measuring, pending):
            s.counts.pending = n
        for name, _, _ in self.held:
            self.sensors[name].counts.pending += 1
        return {name: s.counts for name, s in self.sensors.items()}
