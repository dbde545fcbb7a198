"""Errors a user can act on: each names the file, the field and the offending value."""
from __future__ import annotations

from typing import Any


class MbfgError(Exception):
    """Base class of every error mbfg_ros reports to a user (printed without traceback)."""


class ConfigError(MbfgError):
    """A problem in a mechanism config (YAML) or URDF.

    Attributes:
        file: the file the problem is in (may be None for in-memory input).
        field: dotted path of the field, e.g. ``sensors.encoders[0].noise``.
        value: the offending value (None when the field is missing).
        reason: what is wrong and, where possible, what would be right.
    """

    _MISSING = object()

    def __init__(self, reason: str, *, file: str | None = None, field: str | None = None,
                 value: Any = _MISSING) -> None:
        self.reason = reason
        self.file = file
        self.field = field
        self.value = value
        super().__init__(self.format())

    def format(self) -> str:
        where = []
        if self.file:
            where.append(str(self.file))
        if self.field:
            where.append(f"field '{self.field}'")
        head = ": ".join(where)
        value = "" if self.value is ConfigError._MISSING else f" (value: {self.value!r})"
        return f"{head}: {self.reason}{value}" if head else f"{self.reason}{value}"

    def with_file(self, file: str) -> "ConfigError":
        """The same error, attributed to ``file`` if it had no file yet."""
        if self.file:
            return self
        return ConfigError(self.reason, file=file, field=self.field, value=self.value)


class AssemblyError(MbfgError):
    """The position or velocity problem has no solution near the given configuration.

    ``field`` is the config field to fix (``mechanism.dof`` when the DOF choice is the cause,
    else ``mechanism.initial``)."""

    def __init__(self, message: str, field: str = "mechanism.initial") -> None:
        super().__init__(message)
        self.field = field


class CliError(MbfgError):
    """Bad command-line input (an unknown option value, an unwritable path, ...)."""
