"""The model-uncertainty scale's grid, its innovation bookkeeping and the work its search adds
to each reading (mbfg_ros/estimation/model_uncertainty.py); its search on real recordings is
scored in test/replay/test_double_pendulum_recordings.py, and the simulated rigs of
tools/replay_fingerprint.py (true noises) do not start it."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from conftest import CONFIG, ROOT
from mbfg_ros.estimation.background_work import WorkShare
from mbfg_ros.estimation.estimator import Estimator
from mbfg_ros.estimation.model_uncertainty import CATCH_UP, SETTLE, InnovationSum, ModelUncertainty, candidate_scales
from mbfg_ros.model.config import ModelUncertaintyConfig
from mbfg_ros.model.mechanism import load_mechanism


def test_the_grid_spans_the_bounds_by_half_decades():
    got = candidate_scales(ModelUncertaintyConfig())
    assert got == pytest.approx([1.0, 10 ** -0.5, 0.1, 10 ** -1.5, 0.01])
    got = candidate_scales(ModelUncertaintyConfig(min=0.05, max=2.0))
    assert got[0] == 2.0 and got[-1] == 0.05 and all(a / b <= math.sqrt(10) * 1.0001 for a, b in zip(got, got[1:]))


def test_innovation_sum_is_a_mean():
    s = InnovationSum()
    assert math.isnan(s.mean)
    s.add(3.0, 2)
    s.add(1.0, 2)
    assert s.mean == 1.0


class CountingEstimator(Estimator):
    """An estimator whose candidates (``model_scale`` fixed: no search of their own) count the
    readings they take."""
    taken = 0

    def take_sample(self, sensor, stamp, value):
        if self.uncertainty is None:
            CountingEstimator.taken += 1
        return super().take_sample(sensor, stamp, value)


def test_the_search_takes_a_bounded_share_of_the_buffer_per_reading():
    """The real sys_id fixture's encoders (500 Hz each) start the search 1 s in: each reading the
    estimator takes, the candidates take CATCH_UP readings each at most in all (no replay of the
    whole first second at once), all catch up within SETTLE / (CATCH_UP - 1) s of data plus a
    reading, the estimator's scale meanwhile one of those that have, and it holds a scale after
    ``seconds``."""
    mech = load_mechanism(CONFIG / "double_pendulum.yaml")
    cfg = dataclasses.replace(mech.config.estimator,
                              model_uncertainty=ModelUncertaintyConfig(seconds=1.5))
    rows = _sys_id_rows(2.0)
    est = CountingEstimator(mech, cfg, freeze_gc=False)
    mu, n = est.uncertainty, len(candidate_scales(cfg.model_uncertainty))
    per_reading, caught_up, searching_since, held = [], None, None, None
    for t, q1, q2 in rows:
        for sensor, q in (("shoulder_encoder", q1), ("elbow_encoder", q2)):
            before = CountingEstimator.taken
            est.add_sample(sensor, t, [q])
            per_reading.append(CountingEstimator.taken - before)
            if mu.state == "held" and held is None:
                held = (t, len(per_reading))
            if mu.state == "searching" and searching_since is None:
                searching_since = t
            if searching_since is not None and caught_up is None:
                if mu.buffer:     # the scale in use: 1, or one of a candidate that has caught up
                    ready = {c for (c, _), k in zip(mu.candidates, mu.taken) if k == len(mu.buffer)}
                    assert est.model_scale in ready | {1.0}
                else:
                    caught_up = t
    assert searching_since == pytest.approx(SETTLE, abs=0.01) and mu.searched
    assert max(per_reading) == CATCH_UP * n
    assert caught_up - searching_since <= SETTLE / (CATCH_UP - 1) + 0.01
    # held at `seconds`, every reading up to then taken by every candidate once
    assert held[0] == pytest.approx(1.5, abs=0.01) and CountingEstimator.taken == n * held[1]
    assert not mu.candidates and est.model_scale in candidate_scales(cfg.model_uncertainty)


def _sys_id_rows(until: float) -> np.ndarray:
    """(t, q1, q2) rows of the sys_id fixture (a real run of the DFKI double pendulum) up to
    ``until`` s."""
    rows = np.loadtxt(ROOT / "test/fixtures/double_pendulum/sys_id_trajectory_00_0-3.5s.csv",
                      delimiter=",", skiprows=1, usecols=(0, 1, 2))
    return rows[rows[:, 0] <= until]


def _sys_id_readings(until: float):
    return [(sensor, t, q) for t, q1, q2 in _sys_id_rows(until)
            for sensor, q in (("shoulder_encoder", q1), ("elbow_encoder", q2))]


def _rest_then_sys_id(rest: float, until: float) -> np.ndarray:
    """(t, q1, q2) rows: the sys_id fixture's first positions held for ``rest`` s at its rate, then
    the fixture up to ``until`` s of it."""
    rows = _sys_id_rows(until)
    t_still = np.arange(0.0, rest, float(np.median(np.diff(rows[:, 0]))))
    still = np.column_stack([t_still, np.full(t_still.size, rows[0, 1]), np.full(t_still.size, rows[0, 2])])
    return np.vstack([still, rows + [rest, 0.0, 0.0]])


def test_in_the_background_the_search_works_only_in_spare_time_and_holds_the_same_scale():
    """A live node's search (``background``): no candidate takes a reading inside the
    estimator's; given spare time (and all of a core: ``background_share`` 1), the candidates
    work through the readings up to ``seconds`` (no later one is queued) and hold the scale the
    synchronous search holds."""
    mech = load_mechanism(CONFIG / "double_pendulum.yaml")
    cfg = dataclasses.replace(mech.config.estimator,
                              model_uncertainty=ModelUncertaintyConfig(seconds=1.5, background_share=1.0))
    readings = _sys_id_readings(2.0)
    sync = Estimator(mech, cfg, freeze_gc=False)
    for sensor, t, q in readings:
        sync.add_sample(sensor, t, [q])
    assert sync.uncertainty.state == "held"
    est = CountingEstimator(mech, cfg, freeze_gc=False)
    mu = est.uncertainty
    mu.background = True
    CountingEstimator.taken = 0
    for sensor, t, q in readings:
        est.add_sample(sensor, t, [q])
    assert mu.state == "searching" and CountingEstimator.taken == 0 and est.model_scale == 1.0
    assert not mu.candidates and mu.buffer[-1][1] == pytest.approx(1.5, abs=0.01)  # none after seconds
    est.spare_time(0.0)                                               # no time spare: no work
    assert CountingEstimator.taken == 0 and mu.state == "searching"
    est.spare_time(math.inf)
    assert mu.state == "held" and est.model_scale == sync.model_scale


class FakeClock:
    """A clock the test moves: the search's wall and CPU clock at once, so that its budget is
    judged on costs the test sets, not on how fast (or how busy) the machine is."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class PricedEstimator(CountingEstimator):
    """A counting estimator whose candidates' readings cost READING s on ``clock``."""
    clock: FakeClock | None = None
    READING = 1e-4

    def take_sample(self, sensor, stamp, value):
        if self.uncertainty is None and PricedEstimator.clock is not None:
            PricedEstimator.clock.now += self.READING
        return super().take_sample(sensor, stamp, value)


