"""Ground-truth simulation of mechanisms and synthetic sensor data (no ROS imports).

- :mod:`mbfg_ros.sim.scenario`: what is simulated (modelling errors, inputs, friction).
- :mod:`mbfg_ros.sim.input_profiles`: the applied input efforts over time.
- :mod:`mbfg_ros.sim.constrained_dynamics`: a lean evaluation of the constrained equations of
  motion (the model's physics, without derivatives) for the integrator.
- :mod:`mbfg_ros.sim.forward`: integration of the truth, :class:`Trajectory`, :func:`simulate`.
- :mod:`mbfg_ros.sim.sensors`: sensor samples from a trajectory, :func:`synthesize`.
- :mod:`mbfg_ros.sim.ground_truth`: the true joint states and forces at a chosen rate.
"""
