"""The estimator node for a rig.

    ros2 launch mbfg_ros estimator.launch.py config:=/path/rig.yaml \
        [urdf:=/path/rig.urdf | robot_description:="$(xacro rig.urdf.xacro)"] \
        [use_sim_time:=true] [namespace:=rig1] [log_level:=debug] [managed:=true]

managed:=true starts the managed (lifecycle) node, estimator_lifecycle: it waits unconfigured
until `ros2 lifecycle set /mbfg_estimator configure` (then activate) or a lifecycle manager
(README "Managed mode").

Node names, parameters and remappings come from mbfg_ros.ros.launch_description, the same
description `mbfg run estimator` starts where ros2 launch is not installed.
"""
from mbfg_ros.ros.launch_description import launch_file_description


def generate_launch_description():
    return launch_file_description("estimator")
