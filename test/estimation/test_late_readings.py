"""A reading that arrives after its keyframe closed is used late, also when its stamp is a
rounding error past the closed keyframe's time (keyframe_of's tolerance puts it in that keyframe):
queued instead, it waited in a slot already taken and stayed pending for ever."""
from __future__ import annotations

from support.replay_bags import simulated_messages
from mbfg_ros.estimation.estimator import Estimator
from mbfg_ros.io.sensor_inputs import InputRouter
from mbfg_ros.io.topic_names import resolve_topic


def test_a_stamp_a_rounding_error_past_a_closed_keyframe_is_late_not_lost(four_bar):
    router = InputRouter(four_bar, namespace="/")
    est = Estimator(four_bar)
    epoch = None
    cell = None
    for m in simulated_messages("four_bar", 0.5):
        topic = resolve_topic(m.topic)
        for r in router.decode(topic, m.msgtype, m.msg):
            epoch = epoch if epoch is not None else (r.stamp_ns // 10 ** 9) * 10 ** 9
            est.add_sample(r.sensor, (r.stamp_ns - epoch) * 1e-9, r.value)
            if r.sensor == "rocker_pin_load":
                cell = r.value
    sch = est.schedule
    assert sch.closed > 10
    stamp = sch.t_closed + 1e-12                       # keyframe_of: the closed keyframe
    assert sch.keyframe_of(stamp) == sch.closed
    before = est.counts()["rocker_pin_load"].late
    assert est.add_sample("rocker_pin_load", stamp, cell) == "late"
    est.flush()
    c = est.counts()["rocker_pin_load"]
    assert c.late == before + 1 and c.pending == 0
    assert c.received == c.used + c.late + c.too_old + c.rejected + c.discarded + c.pending
