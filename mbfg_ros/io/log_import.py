"""A recorded log (CSV, .mat, .npz) to a rosbag2 of the rig's sensor messages: ``mbfg import``.

The map (:mod:`mbfg_ros.io.log_map`) says which column is the time and which columns are which
sensor's readings; each mapped sensor becomes the messages ``mbfg simulate`` writes for it
(:mod:`mbfg_ros.io.simulation_messages`: JointState for encoders and known inputs, Imu for
gyros, WrenchStamped for load cells), header stamp = log (receive) time = the log's own time of
the row. Per sensor, a row is

- skipped and counted as NaN when one of its mapped cells is empty or not finite (a row without
  a time is skipped for every sensor and counted once, ``rows_without_time``);
- dropped and counted as a repeat (``repeats: drop``, the default) when every mapped value equals
  the previous row's: a logger that writes the last value again when no new sample came;
- dropped and counted as a same-stamp row when its time equals the previous written sample's
  (the estimator would reject a second reading at one stamp).

A time column that goes backwards is refused with the row (and the CSV line). What is written
is summarised per sensor: samples, repeats, NaN, same-stamp rows, gaps (steps longer than
``gap_factor`` median periods), rate (1 / median period) and jitter (RMS deviation of the other
steps from the median period).
"""
from __future__ import annotations

import heapq
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mbfg_ros.io.bag_writer import BagWriter
from mbfg_ros.io.log_map import TIME_UNITS_NS, ChannelColumns, LogMap, check_log_map
from mbfg_ros.io.log_tables import LogError, LogTable, read_log_table
from mbfg_ros.io.simulation_messages import sensor_messages
from mbfg_ros.model.channels import channel_names
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.sim.sensors import Sample, sensor_channels

MAX_GAPS_LISTED = 5


@dataclass
class ChannelImport:
    """What became of one sensor's column(s). Times in s; ``gap_starts``: the first gaps' start
    times (s after the log's first time)."""
    channel: str
    kind: str
    topic: str
    columns: tuple[str, ...]
    written: int = 0
    repeats: int = 0
    nan: int = 0
    same_stamp: int = 0
    gaps: int = 0
    largest_gap: float = 0.0
    gap_starts: list[float] = field(default_factory=list)
    rate: float = float("nan")
    jitter: float = float("nan")


@dataclass
class LogImport:
    """A log turned into sensor samples (``samples``, in stamp order) with what happened to each
    channel. ``epoch_ns``: the whole second before the first time (the samples' stamps are
    relative to it); ``bag``: the written bag's summary once written."""
    source: Path
    format: str
    delimiter: str
    rows: int
    rows_without_time: int
    first_ns: int
    last_ns: int
    epoch_ns: int
    channels: list[ChannelImport]
    unmapped: list[str]
    samples: list[Sample] = field(repr=False, default_factory=list)
    bag: dict | None = None

    def facts(self) -> dict:
        """The summary as JSON-able facts (``channels`` per channel name)."""
        def num(x: float):
            return None if not np.isfinite(x) else float(x)
        return {"source": str(self.source), "format": self.format, "delimiter": self.delimiter or None,
                "rows": self.rows, "rows_without_time": self.rows_without_time,
                "first_stamp": self.first_ns / 1e9, "last_stamp": self.last_ns / 1e9,
                "duration": (self.last_ns - self.first_ns) / 1e9, "unmapped": self.unmapped,
                "channels": {c.channel: {"kind": c.kind, "topic": c.topic, "columns": list(c.columns),
                                         "written": c.written, "repeats": c.repeats, "nan": c.nan,
                                         "same_stamp": c.same_stamp, "gaps": c.gaps,
                                         "largest_gap": c.largest_gap, "gap_starts": c.gap_starts,
                                         "rate": num(c.rate), "jitter": num(c.jitter)}
                             for c in self.channels},
                "bag": self.bag}


