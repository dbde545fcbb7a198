"""The keyframe inbox: readings written at arrival into the parameter rows of their keyframes."""
from __future__ import annotations

import numpy as np
import pytest

from mbfg_ros.estimation.estimator import Estimator


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
