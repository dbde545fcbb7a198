"""Time jumps and lagging sensors in a stream of readings (a bag that loops, a clock reset, a
corrupt stamp, a starved transport): one set of rules for the ROS node and for ``mbfg replay``,
so a replay restarts the estimator exactly where the node would. No ROS imports.

Rules, applied to readings in the order they arrive (receive order):

- a reading is **out of line** when it is stamped more than ``jump_back`` (0.1 s) before the
  newest reading of its own sensor, or more than ``jump_ahead`` (0.5 s) after the newest stamp
  of all sensors;
- an out-of-line reading is **held**, not fed, until the new time it shows **persists**: the
  held readings (all within ``jump_back`` of each other, each sensor's in increasing stamp
  order) confirm it once one topic has sent ``confirm_readings`` (3) of them with distinct
  stamps, or ``confirm_topics`` (2) topics have sent one. An **isolated** out-of-line stamp
  never persists: when its sensor sends a reading in line with the old time again (or the
  in-line stamps advance by ``hold_limit``, 1 s, without a confirmation, or a further
  out-of-line reading does not fit), the held readings are **rejected** and counted per topic
  (``rejected``, the node's ``rejected_stamp``); the estimator never sees them;
- a confirmed new time is a jump **backwards** (it started more than ``jump_back`` before its
  sensor's newest stamp: a bag loop, a clock reset) or **forwards** by more than
  ``max_time_gap`` (2 s): the caller restarts the estimator, then feeds the held readings
  (:meth:`TimeJumps.released`) and the current one. A confirmed gap forwards of at most
  ``max_time_gap`` (every sensor paused) is no jump: the held readings are fed as they are.
  After a jump the other sensors are stale: their readings are dropped (counted per topic in
  ``stale``) until one fits the new time, within half the jump, so readings left over from
  before the jump cannot drag the estimator back;
- with ``max_lag`` set, a reading older than the newest stamp by more than ``max_lag`` s that is
  not out of line for its own sensor (its stamps go forwards) comes from a sensor lagging the
  others, e.g. a transport starved under load: too old for the estimator's window, and fed it
  would look like a jump backwards. It is dropped and counted per topic in ``too_old``.
  :func:`lagging_limit` gives the limit the node and replay use for a smoother lag.

Every reading checked ends in exactly one of: fed (``ok``/``jump``, or released later),
``stale``, ``too_old``, ``rejected``, or still held (:attr:`TimeJumps.held`).

:meth:`TimeJumps.check_block` applies the same rules to many readings at once (the offline
replay): while nothing is held or stale, it finds with numpy the readings that are in line
(not out of line, not too old), feeds them as one run and only checks reading by reading from
the first one that is not, so its verdicts and counts are those of :meth:`TimeJumps.check`.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

JUMP_BACK = 0.1
"""s: a stamp this far before its sensor's newest one is out of line."""

JUMP_AHEAD = 0.5
"""s: a stamp this far after the newest stamp of every sensor is out of line."""

DEFAULT_MAX_TIME_GAP = 2.0
"""s: a confirmed stamp this far after the newest one is a time jump (the node's ``max_time_gap``)."""

CONFIRM_READINGS = 3
"""Out-of-line readings with distinct stamps on one topic that confirm a new time."""

CONFIRM_TOPICS = 2
"""Topics whose out-of-line readings together confirm a new time."""

HOLD_LIMIT = 1.0
"""s: held readings are rejected once the in-line stamps advanced this much without a confirmation."""


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
class _Held:
    topic: str
    sensor: str
    t: int
    item: Any


@dataclass
class _Candidate:
    """Out-of-line readings that may be the start of a new time."""
    direction: str                   # backwards | forwards (of the first reading)
    from_ns: int                     # the newest in-line stamp when it began
    readings: list[_Held] = field(default_factory=list)
    last: dict[str, int] = field(default_factory=dict)         # sensor -> newest held stamp
    stamps: dict[str, set] = field(default_factory=dict)       # topic -> distinct held stamps
    newest: int = 0

    def fits(self, sensor: str, t: int, tolerance_ns: int) -> bool:
        if not self.readings:
            return True
        if abs(t - self.newest) > tolerance_ns:
            return False
        return sensor not in self.last or t > self.last[sensor]

    def add(self, h: _Held) -> None:
        self.readings.append(h)
        self.last[h.sensor] = h.t
        self.stamps.setdefault(h.topic, set()).add(h.t)
        self.newest = h.t if len(self.readings) == 1 else max(self.newest, h.t)


