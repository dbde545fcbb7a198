"""Time jumps and lagging sensors in a stream of readings (a bag that loops, a clock reset, a
corrupt stamp, a starved transport): one set of rules for the ROS node and for ``mbfg replay``,
so a replay restarts the estimator exactly where the node would. No ROS imports.

Rules, applied to readings in the order they arrive (receive order):

- a reading stamped more than ``jump_back`` (0.1 s) before the previous reading of the same
  sensor is a jump **backwards**; one stamped more than ``max_time_gap`` (default 2 s) after the
  newest stamp is a jump **forwards**. The caller restarts the estimator. After a jump the other
  sensors are stale: their readings are dropped (counted per topic in ``stale``) until one fits
  the new time, within half the jump, so readings left over from before the jump cannot drag
  the estimator back;
- with ``max_lag`` set, a reading older than the newest stamp by more than ``max_lag`` s that is
  not a jump (its sensor's own stamps go forwards) comes from a sensor lagging the others, e.g.
  a transport starved under load: too old for the estimator's window, and fed it would look
  like a jump backwards. It is dropped and counted per topic in ``too_old``.
  :func:`lagging_limit` gives the limit the node and replay use for a smoother lag.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

JUMP_BACK = 0.1
"""s: a sensor's stamp this far before its previous one is a time jump."""

DEFAULT_MAX_TIME_GAP = 2.0
"""s: a stamp this far after the newest one is a time jump (the node's ``max_time_gap``)."""


def lagging_limit(lag: float) -> float:
    """s behind the newest stamp beyond which a reading is too old for a smoother of ``lag`` s:
    the window plus half of it (at least 0.5 s) for late readings still worth re-solving."""
    return lag + 0.5 * max(lag, 1.0)


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
    feeding it), ``stale`` (left over from before a jump: drop it) or ``too_old`` (a lagging
    sensor: drop it). Stamps are integer ns in any one time base."""
    max_time_gap: float = DEFAULT_MAX_TIME_GAP
    jump_back: float = JUMP_BACK
    max_lag: float | None = None
    jumps: list[Jump] = field(default_factory=list)
    stale: Counter = field(default_factory=Counter)           # topic -> readings dropped
    too_old: Counter = field(default_factory=Counter)         # topic -> readings dropped

    def __post_init__(self) -> None:
        self._last: dict[str, int] = {}       # sensor -> newest stamp (ns) since the last jump
        self.newest_ns: int | None = None     # newest stamp checked since the last jump
        self._stale: set[str] = set()
        self._tolerance = 0
        self._gap_ns = int(round(self.max_time_gap * 1e9))
        self._back_ns = int(round(self.jump_back * 1e9))
        self._lag_ns = None if self.max_lag is None else int(round(self.max_lag * 1e9))

    def check(self, topic: str, sensor: str, t: int) -> str:
        """Verdict on the reading of ``sensor`` stamped ``t`` ns that arrived on ``topic``."""
        if sensor in self._stale:
            if abs(t - self.newest_ns) < self._tolerance:
                self._stale.discard(sensor)
            else:
                self.stale[topic] += 1
                return "stale"
        verdict = "ok"
        last = self._last.get(sensor)
        newest = self.newest_ns
        if newest is not None:
            backwards = last is not None and t < last - self._back_ns
            if self._lag_ns is not None and t < newest - self._lag_ns and not backwards:
                self.too_old[topic] += 1
                self._last[sensor] = t if last is None else max(last, t)
                return "too_old"
            if backwards:
                verdict = self._jump(topic, sensor, t, "backwards",
                                     f"time jumped backwards by {(last - t) / 1e9:.3f} s on {sensor}")
            elif t > newest + self._gap_ns:
                verdict = self._jump(topic, sensor, t, "forwards",
                                     f"time jumped forwards by {(t - newest) / 1e9:.3f} s on {sensor} "
                                     f"(more than max_time_gap {self.max_time_gap:g} s)")
        self._last[sensor] = t if last is None or verdict == "jump" else max(last, t)
        if self.newest_ns is None or t > self.newest_ns:
            self.newest_ns = t
        return verdict

    def _jump(self, topic: str, sensor: str, t: int, direction: str, reason: str) -> str:
        self.jumps.append(Jump(topic, sensor, direction, self.newest_ns, t, reason))
        self._tolerance = max(abs(t - self.newest_ns) // 2, 1_000_000)
        self._stale = {s for s in self._last if s != sensor}
        self._last.clear()
        self.newest_ns = t
        return "jump"
