"""The node's per-keyframe output messages for a batch of keyframes, serialised at once.

The same topics and messages as :func:`mbfg_ros.io.estimate_messages.estimate_messages` and
``tf_message`` (joint states, accelerations, closure forces, load-cell estimates, /tf), built
by their own builders once per rig as :class:`~mbfg_ros.io.cdr_template.CdrTemplate` s and
filled for every keyframe of a batch with numpy. Covariance messages are not covered (the
callers fall back to the per-message path when they are written). :meth:`BatchMessages.usable`
says whether every template reproduces the ordinary serialisation of the batch's first
keyframe byte for byte; if not, the caller uses the per-message path.
"""
from __future__ import annotations

import numpy as np

from mbfg_ros.io import messages as msgs
from mbfg_ros.io.cdr_template import CdrTemplate
from mbfg_ros.io.estimate_messages import (TF_MESSAGE, OutputNames, load_cell_frame, tf_placements,
                                          transform_stamped, transform_values)
from mbfg_ros.model.mechanism import Mechanism


class BatchMessages:
    """Templates of one rig's per-keyframe output messages."""

    def __init__(self, mech: Mechanism, names: OutputNames) -> None:
        self.mech, self.names = mech, names
        self.data = mech.create_data()
        J = list(mech.joint_names)
        n = mech.n
        self.topics: list[tuple[str, str, CdrTemplate, str]] = []    # topic, type, template, source
        self.topics.append((names.topic("joint_states"), msgs.JOINT_STATE,
                            CdrTemplate(lambda ns, a: msgs.joint_state(ns, J, a[0], a[1], a[2]), [n] * 3), "js"))
        self.topics.append((names.topic("dynamic_joint_states"), msgs.DYNAMIC_JOINT_STATE,
                            CdrTemplate(lambda ns, a: msgs.dynamic_joint_state(
                                ns, J, {"position": a[0], "velocity": a[1], "acceleration": a[2], "effort": a[3]}),
                                [n] * 4), "djs"))
        for j, c in enumerate(mech.closure_configs):
            frame = names.frame(c.frame_b)
            self.topics.append((names.topic(f"forces/{c.name}"), msgs.WRENCH_STAMPED,
                                CdrTemplate(lambda ns, a, frame=frame: msgs.wrench_stamped(ns, frame, a[0], a[1]),
                                            [3, 3]), f"closure{j}"))
        for k, cell in enumerate(mech.load_cells):
            frame = names.frame(load_cell_frame(mech, k))
            self.topics.append((names.topic(f"forces/{cell.config.name}"), msgs.WRENCH_STAMPED,
                                CdrTemplate(lambda ns, a, frame=frame: msgs.wrench_stamped(ns, frame, a[0], a[1]),
                                            [3, 3]), f"cell{k}"))
        pairs = [(p, c) for p, c, _ in tf_placements(mech, self.data, np.zeros(n))]
        self.tf_pairs = pairs

        def tf(ns, a):
            v = a[0].reshape(-1, 7)
            return msgs.typestore().types[TF_MESSAGE](transforms=[
                transform_stamped(ns, names.frame(p), names.frame(c), v[i]) for i, (p, c) in enumerate(pairs)])
        self.topics.append(("/tf", TF_MESSAGE, CdrTemplate(tf, [7 * len(pairs)]), "tf"))

    def _values(self, q, v, a, effort, F, T, cells) -> dict[str, list[np.ndarray]]:
        mech = self.mech
        N = q.shape[0]
        out = {"js": [q, v, effort], "djs": [q, v, a, effort]}
        for j in range(len(mech.closure_configs)):
            out[f"closure{j}"] = [F[:, j], T[:, j]]
        for k, cell in enumerate(mech.load_cells):
            axis = np.asarray(cell.config.axis, float)
            w = cells[:, k:k + 1] * axis
            z = np.zeros((N, 3))
            out[f"cell{k}"] = [w, z] if cell.config.component == "force" else [z, w]
        jt = mech.joint_transforms
        if jt.ok:
            tfv = jt.values(q).reshape(N, -1)
        else:
            tfv = np.zeros((N, 7 * len(self.tf_pairs)))
            for i in range(N):
                tfv[i] = np.concatenate([transform_values(M) for _, _, M in
                                         tf_placements(mech, self.data, q[i])]) if self.tf_pairs else tfv[i]
        out["tf"] = [tfv]
        return out

    def usable(self, stamp_ns: int, q, v, a, effort, F, T, cells) -> bool:
        """Whether every template serialises this keyframe (row 0 of the arrays) exactly."""
        vals = self._values(q[:1], v[:1], a[:1], effort[:1], F[:1], T[:1], cells[:1])
        return all(tpl.matches(stamp_ns, [x[0] for x in vals[src]]) for _, _, tpl, src in self.topics)

    def serialize(self, stamps_ns: np.ndarray, q, v, a, effort, F, T, cells) -> list[tuple[str, str, np.ndarray]]:
        """(topic, type, (N, L) bytes) per topic: the messages of N keyframes (state arrays (N, .);
        F, T (N, nc, 3) closure force and torque in frame_b; cells (N, ncell))."""
        vals = self._values(q, v, a, effort, F, T, cells)
        return [(topic, mt, tpl.fill(stamps_ns, vals[src])) for topic, mt, tpl, src in self.topics]


def write_keyframe(out, e, forces, stamp_ns: int, serialized: list[tuple[str, str, np.ndarray]] | None,
                   row: int) -> None:
    """Write keyframe ``e``'s messages to ``out`` (an OutputBag or WriterProcess): row ``row``
    of a batch :meth:`BatchMessages.serialize` gave, or, without one, the per-message path."""
    if serialized is None:
        out.write_estimate(e, forces, stamp_ns)
        return
    out.write_static(stamp_ns)
    for topic, msgtype, data in serialized:
        out.write_raw(topic, msgtype, stamp_ns, data[row].tobytes())
