"""Serialising many messages of one fixed layout at once: a CDR template with holes.

A message whose strings and array lengths never change (the estimator's outputs of one rig:
same joint names, frames, interfaces) has the same bytes every keyframe except its header
stamps and its float64 values. :class:`CdrTemplate` serialises the message once with sentinel
values (the message's own builder, so nothing about the layout is restated here), finds where
each stamp and each value landed, and then writes N messages as one (N, L) byte array filled
with numpy. It checks itself: built from real values, its first message must equal the
ordinary serialisation byte for byte (:meth:`matches`), or the caller falls back to that.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from mbfg_ros.io import messages as msgs

SENTINEL_SEC = 1_234_567_891
SENTINEL_NSEC = 987_654_321


SENTINEL_STAMP = np.array([SENTINEL_SEC], "<i4").tobytes() + np.array([SENTINEL_NSEC], "<u4").tobytes()
"""The CDR bytes of a header.stamp holding the sentinel time (int32 sec, uint32 nanosec)."""


def sentinel_values(count: int) -> np.ndarray:
    """``count`` distinct float64 values whose byte patterns are unlikely elsewhere."""
    return 7.123456789012345e13 + 1.000000000000123 * np.arange(count)


def find_once(data: bytes, pattern: bytes) -> int | None:
    """The offset of ``pattern`` in ``data`` if it occurs exactly once, else None."""
    at = data.find(pattern)
    if at < 0 or data.find(pattern, at + 1) >= 0:
        return None
    return at


def value_offsets(data: bytes, values: np.ndarray) -> np.ndarray | None:
    """The offset in ``data`` of each float64 of ``values`` (sentinels), or None if one is not
    found exactly once."""
    offs = np.zeros(len(values), np.int64)
    for i, v in enumerate(values):
        at = find_once(data, np.float64(v).tobytes())
        if at is None:
            return None
        offs[i] = at
    return offs


class CdrTemplate:
    """Messages ``build(stamp_ns, arrays) -> message`` whose ``arrays`` have the given widths."""

    def __init__(self, build: Callable[[int, list[np.ndarray]], object], widths: Sequence[int]) -> None:
        self.build = build
        self.widths = list(widths)
        total = sum(self.widths)
        vals = sentinel_values(total)
        parts, s = [], 0
        for w in self.widths:
            parts.append(vals[s:s + w])
            s += w
        stamp = SENTINEL_SEC * 1_000_000_000 + SENTINEL_NSEC
        data = bytes(msgs.serialize(build(stamp, parts)))
        self.template = np.frombuffer(data, np.uint8).copy()
        offsets = value_offsets(data, vals)
        self.ok = offsets is not None
        if offsets is None:
            return
        self.value_offsets = offsets
        offs, at = [], data.find(SENTINEL_STAMP)
        while at >= 0:
            offs.append(at)
            at = data.find(SENTINEL_STAMP, at + 1)
        self.stamp_offsets = np.array(offs, np.int64)
        # runs of values stored back to back (a float64[] field): one slice copy per run
        self._runs: list[tuple[int, int, int]] = []       # (first value, count, byte offset)
        for i, o in enumerate(self.value_offsets):
            if self._runs and self._runs[-1][0] + self._runs[-1][1] == i and \
                    self._runs[-1][2] + 8 * self._runs[-1][1] == o:
                first, count, at = self._runs[-1]
                self._runs[-1] = (first, count + 1, at)
            else:
                self._runs.append((i, 1, int(o)))

    @property
    def size(self) -> int:
        return int(self.template.size)

    def fill(self, stamps_ns: np.ndarray, arrays: Sequence[np.ndarray]) -> np.ndarray:
        """(N, L) uint8: the N messages of ``stamps_ns`` (N,) with values ``arrays`` ((N, w) each)."""
        N = int(np.size(stamps_ns))
        out = np.tile(self.template, (N, 1))
        V = np.ascontiguousarray(np.hstack([np.asarray(a, "<f8").reshape(N, -1) for a in arrays]) if arrays
                                 else np.zeros((N, 0)))
        for first, count, at in self._runs if V.shape[1] else ():
            out[:, at:at + 8 * count] = V[:, first:first + count].view(np.uint8)
        if self.stamp_offsets.size:
            st = np.asarray(stamps_ns, np.int64)
            sec = (st // 1_000_000_000).astype("<i4").view(np.uint8).reshape(N, 4)
            nsec = (st % 1_000_000_000).astype("<u4").view(np.uint8).reshape(N, 4)
            for o in self.stamp_offsets:
                out[:, o:o + 4] = sec
                out[:, o + 4:o + 8] = nsec
        return out

    def matches(self, stamp_ns: int, arrays: Sequence[np.ndarray]) -> bool:
        """Whether the template gives the ordinary serialisation of these values (one message)."""
        if not self.ok:
            return False
        mine = self.fill(np.array([stamp_ns]), [np.asarray(a, float).reshape(1, -1) for a in arrays])[0].tobytes()
        return mine == bytes(msgs.serialize(self.build(stamp_ns, [np.asarray(a, float).reshape(-1) for a in arrays])))
