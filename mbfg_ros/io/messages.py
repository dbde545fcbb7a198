"""Standard ROS 2 messages as rosbags dataclasses (typestore ``Stores.ROS2_KILTED``), and stamps.

Times: a run's times are seconds from its start (``Sample.stamp``); messages carry absolute
stamps ``epoch + t``, handled as integer nanoseconds so no precision is lost at ~1.7e9 s.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Sequence

import numpy as np
from rosbags.typesys import Stores, get_types_from_msg, get_typestore

JOINT_STATE = "sensor_msgs/msg/JointState"
IMU = "sensor_msgs/msg/Imu"
WRENCH_STAMPED = "geometry_msgs/msg/WrenchStamped"
DYNAMIC_JOINT_STATE = "control_msgs/msg/DynamicJointState"
INTERFACE_VALUE = "control_msgs/msg/InterfaceValue"

CONTROL_MSGS_DEFINITIONS = {
    INTERFACE_VALUE: "string[] interface_names\nfloat64[] values\n",
    DYNAMIC_JOINT_STATE: "std_msgs/Header header\nstring[] joint_names\n"
                         "InterfaceValue[] interface_values\n",
}
"""control_msgs' DynamicJointState (what ros2_control's joint_state_broadcaster publishes on
/dynamic_joint_states) and InterfaceValue, as defined upstream (comments left out); rosbags'
typestores do not have control_msgs, so :func:`typestore` adds them."""

DEFAULT_EPOCH = 1_700_000_000.0
"""s, the default absolute time of a simulated run's t = 0 (2023-11-14 22:13:20 UTC): stamps look
like a real rig's, and code that assumes stamps start at 0 fails visibly."""


@lru_cache(maxsize=1)
def typestore():
    """The rosbags typestore every mbfg_ros bag is written with (ROS 2 Kilted types, plus the
    control_msgs messages of :data:`CONTROL_MSGS_DEFINITIONS`)."""
    store = get_typestore(Stores.ROS2_KILTED)
    for name, text in CONTROL_MSGS_DEFINITIONS.items():
        store.register(get_types_from_msg(text, name))
    return store


def seconds_to_ns(t: float) -> int:
    """Seconds to integer nanoseconds (rounded)."""
    return int(round(float(t) * 1e9))


def stamp_ns(t: float, epoch_ns: int) -> int:
    """Absolute stamp (ns) of run time ``t`` (s) with the run's t = 0 at ``epoch_ns``."""
    return int(epoch_ns) + seconds_to_ns(t)


def time_msg(ns: int):
    """builtin_interfaces/msg/Time of an absolute time in ns (sec may be negative for ns < 0)."""
    sec, nanosec = divmod(int(ns), 1_000_000_000)
    return typestore().types["builtin_interfaces/msg/Time"](sec=sec, nanosec=nanosec)


def time_to_ns(t) -> int:
    """Integer ns of a builtin_interfaces/msg/Time (or any object with sec and nanosec)."""
    return int(t.sec) * 1_000_000_000 + int(t.nanosec)


def header(ns: int, frame_id: str = ""):
    return typestore().types["std_msgs/msg/Header"](stamp=time_msg(ns), frame_id=frame_id)


def _array(values) -> np.ndarray:
    return np.asarray(values if values is not None else (), dtype=np.float64).reshape(-1)


def joint_state(ns: int, names: Sequence[str], position=None, velocity=None, effort=None,
                frame_id: str = ""):
    """sensor_msgs/msg/JointState; arrays left out are empty."""
    return typestore().types[JOINT_STATE](
        header=header(ns, frame_id), name=list(names), position=_array(position),
        velocity=_array(velocity), effort=_array(effort))


def imu(ns: int, frame_id: str, angular_velocity=None, noise: float = 0.0, linear_acceleration=None,
        acceleration_noise: float = 0.0):
    """sensor_msgs/msg/Imu with angular_velocity (rad/s) and linear_acceleration (m/s^2), each
    with its covariance diagonal noise^2; a field not given is zeros marked unknown (covariance[0]
    = -1), and so is the orientation."""
    T = typestore().types
    unknown = np.zeros(9)
    unknown[0] = -1.0
    V = T["geometry_msgs/msg/Vector3"]

    def vector(values, sigma: float):
        if values is None:
            return V(x=0.0, y=0.0, z=0.0), unknown.copy()
        w = np.asarray(values, float)
        return V(x=float(w[0]), y=float(w[1]), z=float(w[2])), np.diag(np.full(3, float(sigma) ** 2)).reshape(9)

    w, w_cov = vector(angular_velocity, noise)
    acc, acc_cov = vector(linear_acceleration, acceleration_noise)
    return T[IMU](
        header=header(ns, frame_id),
        orientation=T["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0),
        orientation_covariance=unknown.copy(),
        angular_velocity=w, angular_velocity_covariance=w_cov,
        linear_acceleration=acc, linear_acceleration_covariance=acc_cov)


def wrench_stamped(ns: int, frame_id: str, force, torque):
    """geometry_msgs/msg/WrenchStamped (N, N m) in ``frame_id``."""
    T = typestore().types
    f = np.asarray(force, float)
    t = np.asarray(torque, float)
    V = T["geometry_msgs/msg/Vector3"]
    return T[WRENCH_STAMPED](
        header=header(ns, frame_id),
        wrench=T["geometry_msgs/msg/Wrench"](force=V(x=float(f[0]), y=float(f[1]), z=float(f[2])),
                                            torque=V(x=float(t[0]), y=float(t[1]), z=float(t[2]))))


def dynamic_joint_state(ns: int, names: Sequence[str], interfaces: dict[str, np.ndarray],
                        extra: dict[str, dict[str, np.ndarray]] | None = None, frame_id: str = ""):
    """control_msgs/msg/DynamicJointState: for every joint in ``names`` the interfaces
    ``interfaces`` ({interface name: one value per joint}, e.g. position, velocity, acceleration,
    effort: ros2_control's names); ``extra`` adds interfaces to some joints only ({interface:
    {joint: value}})."""
    T = typestore().types
    columns = {k: np.asarray(v, float).reshape(-1) for k, v in interfaces.items()}
    values = []
    for i, joint in enumerate(names):
        keys = list(columns)
        vals = [float(columns[k][i]) for k in keys]
        for k, by_joint in (extra or {}).items():
            if joint in by_joint:
                keys.append(k)
                vals.append(float(by_joint[joint]))
        values.append(T[INTERFACE_VALUE](interface_names=keys, values=np.asarray(vals, float)))
    return T[DYNAMIC_JOINT_STATE](header=header(ns, frame_id), joint_names=list(names),
                                  interface_values=values)


def joint_values(msg, interface: str, names: Sequence[str]) -> np.ndarray | None:
    """One interface's value for each of ``names`` from a DynamicJointState (None if a joint or
    its interface is missing)."""
    index = {n: i for i, n in enumerate(msg.joint_names)}
    out = np.empty(len(names))
    for k, joint in enumerate(names):
        i = index.get(joint)
        if i is None or i >= len(msg.interface_values):
            return None
        iv = msg.interface_values[i]
        try:
            out[k] = iv.values[list(iv.interface_names).index(interface)]
        except (ValueError, IndexError):
            return None
    return out


def serialize(msg) -> bytes:
    """CDR bytes of a message (what rosbag2 and DDS carry)."""
    return typestore().serialize_cdr(msg, msg.__msgtype__)
