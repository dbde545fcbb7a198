"""SIGTERM handled like Ctrl-C: a job runner's ``kill`` (or a CI timeout) stops a command the way
an interrupt does, so every ``with`` block cleans up (a bag being written is removed, never left
half-written without its metadata).

:func:`terminate_as_interrupt` makes the first SIGTERM raise :class:`Terminated` (a
KeyboardInterrupt) in the main thread and ignores further ones while the clean-up runs.
"""
from __future__ import annotations

import signal


class Terminated(KeyboardInterrupt):
    """The process received SIGTERM (handled as Ctrl-C; ``mbfg`` exits with status 143)."""


def terminate_as_interrupt() -> None:
    """Install the SIGTERM handler (call from the main thread)."""

    def handler(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)      # the clean-up must not be cut short
        raise Terminated()

    signal.signal(signal.SIGTERM, handler)
