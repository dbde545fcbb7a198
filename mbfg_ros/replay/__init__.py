"""Offline replay of a rosbag through the estimator (no ROS needed): ``mbfg replay``.

Modules:

- ``bag_input``: opens a bag (rosbag2 mcap/sqlite3 or rosbag1, with rosbags), checks its topics
  against the mechanism config and yields the decoded sensor readings and the ground-truth
  messages in the bag's (receive) order;
- ``stamp_order``: a bounded reorder buffer that releases readings in header-stamp order;
- ``truth``: the simulator's ground-truth topics collected into time series;
- ``estimate_log``: the estimates of a run (and the forces derived from them) as arrays;
- ``output_bag``: writes what the ROS node publishes (same topics, types and frames);
- ``session``: one replay run (bag -> estimator -> outputs), with its timings;
- ``residuals``: sensor residuals (measured minus predicted at the estimate);
- ``metrics``: errors and RMSE of the estimates against the truth;
- ``plots``: PNG figures (matplotlib, Agg);
- ``report``: the printed summary, the JSON facts and the per-keyframe CSV.
"""
