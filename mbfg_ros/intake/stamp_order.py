"""Header-stamp order across topics: the readings of several topics, fed in stamp order.

Topics are delivered independently (DDS; a bag stores receive order), so in a backlog a 200 Hz
topic runs ahead of a 1 kHz one in stamp time, and sensors with different transport delays
interleave out of stamp order. :class:`StampOrder` holds each reading while an **active** topic
(one that delivered within ``max(silence_timeout, window)`` of the clock) may still send one
stamped before it, i.e. while that topic's newest stamp plus its nominal period is not past the
reading's stamp (the **watermark**); at most ``window`` s of the clock. At the start (and after a
restart) every topic it knows is waited for until it first sends (its newest stamp is unknown),
as long as it counts as active, so a topic that starts late is not left behind. A reading older
than one already released is still out of order: it goes out at the next release (the estimator
counts it late or too old) and is counted here per topic.

The clock is the caller's, integer ns: the node's steady clock when it took the readings from
its queue, the replay's log (receive) time of each message, so a replay reorders as the node
would have. After a time jump (found downstream, :mod:`mbfg_ros.intake.time_jumps`) the caller
:meth:`~StampOrder.restart` s the order, so the new time is reordered too (without, the topics'
newest stamps stay in the old time after a jump back, and every reading passes at once) and nothing
released in it counts as out of order against the old one. No ROS imports.
"""
from __future__ import annotations

import heapq
from collections import Counter
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from mbfg_ros.model.channels import command_joint

if TYPE_CHECKING:
    from mbfg_ros.model.mechanism import Mechanism

REORDER_WINDOW = 1.0
"""s: longest a reading waits for the other topics (the node's ``reorder_window``)."""

SILENCE_TIMEOUT = 0.5
"""s: a topic silent this long (or ``window``, the longer) is not waited for (the node's
``silence_timeout``, which also judges a silent sensor on /diagnostics)."""

COMMAND_RATE = 1000.0
"""Hz assumed for a known-input command topic (the config gives no rate for it)."""

DEFAULT_PERIOD_NS = 1_000_000
"""ns: the period of a topic without a known rate."""

_UNKNOWN = -(2 ** 62)
"""A topic's newest stamp after a restart, until it sends one in the new time."""


def topic_periods_ns(mech: Mechanism, topic_channels: Mapping[str, Iterable[str]]) -> dict[str, int]:
    """Nominal message period (ns) of each input topic: its fastest channel's configured rate
    (``command:<joint>`` channels count as :data:`COMMAND_RATE`); ``topic_channels``: {topic: the
    sensor and command channels it carries}."""
    rates = {s.name: s.rate for s in mech.config.sensors.all()}
    out = {}
    for topic, names in topic_channels.items():
        rate = max((COMMAND_RATE if command_joint(n) is not None else rates.get(n, 0.0) for n in names),
                   default=0.0)
        out[topic] = int(1e9 / rate) if rate > 0 else DEFAULT_PERIOD_NS
    return out


class StampOrder:
    """``push`` readings as they arrive, ``release`` them in stamp order (see the module docstring).
    ``periods_ns``: {topic: nominal period} of the topics it expects (others are taken as they
    come, with :data:`DEFAULT_PERIOD_NS`); ``window`` and ``silence_timeout`` in s."""

    def __init__(self, periods_ns: Mapping[str, int], window: float = REORDER_WINDOW,
                 silence_timeout: float = SILENCE_TIMEOUT) -> None:
        self.periods_ns = dict(periods_ns)
        self.window = float(window)
        self.out_of_order: Counter = Counter()      # topic -> readings released after a newer one
        self._window_ns = int(round(self.window * 1e9))
        self._active_ns = int(round(max(silence_timeout, self.window) * 1e9))
        self._heap: list[tuple[int, int, int, str, Any]] = []   # (stamp, seq, arrival, topic, item)
        self._seq = 0
        self._newest: dict[str, int] = {}           # topic -> newest stamp since the last restart
        self._seen: dict[str, int] = {}             # topic -> clock of its last reading
        self._released: int | None = None           # newest stamp released since the last restart
        self._started = False

    def __len__(self) -> int:
        """Readings held."""
        return len(self._heap)

    def push(self, topic: str, stamp_ns: int, item: Any, now_ns: int) -> None:
        """One reading of ``topic`` stamped ``stamp_ns``, arrived at ``now_ns`` (the caller's
        clock); ``item`` is what :meth:`release` gives back."""
        if not self._started:                       # every topic expected counts as active now
            self._started = True
            for t in self.periods_ns:
                self._seen[t] = now_ns
                self._newest[t] = _UNKNOWN
        self._seq += 1
        heapq.heappush(self._heap, (stamp_ns, self._seq, now_ns, topic, item))
        if stamp_ns > self._newest.get(topic, _UNKNOWN):
            self._newest[topic] = stamp_ns
        self._seen[topic] = now_ns

    def watermark(self, now_ns: int) -> int | None:
        """ns: readings stamped before it can go (None: no active topic, everything can)."""
        newest, periods = self._newest, self.periods_ns
        nexts = [newest[t] + periods.get(t, DEFAULT_PERIOD_NS) for t, seen in self._seen.items()
                 if now_ns - seen < self._active_ns]
        return min(nexts) if nexts else None

    def release(self, now_ns: int) -> list[Any]:
        """The items due at ``now_ns``, oldest stamp first: stamped before the watermark, or held
        for ``window``."""
        return self._release(self.watermark(now_ns), now_ns - self._window_ns)

    def drain(self) -> list[Any]:
        """Every item held, oldest stamp first (the end of a bag)."""
        return self._release(None, None)

    def _release(self, watermark: int | None, arrived_by: int | None) -> list[Any]:
        heap, out, pop = self._heap, [], heapq.heappop
        while heap and (watermark is None or heap[0][0] < watermark
                        or (arrived_by is not None and heap[0][2] <= arrived_by)):
            stamp, _, _, topic, item = pop(heap)
            if self._released is not None and stamp < self._released:
                self.out_of_order[topic] += 1
            else:
                self._released = stamp
            out.append(item)
        return out

    def set_silence_timeout(self, silence_timeout: float) -> None:
        """A new ``silence_timeout`` (s): how long a quiet topic still holds readings back."""
        self._active_ns = int(round(max(silence_timeout, self.window) * 1e9))

    def restart(self) -> None:
        """A new time base (after a time jump): every topic's newest stamp is unknown again, so a
        reading waits for each active topic to send one in the new time (at most the window), and
        the stamps released before do not count; what is held stays and goes out by the window."""
        self._newest = dict.fromkeys(self._newest, _UNKNOWN)
        self._released = None

    def start_over(self) -> None:
        """As new, after a pause of the input (the managed node's activate): every expected
        topic counts as active again at the next reading, so it waits for each of them to send
        one (at most the window), as at the start; held readings stay (drain them first)."""
        self.restart()
        self._seen.clear()
        self._newest.clear()
        self._started = False