def row_stamps(table: LogTable, log_map: LogMap) -> tuple[np.ndarray, np.ndarray]:
    """(stamps (rows,) int64 ns, valid (rows,) bool): the time column in ns plus the map's
    offset; rows without a time are not valid. Raises LogError where the time goes backwards."""
    col, unit = log_map.time_column, log_map.time_unit
    per = TIME_UNITS_NS[unit]
    whole = table.column(col, integer=True)
    if whole is not None and np.all(np.abs(whole) < np.iinfo(np.int64).max // per):
        raw = whole
        ns = whole * per
        valid = np.ones(ns.shape, bool)
    else:
        raw = table.column(col)
        valid = np.isfinite(raw) & (np.abs(raw) * per < 9e18)
        ns = np.zeros(raw.shape, np.int64)
        ns[valid] = np.round(raw[valid] * per).astype(np.int64)
    ns = ns + int(round(log_map.time_offset * 1e9))
    rows = np.nonzero(valid)[0]
    back = np.nonzero(np.diff(ns[rows]) < 0)[0]
    if back.size:
        i, prev = rows[back[0] + 1], rows[back[0]]
        raise LogError(f"{table.path}: the time column {col!r} goes backwards at {table.where(i)}: "
                       f"{raw[i].item()!r} {unit} after {raw[prev].item()!r} {unit} at {table.where(prev)}; a log "
                       "must be in time order (sort it, or split it where the clock was reset)")
    if rows.size and ns[rows[0]] < 0:
        raise LogError(f"{table.path}: the time column {col!r} plus time.offset starts before 1970 "
                       f"({ns[rows[0]] / 1e9:g} s); give time.offset in the map")
    return ns, valid


def channel_values(table: LogTable, ch: ChannelColumns, rows: int) -> np.ndarray:
    """(rows, k) values scale * cell + offset of the channel's columns, which must have as many
    rows as the time column (``rows``)."""
    cols = []
    for name in ch.columns:
        c = table.column(name)
        if c.shape[0] != rows:
            raise LogError(f"{table.path}: column {name!r} has {c.shape[0]} rows, the time column {rows}")
        cols.append(c)
    return np.column_stack(cols) * ch.scale + ch.offset


def _timing(stats: ChannelImport, stamps_ns: np.ndarray, first_ns: int, gap_factor: float) -> None:
    """Rate, jitter (over the steps that are not gaps) and gaps of the written samples' stamps."""
    if stamps_ns.size < 2:
        return
    steps = np.diff(stamps_ns) / 1e9
    period = float(np.median(steps))
    stats.rate = 1.0 / period if period > 0 else float("inf")
    gap = steps > gap_factor * period
    stats.jitter = float(np.sqrt(np.mean((steps[~gap] - period) ** 2)))
    gaps = np.nonzero(gap)[0]
    stats.gaps = int(gaps.size)
    if gaps.size:
        stats.largest_gap = float(steps[gaps].max())
        stats.gap_starts = [float((stamps_ns[g] - first_ns) / 1e9) for g in gaps[:MAX_GAPS_LISTED]]


def log_samples(table: LogTable, log_map: LogMap, mech: Mechanism) -> LogImport:
    """The samples of every mapped channel of ``table`` (see the module docstring)."""
    bound = check_log_map(log_map, mech)
    topics = {c.name: c.topic for c in sensor_channels(mech)}
    dims = {c.name: c.model.dim for c in sensor_channels(mech)}
    ns, valid = row_stamps(table, log_map)
    rows = np.nonzero(valid)[0]
    if not rows.size:
        raise LogError(f"{table.path}: no row has a time in column {log_map.time_column!r}")
    first, last = int(ns[rows[0]]), int(ns[rows[-1]])
    epoch = first - first % 1_000_000_000
    streams, channels = [], []
    for kind, ch in bound:
        stats = ChannelImport(ch.channel, kind, topics[ch.channel], ch.columns)
        values = channel_values(table, ch, ns.size)
        finite = np.isfinite(values).all(axis=1)
        candidate = valid & finite
        stats.nan = int(np.count_nonzero(valid & ~finite))
        if log_map.repeats == "drop":
            repeat = np.zeros(ns.size, bool)
            repeat[1:] = np.all(values[1:] == values[:-1], axis=1)
            repeat &= candidate
            stats.repeats = int(np.count_nonzero(repeat))
            candidate &= ~repeat
        idx = np.nonzero(candidate)[0]
        same = np.zeros(idx.size, bool)
        same[1:] = ns[idx[1:]] == ns[idx[:-1]]
        stats.same_stamp = int(np.count_nonzero(same))
        idx = idx[~same]
        stats.written = int(idx.size)
        _timing(stats, ns[idx], first, log_map.gap_factor)
        channels.append(stats)
        full = np.zeros((idx.size, dims.get(ch.channel, 1)))
        full[:, list(ch.axes)] = values[idx]
        rel = (ns[idx] - epoch) / 1e9
        streams.append([Sample(ch.channel, kind, t, t, v) for t, v in zip(rel.tolist(), full)])
    samples = list(heapq.merge(*streams, key=lambda s: s.stamp))
    mapped = {ch.channel for _, ch in bound}
    return LogImport(table.path, table.format, table.delimiter, ns.size, int(ns.size - rows.size),
                     first, last, epoch, channels, [n for n in channel_names(mech) if n not in mapped], samples)


def write_log_bag(result: LogImport, mech: Mechanism, out: str | Path, *, storage: str = "mcap",
                  overwrite: bool = False) -> dict:
    """Write the samples of ``result`` as the rig's sensor messages (only the mapped topics) to a
    new rosbag2; the import's facts go into its metadata (custom_data ``mbfg.import``)."""
    data = {"mbfg.epoch_ns": str(result.epoch_ns), "mbfg.rig": mech.config.name,
            "mbfg.import": json.dumps({k: v for k, v in result.facts().items() if k != "bag"}, sort_keys=True)}
    with BagWriter(out, storage=storage, overwrite=overwrite, custom_data=data) as bag:
        for message in sensor_messages(result.samples, mech, result.epoch_ns):
            bag.write(message)
    result.bag = bag.summary()
    return result.bag


def import_log(log: str | Path, log_map: LogMap, mech: Mechanism, out: str | Path, *,
               storage: str = "mcap", overwrite: bool = False) -> LogImport:
    """Read ``log``, map it onto ``mech``'s sensors and write the bag ``out``."""
    result = log_samples(read_log_table(log, log_map.delimiter), log_map, mech)
    write_log_bag(result, mech, out, storage=storage, overwrite=overwrite)
    return result
