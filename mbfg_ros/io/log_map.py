"""The mapping file of ``mbfg import``: which columns of a log are which sensor's readings.

A small YAML file, strict like the rig config (an unknown field is an error with a "did you
mean"); README "mbfg import" has a full example. Its fields:

- ``config``: the rig config the log maps onto (relative to the map file);
- ``time``: ``column`` (required), ``unit`` (s, ms, us, ns; default s), ``offset`` (s added to
  every time after the unit, e.g. the UNIX time of a log that starts at 0; default 0);
- ``repeats``: ``drop`` (default) or ``keep`` a row whose mapped values of a sensor all equal the
  previous row's (a logger that writes the last value again when no new sample came);
- ``gap_factor``: a step between two of a sensor's samples longer than this many median
  periods is reported as a gap (default 5);
- ``delimiter``: CSV only, ``auto`` (sniffed; default) or the character;
- ``sensors``: {config sensor name: column}, or {name: {column: C, scale: k, offset: b}} (reading
  = k * cell + b, in the config's units: rad or m, rad/s, N or N m, m/s^2); a gyro or an
  accelerometer gives one column per measured axis, ``columns: {x: C1, z: C3}`` (a single-axis
  one may use ``column``);
- ``inputs``: {known-input joint: column} (or the mapping form), the commanded effort (N m or N).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mbfg_ros.errors import ConfigError
from mbfg_ros.model.config_fields import AXES
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.model.yaml_reader import YamlNode, check_name, load_yaml_file

TIME_UNITS_NS = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}
"""ns per unit of a time column."""
REPEATS = ("drop", "keep")
DEFAULT_GAP_FACTOR = 5.0
MAX_TIME_OFFSET = 1e11
"""s: the largest time.offset (year 5138)."""


@dataclass(frozen=True)
class ChannelColumns:
    """Where one channel's reading comes from: value = scale * cell + offset, per column.

    ``channel``: the config's sensor name, or ``command:<joint>`` for a known input; ``columns``:
    the log's columns, one per component; ``axes``: for a gyro or an accelerometer the sensor
    axis (0 x, 1 y, 2 z) of each column, else (0,); ``field``: the map's field, for messages; ``per_axis``: the map
    named the columns by axis (``columns: {x: ...}``) rather than one ``column``."""
    channel: str
    columns: tuple[str, ...]
    axes: tuple[int, ...]
    scale: float
    offset: float
    field: str
    per_axis: bool = False


@dataclass(frozen=True)
class LogMap:
    """A validated mapping file (see the module docstring); ``channels`` are unchecked against a
    rig until :func:`check_log_map`."""
    source: Path | None
    config: Path | None
    time_column: str
    time_unit: str
    time_offset: float
    repeats: str
    gap_factor: float
    delimiter: str
    channels: tuple[ChannelColumns, ...]


def _channel(node: YamlNode, key: str, channel: str) -> ChannelColumns:
    raw = node.raw(key)
    field = node.field(key)
    if isinstance(raw, str):
        if not raw:
            raise node.error(key, "expected a column name", raw)
        return ChannelColumns(channel, (raw,), (0,), 1.0, 0.0, field)
    n = YamlNode(raw, field, node.file)
    scale = n.float("scale", 1.0)
    offset = n.float("offset", 0.0)
    if n.has("column") == n.has("columns"):
        raise n.error(None, "give the log's column (column: NAME), or for a gyro one column per axis "
                      "(columns: {x: NAME, ...})", raw)
    if n.has("column"):
        col = n.str("column")
        n.finish()
        return ChannelColumns(channel, (col,), (0,), scale, offset, field)
    cols = n.node("columns")
    axes, names = [], []
    for axis in cols.data:
        if axis not in AXES:
            raise cols.error(str(axis), "a gyro axis is x, y or z")
        axes.append(AXES.index(axis))
        names.append(cols.str(axis))
    if not names:
        raise n.error("columns", "name a column for each measured axis")
    cols.finish()
    n.finish()
    return ChannelColumns(channel, tuple(names), tuple(axes), scale, offset, field, per_axis=True)


def parse_log_map(data: Any, source: str | Path | None = None) -> LogMap:
    """Validate a parsed mapping document (``source``: its file, for messages and relative paths)."""
    file = str(source) if source is not None else None
    root = YamlNode(data, "", file)
    base = Path(source).resolve().parent if source is not None else Path.cwd()
    config = None
    if root.has("config"):
        config = Path(root.str("config"))
        config = config if config.is_absolute() else (base / config).resolve()
    t = root.node("time")
    column = t.str("column")
    unit = t.str("unit", "s", choices=tuple(TIME_UNITS_NS))
    offset = t.raw("offset", 0.0)          # a UNIX time is beyond the configs' 1e9 magnitude limit
    if isinstance(offset, bool) or not isinstance(offset, (int, float)) or not 0.0 <= offset <= MAX_TIME_OFFSET:
        raise t.error("offset", f"expected a number of s from 0 to {MAX_TIME_OFFSET:g}", offset)
    t.finish()
    repeats = root.str("repeats", "drop", choices=REPEATS)
    gap = root.float("gap_factor", DEFAULT_GAP_FACTOR, min=1.0, max=1e6, unit="periods")
    delimiter = root.str("delimiter", "auto")
    if delimiter != "auto" and len(delimiter) != 1:
        raise root.error("delimiter", "auto, or the one character between the cells", delimiter)
    channels = []
    for section, prefix in (("sensors", ""), ("inputs", "command:")):
        node = root.node(section, {})
        channels += [_channel(node, str(name), prefix + str(name)) for name in node.data]
    if not channels:
        raise root.error("sensors", "map at least one sensor (or known input) to a column")
    root.finish()
    return LogMap(Path(source).resolve() if source is not None else None, config, column, unit, float(offset),
                  repeats, gap, delimiter, tuple(channels))


def load_log_map(path: str | Path) -> LogMap:
    """Read and validate a mapping file (YAML)."""
    return parse_log_map(load_yaml_file(path, "map file"), Path(path))


def _a(kind: str) -> str:
    """A sensor kind with its article: "a gyro", "an encoder", "a load cell"."""
    name = kind.replace("_", " ")
    return ("an " if name[0] in "aeiou" else "a ") + name


def check_log_map(log_map: LogMap, mech: Mechanism) -> list[tuple[str, ChannelColumns]]:
    """Check the map's channels against the rig (sensor names with a "did you mean", a gyro's or
    an accelerometer's columns on its measured axes, inputs on known-input joints); returns
    (kind, channel) pairs, kind a sensor kind or command."""
    file = str(log_map.source) if log_map.source else None
    node = YamlNode({}, "", file)
    sensors = {m.name: m for m in mech.sensors}
    out = []
    for ch in log_map.channels:
        given = dict(zip(("xyz"[a] for a in ch.axes), ch.columns)) if ch.per_axis else ch.columns[0]
        if ch.channel.startswith("command:"):
            joint = ch.channel.split(":", 1)[1]
            check_name(node, ch.field, joint, mech.joint_names, "joint")
            if joint not in mech.known_input_joints:
                raise ConfigError(f"not a known input of the config (actuation: {mech.config.joint(joint).actuation}); "
                                  "only joints with actuation: known read a commanded effort", file=file,
                                  field=ch.field, value=joint)
            kind, dim = "command", 1
        else:
            check_name(node, ch.field, ch.channel, list(sensors), "sensor")
            model = sensors[ch.channel]
            kind, dim = model.kind, model.dim
        if dim > 1:           # a sensor of a sensor frame's axes (gyro, accelerometer)
            measured = sorted(int(r) for r in model.rows)
            if not ch.per_axis and len(measured) == 1:
                ch = dataclasses.replace(ch, axes=(measured[0],))
            elif not ch.per_axis or sorted(ch.axes) != measured:
                raise ConfigError(f"{_a(kind)} needs one column per measured axis: {', '.join(AXES[i] for i in measured)} "
                                  "(columns: {axis: COLUMN, ...})", file=file, field=ch.field, value=given)
        elif ch.per_axis:
            raise ConfigError(f"{_a(kind)} reads one column (column: NAME)", file=file,
                              field=ch.field, value=given)
        out.append((kind, ch))
    return out
