"""The simulated rig (sim_rig) and the estimator, optionally with rviz2.

    ros2 launch mbfg_ros sim_rig.launch.py [config:=/path/rig.yaml] [use_sim_time:=true] \
        [rviz:=true] [duration:=60] [namespace:=rig1] [log_level:=debug]

With use_sim_time the rig publishes /clock and the estimator follows it. The launch ends when
the rig's run ends. Nodes and parameters come from mbfg_ros.ros.launch_description, the same
description `mbfg run sim_rig` starts where ros2 launch is not installed.
"""
from mbfg_ros.ros.launch_description import launch_file_description


def generate_launch_description():
    return launch_file_description("sim_rig")
