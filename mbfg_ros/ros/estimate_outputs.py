"""The estimator node's outputs: which output topics are wanted, the messages of a batch of
estimates as (topic, CDR bytes, stamp) -- from the rig's byte templates when they reproduce the
ordinary serialisation exactly, else built message by message -- and their publication.

:class:`EstimateOutputs` is a part of :class:`~mbfg_ros.ros.estimator_node.EstimatorNode` (and
so of the managed node); it reads the node's settings, names, publishers, estimator and feeder.
"""
from __future__ import annotations

import time

import numpy as np

from mbfg_ros.io import estimate_messages as outputs
from mbfg_ros.io import messages as msgs
from mbfg_ros.io.output_templates import BatchMessages


class EstimateOutputs:
    """What the estimator node publishes for its estimates (module docstring)."""

    def _wanted(self) -> set[str]:
        """Output topics with a subscriber (checked once a second): the others are not built,
        so an unwatched output costs nothing. ~/joint_states always goes out."""
        now = time.monotonic()
        if now - self._wanted_at >= 1.0:
            self._wanted_at = now
            wanted = {t for t, pub in self._pub.items() if pub.get_subscription_count() > 0}
            wanted.add(self.names.topic("joint_states"))
            if self.tf is not None and self.count_subscribers("/tf") > 0:
                wanted.add("/tf")
            self._wanted_topics = wanted
        return self._wanted_topics

    def _messages(self, estimates) -> list[tuple[str, bytes, int]]:
        """(topic, CDR bytes, stamp ns) of every output message of ``estimates`` wanted: from
        the rig's byte templates (:class:`~mbfg_ros.io.output_templates.BatchMessages`) when
        they reproduce the ordinary serialisation exactly (checked at the first keyframe; never
        with ``publish_covariance``), else built and serialised message by message."""
        if not estimates:
            return []
        wanted = self._wanted() - self.muted
        want_forces = self.settings["publish_forces"] and any("/forces/" in t for t in wanted)
        stamps = [self.feeder.epoch_ns + int(round(e.stamp * 1e9)) for e in estimates]
        if self._templates is None:
            self._templates = self._output_templates(estimates[0], stamps[0])
        if self._templates:
            return self._template_messages(estimates, stamps, wanted, want_forces)
        return self._object_messages(estimates, wanted, want_forces)

    def _output_templates_of(self, mech) -> BatchMessages | None:
        try:
            return BatchMessages(mech, self.names)
        except Exception as exc:                          # noqa: BLE001 (the ordinary path works)
            self.get_logger().warning(f"no output templates ({exc}): messages built one by one")
            return None

    def _output_templates(self, e, stamp_ns: int) -> BatchMessages | bool:
        """The byte templates of the outputs, or False when they do not give the ordinary
        serialisation of keyframe ``e`` byte for byte (or covariances are published)."""
        templates = self._batch_messages
        if templates is None:
            return False
        try:
            ok = templates.usable(stamp_ns, *self._arrays([e], True))
        except Exception as exc:                          # noqa: BLE001 (the ordinary path works)
            self.get_logger().warning(f"output templates unusable ({exc}): messages built one by one")
            return False
        if not ok:
            self.get_logger().info("output templates do not reproduce the messages: built one by one")
        return templates if ok else False

    def _arrays(self, estimates, forces: bool) -> tuple:
        """(q, v, a, effort, F, T, cells) of ``estimates`` as BatchMessages takes them (F, T,
        cells zero unless ``forces``)."""
        mech = self.mech
        N, nc, ncell = len(estimates), len(mech.closure_configs), len(mech.load_cells)
        q = np.array([e.q for e in estimates])
        v = np.array([e.v for e in estimates])
        a = np.array([e.a for e in estimates])
        effort = np.array([e.effort for e in estimates])
        F, T, cells = np.zeros((N, nc, 3)), np.zeros((N, nc, 3)), np.zeros((N, ncell))
        if forces:
            names = [cell.config.name for cell in mech.load_cells]
            for i, e in enumerate(estimates):
                f = self.estimator.forces(e)
                for j, c in enumerate(f.closures):
                    F[i, j], T[i, j] = c.force, c.torque
                cells[i] = [f.load_cells[name] for name in names]
        return q, v, a, effort, F, T, cells

    def _template_messages(self, estimates, stamps: list[int], wanted: set[str],
                           want_forces: bool) -> list[tuple[str, bytes, int]]:
        topics = {t for t in wanted if t in self._pub or t == "/tf"}
        if not want_forces:
            topics = {t for t in topics if "/forces/" not in t}
        rows = self._templates.serialize(np.array(stamps, np.int64), *self._arrays(estimates, want_forces),
                                         topics=topics)
        out = []
        for i, stamp_ns in enumerate(stamps):       # keyframe by keyframe, as the other path
            for topic, _, data in rows:
                out.append((topic, data[i].tobytes(), stamp_ns))
        return out

    def _object_messages(self, estimates, wanted: set[str], want_forces: bool) -> list[tuple[str, bytes, int]]:
        out = []
        for e in estimates:
            stamp_ns = self.feeder.epoch_ns + int(round(e.stamp * 1e9))
            forces = self.estimator.forces(e) if want_forces else None
            for topic, _, msg in outputs.estimate_messages(self.mech, e, forces, stamp_ns, self.names):
                if topic in wanted and topic in self._pub:
                    out.append((topic, bytes(msgs.serialize(msg)), stamp_ns))
            if "/tf" in wanted:
                tf = outputs.tf_message(self.mech, self._tf_data, e.q, stamp_ns, self.names)
                out.append(("/tf", bytes(msgs.serialize(tf)), stamp_ns))
        return out

    def _publish(self, out: list[tuple[str, bytes, int]]) -> None:
        if not out:
            return
        joint_states = self.names.topic("joint_states")
        now, clock_ns = time.monotonic(), self.get_clock().now().nanoseconds    # one batch's time
        for topic, cdr, stamp_ns in out:
            if topic == "/tf":
                self.tf.send(cdr)
            else:
                self._pub[topic].publish(cdr)
            self.published[topic] = self.published.get(topic, 0) + 1
            if topic == joint_states:
                self._statuses.published(now, (clock_ns - stamp_ns) * 1e-6)
