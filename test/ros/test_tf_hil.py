"""Every frame id the estimator publishes, and every one the rig's sensor messages carry,
resolves in TF: looked up in a buffer filled from /tf and /tf_static over DDS (tf2_ros's Buffer
where it is installed, test/support/tf_buffer.py here), with /tf_static joined late (latched).
Real processes over DDS.

The four-bar with its crank encoder and rocker-pin load cell plus the coupler gyro (frame id
coupler_imu), world_frame map. Bounds: the closure's two frames coincide in map within 1 mm at
the keyframes (the estimator's closure residual is ~1e-6 m); the gyro frame sits at the
coupler's origin within 1e-9 m."""
from __future__ import annotations

import numpy as np
import pytest
import yaml

from conftest import CONFIG
from support.tf_buffer import TfBuffer, TfRecorder
from mbfg_ros.io.estimate_messages import output_topics
from mbfg_ros.io.simulation_messages import sensor_topics
from mbfg_ros.io.topic_names import resolve_topic
from mbfg_ros.model.mechanism import load_mechanism
from mbfg_ros.testing.hil import HilRun


def _tf(stamp_ns: int, parent: str, child: str, xyz, quat_xyzw):
    from geometry_msgs.msg import TransformStamped
    t = TransformStamped()
    t.header.frame_id, t.child_frame_id = parent, child
    t.header.stamp.sec, t.header.stamp.nanosec = divmod(stamp_ns, 1_000_000_000)
    t.transform.translation.x, t.transform.translation.y, t.transform.translation.z = xyz
    (t.transform.rotation.x, t.transform.rotation.y, t.transform.rotation.z,
     t.transform.rotation.w) = quat_xyzw
    return t


def test_own_tf_buffer_chains_interpolates_and_refuses_what_tf2_refuses():
    from tf2_msgs.msg import TFMessage
    buf = TfBuffer()
    c, s = np.cos(np.pi / 4), np.sin(np.pi / 4)
    buf.add(TFMessage(transforms=[_tf(0, "map", "world", (1.0, 0, 0), (0, 0, 0, 1)),
                                  _tf(0, "arm", "tip", (2.0, 0, 0), (0, 0, 0, 1))]), static=True)
    buf.add(TFMessage(transforms=[_tf(10, "world", "arm", (0, 0, 0), (0, 0, 0, 1))]), static=False)
    buf.add(TFMessage(transforms=[_tf(20, "world", "arm", (0, 0, 0), (0, 0, s, c))]), static=False)
    np.testing.assert_allclose(buf.lookup("map", "tip", 10)[:3, 3], [3.0, 0, 0], atol=1e-12)
    np.testing.assert_allclose(buf.lookup("map", "tip", 20)[:3, 3], [1.0, 2.0, 0], atol=1e-12)
    mid = buf.lookup("world", "tip", 15)[:3, 3]                  # between the two stamps
    assert np.linalg.norm(mid) == pytest.approx(2.0) and 0 < mid[1] < 2
    np.testing.assert_allclose(buf.lookup("tip", "map", 10), np.linalg.inv(buf.lookup("map", "tip", 10)))
    for frame, stamp, words in [("tip", 25, "no transform around"), ("elsewhere", 10, "does not exist"),
                                ("tip", 5, "no transform around")]:
        with pytest.raises(LookupError, match=words):
            buf.lookup("map", frame, stamp)
    buf.add(TFMessage(transforms=[_tf(0, "other_root", "lonely", (0, 0, 0), (0, 0, 0, 1))]), static=True)
    with pytest.raises(LookupError, match="not connected"):
        buf.lookup("map", "lonely", 10)


@pytest.mark.ros
def test_every_published_frame_id_resolves_in_tf(tmp_path):
    config = yaml.safe_load((CONFIG / "four_bar.yaml").read_text())
    config["mechanism"]["urdf"] = str(CONFIG.parent / "urdf" / "four_bar.urdf")
    config["sensors"]["gyros"] = yaml.safe_load((CONFIG / "four_bar_gyro.yaml").read_text())["sensors"]["gyros"]
    path = tmp_path / "four_bar_with_gyro.yaml"
    path.write_text(yaml.safe_dump(config))
    mech = load_mechanism(path)
    with HilRun(path, tmp_path / "run", duration=6.0, estimator={"world_frame": "map"}) as run:
        outputs = {t: k for t, k in output_topics(mech, run.names).items()
                   if t not in ("/tf", "/tf_static", "/diagnostics") and "Float64MultiArray" not in k}
        sensors = {resolve_topic(t): k for t, k in sensor_topics(mech).items()}
        run.wait_for_estimates(timeout=90)
        # joins after the estimator published /tf_static: it must still get the static frames
        with TfRecorder(run.domain_id, {**outputs, **sensors}) as tf:
            run.wait_for_rig(timeout=120)
            run.wait_caught_up(timeout=120)
            frames = tf.frame_ids()
            # the /tf stamps this recorder saw (it joined late: the monitor's /tf started earlier,
            # and its /tf subscription may be matched later than its other topics')
            tf_stamps = tf.tf_stamps()
            # > 1 s of keyframes: the recorder may be matched seconds late on a loaded machine
            assert len(tf_stamps) > 200, (len(tf_stamps), run.logs_tail())
            first, last = tf_stamps[len(tf_stamps) // 10], tf_stamps[-len(tf_stamps) // 10]
            checked, failures = {}, []
            for topic, by_frame in frames.items():
                for frame_id, stamps in by_frame.items():
                    if not frame_id:                        # JointState: no frame
                        continue
                    inside = [s for s in stamps if first <= s <= last]
                    assert inside, (topic, frame_id)
                    stamp = inside[len(inside) // 2]
                    try:
                        checked[frame_id] = tf.lookup("map", frame_id, stamp)
                    except LookupError as exc:
                        failures.append(f"{topic}: {frame_id} at {stamp}: {exc}")
            for frame in ("coupler_tip", "rocker_tip", "coupler", "coupler_imu", "motion_plane", "world"):
                checked.setdefault(frame, tf.lookup("map", frame, tf_stamps[len(tf_stamps) // 2]))
            mid = tf_stamps[len(tf_stamps) // 2]
            tips = [tf.lookup("map", f, mid)[:3, 3] for f in ("coupler_tip", "rocker_tip")]
            gyro = tf.lookup("coupler", "coupler_imu", mid)
    assert not failures, "\n".join(failures)
    published = {f for by_frame in frames.values() for f in by_frame if f}
    assert {"rocker_tip", "coupler_imu"} <= published, frames.keys()
    assert np.linalg.norm(tips[0] - tips[1]) < 1e-3, tips
    np.testing.assert_allclose(gyro, np.eye(4), atol=1e-9)
    # REP 103: the linkage's plane is the world's x-z plane; every frame of it at y = 0
    assert all(abs(M[1, 3]) < 1e-9 for M in checked.values()), {f: M[:3, 3] for f, M in checked.items()}
