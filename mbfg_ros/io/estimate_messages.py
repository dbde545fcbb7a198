"""The estimator's outputs as standard ROS 2 messages: one definition for the node and replay.

Topics (``<ns>`` is the estimator node's name, ``/mbfg_estimator`` by default; the replay tool
writes the same topics):

==============================  ==================================  =============================
topic                           type                                content
==============================  ==================================  =============================
``<ns>/joint_states``           sensor_msgs/msg/JointState          every joint: position,
                                                                    velocity, effort = estimated
                                                                    actuator effort (0 if passive)
``<ns>/dynamic_joint_states``   control_msgs/msg/DynamicJointState  every joint: position,
                                                                    velocity, acceleration,
                                                                    effort (ros2_control's
                                                                    interface names); with the
                                                                    covariance the DOF joints
                                                                    also position_variance and
                                                                    velocity_variance
``<ns>/forces/<closure>``       geometry_msgs/msg/WrenchStamped     the closure's reaction on
                                                                    frame_b's body, in frame_b
``<ns>/forces/<load cell>``     geometry_msgs/msg/WrenchStamped     the estimated reading times
                                                                    its axis, in the cell's frame
``<ns>/dof_covariance``         std_msgs/msg/Float64MultiArray      covariance of [q_dof, v_dof],
                                                                    row-major, labels in layout
``/tf``                         tf2_msgs/msg/TFMessage              parent -> child link of every
                                                                    movable joint
``/tf_static``                  tf2_msgs/msg/TFMessage              fixed joints, config frames,
                                                                    Imu frame ids, world_frame
                                                                    (once, latched)
``/diagnostics``                diagnostic_msgs/msg/DiagnosticArray sensors, inputs and solver
==============================  ==================================  =============================

Frame ids of links and closure frames get ``frame_prefix`` (default none; set e.g. ``mbfg/``
on a rig whose robot_state_publisher already publishes the measured link frames). Stamps are
the keyframe times.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np
import pinocchio as pin

from mbfg_ros.estimation.outputs import Estimate, Forces
from mbfg_ros.estimation.status import EstimatorStatus
from mbfg_ros.io import messages as msgs
from mbfg_ros.intake.sensor_health import ERROR, OK, WARN, divergence_verdicts
from mbfg_ros.model.channels import command_joint, load_cell_frame
from mbfg_ros.model.mechanism import Mechanism, MechanismData

TF_MESSAGE = "tf2_msgs/msg/TFMessage"
DIAGNOSTIC_ARRAY = "diagnostic_msgs/msg/DiagnosticArray"
FLOAT64_MULTI_ARRAY = "std_msgs/msg/Float64MultiArray"

DEFAULT_NAMESPACE = "/mbfg_estimator"


@dataclass(frozen=True)
class OutputNames:
    """Where the outputs go: the node's fully qualified name and the TF frame prefix."""
    namespace: str = DEFAULT_NAMESPACE
    frame_prefix: str = ""

    def topic(self, rel: str) -> str:
        return self.namespace.rstrip("/") + "/" + rel

    def frame(self, name: str) -> str:
        return self.frame_prefix + name


def output_topics(mech: Mechanism, names: OutputNames, covariance: bool = False) -> dict[str, str]:
    """{topic: message type} of everything the estimator publishes for ``mech``."""
    out = {names.topic("joint_states"): msgs.JOINT_STATE,
           names.topic("dynamic_joint_states"): msgs.DYNAMIC_JOINT_STATE}
    for c in mech.closure_configs:
        out[names.topic(f"forces/{c.name}")] = msgs.WRENCH_STAMPED
    for cell in mech.load_cells:
        out[names.topic(f"forces/{cell.config.name}")] = msgs.WRENCH_STAMPED
    if covariance:
        out[names.topic("dof_covariance")] = FLOAT64_MULTI_ARRAY
    out["/tf"] = TF_MESSAGE
    out["/tf_static"] = TF_MESSAGE
    out["/diagnostics"] = DIAGNOSTIC_ARRAY
    return out


