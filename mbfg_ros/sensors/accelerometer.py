"""Linear accelerometer: the specific force at a link's frame, sensor_msgs/Imu ``linear_acceleration``.

Config section ``accelerometers`` (:class:`AccelerometerConfig`, the fields of a gyro). Reading
(3,): m/s^2, all three axes of the sensor frame (``frame`` turned by ``rotation_rpy``); the
config's ``axes`` are the measured ones. Model: what an accelerometer at rest on a table reads as
+9.81 m/s^2 upwards,

    y = R_mount^T R_F^T (a_F - s g) + bias,

a_F the classical acceleration of the frame's origin (base frame), g the config's gravity (times
the gravity scale s when it is estimated), R_F the frame's orientation; with pinocchio,
``getFrameClassicalAcceleration(..., LOCAL)`` minus gravity in the frame. Residual (y - model(q(t),
v(t), a(t)) - b(t)) / sigma: it reads the accelerations, so it sees the motion's jerk between
keyframes only through their linear interpolation. A gyro and an accelerometer may share an Imu
topic (:mod:`mbfg_ros.sensors.imu`). The simulator adds the noise (no bias).
"""
from __future__ import annotations

from dataclasses import dataclass

import casadi as ca
import pinocchio as pin

from mbfg_ros.model.yaml_reader import YamlNode
from mbfg_ros.sensors.base import SensorKind
from mbfg_ros.sensors.imu import ImuModel, ImuSensorConfig, compile_mount, parse_imu_sensor


@dataclass(frozen=True)
class AccelerometerConfig(ImuSensorConfig):
    """Accelerometer on a link or frame: sensor_msgs/Imu linear_acceleration on ``topic`` (m/s^2).

    ``rotation_rpy`` is the sensor's mounting rotation relative to ``frame`` (roll, pitch, yaw in
    rad, URDF convention); ``axes`` the measured axes of the sensor frame. ``bias_instability``
    is the bias random walk (m/s^2 per sqrt(s)); ``bias_sigma`` the prior sigma of the bias
    (m/s^2; 0 and no random walk: the bias is not estimated)."""


@dataclass(frozen=True)
class AccelerometerModel(ImuModel):
    """y = R_mount^T (classical acceleration of frame F - gravity, in F) + bias, per axis."""
    config: AccelerometerConfig

    kind = "accelerometer"
    level = 2
    observes = True
    imu_field = "linear_acceleration"
    imu_label = "linear acceleration"

    def unit(self, mech) -> str:
        return "m/s^2"

    def value(self, mech, data, q, v=None, a=None, lam=None, u=None, tau=None, gravity_scale=1.0):
        m, d = mech.model, data.sensor
        pin.forwardKinematics(m, d, q, v, a)
        pin.updateFramePlacement(m, d, self.frame_id)
        acc = pin.getFrameClassicalAcceleration(m, d, self.frame_id, pin.LOCAL).linear
        R = d.oMf[self.frame_id].rotation
        return self.R_mount.T @ (acc - R.T @ (gravity_scale * mech.gravity))

    def symbolic(self, sym, q, v, a, gravity_scale=1.0):
        """The specific force on the measured axes (SX; = :meth:`value`)."""
        lin, _ = sym.frame_acceleration(q, v, a, self.frame_id)
        R, _ = sym.frame_pose(q, self.frame_id)
        f = lin - gravity_scale * ca.mtimes(R.T, ca.DM(sym.gravity))
        y = ca.mtimes(ca.DM(self.R_mount.T), f)
        return ca.vertcat(*[y[int(i)] for i in self.rows])

    def predicted(self, sym, z):
        return self.symbolic(sym, z.q, z.v, z.a, z.gravity_scale)


class AccelerometerKind(SensorKind):
    name = "accelerometer"
    section = "accelerometers"
    default_rate = 400.0
    model = AccelerometerModel

    def parse(self, n: YamlNode) -> AccelerometerConfig:
        return parse_imu_sensor(n, AccelerometerConfig, self.default_rate)

    def compile(self, mech, config: AccelerometerConfig, root: YamlNode, field: str) -> AccelerometerModel:
        return AccelerometerModel(config, *compile_mount(mech, config, root, field))


KIND = AccelerometerKind()
