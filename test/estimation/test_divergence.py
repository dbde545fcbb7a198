"""The rolling divergence test (mbfg_ros.estimation.divergence) on synthetic residuals, and the
judge that tells a lost estimate from a strained fit."""
from __future__ import annotations

import numpy as np

from mbfg_ros.estimation.divergence import LIKELY_CAUSE, LOST, RECENT, STRAINED, DivergenceMonitor, LossJudge


def test_gaussian_residuals_are_not_flagged():
    rng = np.random.default_rng(1)
    mon = DivergenceMonitor()
    for k in range(2000):                   # 10 s at 200 keyframes/s, 5 readings each
        mon.add("enc", k * 0.005, np.abs(rng.standard_normal(5)))
    assert not mon.periods and not mon.failing
    assert 0.8 < mon.rms["enc"] < 1.2


def test_a_run_of_large_residuals_is_one_period_with_its_peak():
    mon = DivergenceMonitor(window=0.5, limit=5.0)
    for k in range(600):
        t = k * 0.005
        r = 20.0 if 1.0 <= t < 1.5 else 1.0
        mon.add("gyro", t, [r, r])
        if t == 1.0 + 0.005 * 3:
            assert "gyro" in mon.failing             # flagged within a few keyframes
            assert "gyro" in mon.strained and not mon.diverged   # a strained fit until judged lost
    assert len(mon.periods) == 1 and mon.period_count == 1
    p = mon.periods[0]
    assert 1.0 <= p.start < 1.05 and p.end is not None and 1.5 < p.end <= 2.0
    assert 19.0 < p.peak <= 20.0 and p.verdict == STRAINED
    assert not mon.failing
    assert mon.diverged_at(np.array([0.5, 1.2, 2.5]), STRAINED).tolist() == [False, True, False]
    assert not mon.diverged_at(np.array([0.5, 1.2, 2.5])).any()      # (lost periods only)


def test_restart_closes_an_open_period():
    mon = DivergenceMonitor()
    for k in range(20):
        mon.add("enc", k * 0.01, [50.0])
    assert mon.failing
    mon.restart()
    assert not mon.failing and mon.periods[0].end == 0.19 and mon.periods[0].verdict == STRAINED
    for k in range(20, 40):
        mon.add("enc", k * 0.01, [50.0])
    mon.restart(0.5, lost="re-initialised")
    assert mon.periods[1].verdict == LOST and mon.periods[1].cause == "re-initialised"


def _judged(residuals: dict, seconds: float, encoders: dict | None = None, note: str = "",
            levels_from: float = 0.0) -> DivergenceMonitor:
    """A monitor fed ``residuals`` {sensor: sigma} every 5 ms for ``seconds`` and judged after
    each, the encoders' residual levels known from ``levels_from`` s on."""
    mon = DivergenceMonitor(window=0.5, limit=5.0)
    judge = LossJudge(encoders or {})
    for k in range(int(seconds / 0.005)):
        for name, r in residuals.items():
            mon.add(name, k * 0.005, [r])
        judge.judge(mon, k * 0.005, lambda: note, encoder_levels=k * 0.005 >= levels_from)
    return mon


def test_one_sensor_fitted_worse_while_another_agrees_is_strained_with_its_likely_cause():
    mon = _judged({"rod_gyro": 8.0, "crank_encoder": 1.0}, 2.0, {"crank_encoder": 1e-3})
    p = mon.open["rod_gyro"]
    assert p.verdict == STRAINED and p.cause == LIKELY_CAUSE and "mbfg tune" in p.cause
    assert mon.strained and not mon.diverged


def test_a_lost_estimate_is_judged_lost():
    # every sensor disagrees for a whole window
    mon = _judged({"rod_gyro": 8.0, "crank_encoder": 8.0}, 1.0, {"crank_encoder": 1e-3})
    assert all(p.lost for p in mon.open.values()) and "no sensor agrees" in mon.open["rod_gyro"].cause
    # a whole-turn slip against an angle encoder (6.3 rad at 1 mrad noise), at once
    mon = _judged({"crank_encoder": 6300.0, "rod_gyro": 1.0}, 0.05, {"crank_encoder": 1e-3})
    assert mon.open["crank_encoder"].lost and "whole-turn" in mon.open["crank_encoder"].cause
    # a lone sensor far beyond the limit for a whole window, but not before the window is full
    assert not _judged({"rod_gyro": 30.0}, 0.3).open["rod_gyro"].lost
    mon = _judged({"rod_gyro": 30.0}, 0.7)
    assert mon.open["rod_gyro"].lost and "20 sigma" in mon.open["rod_gyro"].cause and "only sensor" in mon.open["rod_gyro"].cause
    # a lone sensor at 8 sigma for long is strained, not lost
    assert not _judged({"rod_gyro": 8.0}, 3.0).open["rod_gyro"].lost
    # far beyond the limit while another sensor agrees: strained (the estimate holds)
    assert not _judged({"rod_gyro": 30.0, "crank_encoder": 1.0}, 1.0, {"crank_encoder": 1e-3}).open["rod_gyro"].lost


