"""Node parameters declared from one table: type, default, unit, range, description.

Each node lists its parameters as :class:`ParameterSpec` rows (the tables are in
:mod:`mbfg_ros.ros.parameter_tables`); :func:`declare_node_parameters`, the one entry point of
both nodes, declares them on an rclpy node with a ``ParameterDescriptor`` (description,
read-only, ranges, constraints), checks that the node was given no name it lacks, and returns the
validated values. Anything wrong (a string for a number, a value out of range, an
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
    a 0 that means "use the default" and is then allowed outside the range; ``runtime`` marks
    a parameter that may change on a running node (declared writable; applied by
    :mod:`mbfg_ros.ros.runtime_parameters`), every other one is read-only."""
    name: str
    kind: Any
    default: Any
    description: str
    unit: str = ""
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    zero_means: str = ""
    runtime: bool = False

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


def _descriptor(spec: ParameterSpec, typed_default: bool = False, read_only: bool = True):
    from rcl_interfaces.msg import (FloatingPointRange, IntegerRange, ParameterDescriptor,
                                    ParameterType)
    types = {float: ParameterType.PARAMETER_DOUBLE, int: ParameterType.PARAMETER_INTEGER,
             bool: ParameterType.PARAMETER_BOOL, str: ParameterType.PARAMETER_STRING,
             "str_list": ParameterType.PARAMETER_STRING_ARRAY,
             "float_list": ParameterType.PARAMETER_DOUBLE_ARRAY}
    unit = f" [{spec.unit}]" if spec.unit else ""
    d = ParameterDescriptor(description=spec.description + unit, read_only=read_only,
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


def declare(node, specs: Iterable[ParameterSpec], writable: Iterable[str] | None = None) -> dict[str, Any]:
    """Declare ``specs`` on ``node`` (with descriptors; read-only unless named in ``writable``,
    by default the ``runtime`` ones) and return {name: value} validated with
    :func:`check_value`. Raises ParameterError on the first bad parameter."""
    from rclpy.exceptions import ParameterException
    specs = tuple(specs)
    names = {s.name for s in specs if s.runtime} if writable is None else set(writable)
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
            p = node.declare_parameter(spec.name, default,
                                       _descriptor(spec, typed, read_only=spec.name not in names))
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


def declare_node_parameters(node, specs: tuple[ParameterSpec, ...],
                            ros_argv: list[str] | None = None,
                            writable: Iterable[str] | None = None) -> dict[str, Any]:
    """Declare ``specs`` on ``node`` (:func:`declare`; ``writable`` as there) and return {name:
    validated value}. A name
    given to this node that it does not have (:func:`unknown_overrides`) raises ParameterError
    listing the node's parameters; one given only by a wildcard section of a params file is
    logged as a warning and ignored."""
    values = declare(node, specs, writable)
    extra, ignored = unknown_overrides(node, specs, ros_argv)
    if ignored:
        node.get_logger().warning(f"ignoring parameter(s) {', '.join(repr(e) for e in ignored)} "
                                  "given by a wildcard section of a params file: this node has "
                                  "no such parameter")
    if extra:
        raise ParameterError(f"unknown parameter(s) {', '.join(repr(e) for e in extra)} "
                             f"(this node has: {', '.join(s.name for s in specs)}, use_sim_time)")
    return values


def unknown_overrides(node, specs: Iterable[ParameterSpec],
                      argv: list[str] | None = None) -> tuple[list[str], list[str]]:
    """Names given to the node (``-p`` or a params file) that it does not declare, as
    (errors, ignored): a name given to this node specifically (``-p``, the node's own section of
    a params file, ``cli_args``) is a typo and an error; a name that only a wildcard section
    (``/**``, ``/**/name``...) of a params file gives is ignored (a file shared by several nodes
    holds other nodes' parameters), and the node says so in a warning. ``argv`` is the command
    line the node was started with; without it every unknown name is an error."""
    names = {s.name for s in specs} | {"use_sim_time", "start_type_description_service"}
    given = getattr(node, "_parameter_overrides", {}) or {}
    unknown = sorted(n for n in given if n not in names and not n.startswith("qos_overrides."))
    if not unknown or argv is None:
        return unknown, []
    wildcard_only = wildcard_parameters(argv, node.get_fully_qualified_name())
    return ([n for n in unknown if n not in wildcard_only],
            [n for n in unknown if n in wildcard_only])


# ---------------------------------------------------------------------------------------------
# where parameters come from: ROS command-line arguments and params files (no rclpy needed)

_VALUE_OPTIONS = {"-r", "--remap", "--log-level", "-e", "--enclave", "--log-config-file"}


def ros_parameter_arguments(argv: list[str]) -> tuple[list[str], list[str]]:
    """(names given with ``-p name:=value``, params files given with ``--params-file``) in the
    ``--ros-args`` sections of a command line."""
    names: list[str] = []
    files: list[str] = []
    inside = False
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--ros-args":
            inside = True
        elif a == "--" and inside:
            inside = False
        elif inside and a in ("-p", "--param") and i + 1 < len(argv):
            names.append(argv[i + 1].split(":=", 1)[0])
            i += 1
        elif inside and a == "--params-file" and i + 1 < len(argv):
            files.append(argv[i + 1])
            i += 1
        elif inside and a in _VALUE_OPTIONS:
            i += 1
        i += 1
    return names, files


def params_file_sections(data: Any) -> list[tuple[str, dict[str, Any]]]:
    """(node name pattern, {parameter: value}) of every ``ros__parameters`` section of a params
    file's YAML (nested namespace keys joined with '/'; nested parameter names with '.')."""
    out: list[tuple[str, dict[str, Any]]] = []

    def flatten(d: dict, prefix: str = "") -> dict[str, Any]:
        flat: dict[str, Any] = {}
        for k, v in d.items():
            if isinstance(v, dict):
                flat.update(flatten(v, f"{prefix}{k}."))
            else:
                flat[f"{prefix}{k}"] = v
        return flat

    def walk(d: dict, path: list[str]) -> None:
        for key, value in d.items():
            if key == "ros__parameters" and isinstance(value, dict):
                out.append(("/" + "/".join(p.strip("/") for p in path if p.strip("/")), flatten(value)))
            elif isinstance(value, dict):
                walk(value, path + [str(key)])

    if isinstance(data, dict):
        walk(data, [])
    return out


def is_wildcard(pattern: str) -> bool:
    return "*" in pattern


def matches_node(pattern: str, node_fqn: str) -> bool:
    """Whether a params-file section name applies to the node ``node_fqn`` (``*`` is one name
    token, ``**`` any number of them; a name without a leading '/' is absolute)."""
    want = [t for t in pattern.split("/") if t]
    have = [t for t in node_fqn.split("/") if t]

    def match(i: int, j: int) -> bool:
        if i == len(want):
            return j == len(have)
        if want[i] == "**":
            return any(match(i + 1, k) for k in range(j, len(have) + 1))
        return j < len(have) and (want[i] == "*" or want[i] == have[j]) and match(i + 1, j + 1)

    return match(0, 0)


def wildcard_parameters(argv: list[str], node_fqn: str) -> set[str]:
    """Parameter names that reach the node ``node_fqn`` only through wildcard sections of its
    params files (never through ``-p`` or a section naming the node)."""
    import yaml
    names, files = ros_parameter_arguments(argv)
    specific = set(names)
    wildcard: set[str] = set()
    for path in files:
        try:
            with open(path, encoding="utf-8") as fh:
                data = yaml.safe_load(fh)
        except (OSError, yaml.YAMLError):
            continue                    # rcl reports an unreadable file itself
        for pattern, params in params_file_sections(data):
            if matches_node(pattern, node_fqn):
                (wildcard if is_wildcard(pattern) else specific).update(params)
    return wildcard - specific


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


def empty_overrides(argv: Iterable[str]) -> list[str]:
    """Parameters given as ``-p name:=`` with nothing after ``:=`` (``-p config:=$RIG`` with
    RIG unset): rcl cannot parse them and rclpy.init would fail with a traceback."""
    args = list(argv)
    out = []
    for i, arg in enumerate(args[:-1]):
        if arg in ("-p", "--param"):
            name, sep, value = args[i + 1].partition(":=")
            if sep and not value:
                out.append(name)
    return out


def init_rclpy(argv: list[str], node_name: str) -> bool:
    """``rclpy.init(args=argv)``; False after one logged error line naming the problem when the
    command line is refused (an empty ``-p name:=``, an unparsable ``--ros-args``)."""
    import rclpy
    empty = empty_overrides(argv)
    try:
        if empty:
            raise ParameterError(
                f"parameter '{empty[0]}' is given without a value ('-p {empty[0]}:=' with nothing "
                f"after ':=': an unset shell variable?); give it a value (-p {empty[0]}:=VALUE) "
                "or leave it out")
        rclpy.init(args=argv)
    except (ParameterError, RuntimeError) as exc:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if not isinstance(exc, ParameterError):
            text = f"the ROS arguments of the command line could not be parsed: {text}"
        rclpy.logging.get_logger(node_name).error(f"cannot start: {text}")
        return False
    return True