def estimate_messages(mech: Mechanism, e: Estimate, forces: Forces | None, stamp_ns: int,
                      names: OutputNames) -> list[tuple[str, str, object]]:
    """(topic, type, message) of one keyframe's estimate (TF and diagnostics separately)."""
    out = [(names.topic("joint_states"), msgs.JOINT_STATE,
            msgs.joint_state(stamp_ns, mech.joint_names, e.q, e.v, e.effort)),
           (names.topic("dynamic_joint_states"), msgs.DYNAMIC_JOINT_STATE,
            msgs.dynamic_joint_state(stamp_ns, mech.joint_names,
                                     {"position": e.q, "velocity": e.v, "acceleration": e.a,
                                      "effort": e.effort}, dof_variances(mech, e.covariance)))]
    if forces is not None:
        for c in forces.closures:
            out.append((names.topic(f"forces/{c.name}"), msgs.WRENCH_STAMPED,
                        msgs.wrench_stamped(stamp_ns, names.frame(c.frame), c.force, c.torque)))
        for k, cell in enumerate(mech.load_cells):
            value = forces.load_cells[cell.config.name]
            axis = np.asarray(cell.config.axis, float)
            f, t = (axis * value, np.zeros(3)) if cell.config.component == "force" else (np.zeros(3), axis * value)
            out.append((names.topic(f"forces/{cell.config.name}"), msgs.WRENCH_STAMPED,
                        msgs.wrench_stamped(stamp_ns, names.frame(load_cell_frame(mech, k)), f, t)))
    if e.covariance is not None:
        out.extend(covariance_messages(mech, e.covariance, stamp_ns, names))
    return out


def dof_variances(mech: Mechanism, P: np.ndarray | None) -> dict[str, dict[str, float]] | None:
    """{position_variance, velocity_variance: {DOF joint: variance}} from the covariance of
    [q_dof, v_dof] (None without one): extra interfaces of ~/dynamic_joint_states."""
    if P is None:
        return None
    g = len(mech.dof)
    var = np.maximum(np.diag(P), 0.0)
    return {"position_variance": dict(zip(mech.dof_names, var[:g])),
            "velocity_variance": dict(zip(mech.dof_names, var[g:]))}


def covariance_messages(mech: Mechanism, P: np.ndarray, stamp_ns: int,
                        names: OutputNames) -> list[tuple[str, str, object]]:
    """~/dof_covariance: the covariance of [q_dof, v_dof] as a 2-D std_msgs/Float64MultiArray
    (row-major; dim[0] the rows, labelled with the state's names, dim[1] the columns)."""
    T = msgs.typestore().types
    g = len(mech.dof)
    labels = [f"{j}.position" for j in mech.dof_names] + [f"{j}.velocity" for j in mech.dof_names]
    layout = T["std_msgs/msg/MultiArrayLayout"](
        dim=[T["std_msgs/msg/MultiArrayDimension"](label=",".join(labels), size=2 * g, stride=4 * g * g),
             T["std_msgs/msg/MultiArrayDimension"](label="column", size=2 * g, stride=2 * g)],
        data_offset=0)
    return [(names.topic("dof_covariance"), FLOAT64_MULTI_ARRAY,
             T[FLOAT64_MULTI_ARRAY](layout=layout, data=np.asarray(P, float).reshape(-1)))]


def _transform(stamp_ns: int, parent: str, child: str, M: pin.SE3):
    return transform_stamped(stamp_ns, parent, child, transform_values(M))


def transform_values(M: pin.SE3) -> np.ndarray:
    """(7,) translation x, y, z (m) and rotation quaternion x, y, z, w of a placement, as TF
    messages carry them."""
    qt = pin.Quaternion(M.rotation)
    tr = M.translation
    return np.array([tr[0], tr[1], tr[2], qt.x, qt.y, qt.z, qt.w], float)


def transform_stamped(stamp_ns: int, parent: str, child: str, values):
    """geometry_msgs/TransformStamped from :func:`transform_values`."""
    T = msgs.typestore().types
    x = [float(v) for v in values]
    return T["geometry_msgs/msg/TransformStamped"](
        header=msgs.header(stamp_ns, parent), child_frame_id=child,
        transform=T["geometry_msgs/msg/Transform"](
            translation=T["geometry_msgs/msg/Vector3"](x=x[0], y=x[1], z=x[2]),
            rotation=T["geometry_msgs/msg/Quaternion"](x=x[3], y=x[4], z=x[5], w=x[6])))


