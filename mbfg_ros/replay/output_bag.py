"""The replay's output bag: exactly what the ROS node publishes, built by the same functions.

Topics, types and frames are :func:`mbfg_ros.io.estimate_messages.output_topics` (joint states,
accelerations, closure forces, load-cell estimates, optionally the DOF covariance, /tf,
/tf_static once at the first estimate, /diagnostics). Header stamps are the keyframe times
(absolute: the replay's epoch + the estimator's time); every message's log time is its stamp.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from mbfg_ros.estimation.outputs import Estimate, Forces
from mbfg_ros.io.bag_writer import BagWriter
from mbfg_ros.io.estimate_messages import (OutputNames, estimate_messages, output_topics,
                                          static_tf_message, tf_message)
from mbfg_ros.io.simulation_messages import BagMessage
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.io.output_templates import BatchMessages

DIAGNOSTICS = "/diagnostics"


class OutputBag:
    """A rosbag2 of the estimator's outputs; use as a context manager."""

    def __init__(self, path: str | Path, mech: Mechanism, names: OutputNames, *,
                 covariance: bool = False, storage: str = "mcap", overwrite: bool = False,
                 custom_data: dict[str, str] | None = None) -> None:
        self.mech = mech
        self.names = names
        self.covariance = covariance
        self.writer = BagWriter(path, storage=storage, overwrite=overwrite, custom_data=custom_data)
        self.data = mech.create_data()
        self._static_done = False
        self._batch: BatchMessages | None = None       # for write_keyframes

    def __enter__(self) -> "OutputBag":
        self.writer.__enter__()
        for topic, msgtype in output_topics(self.mech, self.names, self.covariance).items():
            self.writer.add_topic(topic, msgtype)
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        return self.writer.__exit__(exc_type, exc, tb)

    def write_estimate(self, e: Estimate, forces: Forces, stamp_ns: int) -> None:
        """Every message of one keyframe (and /tf_static before the first)."""
        w = self.writer
        self.write_static(stamp_ns)
        if e.covariance is not None and not self.covariance:
            e = replace(e, covariance=None)        # computed for the plots, not asked for here
        for topic, msgtype, msg in estimate_messages(self.mech, e, forces, stamp_ns, self.names):
            w.write(BagMessage(topic, msgtype, stamp_ns, msg))
        w.write(BagMessage("/tf", "tf2_msgs/msg/TFMessage", stamp_ns,
                           tf_message(self.mech, self.data, e.q, stamp_ns, self.names)))

    def write_static(self, stamp_ns: int) -> None:
        """/tf_static (once, before the first estimate)."""
        if not self._static_done:
            self._static_done = True
            self.writer.write(BagMessage("/tf_static", "tf2_msgs/msg/TFMessage", stamp_ns,
                                         static_tf_message(self.mech, stamp_ns, self.names)))

    def write_keyframes(self, stamps_ns: np.ndarray, arrays: tuple) -> None:
        """The messages of N keyframes from their arrays (q, v, a, effort, F, T, cells, as
        :meth:`~mbfg_ros.io.output_templates.BatchMessages.serialize` takes them), serialised at
        once; the caller has checked :meth:`BatchMessages.usable`."""
        if self._batch is None:
            self._batch = BatchMessages(self.mech, self.names)
        self.write_rows(stamps_ns, self._batch.serialize(stamps_ns, *arrays))

    def write_rows(self, stamps_ns: np.ndarray, serialized: list[tuple[str, str, np.ndarray]]) -> None:
        """The messages of N keyframes (stamps ``stamps_ns`` (N,) ns), already serialised: (topic,
        type, (N, L) uint8 rows) per topic as :meth:`~mbfg_ros.io.output_templates.BatchMessages.serialize`
        gives them, written keyframe by keyframe (in bulk, :meth:`BagWriter.write_rows`)."""
        if len(stamps_ns):
            self.write_static(int(stamps_ns[0]))
            self.writer.write_rows([(t, mt) for t, mt, _ in serialized], stamps_ns, [r for _, _, r in serialized])

    def write_diagnostics(self, msg, stamp_ns: int) -> None:
        self.writer.write(BagMessage(DIAGNOSTICS, "diagnostic_msgs/msg/DiagnosticArray", stamp_ns, msg))

    def summary(self) -> dict:
        return self.writer.summary()
