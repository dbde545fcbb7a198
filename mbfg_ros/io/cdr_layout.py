"""Deserialising many messages of one fixed layout at once: the decode direction of
:mod:`~mbfg_ros.io.cdr_template`.

Messages of one topic whose strings and array lengths never change (the same joint names, frame
ids and interface names in every message) differ only in their header stamp and their float64
values. :meth:`CdrLayout.learn` deserialises the first message with the bag's own typestore,
serialises a copy of it with sentinel values in every float64 field and in ``header.stamp``
(the same technique as the encode direction), and finds where each landed; the other bytes are
the layout's constant bytes. :meth:`CdrLayout.decode` then checks with numpy which rows of an
(N, L) byte array have exactly those constant bytes (every other row is left to the ordinary
per-message path) and gives their stamps and values as arrays (:class:`FixedRows`), without a
Python object per message. Values are read bit for bit as the per-message deserialisation reads
them (NaN, -0.0 and all).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

import numpy as np

from mbfg_ros.io.cdr_template import (SENTINEL_NSEC, SENTINEL_SEC, SENTINEL_STAMP, find_once, sentinel_values,
                                      value_offsets)

_BYTES8 = np.arange(8)


def _float_leaves(msg, path: str, out: list[tuple[str, int | None]]) -> None:
    """(path, count) of every float field of ``msg`` in field order (count None: a scalar)."""
    for f in dataclasses.fields(msg):
        if f.name == "__msgtype__":
            continue
        v = getattr(msg, f.name)
        p = f"{path}{f.name}"
        if isinstance(v, float):
            out.append((p, None))
        elif isinstance(v, np.ndarray) and v.dtype == np.float64:
            out.append((p, int(v.size)))
        elif dataclasses.is_dataclass(v):
            _float_leaves(v, p + ".", out)
        elif isinstance(v, list) and v and all(dataclasses.is_dataclass(x) for x in v):
            for i, x in enumerate(v):
                _float_leaves(x, f"{p}.{i}.", out)


def _with_sentinels(msg, path: str, values: dict[str, np.ndarray], stamp) -> object:
    """A copy of ``msg`` with the float fields from ``values`` and ``header.stamp`` = ``stamp``."""
    changes = {}
    for f in dataclasses.fields(msg):
        if f.name == "__msgtype__":
            continue
        v = getattr(msg, f.name)
        p = f"{path}{f.name}"
        if p in values:
            s = values[p]
            changes[f.name] = float(s[0]) if isinstance(v, float) else s.copy()
        elif p == "header.stamp" and stamp is not None:
            changes[f.name] = type(v)(sec=SENTINEL_SEC, nanosec=SENTINEL_NSEC)
        elif dataclasses.is_dataclass(v):
            changes[f.name] = _with_sentinels(v, p + ".", values, stamp)
        elif isinstance(v, list) and v and all(dataclasses.is_dataclass(x) for x in v):
            changes[f.name] = [_with_sentinels(x, f"{p}.{i}.", values, stamp) for i, x in enumerate(v)]
    return dataclasses.replace(msg, **changes) if changes else msg


class CdrLayout:
    """Where the stamp and the float64 values sit in the messages shaped like ``template``
    (``size`` bytes each). Build with :meth:`learn`."""

    def __init__(self, template, size: int, constant: np.ndarray, const_idx: np.ndarray,
                 leaves: dict[str, np.ndarray], stamp_offset: int | None) -> None:
        self.template = template              # the first message, deserialized
        self.size = size
        self._constant = constant             # the constant bytes' values
        self._const_idx = const_idx           # their offsets
        self.leaves = leaves                  # path -> offsets of its float64 values (k,)
        self.stamp_offset = stamp_offset      # offset of header.stamp (int32 sec, uint32 nanosec)

    @classmethod
    def learn(cls, raw: bytes, msgtype: str, deserialize: Callable[[bytes, str], object],
              serialize: Callable[[object, str], bytes]) -> "CdrLayout | None":
        """The layout of ``raw`` (one message of ``msgtype``), or None when it cannot be
        learned (a message that does not deserialize, a sentinel not found exactly once, a
        serialization that does not give ``raw``'s other bytes back)."""
        try:
            msg = deserialize(bytes(raw), msgtype)
            found: list[tuple[str, int | None]] = []
            _float_leaves(msg, "", found)
            counts = [1 if k is None else k for _, k in found]
            sentinels = sentinel_values(sum(counts))
            values, s = {}, 0
            for (p, _), k in zip(found, counts):
                values[p] = sentinels[s:s + k]
                s += k
            header = getattr(msg, "header", None)
            stamp = getattr(header, "stamp", None)
            has_stamp = stamp is not None and hasattr(stamp, "sec") and hasattr(stamp, "nanosec")
            probe = bytes(serialize(_with_sentinels(msg, "", values, stamp if has_stamp else None), msgtype))
        except Exception:                      # noqa: BLE001 - any type the probe cannot handle
            return None
        if len(probe) != len(raw):
            return None
        variable = np.zeros(len(probe), bool)
        leaves: dict[str, np.ndarray] = {}
        for p, _ in found:
            offs = value_offsets(probe, values[p])
            if offs is None:
                return None
            for at in offs.tolist():
                variable[at:at + 8] = True
            leaves[p] = offs
        stamp_offset = None
        if has_stamp:
            stamp_offset = find_once(probe, SENTINEL_STAMP)
            if stamp_offset is None:
                return None
            variable[stamp_offset:stamp_offset + 8] = True
        const_idx = np.flatnonzero(~variable)
        probe_arr = np.frombuffer(probe, np.uint8)
        layout = cls(msg, len(probe), probe_arr[const_idx].copy(), const_idx, leaves, stamp_offset)
        if not layout.matches(np.frombuffer(bytes(raw), np.uint8)[None, :])[0]:
            return None
        return layout

    def matches(self, rows: np.ndarray) -> np.ndarray:
        """(N,) bool: which rows of ``rows`` ((N, size) uint8) have this layout's constant bytes."""
        if rows.ndim != 2 or rows.shape[1] != self.size:
            return np.zeros(len(rows), bool)
        return np.all(rows[:, self._const_idx] == self._constant, axis=1)

    def decode(self, rows: np.ndarray, log_ns: np.ndarray | None = None,
               order: np.ndarray | None = None) -> "FixedRows":
        """The rows (all matching: see :meth:`matches`) as arrays."""
        return FixedRows(self, rows, log_ns, order)


@dataclass
class FixedRows:
    """N messages of one layout: ``template`` holds their strings and lengths, :meth:`values`
    and :meth:`stamps_ns` their numbers. ``log_ns``/``order``: their log times and positions in
    the read order, when the caller passes them."""
    layout: CdrLayout
    rows: np.ndarray                   # (N, size) uint8
    log_ns: np.ndarray | None = None
    order: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.rows.shape[0])

    @property
    def template(self):
        return self.layout.template

    def _at(self, offsets: np.ndarray) -> np.ndarray:
        idx = offsets[:, None] + _BYTES8
        return np.ascontiguousarray(self.rows[:, idx]).view("<f8").reshape(len(self), offsets.size)

    def values(self, path: str) -> np.ndarray:
        """(N, k): the float64 field ``path`` (``position``, ``wrench.force.x``), or every float64
        field under it in field order (``wrench.force``: x, y, z)."""
        if path in self.layout.leaves:
            return self._at(self.layout.leaves[path])
        pre = path + "."
        offs = [o for p, o in self.layout.leaves.items() if p.startswith(pre)]
        if not offs:
            raise KeyError(f"no float64 field {path!r} in {self.template.__msgtype__}")
        return self._at(np.concatenate(offs))

    def stamps_ns(self) -> np.ndarray:
        """(N,) int64: ``header.stamp`` in ns."""
        o = self.layout.stamp_offset
        if o is None:
            raise KeyError(f"{self.template.__msgtype__} has no header.stamp")
        sec = np.ascontiguousarray(self.rows[:, o:o + 4]).view("<i4").reshape(-1).astype(np.int64)
        nsec = np.ascontiguousarray(self.rows[:, o + 4:o + 8]).view("<u4").reshape(-1).astype(np.int64)
        return sec * 1_000_000_000 + nsec
