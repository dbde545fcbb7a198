"""The estimator's per-keyframe output messages for a batch of keyframes, serialised at once.

The same topics and messages as :func:`mbfg_ros.io.estimate_messages.estimate_messages` and
``tf_message`` (joint states, accelerations, closure forces, load-cell estimates, /tf), built
by their own builders once per rig as :class:`~mbfg_ros.io.cdr_template.CdrTemplate` s and
filled for every keyframe of a batch with numpy: the ``estimator`` node publishes them
(:mod:`mbfg_ros.ros.estimator_node`), the replay writes them
(:mod:`mbfg_ros.replay.output_batch`). Covariance messages are not covered (the callers fall
back to the per-message path when they go out). :meth:`BatchMessages.usable` says whether every
template reproduces the ordinary serialisation of the batch's first keyframe byte for byte; if
not, the caller uses the per-message path.
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin

from mbfg_ros.io import messages as msgs
from mbfg_ros.io.cdr_template import CdrTemplate
from mbfg_ros.io.estimate_messages import (TF_MESSAGE, OutputNames, movable_tf_values,
                                          tf_placements, transform_stamped)
from mbfg_ros.model.channels import load_cell_frame
from mbfg_ros.model.joint_transforms import quaternions
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
        fid = {name: mech.model.getFrameId(name, pin.FrameType.BODY) for name in mech.link_names}
        self._tf_frames = [(fid[p], fid[c]) for p, c in pairs]      # pinocchio frame ids (link_placements')

        def tf(ns, a):
            v = a[0].reshape(-1, 7)
            return msgs.typestore().types[TF_MESSAGE](transforms=[
                transform_stamped(ns, names.frame(p), names.frame(c), v[i]) for i, (p, c) in enumerate(pairs)])
        self.topics.append(("/tf", TF_MESSAGE, CdrTemplate(tf, [7 * len(pairs)]), "tf"))

    def _values(self, q, v, a, effort, F, T, cells, sources: set[str] | None = None) -> dict[str, list[np.ndarray]]:
        """The arrays of each template's source (only ``sources``, if given)."""
        mech = self.mech
        N = q.shape[0]
        out = {"js": [q, v, effort], "djs": [q, v, a, effort]}
        if sources is None or any(s.startswith("closure") for s in sources):
            for j in range(len(mech.closure_configs)):
                out[f"closure{j}"] = [F[:, j], T[:, j]]
        if sources is None or any(s.startswith("cell") for s in sources):
            for k, cell in enumerate(mech.load_cells):
                axis = np.asarray(cell.config.axis, float)
                w = cells[:, k:k + 1] * axis
                z = np.zeros((N, 3))
                out[f"cell{k}"] = [w, z] if cell.config.component == "force" else [z, w]
        if sources is None or "tf" in sources:
            out["tf"] = [self._tf_values(q)]
        return out

    def _tf_values(self, q: np.ndarray) -> np.ndarray:
        """(N, 7 K) the TF values of the K movable joints at each q (N, n), as
        :func:`movable_tf_values` gives them per keyframe: from the mechanism's JointTransforms
        at once, or pinocchio's kinematics per keyframe with the quaternions at once."""
        N, K = q.shape[0], len(self._tf_frames)
        jt = self.mech.joint_transforms
        if jt.ok:
            return jt.values(q).reshape(N, 7 * K)
        H = np.empty((N, K, 4, 4))
        model, data = self.mech.model, self.data.pin
        fk, oMf = pin.framesForwardKinematics, data.oMf
        for i in range(N if K else 0):
            fk(model, data, q[i])
            for k, (p, c) in enumerate(self._tf_frames):
                H[i, k] = oMf[p].actInv(oMf[c]).homogeneous
        R = H[:, :, :3, :3].reshape(N * K, 3, 3)
        return np.concatenate([H[:, :, :3, 3], quaternions(R).reshape(N, K, 4)], axis=2).reshape(N, 7 * K)

    def usable(self, stamp_ns: int, q, v, a, effort, F, T, cells) -> bool:
        """Whether every template serialises this keyframe (row 0 of the arrays) exactly (and
        the batch's TF values are the per-keyframe ones)."""
        vals = self._values(q[:1], v[:1], a[:1], effort[:1], F[:1], T[:1], cells[:1])
        _, ref = movable_tf_values(self.mech, self.data, q[0])
        if ref.size and vals["tf"][0][0].tobytes() != ref.reshape(-1).tobytes():
            return False
        return all(tpl.matches(stamp_ns, [x[0] for x in vals[src]]) for _, _, tpl, src in self.topics)

    def serialize(self, stamps_ns: np.ndarray, q, v, a, effort, F, T, cells,
                  topics: set[str] | None = None) -> list[tuple[str, str, np.ndarray]]:
        """(topic, type, (N, L) bytes) per topic (of ``topics`` only, if given): the messages of
        N keyframes (state arrays (N, .); F, T (N, nc, 3) closure force and torque in frame_b;
        cells (N, ncell); F, T, cells unused unless a force topic is asked for)."""
        chosen = [x for x in self.topics if topics is None or x[0] in topics]
        vals = self._values(q, v, a, effort, F, T, cells, {x[3] for x in chosen})
        return [(topic, mt, tpl.fill(stamps_ns, vals[src])) for topic, mt, tpl, src in chosen]
