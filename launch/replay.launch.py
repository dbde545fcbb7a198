"""A recorded bag through the live estimator: ros2 bag play --clock and the estimator on sim time.

    ros2 launch mbfg_ros replay.launch.py bag:=/path/bag [config:=/path/rig.yaml] \
        [rate:=2.0] [loop:=true] [namespace:=rig1] [log_level:=debug]

The launch ends when the bag has been played. Each loop makes time jump backwards: the estimator
resets and logs it once. Processes and parameters come from mbfg_ros.ros.launch_description, the
same description `mbfg run replay` starts (with a rosbags-based player) where ros2 is not
installed. For offline, faster-than-real-time processing use `mbfg replay` instead.
"""
from mbfg_ros.ros.launch_description import launch_file_description


def generate_launch_description():
    return launch_file_description("replay")
