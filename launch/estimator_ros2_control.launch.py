"""The estimator on a ros2_control robot's broadcaster topics (no adapter node).

    ros2 launch mbfg_ros estimator_ros2_control.launch.py [config:=/path/rig.yaml] \
        [params_file:=/path/rig.params.yaml] [namespace:=robot1] [use_sim_time:=true] [log_level:=debug] \
        [managed:=true]

It reads joint_states (joint_state_broadcaster), ft_sensor/wrench (force_torque_sensor_broadcaster)
and imu_sensor/imu (imu_sensor_broadcaster) as config/arm6_ros2_control.yaml names them, with
config/arm6_ros2_control.params.yaml, unless other files are given (README "Wiring the estimator
to ros2_control"); managed:=true starts the managed (lifecycle) node, as ros2_control's
controllers are (README "Managed mode"). Node names, parameters and remappings come from
mbfg_ros.ros.launch_description, the same description `mbfg run estimator --config ...
--params-file ...` starts where ros2 launch is not installed.
"""
from mbfg_ros.ros.launch_description import launch_file_description


def generate_launch_description():
    return launch_file_description("estimator_ros2_control")
