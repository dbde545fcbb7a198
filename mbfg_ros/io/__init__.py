"""Message conversion and rosbag2 writing/reading with rosbags (no ROS imports).

- :mod:`mbfg_ros.io.messages`: the standard messages (rosbags typestore ROS2_KILTED) and time
  stamps.
- :mod:`mbfg_ros.io.simulation_messages`: sensor samples and ground truth as messages.
- :mod:`mbfg_ros.io.bag_writer`: writing a rosbag2 (mcap or sqlite3).
- :mod:`mbfg_ros.io.bag_reader`: iterating a bag's messages (rosbag2 or rosbag1).
"""
