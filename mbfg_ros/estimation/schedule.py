"""When keyframes close, and which readings each one takes.

Keyframes are at ``t_k = t0 + (k - k0) h``; a run starts (keyframe k0 at the earliest stamp seen)
once ``sensor_wait`` seconds of readings have arrived. Keyframe k is closed when no live
stream is still due a reading stamped at or before t_k, or the newest stamp is ``sensor_wait``
beyond it (a stream is live if it reported within the last 0.5 s of the run). A stream is due
one while its newest stamp plus its period, less a slack (:data:`DUE_SLACK` of it, or 4 sigmas of
its stamps' timing error), is before t_k (:func:`due_lead`; its period: the config's rate, or the
period its stamps show where shorter):
a keyframe waits for the readings that fall in it, not for the next reading of a slower stream
(a 200 Hz load cell would hold every other 400 Hz keyframe back half a load-cell period). A
reading that comes earlier than that (its stream's stamps off by more than the slack, or a period
shorter than the config's and not yet measured) joins its closed keyframe as a late reading
(:mod:`.late_readings`). Known-input command streams hold keyframes back until they report past
t_k, so a keyframe never closes before its command arrived.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mbfg_ros.estimation.sensor_streams import SensorStream
from mbfg_ros.estimation.stamp_jitter import MIN_STEPS
from mbfg_ros.estimation.step_function import StepLayout
from mbfg_ros.model.config import EstimatorConfig

LIVE_WINDOW = 0.5        # s: a stream that reported within this much of the newest stamp is live
AUTO_GROUP_PERIOD = 0.004      # s of keyframes per ISAM2 update with keyframes_per_update: 0
DUE_SLACK = 0.25
"""Of a stream's period: a reading stamped up to this much before its stream's newest stamp plus
its period is still waited for (stamp jitter)."""
DUE_JITTER_SIGMAS = 4.0
"""... or up to this many standard deviations of its stamps' timing error, where that is more."""


@dataclass
class GroupStep:
    """A linearised step waiting for its group's ISAM2 update."""
    k: int
    factors: list
    x1: np.ndarray
    taken: list[int]
    extra: list
    wall: float
    cpu: float


def keyframes_per_update(cfg: EstimatorConfig) -> int:
    """The configured number, or (0: auto) one per whole 4 ms of keyframes: 1 below 500 Hz, 2 from
    500 Hz, 4 at 1 kHz. (Rounded instead, 400 Hz solved two at a time: the first of each pair came
    out a keyframe period later, and the fast crank's live node published 3-5 ms later at p50.)"""
    if cfg.keyframes_per_update > 0:
        return cfg.keyframes_per_update
    return max(1, int(cfg.keyframe_rate * AUTO_GROUP_PERIOD + 1e-9))


def due_lead(period: float, jitter: float = 0.0) -> float:
    """s: a stream whose newest stamp is at least this close before a keyframe (or past it) is due
    no more readings in that keyframe: its ``period`` (s; 0 unknown: then it is due until it
    reports past the keyframe) less a slack, :data:`DUE_SLACK` of it or :data:`DUE_JITTER_SIGMAS`
    times its stamps' timing error ``jitter`` (s), the larger."""
    if period <= 0:
        return 0.0
    slack = DUE_SLACK * period
    by_jitter = DUE_JITTER_SIGMAS * jitter
    if by_jitter > slack:                    # (as max(slack, by_jitter); and max(0, lead) below)
        slack = by_jitter
    lead = period - slack
    return lead if lead > 0.0 else 0.0


def stream_lead(s: SensorStream) -> float:
    """:func:`due_lead` of stream s: its nominal period, or the period its stamps show where shorter
    (once :data:`~mbfg_ros.estimation.stamp_jitter.MIN_STEPS` steps are measured), and its stamps'
    timing error; 0 for commands."""
    if s.kind == "command":
        return 0.0
    period = s.nominal_period
    stamps = s.stamps
    measured = stamps.period if stamps.steps >= MIN_STEPS else 0.0
    if measured > 0 and (period <= 0 or measured < period):
        period = measured
    return due_lead(period, s.jitter)


