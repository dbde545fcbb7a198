"""The replay's output messages in batches of keyframes.

:class:`OutputWriter` hands the keyframes of both replays over in batches (serialised at once
by :class:`~mbfg_ros.io.output_templates.BatchMessages`, which the node uses too, and written in
bulk by :meth:`OutputBag.write_keyframes`).
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

from mbfg_ros.io.estimate_messages import OutputNames
from mbfg_ros.io.output_templates import BatchMessages
from mbfg_ros.estimation.outputs import Estimate, Forces
from mbfg_ros.model.mechanism import Mechanism

FLUSH_ROWS = 1024
"""Keyframes an :class:`OutputWriter` holds before it serialises and writes them."""


def diagnostics_due(times: Sequence[float], next_t: float, period: float) -> tuple[list[int], float]:
    """Rows of keyframe times ``times`` (s) after which /diagnostics is written: a keyframe at or
    past ``next_t``, which then moves to the next multiple of ``period`` (s) after it. Returns
    (rows, the new next_t)."""
    due = []
    for i, t in enumerate(np.asarray(times, float).tolist()):
        if t >= next_t:
            due.append(i)
            next_t = (math.floor(t / period) + 1) * period
    return due, next_t


class OutputWriter:
    """Writes keyframes' output messages to ``out`` (an OutputBag or WriterProcess), in the
    order the message-by-message path writes them (/tf_static first, each keyframe's messages,
    /diagnostics after its keyframe). With ``batch`` and exact templates (checked on the first
    keyframe, :meth:`BatchMessages.usable`), keyframes are held until ``rows`` of them are
    there, then handed over as arrays (``out.write_keyframes``: serialised at once and written
    in bulk where the bag is written, so in the writer process if there is one) with the
    diagnostics between them; otherwise each keyframe goes through ``out.write_estimate``.
    :meth:`flush` (before ``out`` is closed) writes what is held."""

    def __init__(self, out, mech: Mechanism, names: OutputNames, *, batch: bool = True,
                 rows: int = FLUSH_ROWS) -> None:
        self.out, self.mech, self.names = out, mech, names
        self.batch, self.rows = batch, rows
        self.exact: bool | None = None        # decided at the first keyframe
        self._stamps: list[np.ndarray] = []   # held keyframes: stamps and arrays, in pieces
        self._arrays: list[list[np.ndarray]] = []
        self._diagnostics: list[tuple[int, object, int]] = []   # (after row, message, stamp)
        self._held_rows = 0

    def write(self, stamps_ns: np.ndarray, arrays: tuple, estimates: Sequence[Estimate],
              forces: Callable[[], Sequence[Forces]], due: Sequence[int],
              diagnostic: Callable[[int], object]) -> None:
        """N keyframes: ``stamps_ns`` (N,) ns, ``arrays`` (q, v, a, effort, F, T, cells) as
        :meth:`BatchMessages.serialize` takes them, their ``estimates``, ``forces()`` (their Forces,
        asked for only on the message-by-message path), and diagnostics after rows ``due``
        (``diagnostic(i)``: the DiagnosticArray of row i, built when this is called)."""
        stamps = np.asarray(stamps_ns, np.int64)
        if not stamps.size:
            return
        if self.exact is None:
            self.exact = self.batch and BatchMessages(self.mech, self.names).usable(int(stamps[0]), *arrays)
        if not self.exact:
            due_set = set(due)
            for i, (e, f) in enumerate(zip(estimates, forces())):
                self.out.write_estimate(e, f, int(stamps[i]))
                if i in due_set:
                    self.out.write_diagnostics(diagnostic(i), int(stamps[i]))
            return
        for i in due:
            self._diagnostics.append((self._held_rows + i + 1, diagnostic(i), int(stamps[i])))
        self._stamps.append(stamps)
        if not self._arrays:
            self._arrays = [[] for _ in arrays]
        for held, x in zip(self._arrays, arrays):
            held.append(x)
        self._held_rows += stamps.size
        if self._held_rows >= self.rows:
            self.flush()

    def flush(self) -> None:
        """Hand over the keyframes held (runs of them between diagnostics) and the diagnostics."""
        if not self._stamps:
            return
        stamps = np.concatenate(self._stamps)
        arrays = [np.concatenate(parts) for parts in self._arrays]
        diagnostics = self._diagnostics
        self._stamps, self._arrays, self._diagnostics, self._held_rows = [], [], [], 0
        row = 0
        for end, msg, stamp in [*diagnostics, (stamps.size, None, 0)]:
            if end > row:
                self.out.write_keyframes(stamps[row:end], tuple(x[row:end] for x in arrays))
                row = end
            if msg is not None:
                self.out.write_diagnostics(msg, stamp)