def static_tf_message(mech: Mechanism, stamp_ns: int, names: OutputNames, world_frame: str = ""):
    """TFMessage of every frame that never moves relative to its parent, so that every frame id
    the estimator publishes (and the rig's sensor messages carry) resolves in TF: the URDF's
    fixed joints; the config's ``frames`` on their parent; each Imu sensor's (gyro's,
    accelerometer's) ``frame_id`` on its ``frame``, turned by ``rotation_rpy`` (unless a link or
    frame already has that name); and
    ``world_frame`` on the URDF's root link (identity), if given. For /tf_static."""
    msg = tf_message(mech, mech.create_data(), np.zeros(mech.n), stamp_ns, names, fixed=True)
    known = {mech.urdf.root_link} | {j.child for j in mech.urdf.tree} | {j.parent for j in mech.urdf.tree}
    for fc in mech.config.frames:
        M = pin.SE3(pin.rpy.rpyToMatrix(*fc.rpy), np.asarray(fc.xyz, float))
        msg.transforms.append(_transform(stamp_ns, names.frame(mech.tf_frame(fc.parent)),
                                         names.frame(fc.name), M))
        known.add(fc.name)
    for sensor in mech.sensors:
        mount = sensor.mount(mech)
        if mount is None or mount[1] in known:
            continue
        frame, frame_id, rpy = mount
        known.add(frame_id)
        M = pin.SE3(pin.rpy.rpyToMatrix(*rpy), np.zeros(3))
        msg.transforms.append(_transform(stamp_ns, names.frame(mech.tf_frame(frame)),
                                         names.frame(frame_id), M))
    root = names.frame(mech.urdf.root_link)
    if world_frame and world_frame != root:
        msg.transforms.append(_transform(stamp_ns, world_frame, root, pin.SE3.Identity()))
    return msg


def tf_message(mech: Mechanism, data: MechanismData, q: np.ndarray, stamp_ns: int,
               names: OutputNames, fixed: bool = False):
    """TFMessage: parent -> child link of every movable joint (or of every fixed joint)."""
    if fixed:
        transforms = [_transform(stamp_ns, names.frame(parent), names.frame(child), M)
                      for parent, child, M in tf_placements(mech, data, q, fixed)]
    else:
        pairs, vals = movable_tf_values(mech, data, q)
        transforms = [transform_stamped(stamp_ns, names.frame(parent), names.frame(child), vals[i])
                      for i, (parent, child) in enumerate(pairs)]
    return msgs.typestore().types[TF_MESSAGE](transforms=transforms)


def movable_tf_values(mech: Mechanism, data: MechanismData, q: np.ndarray) -> tuple[list, np.ndarray]:
    """(pairs, (P, 7)): the (parent, child) links of every movable joint and the child's
    :func:`transform_values` in the parent at q, from :attr:`Mechanism.joint_transforms` (the
    replay's batches use it too, so both give the same bytes), or from pinocchio where that
    model does not apply."""
    jt = mech.joint_transforms
    if jt.ok:
        return jt.pairs, jt.values(np.asarray(q, float)[None])[0]
    placed = tf_placements(mech, data, q)
    vals = np.array([transform_values(M) for _, _, M in placed]).reshape(-1, 7)
    return [(p, c) for p, c, _ in placed], vals


def tf_placements(mech: Mechanism, data: MechanismData, q: np.ndarray, fixed: bool = False) -> list[tuple]:
    """(parent link, child link, placement of the child in the parent) of every movable joint
    (or of every fixed joint) at q."""
    place = mech.link_placements(data, q)
    return [(j.parent, j.child, place[j.parent].actInv(place[j.child])) for j in mech.urdf.tree
            if (j.type == "fixed") == fixed and j.parent in place and j.child in place]


def _status(name: str, level: int, message: str, hardware_id: str, values: dict):
    T = msgs.typestore().types
    kv = [T["diagnostic_msgs/msg/KeyValue"](key=str(k), value=_fmt(v)) for k, v in values.items()]
    return T["diagnostic_msgs/msg/DiagnosticStatus"](level=level, name=name, message=message,
                                                      hardware_id=hardware_id, values=kv)


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def sensor_period(mech: Mechanism, name: str) -> float:
    for s in mech.config.sensors.all():
        if s.name == name:
            return 1.0 / s.rate
    return 0.01