class KeyframeSchedule:
    """The keyframe clock of one run and the readiness rule over the input streams."""

    def __init__(self, streams: list[SensorStream], h: float, sensor_wait: float) -> None:
        self.streams = streams
        self.measuring = [s for s in streams if s.kind != "command"]
        self.h = h
        self.wait = sensor_wait
        self.started = False
        self.t0 = 0.0
        self.k0 = 0
        self.closed = -1                 # newest closed keyframe
        self.t_closed = -math.inf        # its time, and the next keyframe's (cached for the
        self.t_next = -math.inf          # per-reading path)
        self.latest = -math.inf          # newest stamp of this run

    def restart(self, k0: int) -> None:
        """A new run whose keyframe 0 will be ``k0`` (keys stay unique across runs)."""
        self.started = False
        self.t0 = 0.0
        self.k0 = k0
        self.mark_closed(k0 - 1)
        self.latest = -math.inf
        for s in self.streams:
            s.run_last = -math.inf

    def open(self, stamp: float) -> None:
        """Keyframe k0 at ``stamp``."""
        self.started = True
        self.t0 = stamp
        self.mark_closed(self.k0 - 1)

    def mark_closed(self, k: int) -> None:
        for s in self.streams:
            s.lead = stream_lead(s)
        self.closed = k
        self.t_closed = self.time(k)
        self.t_next = self.time(k + 1)

    def time(self, k: int) -> float:
        return self.t0 + (k - self.k0) * self.h

    def fraction(self, stamp: float, k: int) -> float:
        """(stamp - t_{k-1}) / h."""
        return (stamp - self.time(k - 1)) / self.h

    def keyframe_of(self, stamp: float) -> int:
        """The keyframe k with t_{k-1} < stamp <= t_k."""
        return self.k0 + max(0, math.ceil((stamp - self.t0) / self.h - 1e-9))

    def next_ready(self) -> bool:
        """Whether the next keyframe can close: no live stream is due a reading in it (module
        docstring), or the newest stamp is ``sensor_wait`` past it."""
        t = self.t_next
        if self.latest >= t + self.wait:
            return True
        live_since = self.latest - LIVE_WINDOW
        any_live = False
        for s in self.streams:
            if s.run_last >= live_since:
                any_live = True
                if s.run_last + s.lead < t:
                    return False
        return any_live

    def ready_with(self, stream: SensorStream, stamp: float) -> bool:
        """Whether taking a reading of ``stream`` stamped ``stamp`` would let the next keyframe
        close (:meth:`next_ready` with it counted; nothing changes)."""
        latest, last = self.latest, stream.run_last
        self.latest, stream.run_last = max(latest, stamp), max(last, stamp)
        try:
            return self.next_ready()
        finally:
            self.latest, stream.run_last = latest, last


