"""Sensor kinds, each in one module (no ROS imports).

A kind module holds everything about one kind of sensor: its config section (dataclass and
parser), its compiled model (numeric, for the simulator and the replay's residuals; symbolic, the
whitened residual the estimator's step function stacks), its synthesis faults and message part for
the simulator, its message decoding and its tuning hook (:mod:`mbfg_ros.sensors.base`).

- :mod:`.encoder` (``encoders``, JointState position), :mod:`.gyro` (``gyros``, Imu
  angular_velocity), :mod:`.load_cell` (``load_cells``, WrenchStamped or Float64),
  :mod:`.accelerometer` (``accelerometers``, Imu linear_acceleration);
- :mod:`.command`: a known input effort (JointState effort; the config's ``joints``);
- :mod:`.joint_state`, :mod:`.imu`: what the kinds of one message type share;
- :mod:`.registry`: the kinds in the order everything iterates them.
"""
