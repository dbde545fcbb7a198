"""Gyroscope: the angular velocity of a link's frame, sensor_msgs/Imu ``angular_velocity``.

Config section ``gyros`` (:class:`GyroConfig`). Reading (3,): rad/s, all three axes of the sensor
frame (``frame`` turned by ``rotation_rpy``); the config's ``axes`` are the measured ones. Model
y = R_mount^T omega_F (the frame's angular velocity in its own coordinates, pinocchio LOCAL) +
bias per measured axis; residual (y - omega(q(t), v(t)) - b(t)) / sigma. The simulator adds the
noise and, with ``--gyro-bias`` / ``--gyro-bias-walk``, a constant bias and its random walk.
"""
from __future__ import annotations

from dataclasses import dataclass

import casadi as ca
import numpy as np
import pinocchio as pin

from mbfg_ros.model.yaml_reader import YamlNode
from mbfg_ros.sensors.base import SensorKind
from mbfg_ros.sensors.imu import ImuModel, ImuSensorConfig, compile_mount, parse_imu_sensor


@dataclass(frozen=True)
class GyroConfig(ImuSensorConfig):
    """Gyroscope on a link or frame: sensor_msgs/Imu angular_velocity on ``topic`` (rad/s).

    ``rotation_rpy`` is the sensor's mounting rotation relative to ``frame`` (roll, pitch, yaw in
    rad, URDF convention); ``axes`` the measured axes of the sensor frame. ``bias_instability``
    is the bias random walk (rad/s per sqrt(s)); ``bias_sigma`` the prior sigma of the bias (rad/s).
    """


@dataclass(frozen=True)
class GyroModel(ImuModel):
    """y = R_mount^T omega_F (angular velocity of frame F in F coordinates) + bias, per axis."""
    config: GyroConfig

    kind = "gyro"
    level = 1
    observes = True
    imu_field = "angular_velocity"
    imu_label = "angular velocity"

    def unit(self, mech) -> str:
        return "rad/s"

    def value(self, mech, data, q, v=None, a=None, lam=None, u=None, tau=None, gravity_scale=1.0):
        d = data.sensor
        pin.forwardKinematics(mech.model, d, q, v)
        return self.R_mount.T @ pin.getFrameVelocity(mech.model, d, self.frame_id, pin.LOCAL).angular

    def values(self, mech, q, v=None, a=None, lam=None, u=None, tau=None):
        model = mech.model
        data = model.createData()
        RT = self.R_mount.T
        out = np.empty((q.shape[0], 3))
        for i in range(q.shape[0]):
            pin.forwardKinematics(model, data, q[i], v[i])
            out[i] = RT @ pin.getFrameVelocity(model, data, self.frame_id, pin.LOCAL).angular
        return out

    def evaluate(self, mech, data, q, v, derivatives: bool = True):
        """Angular velocity in the sensor frame (measured axes, rad/s), without bias: y, or
        (y, y_q, y_v) with derivatives from pinocchio's frame velocity derivatives."""
        m, d = mech.model, data.sensor
        if not derivatives:
            pin.forwardKinematics(m, d, q, v)
            w = pin.getFrameVelocity(m, d, self.frame_id, pin.LOCAL).angular
            return (self.R_mount.T @ w)[self.rows]
        pin.computeForwardKinematicsDerivatives(m, d, q, v, np.zeros(mech.n))
        w = pin.getFrameVelocity(m, d, self.frame_id, pin.LOCAL).angular
        dvq, dvv = pin.getFrameVelocityDerivatives(m, d, self.frame_id, pin.LOCAL)
        RT = self.R_mount.T[self.rows]
        return RT @ w, RT @ dvq[3:], RT @ dvv[3:]

    def symbolic(self, sym, q, v):
        """Angular velocity in the gyro's frame, its measured axes (SX; = :meth:`evaluate`)."""
        _, ang = sym.frame_velocity(q, v, self.frame_id)
        w = ca.mtimes(ca.DM(self.R_mount.T), ang)
        return ca.vertcat(*[w[int(i)] for i in self.rows])

    def predicted(self, sym, z):
        return self.symbolic(sym, z.q, z.v)

    def add_bias(self, value, stamp, options, rng):
        """A constant bias of std ``options.gyro_bias`` per axis, plus its random walk with the
        config's ``bias_instability`` when ``options.gyro_bias_walk``."""
        K = value.shape[0]
        r = rng("bias")
        bias = np.broadcast_to(options.gyro_bias * r.standard_normal(3), (K, 3)).copy()
        walk = self.config.bias_instability
        if options.gyro_bias_walk and walk > 0 and K:
            dt = np.diff(np.concatenate([[0.0], stamp]))
            steps = walk * np.sqrt(np.maximum(dt, 0.0))[:, None] * r.standard_normal((K, 3))
            bias += np.cumsum(steps, axis=0)
        return value + bias


class GyroKind(SensorKind):
    name = "gyro"
    section = "gyros"
    default_rate = 400.0
    model = GyroModel

    def parse(self, n: YamlNode) -> GyroConfig:
        return parse_imu_sensor(n, GyroConfig, self.default_rate)

    def compile(self, mech, config: GyroConfig, root: YamlNode, field: str) -> GyroModel:
        return GyroModel(config, *compile_mount(mech, config, root, field))


KIND = GyroKind()
