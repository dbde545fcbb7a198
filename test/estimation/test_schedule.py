"""The keyframe inbox: readings written at arrival into the parameter rows of their keyframes."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from conftest import mechanism
from support.replay_bags import simulated_messages
from mbfg_ros.estimation.estimator import Estimator
from mbfg_ros.estimation.schedule import DUE_JITTER_SIGMAS, DUE_SLACK, KeyframeSchedule
from mbfg_ros.estimation.sensor_streams import SensorStream
from mbfg_ros.io.sensor_inputs import InputRouter
from mbfg_ros.io.topic_names import resolve_topic


@pytest.fixture()
def est(four_bar):
    return Estimator(four_bar, freeze_gc=False)


def _slots(est, name):
    b = est.layout.block(name)
    V = b.view(est._p)
    return V[:est.gate.sensors[name].taken]


def test_each_keyframe_takes_its_readings_whatever_the_arrival_order(est):
    h = est.h
    rng = np.random.default_rng(0)
    stamps = np.arange(1, 200) * 1e-3
    order = np.argsort(stamps + rng.uniform(0, 0.004, stamps.size))    # out of order by < 4 ms
    sch = est.schedule
    sch.open(0.0)
    inbox, i = est.inbox, est.gate.sensors["crank_encoder"].slot
    for j in order:
        k = sch.keyframe_of(stamps[j])
        inbox.put(i, k, sch.closed, float(stamps[j]), float(stamps[j]), sch.fraction(float(stamps[j]), k))
    assert inbox.pending[i] == stamps.size
    seen = []
    for k in range(0, 41):
        extra = inbox.take(k, est._p, sch)
        V = _slots(est, "crank_encoder")
        t = sch.time(k - 1) + V[:, 0] * h
        np.testing.assert_allclose(t, V[:, 1], atol=1e-12)            # value = stamp here
        assert np.all((t > sch.time(k - 1) - 1e-12) & (t <= sch.time(k) + 1e-12))
        seen += list(t) + [st for _, st, _ in extra]
        sch.mark_closed(k)
    np.testing.assert_allclose(np.sort(seen), stamps, atol=1e-12)
    assert inbox.pending[i] == 0


def test_readings_beyond_the_slots_and_the_ring_are_spilled_not_lost(est):
    sch = est.schedule
    sch.open(0.0)
    inbox, i = est.inbox, est.gate.sensors["rocker_pin_load"].slot
    slots = est.layout.block("rocker_pin_load").slots
    for j in range(slots + 3):                                   # a burst into keyframe 1
        inbox.put(i, 1, sch.closed, 0.001 + j * 1e-4, float(j), sch.fraction(0.001 + j * 1e-4, 1))
    far = sch.keyframe_of(10.0)                                   # far beyond the ring
    inbox.put(i, far, sch.closed, 10.0, 5.0, sch.fraction(10.0, far))
    assert inbox.pending[i] == slots + 4
    inbox.take(0, est._p, sch)
    sch.mark_closed(0)
    extra = inbox.take(1, est._p, sch)
    assert est.measuring[i].taken == slots and len(extra) == 3
    drained = inbox.drain(sch)
    assert [st for _, st, _ in drained] == [10.0] and inbox.pending[i] == 0


def test_a_step_carries_each_sensors_current_innovation_scale(est):
    """The robust kernel judges readings against the sensor's recent innovations: the taken
    step's parameters hold each sensor's running mean |r| as it is when the step closes."""
    sch = est.schedule
    sch.open(0.0)
    s = est.gate.sensors["crank_encoder"]
    s.set_mean_abs(4.2)
    est.inbox.take(0, est._p, sch)
    assert est._p[est.layout.block("crank_encoder").mean_abs] == 4.2


def test_the_next_estimates_wait_for_the_newest_keyframe_of_the_next_update(est):
    assert est.next_estimate_stamp() is None                  # no run yet
    sch = est.schedule
    sch.open(0.0)
    assert est.next_estimate_stamp() == pytest.approx(sch.time(sch.closed + est.keyframes_per_update))
    est.keyframes_per_update = 3                              # three keyframes per ISAM2 update,
    est.group.append(None)                                    # one of them closed already
    assert est.next_estimate_stamp() == pytest.approx(sch.time(sch.closed + 2))
    est.group.clear()


def test_a_keyframe_waits_only_for_the_readings_that_fall_in_it():
    """A 200 Hz load cell holds back only the 400 Hz keyframes a reading of it falls in; an encoder
    whose next reading is due after the keyframe does not hold it; a command until it reports
    past; a stream's period from its stamps where shorter than the config's; a wider slack for
    jittery stamps."""
    enc = SensorStream("enc", "encoder", 0, 1, nominal_period=0.001)
    cell = SensorStream("cell", "load_cell", 0, 1, nominal_period=0.005)
    sch = KeyframeSchedule([enc, cell], 0.0025, 0.01)
    sch.restart(0)
    sch.open(0.0)
    enc.run_last = cell.run_last = sch.latest = 0.0
    sch.mark_closed(0)                                    # next: 2.5 ms
    assert not sch.next_ready()                           # the encoder's 1 and 2 ms readings are due
    enc.run_last = sch.latest = 0.002
    assert sch.next_ready()                               # its next (3 ms) and the cell's (5 ms) are not
    sch.mark_closed(1)                                    # next: 5 ms
    enc.run_last = sch.latest = 0.0045                    # (a 0.5 ms phase: its next is at 5.5 ms)
    assert not sch.next_ready()                           # the cell's 5 ms reading is due
    cell.run_last = 0.005 - DUE_SLACK * 0.005 + 1e-6      # stamped early, within the slack
    assert sch.next_ready()
    sch.latest = 0.005 + 0.01                             # sensor_wait past: closes whatever is due
    cell.run_last = 0.0
    assert sch.next_ready()
    cmd = SensorStream("command:j", "command", 0, 1, nominal_period=0.005)
    sch = KeyframeSchedule([enc, cmd], 0.0025, 0.01)
    sch.restart(0)
    sch.open(0.0)
    enc.run_last = cmd.run_last = sch.latest = 0.002
    sch.mark_closed(0)
    assert not sch.next_ready()                           # a command: until it reports past 2.5 ms
    slow = SensorStream("slow", "load_cell", 0, 1, nominal_period=0.005)   # really at 1 kHz
    for i in range(30):
        slow.stamps.add(i * 1e-3)
    jittery = SensorStream("jittery", "load_cell", 0, 1, stated_jitter=0.0005, nominal_period=0.005)
    sch = KeyframeSchedule([slow, jittery], 0.0025, 0.01)
    sch.mark_closed(0)
    assert slow.lead == pytest.approx((1 - DUE_SLACK) * 1e-3)
    assert jittery.lead == pytest.approx(0.005 - DUE_JITTER_SIGMAS * 0.0005)   # 4 sigmas > a quarter


def test_fast_crank_estimates_come_out_when_the_fast_sensors_allow():
    """Fed in stamp order, the fast crank's estimates (400 Hz keyframes; encoder 1 kHz, gyro 400
    Hz, load cell 200 Hz) come out as soon as their keyframe's readings are in: with two keyframes
    per ISAM2 update (the auto setting before) at most one keyframe period after their stamps (the
    first of a pair waits for the second; before, the load cell's next reading held every other
    keyframe back another period), with one (auto now) at once; every reading is used in its own
    step."""
    mech = mechanism("fast_crank")
    router = InputRouter(mech, namespace="/")
    messages = simulated_messages("fast_crank", 0.3)
    for per_update, longest in ((2, 1.0), (0, 0.0)):         # (0: auto, 1 at 400 Hz)
        cfg = dataclasses.replace(mech.config.estimator, keyframes_per_update=per_update)
        est = Estimator(mech, cfg, freeze_gc=False)
        assert est.keyframes_per_update == (per_update or 1)
        epoch, waits = None, []
        for m in messages:
            for r in router.decode(resolve_topic(m.topic), m.msgtype, m.msg):
                epoch = epoch if epoch is not None else (r.stamp_ns // 10 ** 9) * 10 ** 9
                t = (r.stamp_ns - epoch) * 1e-9
                est.add_sample(r.sensor, t, r.value)
                waits += [t - e.stamp for e in est.pop_estimates()]
        assert len(waits) > 80
        assert max(waits[8:]) <= longest * est.h + 1e-9      # (after the start-up's collection)
        est.flush()
        for c in est.counts().values():
            assert c.late == c.too_old == c.discarded == c.pending == 0 and c.used == c.received
