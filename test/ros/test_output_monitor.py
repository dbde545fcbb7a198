"""The demo's monitor: the estimates, truth and forces taken as bytes and decoded in bulk are
the messages that were published (real DDS, a private domain)."""
from __future__ import annotations

import time

import numpy as np
import pytest

from mbfg_ros.io import messages as msgs
from mbfg_ros.ros.background_node import BackgroundNode
from mbfg_ros.ros.message_classes import message_class
from mbfg_ros.ros.output_monitor import MonitorThread, RELIABLE
from mbfg_ros.ros.processes import fresh_domain_id

pytestmark = pytest.mark.ros

EPOCH = 1_700_000_000_000_000_000


def test_the_monitor_records_what_was_published(four_bar):
    domain = fresh_domain_id()
    J = list(four_bar.joint_names)
    est_js, truth_js = "/mbfg_estimator/joint_states", "/truth/joint_states"
    est_f, truth_f = "/mbfg_estimator/forces/coupler_rocker", "/truth/forces/coupler_rocker"
    rng = np.random.default_rng(0)
    q, v, e = rng.standard_normal((3, 60, len(J)))
    force = rng.standard_normal((60, 3))
    with MonitorThread(four_bar, domain, outputs=("joint_states", "forces/coupler_rocker")) as m:
        talker = BackgroundNode(domain, "talker").start()
        try:
            node = talker.node
            pubs = {t: node.create_publisher(message_class(k), t, RELIABLE)
                    for t, k in ((est_js, msgs.JOINT_STATE), (truth_js, msgs.JOINT_STATE),
                                 (est_f, msgs.WRENCH_STAMPED), (truth_f, msgs.WRENCH_STAMPED))}
            end = time.monotonic() + 60.0
            while any(p.get_subscription_count() < 1 for p in pubs.values()) and time.monotonic() < end:
                time.sleep(0.05)
            sent = time.time_ns()
            for k in range(60):
                stamp = EPOCH + k * 5_000_000
                # the last estimate has another layout (a frame id): decoded by a second layout
                est = msgs.joint_state(stamp, J, q[k], v[k], e[k], frame_id="base" if k == 59 else "")
                pubs[est_js].publish(bytes(msgs.serialize(est)))
                pubs[truth_js].publish(bytes(msgs.serialize(msgs.joint_state(stamp, J, q[k], v[k], e[k]))))
                for topic in (est_f, truth_f):
                    pubs[topic].publish(bytes(msgs.serialize(msgs.wrench_stamped(stamp, "rocker_tip", force[k],
                                                                                 -force[k]))))
            assert m.wait_for(lambda mon: len(mon.estimates) == len(mon.truth) == 60
                              and all(len(f) == 60 for f in mon.forces.values()), 60.0), \
                (len(m.estimates), len(m.truth))
        finally:
            talker.close()
        stamps = [s for s, *_ in m.estimates]
        assert stamps == [EPOCH + k * 5_000_000 for k in range(60)]
        np.testing.assert_array_equal([x[2] for x in m.estimates], q)
        np.testing.assert_array_equal([x[3] for x in m.truth], e)
        assert all(sent <= x[1] <= time.time_ns() for x in m.estimates)      # when DDS received it
        est_force = m.forces[("estimate", "coupler_rocker")]
        np.testing.assert_array_equal([f for _, f, _ in est_force], force)
        np.testing.assert_array_equal([t for *_, t in m.forces[("truth", "coupler_rocker")]], -force)
        rec = m.topics[est_js]
        assert rec.count == 60 and rec.names == {tuple(J)} and rec.frame_ids == {"", "base"}
        assert m.topics[est_f].frame_ids == {"rocker_tip"}
        assert m.tracking()[J[0]]["q_rmse"] == 0.0
        assert m.truth_latency_ms().size == 60
