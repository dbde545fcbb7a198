"""Time jumps in a recording (a bag that loops, a clock reset, a corrupt stamp), detected as the
ROS node detects them, so a replay restarts the estimator where the node would.

Rules (the estimator node's, ``mbfg_ros/ros/estimator_node.py``), applied to readings in receive
order: a reading stamped more than ``jump_back`` (0.1 s) before the previous reading of the same
sensor is a jump backwards; one stamped more than ``max_time_gap`` (default 2 s, the node's
parameter) after the newest stamp is a jump forwards. After a jump the other sensors are stale:
their readings are dropped (and counted per topic) until one fits the new time, within half
the jump, so readings left over from before the jump cannot drag the estimator back.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from mbfg_ros.io.sensor_inputs import Reading

JUMP_BACK = 0.1
"""s: a sensor's stamp this far before its previous one is a time jump."""

DEFAULT_MAX_TIME_GAP = 2.0
"""s: a stamp this far after the newest one is a time jump (the node's ``max_time_gap``)."""


@dataclass(frozen=True)
class Jump:
    """One time jump: on ``topic`` (``sensor``), from the newest stamp before it to ``to_ns``."""
    topic: str
    sensor: str
    direction: str            # backwards | forwards
    from_ns: int
    to_ns: int
    reason: str


@dataclass
class TimeJumps:
    """``check`` each reading in receive order: ``ok``, ``jump`` (restart the estimator before
    feeding it) or ``stale`` (drop it; counted in ``stale``)."""
    max_time_gap: float = DEFAULT_MAX_TIME_GAP
    jump_back: float = JUMP_BACK
    jumps: list[Jump] = field(default_factory=list)
    stale: Counter = field(default_factory=Counter)           # topic -> readings dropped

    def __post_init__(self) -> None:
        self._last: dict[str, int] = {}       # sensor -> newest stamp (ns) since the last jump
        self._newest: int | None = None
        self._stale: set[str] = set()
        self._tolerance = 0
        self._gap_ns = int(round(self.max_time_gap * 1e9))
        self._back_ns = int(round(self.jump_back * 1e9))

    def check(self, topic: str, reading: Reading) -> str:
        t, sensor = reading.stamp_ns, reading.sensor
        if sensor in self._stale:
            if abs(t - self._newest) < self._tolerance:
                self._stale.discard(sensor)
            else:
                self.stale[topic] += 1
                return "stale"
        verdict = "ok"
        last = self._last.get(sensor)
        if self._newest is not None:
            if last is not None and t < last - self._back_ns:
                verdict = self._jump(topic, sensor, t, "backwards",
                                     f"time jumped backwards by {(last - t) / 1e9:.3f} s on {sensor}")
            elif t > self._newest + self._gap_ns:
                verdict = self._jump(topic, sensor, t, "forwards",
                                     f"time jumped forwards by {(t - self._newest) / 1e9:.3f} s on {sensor} "
                                     f"(more than max_time_gap {self.max_time_gap:g} s)")
        self._last[sensor] = t if last is None or verdict == "jump" else max(last, t)
        if self._newest is None or t > self._newest:
            self._newest = t
        return verdict

    def _jump(self, topic: str, sensor: str, t: int, direction: str, reason: str) -> str:
        self.jumps.append(Jump(topic, sensor, direction, self._newest, t, reason))
        self._tolerance = max(abs(t - self._newest) // 2, 1_000_000)
        self._stale = {s for s in self._last if s != sensor}
        self._last.clear()
        self._newest = t
        return "jump"
