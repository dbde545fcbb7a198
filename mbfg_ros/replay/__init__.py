"""Offline replay of a rosbag through the estimator (no ROS needed): ``mbfg replay``.

Modules:

- ``bag_input``: opens a bag (rosbag2 mcap/sqlite3 or rosbag1, with rosbags), checks its topics
  against the mechanism config and yields the decoded sensor readings and the ground-truth
  messages in the bag's (receive) order;
- ``session``: one online replay run (:class:`~mbfg_ros.replay.session.OnlineReplay`): the
  readings through the node's intake (:mod:`mbfg_ros.intake`: stamp order, time rules) into the
  estimator;
- ``smoothing``: ``--smooth``, the recording solved offline era by era;
- ``replay_output``: what both share: options, the output side (forces, log, messages,
  /diagnostics, timings) and the result;
- ``truth``: the simulator's ground-truth topics collected into time series;
- ``estimate_log``: the estimates of a run (and the forces derived from them) as arrays;
- ``output_bag``, ``output_batch``, ``pipeline``: write what the ROS node publishes (same topics,
  types and frames), in batches, optionally in a process of its own (and read in one);
- ``residuals``: sensor residuals (measured minus predicted at the estimate);
- ``metrics``: errors and RMSE of the estimates against the truth;
- ``plots``: PNG figures (matplotlib, Agg);
- ``report``: the printed summary, the JSON facts and the per-keyframe CSV;
- ``tuning``: noise settings from a recording (``mbfg tune``);
- ``recording_speed``, ``recorded_torque``: a recording's top DOF speed (``mbfg check --bag``) and
  a recorded run's estimated torques scored against the recorded ones.
"""