def test_in_the_background_the_search_takes_at_most_its_share_of_a_core():
    """Ticks 4 ms apart, each leaving its whole period spare, for 0.6 s on an injected clock (a
    candidate's reading costs 0.1 ms, building one 1.5 ms): the search works in at most
    ``background_share`` of that time (plus the bucket's saved-up credit and one piece), but
    does work; with all of a core it works more. The budget's logic, not the machine's speed."""
    mech = load_mechanism(CONFIG / "double_pendulum.yaml")
    readings = _sys_id_readings(1.6)
    build = 1.5e-3

    def run(share: float) -> tuple[float, int]:
        cfg = dataclasses.replace(mech.config.estimator, model_uncertainty=ModelUncertaintyConfig(
            seconds=1.5, background_share=share))
        est = PricedEstimator(mech, cfg, freeze_gc=False)
        mu = est.uncertainty
        mu.background = True
        clock = FakeClock()
        mu.clock = mu.cpu_clock = clock
        make = mu.make_candidate

        def priced_candidate(scale):
            clock.now += build
            return make(scale)
        mu.make_candidate = priced_candidate
        for sensor, t, q in readings:
            est.add_sample(sensor, t, [q])
        CountingEstimator.taken = 0
        PricedEstimator.clock = clock
        try:
            inside = 0.0
            while clock.now < 0.6:
                deadline = clock.now + 0.004
                t0 = clock.now
                est.spare_time(deadline)
                inside += clock.now - t0
                clock.now = max(clock.now, deadline)
        finally:
            PricedEstimator.clock = None
        assert mu.state == "searching"                    # (not through: the bound is the share's)
        return inside / clock.now, CountingEstimator.taken

    used, taken = run(0.1)
    assert 0 < used <= 0.1 + (0.1 * WorkShare.WINDOW + build) / 0.6 and taken > 0
    used_all, taken_all = run(1.0)
    assert used_all > 0.5 and taken_all > 5 * taken


