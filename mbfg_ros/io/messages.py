"""Standard ROS 2 messages as rosbags dataclasses (typestore ``Stores.ROS2_KILTED``), and stamps.

Times: a run's times are seconds from its start (``Sample.stamp``); messages carry absolute
stamps ``epoch + t``, handled as integer nanoseconds so no precision is lost at ~1.7e9 s.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Sequence

import numpy as np
from rosbags.typesys import Stores, get_typestore

JOINT_STATE = "sensor_msgs/msg/JointState"
IMU = "sensor_msgs/msg/Imu"
WRENCH_STAMPED = "geometry_msgs/msg/WrenchStamped"
JOINT_TRAJECTORY = "trajectory_msgs/msg/JointTrajectory"

DEFAULT_EPOCH = 1_700_000_000.0
"""s, the default absolute time of a simulated run's t = 0 (2023-11-14 22:13:20 UTC): stamps look
like a real rig's, and code that assumes stamps start at 0 fails visibly."""


@lru_cache(maxsize=1)
def typestore():
    """The rosbags typestore every mbfg_ros bag is written with (ROS 2 Kilted types)."""
    return get_typestore(Stores.ROS2_KILTED)


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


def imu(ns: int, frame_id: str, angular_velocity, noise: float):
    """sensor_msgs/msg/Imu with angular_velocity (rad/s) and its covariance diagonal noise^2;
    orientation and linear acceleration are marked unknown (covariance[0] = -1)."""
    T = typestore().types
    unknown = np.zeros(9)
    unknown[0] = -1.0
    w = np.asarray(angular_velocity, float)
    return T[IMU](
        header=header(ns, frame_id),
        orientation=T["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0),
        orientation_covariance=unknown.copy(),
        angular_velocity=T["geometry_msgs/msg/Vector3"](x=float(w[0]), y=float(w[1]), z=float(w[2])),
        angular_velocity_covariance=np.diag(np.full(3, float(noise) ** 2)).reshape(9),
        linear_acceleration=T["geometry_msgs/msg/Vector3"](x=0.0, y=0.0, z=0.0),
        linear_acceleration_covariance=unknown.copy())


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


def joint_trajectory(ns: int, names: Sequence[str], positions, velocities, accelerations, effort,
                     frame_id: str = ""):
    """trajectory_msgs/msg/JointTrajectory with one point (time_from_start 0) at the stamp."""
    T = typestore().types
    point = T["trajectory_msgs/msg/JointTrajectoryPoint"](
        positions=_array(positions), velocities=_array(velocities),
        accelerations=_array(accelerations), effort=_array(effort),
        time_from_start=T["builtin_interfaces/msg/Duration"](sec=0, nanosec=0))
    return T[JOINT_TRAJECTORY](header=header(ns, frame_id), joint_names=list(names), points=[point])


def serialize(msg) -> bytes:
    """CDR bytes of a message (what rosbag2 and DDS carry)."""
    return typestore().serialize_cdr(msg, msg.__msgtype__)
