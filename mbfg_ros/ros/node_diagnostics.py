"""The estimator node's own /diagnostics statuses and the sensor changes it logs (no ROS imports).

:class:`NodeStatuses` builds the ``input queue`` and ``outputs`` statuses (name, level, message,
values) that :func:`~mbfg_ros.io.estimate_messages.diagnostics_message` adds to the estimator's:
their levels judge the last ``health_window`` seconds (a warning clears once its cause is gone),
their values are run totals, and every reading queued is accounted for
(``unaccounted_readings``, :meth:`~mbfg_ros.intake.feeder.Feeder.unaccounted`).
:class:`SensorChangeLog` says which sensor statuses to log: once when a sensor turns WARN (silent,
unusable, losing readings) and when it is back, an ERROR (the divergence test) once per period.
"""
from __future__ import annotations

from collections import deque

import numpy as np

from mbfg_ros.intake.feeder import Feeder
from mbfg_ros.intake.sensor_health import ERROR, OK, WARN, RollingCounts


class NodeStatuses:
    """The node's ``input queue`` and ``outputs`` statuses over a rolling ``window`` (s)."""

    def __init__(self, window: float) -> None:
        self.counts = RollingCounts(window)
        self.latency: deque = deque()              # (steady s, node clock at publish - stamp, ms)

    def published(self, now: float, latency_ms: float) -> None:
        """A ~/joint_states went out at ``now`` (steady s), ``latency_ms`` after its stamp."""
        self.latency.append((now, latency_ms))

    def input_queue(self, now: float, queue: dict[str, int], messages: dict[str, int], lost: dict[str, int],
                    router, feeder: Feeder, worker_errors: int, in_feed: int) -> tuple:
        """The input queue's status at ``now`` (steady s): ``queue`` the SampleQueue's figures,
        ``messages`` and ``lost`` (in DDS) per topic, the input ``router``'s problems and
        disagreements, the ``feeder``'s counts, readings taken from the stamp order not fed yet."""
        lost_total = sum(lost.values())
        unusable = sum(sum(c.values()) for c in router.problems.values())
        win = self.counts
        win.update(now, {"worker_errors": worker_errors, "dropped": queue["dropped"], "lost": lost_total,
                         "unusable": unusable})
        recent = {k: int(win.delta(k)) for k in ("worker_errors", "dropped", "lost", "unusable")}
        w = f"in the last {max(win.span, 0.0):.0f} s"
        level, message = OK, "ok"
        if recent["worker_errors"]:
            level, message = ERROR, f"{recent['worker_errors']} estimation step errors {w} (see the log)"
        elif recent["dropped"]:
            level, message = ERROR, f"{recent['dropped']} readings dropped {w}: the queue was full"
        elif recent["lost"]:
            level, message = ERROR, (f"{recent['lost']} messages lost in DDS {w} before the node "
                                     "took them (qos_depth too small, or the node starved of CPU)")
        elif recent["unusable"]:
            level, message = WARN, f"{recent['unusable']} unusable messages {w}"
        values = dict(queue)
        values["reordering"] = len(feeder.order)
        values["worker_errors"] = worker_errors
        values["lost_in_dds"] = lost_total
        for topic, count in sorted(lost.items()):
            values[f"lost {topic}"] = count
        for topic, counter in router.problems.items():
            for reason, count in counter.items():
                values[f"unusable {topic}"] = f"{count} x {reason}"
        for topic, counter in router.disagreements.items():
            for what, count in counter.items():
                values[f"disagrees {topic}"] = f"{count} x {what}"
        for topic in sorted(router.topics):
            values[f"messages {topic}"] = messages.get(topic, 0)
        values.update(feeder.values())
        # every reading queued is in exactly one place: waiting, in the intake (held by the time
        # rules or the stamp order, dropped by the rules), being fed, or received by the estimator
        values["unaccounted_readings"] = feeder.unaccounted(queue["queued"] - queue["waiting"] - in_feed)
        return ("input queue", level, message, values)

    def outputs(self, now: float, window: float, published: dict[str, int], feeder: Feeder, lagged: bool) -> tuple:
        """The outputs' status: messages published per topic, the stamp-to-publish latency of
        ~/joint_states over the last ``window`` s, time jumps, the epoch."""
        while self.latency and self.latency[0][0] < now - window:
            self.latency.popleft()
        lat = np.fromiter((x[1] for x in self.latency), float) if self.latency else np.zeros(0)
        values = {"stamp_to_publish_mean_ms": float(lat.mean()) if lat.size else 0.0,
                  "stamp_to_publish_p99_ms": float(np.percentile(lat, 99)) if lat.size else 0.0,
                  "stamp_to_publish_window_s": window,
                  "jumps_backwards": feeder.jumps["backwards"], "jumps_forwards": feeder.jumps["forwards"],
                  "epoch_s": "none" if feeder.epoch_ns is None else f"{feeder.epoch_ns * 1e-9:.0f}",
                  "lagged": lagged}
        for topic, count in sorted(published.items()):
            values[f"published {topic}"] = count
        return ("outputs", OK, f"{sum(published.values())} messages published", values)


class SensorChangeLog:
    """Which sensor statuses of a DiagnosticArray to log (see the module docstring); ``prefix``
    starts the sensors' status names (``<node>: sensor ``)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self._warned: set[str] = set()            # sensors logged as WARN
        self._diverged: set[str] = set()          # sensors logged as ERROR (diverged)

    def lines(self, statuses) -> list[tuple[str, str]]:
        """(log level: error | warning | info, text) for each change worth a log line."""
        out = []
        for status in statuses:
            if not status.name.startswith(self.prefix):
                continue
            name = status.name[len(self.prefix):]
            if status.level == ERROR and name not in self._diverged:
                self._diverged.add(name)         # the divergence test: logged once per period
                out.append(("error", f"sensor {name} ({status.hardware_id}): {status.message}"))
            elif status.level != ERROR:
                self._diverged.discard(name)
            bad = status.level == WARN and status.message != "no data yet"
            if bad and name not in self._warned:
                self._warned.add(name)
                if status.message.startswith("fitted worse"):     # the divergence test: strained
                    out.append(("warning", f"sensor {name} ({status.hardware_id}): {status.message}"))
                else:
                    what = status.message if status.message.startswith("silent") else f"WARN: {status.message}"
                    out.append(("warning", f"sensor {name} ({status.hardware_id}) is {what}; "
                                           "estimating from the others"))
            elif not bad and name in self._warned and status.message == "ok":
                self._warned.discard(name)
                out.append(("info", f"sensor {name} ({status.hardware_id}) is back"))
        return out
