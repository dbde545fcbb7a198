"""How a process of the package ends (no ROS imports).

SIGTERM handled like Ctrl-C: a job runner's ``kill`` (or a CI timeout) stops a command the way
an interrupt does, so every ``with`` block cleans up (a bag being written is removed, never left
half-written without its metadata). :func:`terminate_as_interrupt` makes the first SIGTERM raise
:class:`Terminated` (a KeyboardInterrupt) in the main thread and ignores further ones while the
clean-up runs.

No orphans: :func:`follow_parent`, called first by every node's ``main()``, ends a node started
by a runner (:mod:`mbfg_ros.ros.processes`, which sets :data:`PARENT_PID_VARIABLE`) when that
runner dies.
"""
from __future__ import annotations

import os
import signal
import sys

PARENT_PID_VARIABLE = "MBFG_PARENT_PID"
"""Environment variable a runner sets to its process id for the nodes it starts."""


class Terminated(KeyboardInterrupt):
    """The process received SIGTERM (handled as Ctrl-C; ``mbfg`` exits with status 143)."""


def terminate_as_interrupt() -> None:
    """Install the SIGTERM handler (call from the main thread)."""

    def handler(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)      # the clean-up must not be cut short
        raise Terminated()

    signal.signal(signal.SIGTERM, handler)


def follow_parent() -> None:
    """Called first by every node's main(): when started by a runner (which sets
    ``MBFG_PARENT_PID``), ask Linux for SIGTERM when that runner dies (``PR_SET_PDEATHSIG``), so
    a runner killed without a chance to clean up (SIGKILL, a CI timeout) leaves no orphan
    nodes; exit at once if the runner is already gone."""
    pid = os.environ.get(PARENT_PID_VARIABLE)
    if not pid or not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != int(pid):
        sys.exit(0)
