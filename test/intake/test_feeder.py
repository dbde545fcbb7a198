"""Feeder: readings -> time rules -> stamp order -> the estimator, every reading accounted for
(one path for the node and mbfg replay). A real estimator on simulated four-bar readings."""
from __future__ import annotations

import pytest

from support.replay_bags import simulated_messages
from mbfg_ros.estimation.estimator import Estimator
from mbfg_ros.intake.feeder import Feeder
from mbfg_ros.intake.stamp_order import StampOrder, topic_periods_ns
from mbfg_ros.io.sensor_inputs import InputRouter
from mbfg_ros.io.topic_names import resolve_topic


@pytest.fixture(scope="module")
def readings(four_bar) -> list[tuple[str, str, int, object]]:
    """1 s of the four-bar's readings (encoder 1 kHz, load cell 200 Hz) in stamp order."""
    router = InputRouter(four_bar, namespace="/")
    out = []
    for m in simulated_messages("four_bar", 1.0):
        topic = resolve_topic(m.topic)
        out += [(topic, r.sensor, r.stamp_ns, r.value) for r in router.decode(topic, m.msgtype, m.msg)]
    return out


def feeder_of(mech, **hooks) -> Feeder:
    periods = topic_periods_ns(mech, {"/encoders": ["crank_encoder"], "/rocker_pin/wrench": ["rocker_pin_load"]})
    return Feeder(Estimator(mech), StampOrder(periods), **hooks)


def push_all(f: Feeder, readings) -> None:
    """Each reading as it would arrive: at its stamp (the stamp order's clock), released at once."""
    for topic, sensor, stamp, value in readings:
        f.push(topic, sensor, stamp, value, stamp)
        f.feed(f.release(stamp))


def run(mech, readings, **hooks) -> Feeder:
    feeder = feeder_of(mech, **hooks)
    push_all(feeder, readings)
    feeder.feed(feeder.drain())
    feeder.estimator.flush()
    return feeder


def test_a_steady_stream_is_fed_whole(four_bar, readings):
    seen = []
    f = run(four_bar, readings, on_sample=lambda sensor, t, value, status: seen.append((sensor, t, status)))
    assert f.epoch_ns == (readings[0][2] // 10 ** 9) * 10 ** 9
    assert len(seen) == len(readings) and seen[0][1] == f.seconds(readings[0][2])
    assert sum(f.statuses.values()) == len(readings) == 1200
    assert f.unaccounted(len(readings)) == 0 and f.jumps == {"backwards": 0, "forwards": 0}
    figures = f.sensor_figures()
    assert figures["crank_encoder"].arrived == 1000 and figures["rocker_pin_load"].arrived == 200
    assert figures["crank_encoder"].last_stamp == pytest.approx(f.seconds(readings[-1][2]), abs=0.01)
    assert f.values()["samples rejected_stamp"] == 0


def test_a_loop_resets_the_estimator_between_the_hooks(four_bar, readings):
    events = []
    f = feeder_of(four_bar)
    f.before_reset = lambda e: events.append(("before", e.direction, e.by_rules, f.estimator.health.resets,
                                              len(f.order)))
    f.after_reset = lambda e: events.append(("after", e.direction, e.by_rules, f.estimator.health.resets))
    push_all(f, readings)
    for topic, sensor, stamp, value in readings:        # the loop arrives 2 s later
        f.push(topic, sensor, stamp, value, stamp + 2 * 10 ** 9)
        f.feed(f.release(stamp + 2 * 10 ** 9))
    # the old time's readings were fed before the reset (the stamp order was empty then)
    assert events == [("before", "backwards", True, 0, 0), ("after", "backwards", True, 1)]
    assert f.jumps["backwards"] == 1 and not f.fed_stamp.keys() - {"crank_encoder", "rocker_pin_load"}
    assert f.unaccounted(2 * len(readings)) == 0


def test_an_isolated_future_stamp_is_rejected_and_counted(four_bar, readings):
    bad = list(readings)
    topic, sensor, stamp, value = bad[500]
    bad[500] = (topic, sensor, stamp + 1000 * 10 ** 9, value)
    f = run(four_bar, bad)
    assert f.estimator.health.resets == 0 and f.jumps["forwards"] == 0
    assert f.values()["samples rejected_stamp"] == 1 and f.time_jumps.rejected == {topic: 1}
    assert f.unaccounted(len(bad)) == 0
    assert f.sensor_figures()[sensor].reasons["stamps out of line"] == 1


def test_pause_feeds_nothing_and_resume_restarts_the_estimator_and_the_time_line(four_bar, readings):
    """The managed node's deactivate, then activate 10 s later: nothing is fed while paused (the
    readings in hand are dropped and counted), then one reset, no time jump, every reading
    accounted for."""
    f = feeder_of(four_bar)
    push_all(f, readings[:600])
    topic, sensor, stamp, value = readings[600]
    f.push(topic, sensor, stamp, value, stamp)                       # held by the stamp order
    assert len(f.order) == 1
    keyframes = f.estimator.health.keyframes
    f.pause()
    push_all(f, readings[601:700])                                   # in hand when it paused
    assert f.estimator.health.keyframes == keyframes and len(f.order) == 1
    f.resume("activate")
    assert f.estimator.health.resets == 1 and len(f.order) == 0
    assert f.values()["samples dropped_while_paused"] == 100
    later = [(t, s, st + 10 * 10 ** 9, v) for t, s, st, v in readings[700:]]
    push_all(f, later)
    f.feed(f.drain())
    assert f.jumps == {"backwards": 0, "forwards": 0} and f.estimator.health.resets == 1
    assert f.unaccounted(len(readings)) == 0
