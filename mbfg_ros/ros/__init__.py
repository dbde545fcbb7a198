"""The ROS 2 face of mbfg_ros: the estimator and sim_rig nodes, their launch descriptions, TF.

This is the only package (with :mod:`mbfg_ros.testing`) that imports rclpy and the ROS message
packages; the modules that need no rclpy (:mod:`.launch_description`, :mod:`.processes`,
:mod:`.live_rig`, :mod:`.sample_queue`) import none, so the command line starts fast.
"""
