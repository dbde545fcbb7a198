"""TF output: tf2_ros broadcasters on a ROS machine, identical plain publishers without tf2_ros.

The estimator builds every TFMessage once (``mbfg_ros.io.estimate_messages.tf_message``, CDR
bytes). With tf2_ros importable the transforms go through ``tf2_ros.TransformBroadcaster`` /
``StaticTransformBroadcaster``; in the pip environment (no tf2_ros) the same bytes are published
on ``/tf`` and ``/tf_static`` with tf2_ros's QoS: /tf reliable, volatile, keep-last 100;
/tf_static reliable, transient-local, keep-last 1 (late joiners get the static frames).
"""
from __future__ import annotations

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message

try:                                   # a ROS machine
    import tf2_ros
except ImportError:                    # the pip environment
    tf2_ros = None

from tf2_msgs.msg import TFMessage

TF_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE,
                    durability=DurabilityPolicy.VOLATILE, history=HistoryPolicy.KEEP_LAST)
"""The QoS of tf2_ros.TransformBroadcaster (and of tf2_ros listeners)."""

TF_STATIC_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                           durability=DurabilityPolicy.TRANSIENT_LOCAL, history=HistoryPolicy.KEEP_LAST)
"""The QoS of tf2_ros.StaticTransformBroadcaster."""


class TfPublisher:
    """Publishes TFMessage bytes on /tf (``send``) and /tf_static (``send_static``)."""

    def __init__(self, node) -> None:
        self.uses_tf2_ros = tf2_ros is not None
        if self.uses_tf2_ros:
            self._dynamic = tf2_ros.TransformBroadcaster(node)
            self._static = tf2_ros.StaticTransformBroadcaster(node)
        else:
            self._dynamic = node.create_publisher(TFMessage, "/tf", TF_QOS)
            self._static = node.create_publisher(TFMessage, "/tf_static", TF_STATIC_QOS)

    def send(self, cdr: bytes) -> None:
        """Moving frames (a serialized tf2_msgs/msg/TFMessage)."""
        if self.uses_tf2_ros:
            self._dynamic.sendTransform(deserialize_message(cdr, TFMessage).transforms)
        else:
            self._dynamic.publish(cdr)

    def send_static(self, cdr: bytes) -> None:
        """Fixed frames, latched for late subscribers (replaces what was sent before)."""
        if self.uses_tf2_ros:
            self._static.sendTransform(deserialize_message(cdr, TFMessage).transforms)
        else:
            self._static.publish(cdr)
