"""mbfg_ros.ros.rclpy_compat on the distribution under test (Kilted, or Jazzy with ``make test
ROS_DISTRO=jazzy``) and on Humble's module layout.

Humble's rclpy has the subscription event classes in ``rclpy.qos_event`` (``rclpy.event_handler``
came with Iron): the compat module falls back to it. A real process where ``rclpy.event_handler``
cannot be imported and ``rclpy.qos_event`` is this rclpy's event-handler code under Humble's
module name; the node starts there, subscribes with the message-lost event and takes real
messages."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from conftest import CONFIG
from mbfg_ros.ros.processes import ros_environment

pytestmark = pytest.mark.ros

PROBE = textwrap.dedent("""
    import importlib.util, sys, time
    from pathlib import Path
    import rclpy, rclpy.node                                  # the real rclpy, loaded as usual
    source = Path(rclpy.__file__).parent / "event_handler.py"
    spec = importlib.util.spec_from_file_location("rclpy.qos_event", source)
    humble = importlib.util.module_from_spec(spec)
    sys.modules["rclpy.qos_event"] = humble
    spec.loader.exec_module(humble)
    sys.modules["rclpy.event_handler"] = None                 # "No module named rclpy.event_handler"
    try:
        import rclpy.event_handler
        raise SystemExit("rclpy.event_handler is still importable")
    except ImportError:
        pass
    from mbfg_ros.ros import estimator_node, node_intake, rclpy_compat
    assert rclpy_compat.SubscriptionEventCallbacks is humble.SubscriptionEventCallbacks
    assert rclpy_compat.UnsupportedEventTypeError is humble.UnsupportedEventTypeError
    assert node_intake.SubscriptionEventCallbacks is humble.SubscriptionEventCallbacks
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import JointState
    rclpy.init(args=["probe", "--ros-args", "-p", "config:=%s"])
    node = estimator_node.EstimatorNode()
    pub = node.create_publisher(JointState, "/encoders", qos_profile_sensor_data)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    end = time.monotonic() + 60
    k = 0
    while node.queue.messages.get("/encoders", 0) < 20 and time.monotonic() < end:
        k += 1
        msg = JointState(name=["crank_joint"], position=[1.0])
        msg.header.stamp.sec, msg.header.stamp.nanosec = 1700000000, k * 1000000
        pub.publish(msg)
        executor.spin_once(timeout_sec=0.01)
    print("received", node.queue.messages.get("/encoders", 0), "lost", sum(node.lost.values()))
    node.stop()
    node.destroy_node()
    rclpy.try_shutdown()
""")


NEWER = textwrap.dedent("""
    import sys
    import rclpy.event_handler
    from mbfg_ros.ros import rclpy_compat
    assert rclpy_compat.SubscriptionEventCallbacks is rclpy.event_handler.SubscriptionEventCallbacks
    assert rclpy_compat.UnsupportedEventTypeError is rclpy.event_handler.UnsupportedEventTypeError
    assert "rclpy.qos_event" not in sys.modules, "the deprecated alias was imported"
""")


def test_event_classes_come_from_event_handler_on_this_distribution(tmp_path):
    """Jazzy and Kilted: rclpy.event_handler's classes, and never the alias rclpy.qos_event, which
    warns on import there (a fresh process: the test process may have imported anything)."""
    out = subprocess.run([sys.executable, "-c", NEWER], env=ros_environment(tmp_path),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "deprecated" not in out.stderr, out.stderr


def test_node_runs_with_humbles_qos_event_module(tmp_path):
    script = PROBE % (CONFIG / "four_bar.yaml")
    out = subprocess.run([sys.executable, "-c", script], env=ros_environment(tmp_path),
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stdout + out.stderr
    received = int(out.stdout.split("received")[1].split()[0])
    assert received >= 20, out.stdout + out.stderr