def test_encoders_are_judged_lost_only_by_a_slip_until_their_levels_are_known():
    """While the model-uncertainty search may still find that the encoders' noises are wrong
    (a real rig's encoders at 8 sigma of their datasheet noise from the start), two encoders
    failing together are strained; once the levels are known, lost. A slip is lost at once."""
    both = {"shoulder_encoder": 8.0, "elbow_encoder": 8.0}
    angles = {"shoulder_encoder": 1e-4, "elbow_encoder": 1e-4}
    mon = _judged(both, 1.4, angles, levels_from=1.5)
    assert mon.open and not mon.diverged
    mon = _judged(both, 1.6, angles, levels_from=1.5)
    assert all(p.lost for p in mon.open.values())
    mon = _judged({"shoulder_encoder": 20000.0, "elbow_encoder": 1.0}, 0.05, angles, levels_from=1.5)
    assert mon.open["shoulder_encoder"].lost and "whole-turn" in mon.open["shoulder_encoder"].cause
    # a gyro is judged as before
    mon = _judged({"rod_gyro": 30.0}, 0.7, levels_from=1.5)
    assert mon.open["rod_gyro"].lost


def test_a_new_period_carries_the_keyframe_rate_note():
    note = "encoders show 72 rad/s: set mechanism.top_speed: 72 (keyframe_rate auto) or keyframe_rate: 400"
    mon = _judged({"rod_gyro": 8.0}, 1.0, note=note)
    assert mon.open["rod_gyro"].note == note
    assert mon.open["rod_gyro"].as_dict()["note"] == note


def test_a_calibrated_floor_judges_the_level_a_sensor_showed():
    """After calibrate (the model-uncertainty search), a sensor whose residuals sat at 4 sigma
    from the start is judged against 4; five times that still fails; the floor is bounded."""
    mon = DivergenceMonitor(window=0.5, limit=5.0, settle=0.0)
    t = np.arange(0.0, 2.0, 0.002)
    for s in t[:250]:
        mon.add("enc", s, [4.0])
        mon.add("far", s, [40.0])
    mon.calibrate(["enc", "far"], 10.0)
    assert mon.floor == {"enc": 4.0, "far": 10.0}
    mon.restart()
    for s in t[250:500]:
        mon.add("enc", s, [4.0])
    assert "enc" not in mon.open and mon.rms["enc"] == 1.0
    for s in t[500:]:
        mon.add("enc", s, [21.0])
    assert "enc" in mon.open


def test_a_burst_is_flagged_until_the_sensor_agrees_again():
    """A 0.2 s burst at 20 sigma (a real rig's jerk) is flagged from its start until the recent
    residuals (RECENT s) are back within the limit, not for the window after it; a second burst
    while the window still holds the first opens a period of its own."""
    mon = DivergenceMonitor(window=0.5, limit=5.0)
    for k in range(400):
        t = k * 0.005
        mon.add("enc", t, [20.0 if 0.5 <= t < 0.7 or 1.0 <= t < 1.2 else 1.0])
    assert len(mon.periods) == 2 and not mon.open
    for p, (a, b) in zip(mon.periods, ((0.5, 0.7), (1.0, 1.2))):
        assert a <= p.start < a + 0.05 and b < p.end <= b + RECENT + 0.01, p.as_dict()


def test_every_sensor_must_fail_for_a_whole_window_for_a_lost_verdict():
    """Two encoders (their levels known): one failing for a whole window while the other has just
    started to is strained; both failing a whole window at once is lost. Bursts with a moment of
    agreement between them (a rig whipping its elbow, fitted again between the whips) are not."""
    angles = {"shoulder_encoder": 1e-4, "elbow_encoder": 1e-4}

    def run(shoulder, elbow, seconds: float) -> DivergenceMonitor:
        mon, judge = DivergenceMonitor(window=0.5, limit=5.0), LossJudge(angles)
        for k in range(int(seconds / 0.005)):
            t = k * 0.005
            mon.add("shoulder_encoder", t, [shoulder(t)])
            mon.add("elbow_encoder", t, [elbow(t)])
            judge.judge(mon, t, lambda: "")
        return mon
    mon = run(lambda t: 8.0, lambda t: 8.0 if t >= 0.3 else 1.0, 0.7)
    assert set(mon.open) == {"shoulder_encoder", "elbow_encoder"} and not mon.diverged
    mon = run(lambda t: 8.0, lambda t: 8.0 if t >= 0.3 else 1.0, 1.1)       # the elbow fails from 0.5 s
    assert all(p.lost for p in mon.open.values()) and "no sensor agrees" in mon.open["elbow_encoder"].cause

    def whips(t: float) -> float:               # 0.35 s whips, 0.25 s fitted between them
        return 1.0 if 0.25 <= t % 0.6 < 0.5 else 30.0
    mon = run(whips, whips, 3.0)
    assert mon.period_count >= 8 and not any(p.lost for p in mon.periods), [p.as_dict() for p in mon.periods]
