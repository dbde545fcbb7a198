"""The node benchmark's subscriber reads the keyframe's stamp off the estimate's CDR bytes."""
from __future__ import annotations

from mbfg_ros.io import messages as msgs
from mbfg_ros.ros.latency_probe import header_stamp_ns


def test_header_stamp_from_serialized_messages():
    ns = 1_700_000_123_456_789_012
    js = msgs.serialize(msgs.joint_state(ns, ["a", "b"], position=[0.1, 0.2], velocity=[0.0, 0.0]))
    assert header_stamp_ns(bytes(js)) == ns
    wrench = msgs.serialize(msgs.wrench_stamped(ns + 5, "frame", [1.0, 2.0, 3.0], [0.0, 0.0, 0.0]))
    assert header_stamp_ns(bytes(wrench)) == ns + 5