@dataclass
class TimeJumps:
    """``check`` each reading in receive order: ``ok`` (feed it), ``jump`` (restart the estimator,
    feed :meth:`released`, then it), ``held`` (out of line: wait), ``stale`` (left over from
    before a jump: drop it) or ``too_old`` (a lagging sensor: drop it). After ``ok`` too, feed
    :meth:`released` first (a confirmed pause). Stamps are integer ns in any one time base."""
    max_time_gap: float = DEFAULT_MAX_TIME_GAP
    jump_back: float = JUMP_BACK
    max_lag: float | None = None
    jump_ahead: float = JUMP_AHEAD
    confirm_readings: int = CONFIRM_READINGS
    confirm_topics: int = CONFIRM_TOPICS
    hold_limit: float = HOLD_LIMIT
    jumps: list[Jump] = field(default_factory=list)
    stale: Counter = field(default_factory=Counter)           # topic -> readings dropped
    too_old: Counter = field(default_factory=Counter)         # topic -> readings dropped
    rejected: Counter = field(default_factory=Counter)        # topic -> isolated out-of-line readings
    by_sensor: dict = field(default_factory=dict)             # sensor -> Counter(stale/too_old/rejected)

    def __post_init__(self) -> None:
        self._last: dict[str, int] = {}       # sensor -> newest stamp (ns) since the last jump
        self.newest_ns: int | None = None     # newest stamp fed since the last jump
        self._stale: set[str] = set()
        self._tolerance = 0
        self._gap_ns = int(round(self.max_time_gap * 1e9))
        self._back_ns = int(round(self.jump_back * 1e9))
        self._ahead_ns = int(round(self.jump_ahead * 1e9))
        self._hold_ns = int(round(self.hold_limit * 1e9))
        self._lag_ns = None if self.max_lag is None else int(round(self.max_lag * 1e9))
        self._candidate: _Candidate | None = None
        self._released: list[Any] = []

    # ------------------------------------------------------------------------------------------
    @property
    def held(self) -> int:
        """Readings held now (out of line, waiting for a confirmation or a rejection)."""
        return len(self._candidate.readings) if self._candidate is not None else 0

    def held_by_sensor(self) -> Counter:
        c = self._candidate
        return Counter(h.sensor for h in c.readings) if c is not None else Counter()

    def released(self) -> list[Any]:
        """The items of the held readings a confirmation let through (in arrival order), to feed
        before the reading whose verdict released them; each is given once."""
        out, self._released = self._released, []
        return out

    def _count(self, what: str, topic: str, sensor: str) -> None:
        getattr(self, what)[topic] += 1
        self.by_sensor.setdefault(sensor, Counter())[what] += 1

    # ------------------------------------------------------------------------------------------
    def check(self, topic: str, sensor: str, t: int, item: Any = None) -> str:
        """Verdict on the reading of ``sensor`` stamped ``t`` ns that arrived on ``topic``;
        ``item`` is what :meth:`released` gives back if the reading is held and then let through."""
        if sensor in self._stale:
            if abs(t - self.newest_ns) < self._tolerance:
                self._stale.discard(sensor)
            else:
                self._count("stale", topic, sensor)
                return "stale"
        newest = self.newest_ns
        last = self._last.get(sensor)
        if newest is not None:
            backwards = last is not None and t < last - self._back_ns
            if backwards or t > newest + self._ahead_ns:
                return self._hold(_Held(topic, sensor, t, item), "backwards" if backwards else "forwards")
            if self._lag_ns is not None and t < newest - self._lag_ns:
                self._count("too_old", topic, sensor)
                self._last[sensor] = t if last is None else max(last, t)
                return "too_old"
        self._last[sensor] = t if last is None else max(last, t)
        if newest is None or t > newest:
            self.newest_ns = t
        c = self._candidate
        if c is not None and (sensor in c.last or self.newest_ns - c.from_ns >= self._hold_ns):
            self._reject_candidate()             # its sensor is back in line, or it is too old
        return "ok"

    SLOW_RUN = 32
    """Readings checked one by one after one that is not in line, before numpy is tried again."""

    def check_block(self, topics: Sequence[str], sensors: Sequence[str], keys: np.ndarray,
                    stamps: np.ndarray, item: Callable[[int], Any]) -> list[tuple[str, Any]]:
        """:meth:`check` for M readings in arrival order: reading i is of sensor
        ``sensors[keys[i]]`` on topic ``topics[keys[i]]``, stamped ``stamps[i]`` ns; ``item(i)``
        is what :meth:`released` gives back if it is held. Returns what to do, in order:
        ``("jump", None)`` (restart the estimator), ``("released", items)`` (feed these held
        readings), ``("feed", indexes)`` (feed these readings of the block, in this order)."""
        keys = np.asarray(keys, np.int64)
        stamps = np.asarray(stamps, np.int64)
        M = int(stamps.size)
        events: list[tuple[str, Any]] = []
        feed: list[np.ndarray] = []

        def flush() -> None:
            if feed:
                events.append(("feed", np.concatenate(feed)))
                feed.clear()

        i, slow_until = 0, 0
        while i < M:
            if i >= slow_until and self._candidate is None and not self._stale:
                f = self._in_line(sensors, keys[i:], stamps[i:])
                if f:
                    feed.append(np.arange(i, i + f))
                    i += f
                    continue
                slow_until = i + self.SLOW_RUN
            k = int(keys[i])
            verdict = self.check(topics[k], sensors[k], int(stamps[i]), item(i))
            if verdict in ("ok", "jump"):
                released = self.released()
                if verdict == "jump" or released:
                    flush()
                if verdict == "jump":
                    events.append(("jump", None))
                if released:
                    events.append(("released", released))
                feed.append(np.array([i]))
            i += 1
        flush()
        return events

    def _in_line(self, sensors: Sequence[str], keys: np.ndarray, stamps: np.ndarray) -> int:
        """How many of the readings (from the first on) :meth:`check` finds ``ok`` without a
        hold, with nothing held or stale; the state is advanced past them."""
        m = stamps.size
        t = stamps
        newest0 = self.newest_ns
        run = np.maximum.accumulate(t)
        newest, has_newest = _newest_before(t, newest0)
        flags = has_newest & (t > newest + self._ahead_ns)
        if self._lag_ns is not None:
            flags |= has_newest & (t < newest - self._lag_ns)
        uniq = sorted(set(sensors))
        sid = np.array([uniq.index(n) for n in sensors], np.int64)[keys]
        where: dict[str, np.ndarray] = {}
        for j, name in enumerate(uniq):
            pos = np.flatnonzero(sid == j)
            if not pos.size:
                continue
            where[name] = pos
            tp = t[pos]
            last, has_last = _newest_before(tp, self._last.get(name))
            if newest0 is None and pos[0] == 0:
                has_last[0] = False            # (check() tests nothing before a first stamp)
            flags[pos] |= has_last & (tp < last - self._back_ns)
        f = int(np.argmax(flags)) if flags.any() else m
        if f:
            for name, pos in where.items():
                pos = pos[pos < f]
                if pos.size:
                    hi = int(t[pos].max())
                    last0 = self._last.get(name)
                    self._last[name] = hi if last0 is None else max(last0, hi)
            hi = int(run[f - 1])
            self.newest_ns = hi if newest0 is None else max(newest0, hi)
        return f

    def _hold(self, h: _Held, direction: str) -> str:
        c = self._candidate
        if c is not None and not c.fits(h.sensor, h.t, self._back_ns):
            self._reject_candidate()
            c = None
        if c is None:
            c = self._candidate = _Candidate(direction, self.newest_ns)
        c.add(h)
        if (len(c.stamps) >= self.confirm_topics
                or max(len(s) for s in c.stamps.values()) >= self.confirm_readings):
            return self._confirm(c)
        return "held"

    def forget_time(self) -> None:
        """Start a new time line (the node resumed after a pause it chose): no stamp seen yet,
        so the next readings are in line whatever their time; held readings are rejected
        (counted); the counts stay."""
        if self._candidate is not None:
            self._reject_candidate()
        self._released = []
        self._last.clear()
        self._stale.clear()
        self.newest_ns = None

    def _reject_candidate(self) -> None:
        for h in self._candidate.readings:
            self._count("rejected", h.topic, h.sensor)
        self._candidate = None

    def _confirm(self, c: _Candidate) -> str:
        """The held readings persist: let them through (a jump, or a pause in the data)."""
        self._candidate = None
        first = c.readings[0]
        self._released = [h.item for h in c.readings[:-1]]
        newest = self.newest_ns
        if c.direction == "forwards" and first.t - newest <= self._gap_ns:
            for h in c.readings:                 # every sensor paused: no jump, feed them
                self._last[h.sensor] = max(self._last.get(h.sensor, h.t), h.t)
            self.newest_ns = max(newest, c.newest)
            return "ok"
        if c.direction == "backwards":
            reason = (f"time jumped backwards by {(self._last[first.sensor] - first.t) / 1e9:.3f} s "
                      f"on {first.sensor}")
        else:
            reason = (f"time jumped forwards by {(first.t - newest) / 1e9:.3f} s on {first.sensor} "
                      f"(more than max_time_gap {self.max_time_gap:g} s)")
        self.jumps.append(Jump(first.topic, first.sensor, c.direction, newest, first.t, reason))
        self._tolerance = max(abs(first.t - newest) // 2, 1_000_000)
        self._stale = {s for s in self._last if s not in c.last}
        self._last = dict(c.last)
        self.newest_ns = c.newest
        return "jump"


def _newest_before(t: np.ndarray, before: int | None) -> tuple[np.ndarray, np.ndarray]:
    """For each stamp of ``t`` (ns, in arrival order): the newest stamp seen before it (``before``,
    the newest of earlier blocks, included) and whether there was any (False only for the first
    stamp when ``before`` is None)."""
    prev = np.empty(t.size, np.int64)
    if t.size:
        prev[1:] = np.maximum.accumulate(t)[:-1]
    has = np.ones(t.size, bool)
    if before is None:
        if t.size:
            has[0] = False
            prev[0] = 0
    else:
        if t.size:
            prev[0] = before
        prev = np.maximum(prev, before)
    return prev, has
