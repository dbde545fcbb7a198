"""Node parameters declared from one table: type, default, unit, range, description.

Each node lists its parameters as :class:`ParameterSpec` rows; :func:`declare` declares them on
an rclpy node with a ``ParameterDescriptor`` (description, read-only, ranges, constraints) and
returns the validated values. Anything wrong (a string for a number, a value out of range, an
unknown choice) raises :class:`ParameterError` naming the parameter, the value and what is
allowed; the nodes turn it into one logged error line and exit status 2.

Numbers accept integers for doubles (``-p lag:=2`` works); the tables import no rclpy, so the
launch description and ``mbfg run`` can check parameter names without starting ROS.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Iterable

from mbfg_ros.errors import MbfgError


class ParameterError(MbfgError):
    """A node parameter with a wrong type or value (the message names it and the value)."""


@dataclass(frozen=True)
class ParameterSpec:
    """One parameter: ``kind`` is float, int, bool, str, "str_list" or "float_list"; ``low`` /
    ``high`` bound numbers (inclusive); ``choices`` restrict strings; ``zero_means`` documents
    a 0 that means "use the default" and is then allowed outside the range."""
    name: str
    kind: Any
    default: Any
    description: str
    unit: str = ""
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    zero_means: str = ""

    def constraint(self) -> str:
        """The allowed values in words (for the descriptor and error messages)."""
        parts = []
        if self.low is not None and self.high is not None:
            parts.append(f"{self.low:g} <= value <= {self.high:g}")
        elif self.low is not None:
            parts.append(f"value >= {self.low:g}")
        elif self.high is not None:
            parts.append(f"value <= {self.high:g}")
        if self.choices:
            parts.append("one of: " + ", ".join(self.choices))
        if self.zero_means:
            parts.append(f"or 0 ({self.zero_means})")
        return " ".join(parts)


_KIND_NAMES = {float: "a number", int: "an integer", bool: "true or false", str: "a string",
               "str_list": "a list of strings", "float_list": "a list of numbers"}


def check_value(spec: ParameterSpec, value: Any) -> Any:
    """The value converted to the spec's kind, or ParameterError naming the parameter."""
    def bad(why: str) -> ParameterError:
        allowed = spec.constraint()
        unit = f" {spec.unit}" if spec.unit else ""
        return ParameterError(f"parameter '{spec.name}' {why} (value: {value!r}"
                              f"{unit if isinstance(value, (int, float)) and not isinstance(value, bool) else ''})"
                              + (f"; allowed: {allowed}" if allowed else ""))

    kind = spec.kind
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad(f"must be {_KIND_NAMES[float]}")
        value = float(value)
        if not math.isfinite(value):
            raise bad("must be finite")
        _check_range(spec, value, bad)
        return value
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad(f"must be {_KIND_NAMES[int]}")
        _check_range(spec, value, bad)
        return int(value)
    if kind is bool:
        if not isinstance(value, bool):
            raise bad(f"must be {_KIND_NAMES[bool]}")
        return value
    if kind is str:
        if not isinstance(value, str):
            raise bad(f"must be {_KIND_NAMES[str]}")
        if spec.choices and value not in spec.choices:
            raise bad("is not a known choice")
        return value
    if kind == "str_list":
        if value is None:
            return []
        if isinstance(value, str) or not all(isinstance(v, str) for v in value):
            raise bad(f"must be {_KIND_NAMES['str_list']}")
        return [v for v in value if v != ""]
    if kind == "float_list":
        if value is None:
            return []
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = [value]
        try:
            out = [float(v) for v in value if not isinstance(v, bool)]
        except (TypeError, ValueError):
            raise bad(f"must be {_KIND_NAMES['float_list']}") from None
        if len(out) != len(list(value)) or not all(math.isfinite(v) for v in out):
            raise bad(f"must be {_KIND_NAMES['float_list']}")
        return out
    raise TypeError(f"unknown parameter kind {kind!r}")


def _check_range(spec: ParameterSpec, value: float, bad) -> None:
    if spec.zero_means and value == 0:
        return
    if spec.low is not None and value < spec.low:
        raise bad("is out of range")
    if spec.high is not None and value > spec.high:
        raise bad("is out of range")


