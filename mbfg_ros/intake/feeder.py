"""Readings -> the estimator: time rules, stamp order and ``add_sample``, every reading accounted for.

:class:`Feeder` is a reading's way from its decoded message to the estimator, in the node and in
``mbfg replay`` alike:

- :meth:`Feeder.push` (receive order): the **time rules**
  (:class:`~mbfg_ros.intake.time_jumps.TimeJumps`, made for receive order): an out-of-line stamp
  is held until its new time persists, then either let through (a pause) or, on a confirmed
  **jump**, everything the stamp order holds is fed (the old time's readings), the estimator is
  **reset** and the stamp order restarted; readings left over from before a jump, from a sensor
  lagging the others, or out of line and never confirmed are dropped and counted. A reading let
  through waits in the **stamp order** (:class:`~mbfg_ros.intake.stamp_order.StampOrder`);
- :meth:`Feeder.release` (the readings now due, in stamp order) and :meth:`Feeder.feed`:
  ``add_sample`` with stamps in s relative to the **epoch** (the whole second of the first stamp
  fed: float seconds keep sub-microsecond precision), the estimator's verdicts counted
  (``statuses``) and its own jump check noticed (JUMP_CONFIRM readings before its window reset
  it); the node feeds a backlog in slices, the replay after each message;
- **counts**: each sensor's figures for the rolling health window
  (:meth:`Feeder.sensor_figures`), the /diagnostics values of the time rules
  (:meth:`Feeder.values`), and :meth:`Feeder.unaccounted`: every reading pushed is held by the
  time rules or the stamp order, dropped, or received by the estimator (0 = nothing went missing).

Hooks let the caller act at a jump: ``before_reset`` (the replay closes its era: the estimator
finishes what it has) and ``after_reset`` (the node logs it and restarts its health window; the
replay starts a new era). No ROS imports.
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable

from mbfg_ros.intake.sensor_health import SensorFigures
from mbfg_ros.intake.stamp_order import StampOrder
from mbfg_ros.intake.time_jumps import DEFAULT_MAX_TIME_GAP, TimeJumps, lagging_limit


@dataclass(frozen=True)
class TimeJumpEvent:
    """A restart of the estimator for a time jump: ``direction`` backwards | forwards, the
    ``reason`` logged, the reading that set it off (``topic``, ``stamp_ns``), and whether the
    time rules found it (``by_rules``; False: the estimator's own check, it reset itself)."""
    direction: str
    reason: str
    topic: str
    stamp_ns: int
    by_rules: bool


Hook = Callable[[TimeJumpEvent], None]
SampleHook = Callable[[str, float, Any, str], None]


Reading = tuple[str, str, int, Any]
"""(topic, sensor, stamp ns, value): a reading on its way."""


class Feeder:
    """Feeds readings to ``estimator`` (its public ``add_sample``, ``reset``, ``health``,
    ``counts()`` and ``cfg.lag``) through ``order``; see the module docstring. ``on_sample(sensor,
    t, value, status)`` is called after each ``add_sample`` (t in s since the epoch)."""

    RULE_NAMES = {"stale": "discarded_at_time_jump", "too_old": "too_old_lagging_sensor",
                  "rejected": "rejected_stamp"}
    """/diagnostics name (``samples <name>``) of the readings each time rule drops."""

    def __init__(self, estimator, order: StampOrder, max_time_gap: float = DEFAULT_MAX_TIME_GAP, *,
                 before_reset: Hook | None = None, after_reset: Hook | None = None,
                 on_sample: SampleHook | None = None) -> None:
        self.estimator = estimator
        self.order = order
        self.time_jumps = TimeJumps(max_time_gap=max_time_gap, max_lag=lagging_limit(estimator.cfg.lag))
        self.before_reset, self.after_reset, self.on_sample = before_reset, after_reset, on_sample
        self.epoch_ns: int | None = None            # whole second of the first stamp fed
        self.statuses: Counter = Counter()          # add_sample's verdicts
        self.jumps = {"backwards": 0, "forwards": 0}    # estimator restarts for time jumps
        self.fed_stamp: dict[str, int] = {}         # sensor -> newest stamp fed (ns) since a jump
        self.newest_fed_ns: int | None = None       # newest stamp fed since a jump
        self.estimator_time = 0.0                   # s (wall) spent in add_sample
        self._resets_seen = estimator.health.resets
        self.paused = False                         # readings are dropped (pause .. resume)
        self.dropped_paused: Counter = Counter()    # topic -> readings dropped while paused

    # ------------------------------------------------------------------------------------------
    def push(self, topic: str, sensor: str, stamp_ns: int, value, now_ns: int) -> None:
        """One reading of ``sensor`` that arrived on ``topic`` at ``now_ns`` (the stamp order's
        clock), stamped ``stamp_ns``, in receive order (see the module docstring)."""
        if self.paused:
            self.dropped_paused[topic] += 1
            return
        jumps = self.time_jumps
        reading = (topic, sensor, stamp_ns, value)
        verdict = jumps.check(topic, sensor, stamp_ns, reading)
        if verdict == "jump":
            jump = jumps.jumps[-1]
            self.feed(self.order.drain())               # the old time's readings first
            event = TimeJumpEvent(jump.direction, jump.reason, topic, stamp_ns, True)
            if self.before_reset is not None:
                self.before_reset(event)
            self.estimator.reset(jump.reason)
            self._resets_seen = self.estimator.health.resets
            self.fed_stamp.clear()
            self.newest_fed_ns = None
            self.order.restart()
            self._jumped(event)
        elif verdict != "ok":
            return                          # held, or dropped and counted by TimeJumps
        push = self.order.push
        for held in jumps.released():       # held until their new time persisted: they go first
            push(held[0], held[2], held, now_ns)
        push(topic, stamp_ns, reading, now_ns)

    def release(self, now_ns: int) -> list[Reading]:
        """The readings due at ``now_ns`` in stamp order (:meth:`StampOrder.release`), to :meth:`feed`."""
        return self.order.release(now_ns)

    def drain(self) -> list[Reading]:
        """Every reading the stamp order holds, in stamp order (the end of a recording)."""
        return self.order.drain()

    def feed(self, readings: list[Reading]) -> None:
        """``add_sample`` of each reading (as :meth:`release` gives them)."""
        if self.paused:
            self.dropped_paused.update(r[0] for r in readings)
            return
        add = self._add
        for r in readings:
            add(*r)

    def _add(self, topic: str, sensor: str, stamp_ns: int, value) -> None:
        if self.epoch_ns is None:
            self.epoch_ns = (stamp_ns // 1_000_000_000) * 1_000_000_000
        if stamp_ns > self.fed_stamp.get(sensor, -1):
            self.fed_stamp[sensor] = stamp_ns
            if self.newest_fed_ns is None or stamp_ns > self.newest_fed_ns:
                self.newest_fed_ns = stamp_ns
        est = self.estimator
        t = (stamp_ns - self.epoch_ns) * 1e-9
        t0 = time.perf_counter()
        status = est.add_sample(sensor, t, value)
        self.estimator_time += time.perf_counter() - t0
        self.statuses[status] += 1
        if self.on_sample is not None:
            self.on_sample(sensor, t, value, status)
        if est.health.resets != self._resets_seen:          # the estimator's own jump check
            self._resets_seen = est.health.resets
            self._jumped(TimeJumpEvent("backwards", est.health.last_reset, topic, stamp_ns, False))

    def _jumped(self, event: TimeJumpEvent) -> None:
        self.jumps[event.direction] += 1
        if self.after_reset is not None:
            self.after_reset(event)

    def reset(self, reason: str) -> None:
        """Restart the estimator on request (the node's ~/reset; not a time jump)."""
        self.estimator.reset(reason)
        self._resets_seen = self.estimator.health.resets

    def pause(self) -> None:
        """Feed nothing until :meth:`resume` (the managed node inactive): readings pushed or
        fed meanwhile are dropped and counted (``samples dropped_while_paused``)."""
        self.paused = True

    def resume(self, reason: str) -> None:
        """Feed again, with the estimator and the time line restarted (the managed node's
        activate): what the stamp order holds is dropped and counted as paused, the estimator
        is reset and the next readings start a new time line, not a time jump, waited for
        across topics as at the start (the first reading of the estimator's new run is then
        the oldest of every topic, not whichever topic came first)."""
        self.dropped_paused.update(r[0] for r in self.order.drain())
        self.time_jumps.forget_time()
        self.order.start_over()
        self.fed_stamp.clear()
        self.newest_fed_ns = None
        self.reset(reason)
        self.paused = False

    # ------------------------------------------------------------------------------------------
    def seconds(self, stamp_ns: int) -> float:
        """s since the epoch of a stamp (ns)."""
        return (stamp_ns - (self.epoch_ns or 0)) * 1e-9

    def newest_seconds(self) -> float | None:
        """The newest stamp fed to the estimator since the last jump, s since the epoch (None
        before any)."""
        return None if self.newest_fed_ns is None else self.seconds(self.newest_fed_ns)

    def dropped(self) -> dict[str, int]:
        """{rule name (:data:`RULE_NAMES`): readings the time rules dropped}."""
        return {name: sum(getattr(self.time_jumps, what).values()) for what, name in self.RULE_NAMES.items()}

    def unaccounted(self, pushed: int) -> int:
        """``pushed`` (readings given to :meth:`push`, less those taken by :meth:`release` not
        fed yet) minus those held or dropped by the time rules, those the stamp order holds and
        those the estimator received: 0 when none went missing."""
        received = sum(c.received for c in self.estimator.counts().values())
        return (pushed - self.time_jumps.held - sum(self.dropped().values()) - len(self.order) - received
                - sum(self.dropped_paused.values()))

    def values(self) -> dict[str, int]:
        """/diagnostics values: ``samples <status>`` per add_sample verdict, ``samples <rule>``
        per time rule, ``samples held_out_of_line``."""
        out = {f"samples {status}": n for status, n in sorted(self.statuses.items())}
        out.update((f"samples {name}", n) for name, n in self.dropped().items())
        out["samples held_out_of_line"] = self.time_jumps.held
        out["samples dropped_while_paused"] = sum(self.dropped_paused.values())
        return out

    def sensor_figures(self) -> dict[str, SensorFigures]:
        """Each sensor's cumulative figures for the rolling health window: the estimator's counts
        plus the readings the time rules dropped before it."""
        out = {}
        dropped = self.time_jumps.by_sensor
        for name, c in self.estimator.counts().items():
            d = dropped.get(name, {})
            reasons = {"not finite": c.rejected_nonfinite, "duplicate stamps": c.rejected_duplicate,
                       "too old for the window": c.too_old, "discarded at a restart": c.discarded,
                       "stamps out of line": d.get("rejected", 0),
                       "stale after a time jump": d.get("stale", 0),
                       "lagging the other sensors": d.get("too_old", 0)}
            fed = self.fed_stamp.get(name)
            out[name] = SensorFigures(arrived=c.received + sum(d.values()),
                                      usable=c.used + c.late + c.pending, reasons=reasons,
                                      duplicates=c.rejected_duplicate,
                                      last_stamp=None if fed is None else self.seconds(fed))
        return out
