"""Typed, path-tracking access to a parsed YAML document.

Every read knows the file and the dotted field path, so that each validation failure becomes a
:class:`~mbfg_ros.errors.ConfigError` naming the file, the field and the value. Unknown keys are
errors too (with a "did you mean" hint), because a misspelt optional field would otherwise be
silently ignored.
"""
from __future__ import annotations

import difflib
import math
import re
from pathlib import Path
from typing import Any, Iterator, Sequence

import yaml

from mbfg_ros.errors import ConfigError

_EXPONENT_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")
"""A number in exponent notation: YAML 1.1 (PyYAML) reads ``6e-4`` as a string, ``6.0e-4`` as a float."""

REQUIRED = object()

MAGNITUDE_LIMIT = 1e9
"""No number in a config may exceed this in magnitude (fields with a tighter range say so): a
value like 1e300 is a typo or an attack, and would overflow the estimator's arithmetic."""


class YamlNode:
    """A mapping in the document, with the path that leads to it."""

    def __init__(self, data: Any, path: str, file: str | None) -> None:
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ConfigError("expected a mapping (key: value lines)", file=file,
                              field=path or "<document>", value=data)
        self.data = data
        self.path = path
        self.file = file
        self._read: set[str] = set()

    # -- helpers -----------------------------------------------------------------------------
    def field(self, key: str | int) -> str:
        if isinstance(key, int):
            return f"{self.path}[{key}]"
        return f"{self.path}.{key}" if self.path else str(key)

    def error(self, key: str | int | None, reason: str, value: Any = ConfigError._MISSING) -> ConfigError:
        return ConfigError(reason, file=self.file, field=self.field(key) if key is not None else self.path,
                           value=value)

    def has(self, key: str) -> bool:
        return key in self.data

    def raw(self, key: str, default: Any = REQUIRED) -> Any:
        self._read.add(key)
        if key not in self.data:
            if default is REQUIRED:
                raise self.error(key, "this field is required")
            return default
        return self.data[key]

    # -- typed reads -------------------------------------------------------------------------
    def str(self, key: str, default: Any = REQUIRED, choices: Sequence[str] | None = None) -> Any:
        value = self.raw(key, default)
        if value is default and default is not REQUIRED:
            return value
        if not isinstance(value, str) or not value:
            raise self.error(key, "expected a non-empty string", value)
        if choices is not None and value not in choices:
            raise self.error(key, f"must be one of {', '.join(choices)}", value)
        return value

    def bool(self, key: str, default: Any = REQUIRED) -> Any:
        value = self.raw(key, default)
        if value is default and default is not REQUIRED:
            return value
        if not isinstance(value, bool):
            raise self.error(key, "expected true or false", value)
        return value

    def float(self, key: str, default: Any = REQUIRED, *, min: float | None = None,
              max: float | None = None, positive: bool = False, nonnegative: bool = False,
              unit: str = "") -> Any:
        value = self.raw(key, default)
        if value is default and default is not REQUIRED:
            return value
        return self.check_float(key, value, min=min, max=max, positive=positive,
                                nonnegative=nonnegative, unit=unit)

    def check_float(self, key: str | int, value: Any, *, min: float | None = None,
                    max: float | None = None, positive: bool = False, nonnegative: bool = False,
                    unit: str = "") -> float:
        """``value`` as a finite float within the bounds (``min``/``max`` inclusive, in ``unit``;
        never beyond :data:`MAGNITUDE_LIMIT`), or a ConfigError naming the field and the range."""
        if isinstance(value, str) and _EXPONENT_NUMBER.fullmatch(value.strip()):
            value = float(value)      # YAML 1.1 reads 6e-4 (no dot) as a string: it is a number
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(key, "expected a number", value)
        value = float(value)
        if not math.isfinite(value):
            raise self.error(key, "must be a finite number", value)
        u = f" {unit}" if unit else ""
        if positive and value <= 0.0:
            raise self.error(key, "must be greater than zero", value)
        if nonnegative and value < 0.0:
            raise self.error(key, "must not be negative", value)
        if min is not None and max is not None and not (min <= value <= max):
            raise self.error(key, f"must be from {min:g} to {max:g}{u}", value)
        if min is not None and value < min:
            raise self.error(key, f"must be at least {min:g}{u}", value)
        if max is not None and value > max:
            raise self.error(key, f"must be at most {max:g}{u}", value)
        if abs(value) > MAGNITUDE_LIMIT:
            raise self.error(key, f"must be at most {MAGNITUDE_LIMIT:g} in magnitude", value)
        return value

    def vector(self, key: str, length: int, default: Any = REQUIRED, *, unit: bool = False) -> Any:
        value = self.raw(key, default)
        if value is default and default is not REQUIRED:
            return value
        if not isinstance(value, (list, tuple)) or len(value) != length:
            raise self.error(key, f"expected a list of {length} numbers", value)
        out = tuple(self.check_float(key, v) for v in value)
        if unit:
            norm = math.sqrt(sum(v * v for v in out))
            if norm < 1e-9:
                raise self.error(key, "must be a non-zero direction", value)
            out = tuple(v / norm for v in out)
        return out

    def str_list(self, key: str, default: Any = REQUIRED) -> Any:
        value = self.raw(key, default)
        if value is default and default is not REQUIRED:
            return value
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self.error(key, "expected a list of names", value)
        if len(set(value)) != len(value):
            raise self.error(key, "names must not repeat", value)
        return list(value)

    def float_map(self, key: str, default: Any = REQUIRED) -> Any:
        value = self.raw(key, default)
        if value is default and default is not REQUIRED:
            return value
        node = YamlNode(value, self.field(key), self.file)
        return {str(k): node.check_float(str(k), v) for k, v in node.data.items()}

    def node(self, key: str, default: Any = REQUIRED) -> "YamlNode":
        value = self.raw(key, {} if default is not REQUIRED else REQUIRED)
        return YamlNode(value, self.field(key), self.file)

    def nodes(self, key: str) -> Iterator["YamlNode"]:
        """The items of an optional list of mappings."""
        value = self.raw(key, [])
        if value is None:
            value = []
        if not isinstance(value, list):
            raise self.error(key, "expected a list (lines starting with '- ')", value)
        for i, item in enumerate(value):
            yield YamlNode(item, f"{self.field(key)}[{i}]", self.file)

    def mapping_nodes(self, key: str) -> Iterator[tuple[str, "YamlNode"]]:
        """The entries of an optional mapping of name -> mapping."""
        node = self.node(key, {})
        for name in node.data:
            node._read.add(name)
            yield str(name), YamlNode(node.data[name], node.field(str(name)), self.file)

    def finish(self) -> None:
        """Reject keys that no read asked for (most likely misspelt)."""
        for key in self.data:
            if key not in self._read:
                close = difflib.get_close_matches(str(key), sorted(self._read), n=1)
                hint = f"; did you mean '{close[0]}'?" if close else ""
                known = ", ".join(sorted(self._read)) or "none"
                raise self.error(str(key), f"unknown field{hint} (known fields here: {known})")


def check_name(node: YamlNode, key: str, name: str, known: Sequence[str], what: str) -> None:
    """Raise a ConfigError naming ``what`` if ``name`` is not one of ``known``."""
    if name not in known:
        close = difflib.get_close_matches(name, list(known), n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        listing = ", ".join(known) if len(known) <= 12 else ", ".join(list(known)[:12]) + ", ..."
        raise node.error(key, f"unknown {what}{hint} (the model has: {listing})", name)


def load_yaml_file(path: str | Path, what: str = "config file") -> Any:
    """The parsed YAML document of ``path``; a ConfigError naming the file (no such ``what``,
    not valid YAML with the line and column, not a text file) otherwise."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"no such {what}", file=str(path))
    try:
        with path.open("r", encoding="utf-8") as fh:
            return yaml.safe_load(fh)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"not valid YAML{where}: {problem}", file=str(path)) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not a text file ({exc.reason})", file=str(path)) from None