def test_may_close_foretells_every_reading_that_closes_a_keyframe():
    """:meth:`Estimator.may_close` (the background search's costly readings): every reading that
    closes a keyframe was foretold, and it changes nothing (the same estimates as without it)."""
    mech = load_mechanism(CONFIG / "double_pendulum.yaml")
    readings = _sys_id_readings(0.5)
    plain, est = Estimator(mech, freeze_gc=False), Estimator(mech, freeze_gc=False)
    foretold = closing = 0
    for sensor, t, q in readings:
        plain.add_sample(sensor, t, [q])
        may = est.may_close(sensor, t)
        before = est.schedule.closed
        est.add_sample(sensor, t, [q])
        if est.schedule.closed != before:
            closing += 1
            assert may
        foretold += may
    assert closing > 50 and foretold < 3 * closing
    a, b = plain.pop_estimates(), est.pop_estimates()
    assert len(a) == len(b) and all(np.array_equal(x.q, y.q) and np.array_equal(x.v, y.v) for x, y in zip(a, b))


def test_may_close_foretells_the_closing_readings_of_a_multi_rate_rig():
    """The fast crank (encoder 1 kHz, gyro 400 Hz, load cell 200 Hz, 400 Hz keyframes: a keyframe
    waits only for the readings due in it): every reading that closes a keyframe was foretold."""
    from conftest import mechanism
    from support.replay_bags import simulated_messages
    from mbfg_ros.io.sensor_inputs import InputRouter
    from mbfg_ros.io.topic_names import resolve_topic
    mech = mechanism("fast_crank")
    router = InputRouter(mech, namespace="/")
    est = Estimator(mech, freeze_gc=False)
    epoch, closing = None, 0
    for m in simulated_messages("fast_crank", 0.3):
        for r in router.decode(resolve_topic(m.topic), m.msgtype, m.msg):
            epoch = epoch if epoch is not None else (r.stamp_ns // 10 ** 9) * 10 ** 9
            t = (r.stamp_ns - epoch) * 1e-9
            may = est.may_close(r.sensor, t)
            before = est.schedule.closed
            est.add_sample(r.sensor, t, r.value)
            if est.schedule.closed != before:
                closing += 1
                assert may, (r.sensor, t)
    assert closing > 50


def test_a_reset_starts_a_search_not_over_yet_again_instead_of_bridging_the_gap():
    """A reset (a time jump 20 s on) while the candidates search: they are dropped and the new run
    is watched again, so no candidate integrates across the gap."""
    mech = load_mechanism(CONFIG / "double_pendulum.yaml")
    est = CountingEstimator(mech, mech.config.estimator, freeze_gc=False)
    readings = _sys_id_readings(1.3)
    for sensor, t, q in readings:
        est.add_sample(sensor, t, [q])
    assert est.uncertainty.state == "searching"
    est.reset("time jump")
    CountingEstimator.taken = 0
    for sensor, t, q in readings[:50]:
        est.add_sample(sensor, t + 20.0, [q])
    assert est.uncertainty.state == "watching" and CountingEstimator.taken == 0


@pytest.mark.parametrize("trigger, searched", [(100.0, False), (0.0, True)])
def test_the_trigger_is_the_configs(trigger, searched):
    """``model_uncertainty.trigger``: the sys_id fixture's encoders (1.7-5.9 sigma 1 s in) start
    no search below a trigger of 100 sigmas; 0 starts it whatever the innovations."""
    mech = load_mechanism(CONFIG / "double_pendulum.yaml")
    cfg = dataclasses.replace(mech.config.estimator,
                              model_uncertainty=ModelUncertaintyConfig(seconds=1.2, trigger=trigger))
    est = Estimator(mech, cfg, freeze_gc=False)
    for t, q1, q2 in _sys_id_rows(SETTLE + 0.05):
        est.add_sample("shoulder_encoder", t, [q1])
        est.add_sample("elbow_encoder", t, [q2])
    assert est.uncertainty.searched is searched
    assert est.uncertainty.state == ("searching" if searched else "quiet")


def test_a_rig_started_at_rest_searches_once_it_moves():
    """A rig at rest for its first 1.5 s (the sys_id fixture's first positions repeated at its
    rate, then the fixture): 1 s in its encoders fit their noise, so no search starts and the
    scale stays 1 ("quiet"); once the motion shows the model's error the trigger, judged on, starts
    the search, from the readings of the last SETTLE s, and it holds a scale by ``seconds`` after
    that."""
    mech = load_mechanism(CONFIG / "double_pendulum.yaml")
    cfg = dataclasses.replace(mech.config.estimator, model_uncertainty=ModelUncertaintyConfig(seconds=2.0))
    rest = 1.5
    rows = _rest_then_sys_id(rest, 3.0)
    dt = float(np.median(np.diff(rows[:, 0])))
    est = Estimator(mech, cfg, freeze_gc=False)
    mu = est.uncertainty
    for t, q1, q2 in rows:
        est.add_sample("shoulder_encoder", t, [q1])
        est.add_sample("elbow_encoder", t, [q2])
        if t < rest:
            assert not mu.searched and est.model_scale == 1.0
            if t > SETTLE + 0.1:
                assert mu.state == "quiet" and len(mu.buffer) <= (SETTLE + 0.06) / dt * 2   # the last second
    assert mu.searched and mu.state == "held"
    assert rest - SETTLE <= mu.t_first < rest + 1.0          # searched from the motion's start
    assert est.model_scale < 1.0


def test_a_rig_without_encoders_holds_scale_one_at_settle():
    """Only encoders start a search (trigger above 0), so a gyro-only rig is never left armed:
    scale 1 held SETTLE s in, nothing buffered after that."""
    mu = ModelUncertainty(ModelUncertaintyConfig(), make_candidate=None, encoders=False)
    t = 0.0
    while t < SETTLE + 0.01:
        mu.add("rod_gyro", t, [0.0, 0.0, 1.0 + t], [])
        t += 0.002
    assert mu.state == "held" and not mu.active and not mu.buffer and not mu.searched


def test_in_the_background_a_rig_started_at_rest_searches_in_spare_time_once_it_moves():
    """The live node's path: quiet at rest, the search started by the motion takes no reading
    inside the estimator's, and given spare time it holds the scale the synchronous search holds."""
    mech = load_mechanism(CONFIG / "double_pendulum.yaml")
    cfg = dataclasses.replace(mech.config.estimator,
                              model_uncertainty=ModelUncertaintyConfig(seconds=2.0, background_share=1.0))
    rows = _rest_then_sys_id(1.5, 3.0)
    sync = Estimator(mech, cfg, freeze_gc=False)
    for t, q1, q2 in rows:
        sync.add_sample("shoulder_encoder", t, [q1])
        sync.add_sample("elbow_encoder", t, [q2])
    est = CountingEstimator(mech, cfg, freeze_gc=False)
    mu = est.uncertainty
    mu.background = True
    CountingEstimator.taken = 0
    for t, q1, q2 in rows:
        est.add_sample("shoulder_encoder", t, [q1])
        est.add_sample("elbow_encoder", t, [q2])
    assert mu.searched and mu.state == "searching" and CountingEstimator.taken == 0
    est.spare_time(math.inf)
    assert mu.state == "held" and est.model_scale == sync.model_scale < 1.0