class StepInbox:
    """Readings waiting for their keyframe, written at arrival straight into the parameter
    vector of that keyframe's step: a ring of rows, one per open keyframe (no Python object per
    reading). A row's slots are filled in arrival order.

    Readings stamped before the run starts wait in a list (their keyframes are not known yet);
    readings beyond a step's slots, or more than ``ahead`` keyframes ahead, wait in spill lists.
    """

    def __init__(self, layout: StepLayout, streams: list[SensorStream], ahead: int = 64) -> None:
        self.layout = layout
        self.streams = streams
        self.template = layout.empty_parameters()
        self.K = ahead
        self.rows = np.tile(self.template, (ahead, 1))
        self.width = self.template.size
        self._flat = self.rows.reshape(-1)           # the same memory, one index per value (put)
        self.counts = [[0] * len(streams) for _ in range(ahead)]
        self.blocks = [(b.start, b.width, b.slots, b.sensor.dim) for b in layout.blocks]
        self.mean_abs = np.array([b.mean_abs for b in layout.blocks], dtype=np.intp)   # indices in p
        self.jitter = np.array([b.jitter for b in layout.blocks], dtype=np.intp)
        self.waiting: list[tuple[int, float, object]] = []      # before the run: (stream, stamp, value)
        self.later: list[tuple[int, int, float, object]] = []    # (k, stream, stamp, value)
        self.pending = [0] * len(streams)
        self.newest = -math.inf                                  # newest stamp queued

    def queue(self, i: int, stamp: float, value) -> None:
        """A reading of stream i before the run started."""
        self.waiting.append((i, stamp, value))
        self.pending[i] += 1
        if stamp > self.newest:
            self.newest = stamp

    def put(self, i: int, k: int, closed: int, stamp: float, value, fraction: float) -> None:
        """A reading of stream i for keyframe k (> closed) of the running run, at ``fraction``
        of the step (t - t_{k-1}) / h."""
        self.pending[i] += 1
        if stamp > self.newest:
            self.newest = stamp
        if k - closed > self.K:
            self.later.append((k, i, stamp, value))
            return
        r = k % self.K
        cnt = self.counts[r]
        j = cnt[i]
        start, width, slots, dim = self.blocks[i]
        if j >= slots:
            self.later.append((k, i, stamp, value))
            return
        flat = self._flat
        o = r * self.width + start + j * width      # (row r of the ring, slot j of stream i)
        flat[o] = fraction
        if dim == 1:
            flat[o + 1] = value
        else:
            flat[o + 1:o + 1 + dim] = value
        cnt[i] = j + 1

    def earliest(self, i: int | None = None) -> tuple[float, object] | None:
        """(stamp, value) of the earliest reading waiting for the run to start (of stream i)."""
        best = None
        for j, stamp, value in self.waiting:
            if (i is None or j == i) and (best is None or stamp < best[0]):
                best = (stamp, value)
        return best

    def first_dof_values(self, mech, streams: list[SensorStream]) -> np.ndarray | None:
        """The earliest waiting encoder reading of every DOF coordinate of ``mech``, less the
        encoder's ``offset`` (streams: the measuring streams, in slot order), or None if one is
        missing."""
        first: dict[int, tuple[float, float]] = {}
        for i, s in enumerate(streams):
            if s.kind == "encoder":
                e = self.earliest(i)
                enc = mech.encoders[s.index]
                j = enc.index
                if e is not None and (j not in first or e[0] < first[j][0]):
                    first[j] = (e[0], float(e[1]) - enc.config.offset)     # (the reading less its offset)
        if not all(int(j) in first for j in mech.dof):
            return None
        return np.array([first[int(j)][1] for j in mech.dof])

    def start(self, schedule: "KeyframeSchedule") -> None:
        """The run has opened: the waiting readings go to their keyframes."""
        waiting, self.waiting = self.waiting, []
        for i, stamp, value in waiting:
            self.pending[i] -= 1
            k = schedule.keyframe_of(stamp)
            self.put(i, k, schedule.closed, stamp, value, schedule.fraction(stamp, k))

    def take(self, k: int, p: np.ndarray, schedule: "KeyframeSchedule") -> list:
        """Move keyframe k's row into p (its slots; the rest unused) and reset it, with each
        sensor's current innovation mean (robust weights) and stamp jitter. Sets each stream's ``taken``; returns the readings of k beyond its slots as (stream, stamp, value)
        and moves readings that now fit the ring into it."""
        r = k % self.K
        p[:] = self.rows[r]
        self.rows[r] = self.template
        cnt = self.counts[r]
        pending = self.pending
        for i, s in enumerate(self.streams):
            c = cnt[i]
            s.taken = c
            pending[i] -= c
            cnt[i] = 0
        p[self.mean_abs] = [s.mean_abs for s in self.streams]      # the sensors' innovation scales, now
        p[self.jitter] = [s.jitter for s in self.streams]          # and their stamps' timing errors
        extra = []
        if self.later:
            later, self.later = self.later, []
            for kk, i, stamp, value in later:
                self.pending[i] -= 1
                if kk <= k:
                    extra.append((self.streams[i], stamp, value))
                else:
                    self.put(i, kk, k, stamp, value, schedule.fraction(stamp, kk))
        return extra

    def drain(self, schedule: "KeyframeSchedule") -> list[tuple[int, float, object]]:
        """Remove and return every queued reading as (stream index, stamp, value) (a restart)."""
        out = list(self.waiting)
        self.waiting = []
        if schedule.started:
            h = schedule.h
            for kk in range(schedule.closed + 1, schedule.closed + 1 + self.K):
                r = kk % self.K
                cnt = self.counts[r]
                if not any(cnt):
                    continue
                row, t_prev = self.rows[r], schedule.time(kk - 1)
                for i, (start, width, _, dim) in enumerate(self.blocks):
                    for j in range(cnt[i]):
                        o = start + j * width
                        out.append((i, t_prev + float(row[o]) * h,
                                    float(row[o + 1]) if dim == 1 else row[o + 1:o + 1 + dim].copy()))
                    cnt[i] = 0
                self.rows[r] = self.template
        out += [(i, stamp, value) for _, i, stamp, value in self.later]
        self.later = []
        self.pending = [0] * len(self.streams)
        self.newest = -math.inf
        return out


def step_readings(layout: StepLayout, streams: list[SensorStream], p: np.ndarray, t_prev: float, h: float,
                  taken: list[int] | None = None) -> list[tuple[SensorStream, float, object]]:
    """(stream, stamp, value) of the readings in the slots of a step's parameters p (the step
    (t_prev, t_prev + h]): the first ``taken[i]`` slots of stream i, or (None) every used slot
    (slots fill in order; an unused one has a negative fraction). One-value readings as floats."""
    out = []
    for i, (b, s) in enumerate(zip(layout.blocks, streams)):
        V = b.view(p)
        used = range(taken[i]) if taken is not None else np.flatnonzero(V[:, 0] >= 0)
        for j in used:
            out.append((s, t_prev + float(V[j, 0]) * h, float(V[j, 1]) if s.dim == 1 else V[j, 1:1 + s.dim].copy()))
    return out