def diagnostics_message(mech: Mechanism, status: EstimatorStatus, now: float, stamp_ns: int,
                        node_name: str = DEFAULT_NAMESPACE, silence: float = 0.5,
                        extra: Iterable = (), topic_names: dict[str, str] | None = None,
                        verdicts: dict | None = None, sensor_values: dict | None = None):
    """DiagnosticArray of an estimator's ``status`` at ``now`` (s, the estimator's time base):
    one status per sensor (WARN when silent for more than ``silence`` s or 5 periods, whichever
    is longer), one for the solver, plus ``extra`` statuses given as
    (name, level, message, values) by the caller (e.g. the node's input queue). Status names
    start with ``node_name``, the node's fully qualified name (``/rig1/mbfg_estimator: solver``),
    so the statuses of namespaced estimators never collide. A sensor status's hardware_id is its
    topic, as ``topic_names`` resolves the config's name (the node: its namespace and remaps).

    ``verdicts`` ({sensor: (level, message)}, from :class:`~mbfg_ros.intake.sensor_health.SensorHealth`)
    are the caller's judgement of each sensor over a recent window: a sensor listed there gets
    it (it beats "silent": readings arrive, but none is usable), and with ``verdicts`` given the
    judgement on the run's cumulative counts is left out (it would never clear).
    ``sensor_values`` adds values per sensor. A sensor the estimator's divergence test flags now
    is ERROR naming the figure (:func:`~mbfg_ros.intake.sensor_health.divergence_verdicts`), and so
    is the solver."""
    statuses = []
    topics = {s.name: s.topic for s in mech.config.sensors.all()}
    diverged = divergence_verdicts(status.health.divergence)     # ERROR (lost) / WARN (strained): beat the others
    for name, c in status.counts.items():
        joint = command_joint(name)
        if joint is not None:
            topic = mech.config.joint(joint).topic
            period = 0.001
        else:
            topic = topics.get(name, "")
            period = sensor_period(mech, name)
        topic = (topic_names or {}).get(topic, topic)
        limit = max(silence, 5.0 * period)
        level, message = OK, "ok"
        if name in diverged:
            level, message = diverged[name]
        elif verdicts is not None and name in verdicts:
            level, message = verdicts[name]
        elif c.last_stamp is None:
            level, message = WARN, "no data yet"
        elif now - c.last_stamp > limit:
            level, message = WARN, f"silent for {now - c.last_stamp:.2f} s"
        elif verdicts is None and c.received and (c.rejected + c.too_old) > 0.1 * c.received:
            level, message = WARN, f"{c.rejected + c.too_old} of {c.received} samples not used"
        values = {
            "rate_hz": c.rate(), "received": c.received, "used": c.used, "late": c.late,
            "too_old": c.too_old, "rejected_nonfinite": c.rejected_nonfinite,
            "rejected_duplicate": c.rejected_duplicate, "downweighted": c.downweighted,
            "discarded": c.discarded, "pending": c.pending,
            "last_stamp": "none" if c.last_stamp is None else f"{c.last_stamp:.6f}"}
        if name in status.health.divergence.rms:
            values["residual_rms_in_divergence_window_sigma"] = round(status.health.divergence.rms[name], 2)
        values.update((sensor_values or {}).get(name, {}))
        statuses.append(_status(f"{node_name}: sensor {name}", level, message, topic, values))
    h = status.health
    mean, p99, mx = h.latency()
    e = status.estimate
    level, message = OK, "tracking"
    if e is None:
        level, message = WARN, "waiting for data"
    elif h.last_recovery and h.recoveries:
        message = f"tracking; {h.recoveries} recoveries, last: {h.last_recovery}"
    if h.divergence.diverged:
        level = ERROR
        message = "DIVERGED: " + ", ".join(f"{n} whitened residual RMS {r:.1f} sigma"
                                           for n, r in h.divergence.diverged.items()) + \
            f" over the last {h.divergence.window:g} s (limit {h.divergence.limit:g}); " + message
    elif h.divergence.strained:
        level = WARN
        message += "; fitted worse than their noise: " + ", ".join(
            f"{n} {r:.1f} sigma" for n, r in h.divergence.strained.items())
    if p99 > 1e3 / status.keyframe_rate:
        level = max(level, WARN)
        message += f"; update p99 {p99:.2f} ms exceeds the keyframe period"
    values = {"keyframes": h.keyframes, "update_mean_ms": mean, "update_p99_ms": p99,
              "update_max_ms": mx, "recoveries": h.recoveries, "resets": h.resets,
              "relinearizations": h.relinearizations, "residual_rms": h.residual_rms,
              "closure_residual": h.closure_residual, "last_recovery": h.last_recovery or "none",
              "last_reset": h.last_reset or "none", "unknown_sensor_samples": h.unknown_sensor,
              "diverged_sensors": ",".join(h.divergence.diverged) or "none",
              "strained_sensors": ",".join(h.divergence.strained) or "none",
              "diverged_periods": h.divergence.period_count, "reinitialisations": h.reinitialisations,
              "last_reinitialisation": h.last_reinitialisation or "none",
              "model_uncertainty_scale": h.model_scale, "model_uncertainty_searched": h.model_scale_searched,
              "qr_fallback": h.qr_fallback or "none"}
    if e is not None:
        values["gravity_scale"] = e.gravity_scale
        values["mass_scale"] = e.mass_scale
        values["estimate_stamp"] = f"{e.stamp:.6f}"
    statuses.append(_status(f"{node_name}: solver", level, message, mech.config.name, values))
    for name, lvl, msg, vals in extra:
        statuses.append(_status(f"{node_name}: {name}", lvl, msg, mech.config.name, vals))
    T = msgs.typestore().types
    return T[DIAGNOSTIC_ARRAY](header=msgs.header(stamp_ns), status=statuses)

