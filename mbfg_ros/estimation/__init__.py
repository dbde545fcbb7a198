"""The estimator: a multibody factor graph in joint coordinates on an incremental fixed-lag
smoother (GTSAM ISAM2). No ROS imports: the node, the replay tool, the benchmark and tests all
use :class:`mbfg_ros.estimation.estimator.Estimator`."""