def _descriptor(spec: ParameterSpec, typed_default: bool = False):
    from rcl_interfaces.msg import (FloatingPointRange, IntegerRange, ParameterDescriptor,
                                    ParameterType)
    types = {float: ParameterType.PARAMETER_DOUBLE, int: ParameterType.PARAMETER_INTEGER,
             bool: ParameterType.PARAMETER_BOOL, str: ParameterType.PARAMETER_STRING,
             "str_list": ParameterType.PARAMETER_STRING_ARRAY,
             "float_list": ParameterType.PARAMETER_DOUBLE_ARRAY}
    unit = f" [{spec.unit}]" if spec.unit else ""
    d = ParameterDescriptor(description=spec.description + unit, read_only=True,
                            additional_constraints=spec.constraint(), type=types[spec.kind])
    # every parameter is checked by check_value; dynamic typing lets "-p lag:=2" (an integer)
    # reach it instead of failing inside rclpy with a type error
    d.dynamic_typing = not typed_default      # rclpy refuses it together with a typed default
    if spec.kind is int and spec.low is not None and spec.high is not None and not spec.zero_means:
        d.integer_range = [IntegerRange(from_value=int(spec.low), to_value=int(spec.high), step=0)]
    if spec.kind is float and spec.low is not None and spec.high is not None and not spec.zero_means:
        d.floating_point_range = [FloatingPointRange(from_value=float(spec.low),
                                                     to_value=float(spec.high), step=0.0)]
    return d


def declare(node, specs: Iterable[ParameterSpec]) -> dict[str, Any]:
    """Declare ``specs`` on ``node`` (read-only, with descriptors) and return {name: value}
    validated with :func:`check_value`. Raises ParameterError on the first bad parameter."""
    from rclpy.exceptions import ParameterException
    out: dict[str, Any] = {}
    for spec in specs:
        default = spec.default
        typed = False
        if spec.kind in ("str_list", "float_list") and not default:
            # an empty list has no type: declare the type (then rclpy checks it, not dynamic)
            from rclpy.parameter import Parameter
            default = Parameter.Type.STRING_ARRAY if spec.kind == "str_list" else Parameter.Type.DOUBLE_ARRAY
            typed = True
        try:
            p = node.declare_parameter(spec.name, default, _descriptor(spec, typed))
        except ParameterException as exc:
            raise _rclpy_error(spec, str(exc)) from None
        out[spec.name] = check_value(spec, p.value)
    return out


def _rclpy_error(spec: ParameterSpec, text: str) -> ParameterError:
    """rclpy's refusal of a declared value, reworded as our one-line message."""
    allowed = spec.constraint() or _KIND_NAMES.get(spec.kind, str(spec.kind))
    m = re.search(r"Invalid parameter value \((.*)\) for parameter", text)
    if m:
        return ParameterError(f"parameter '{spec.name}' is out of range (value: {m.group(1)}"
                              f"{' ' + spec.unit if spec.unit else ''}); allowed: {allowed}")
    m = re.search(r"to '(.*)' of type '(\w+)'", text, re.S)
    if m:
        return ParameterError(f"parameter '{spec.name}' has the wrong type (value: {m.group(1)} of type "
                              f"{m.group(2).lower()}); expected {_KIND_NAMES.get(spec.kind, spec.kind)}")
    return ParameterError(f"parameter '{spec.name}': {text}; allowed: {allowed}")


def unknown_overrides(node, specs: Iterable[ParameterSpec]) -> list[str]:
    """Names given to the node (``-p`` or a params file) that it does not declare (typos)."""
    names = {s.name for s in specs} | {"use_sim_time", "start_type_description_service"}
    given = getattr(node, "_parameter_overrides", {}) or {}
    return sorted(n for n in given if n not in names and not n.startswith("qos_overrides."))


def describe(specs: Iterable[ParameterSpec]) -> str:
    """A Markdown table of the parameters (for the README and --help)."""
    rows = ["| parameter | type | default | meaning |", "|---|---|---|---|"]
    for s in specs:
        kind = {float: "double", int: "int", bool: "bool", str: "string", "str_list": "string[]",
                "float_list": "double[]"}[s.kind]
        unit = f" ({s.unit})" if s.unit else ""
        allowed = f"; {s.constraint()}" if s.constraint() else ""
        default = "" if s.default in ("", [], ()) else repr(s.default)
        rows.append(f"| `{s.name}` | {kind} | {default} | {s.description}{unit}{allowed} |")
    return "\n".join(rows)
