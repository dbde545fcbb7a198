"""TimeJumps: the time-jump and lagging-sensor rules of the ROS node and of replay."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from mbfg_ros.intake.time_jumps import TimeJumps, lagging_limit

MS = 1_000_000


def at(ms: float) -> int:
    return int(round(ms * MS))


def steady(j: TimeJumps, until_ms: int, topics=(("/e", "enc", 1), ("/c", "cell", 5)), start_ms: int = 0):
    """Every topic at its period (ms) from start to until, interleaved; all must be ok."""
    for ms in range(start_ms, until_ms):
        for topic, sensor, period in topics:
            if ms % period == 0:
                assert j.check(topic, sensor, at(ms), (sensor, ms)) == "ok", (sensor, ms)


def test_steady_interleaved_stamps_are_ok_even_slightly_out_of_order():
    j = TimeJumps()
    verdicts = [j.check("/e", "enc", at(ms)) for ms in range(100)]
    verdicts += [j.check("/c", "cell", at(ms)) for ms in range(0, 100, 5)]     # late but in the era
    verdicts.append(j.check("/e", "enc", at(99 - 50)))                          # 50 ms back: jitter
    assert set(verdicts) == {"ok"} and not j.jumps and not j.stale and not j.rejected


def test_a_loop_is_a_jump_once_a_second_topic_confirms_it_and_nothing_is_lost():
    j = TimeJumps()
    steady(j, 3000)
    assert j.check("/e", "enc", at(0), ("enc", 0)) == "held"          # one reading: not yet
    assert j.held == 1 and not j.jumps
    assert j.check("/c", "cell", at(0), ("cell", 0)) == "jump"        # the cell went back too
    assert j.released() == [("enc", 0)] and j.released() == []        # fed before the cell's
    jump = j.jumps[0]
    assert (jump.direction, jump.from_ns, jump.to_ns, jump.sensor) == ("backwards", 2999 * MS, 0, "enc")
    assert "backwards by 2.999 s on enc" in jump.reason
    steady(j, 100, start_ms=1)                                         # the new era goes on
    assert not j.stale and not j.rejected and j.held == 0


def test_a_loop_on_one_topic_is_confirmed_by_three_readings_then_the_others_are_stale():
    j = TimeJumps()
    steady(j, 3000)
    assert [j.check("/e", "enc", at(ms), ms) for ms in (0, 1, 2)] == ["held", "held", "jump"]
    assert j.released() == [0, 1]
    assert j.check("/c", "cell", at(2995 + 5)) == "stale"             # left over from before the loop
    assert j.check("/c", "cell", at(5)) == "ok"                       # fits the new time
    assert j.stale == {"/c": 1} and not j.rejected


def test_an_isolated_stamp_back_is_rejected_and_counted_not_a_jump():
    """Case 12 of the audit: one encoder stamp 0.5 s back used to reset the estimator."""
    j = TimeJumps()
    steady(j, 1000)
    assert j.check("/e", "enc", at(500), "bad") == "held"
    assert j.check("/c", "cell", at(1000)) == "ok"                    # the others go on
    assert j.check("/e", "enc", at(1000)) == "ok"                     # back in line: rejected
    assert j.released() == [] and not j.jumps
    assert j.rejected == {"/e": 1} and j.by_sensor["enc"]["rejected"] == 1 and j.held == 0
    steady(j, 1100, start_ms=1001)


def test_an_isolated_future_stamp_is_rejected_and_a_persistent_one_is_a_jump():
    j = TimeJumps(max_time_gap=2.0)
    steady(j, 1000)
    assert j.check("/e", "enc", at(1000 + 1_000_000)) == "held"       # a corrupt stamp
    assert j.check("/e", "enc", at(1000)) == "ok"
    assert j.rejected == {"/e": 1} and not j.jumps
    # the rig's clock really moved 1000 s ahead: both topics confirm it
    assert j.check("/e", "enc", at(2_000_000), "e") == "held"
    assert j.check("/c", "cell", at(2_000_000)) == "jump"
    assert j.released() == ["e"]
    assert [x.direction for x in j.jumps] == ["forwards"]
    assert "more than max_time_gap 2 s" in j.jumps[0].reason


def test_a_pause_of_every_sensor_shorter_than_the_gap_is_fed_without_a_jump():
    j = TimeJumps(max_time_gap=2.0)
    steady(j, 1000)
    # 1.2 s with no data at all, then both resume: held until it persists, then let through
    assert j.check("/e", "enc", at(2200), "e1") == "held"
    assert j.check("/e", "enc", at(2201), "e2") == "held"
    assert j.check("/c", "cell", at(2200), "c1") == "ok"
    assert j.released() == ["e1", "e2"]
    assert not j.jumps and not j.rejected and j.newest_ns == at(2201)
    steady(j, 2300, start_ms=2202)


def test_a_second_of_decreasing_stamps_is_rejected_never_a_jump():
    """The audit's 1 s of decreasing stamps: each 1 ms earlier than the last one."""
    j = TimeJumps()
    steady(j, 2000)
    verdicts = Counter(j.check("/e", "enc", at(1999 - k)) for k in range(1, 1001))
    assert not j.jumps
    assert verdicts["ok"] == 100                      # the first 0.1 s is jitter: fed as late
    steady(j, 2100, topics=(("/e", "enc", 1),), start_ms=2000)
    assert j.rejected["/e"] == 900 and j.held == 0


def test_held_readings_are_rejected_once_the_others_moved_on_by_the_hold_limit():
    j = TimeJumps()
    steady(j, 1000)
    assert j.check("/c", "cell", at(400)) == "held"    # the cell sends one stamp back, then nothing
    steady(j, 2000, topics=(("/e", "enc", 1),), start_ms=1000)
    assert j.rejected == {"/c": 1} and j.held == 0 and not j.jumps


def test_readings_of_one_message_do_not_confirm_each_other():
    """Two encoders in one JointState share its (corrupt) stamp: one topic, one stamp."""
    j = TimeJumps()
    for ms in range(1000):
        assert j.check("/e", "enc1", at(ms)) == "ok" and j.check("/e", "enc2", at(ms)) == "ok"
    assert j.check("/e", "enc1", at(300)) == "held" and j.check("/e", "enc2", at(300)) == "held"
    assert j.check("/e", "enc1", at(1000)) == "ok"
    assert j.rejected == {"/e": 2} and not j.jumps


def test_a_sensor_lagging_beyond_the_window_is_too_old_not_a_jump():
    j = TimeJumps(max_lag=lagging_limit(1.0))            # 1.5 s behind the newest stamp
    for ms in range(0, 3000, 5):
        assert j.check("/e", "enc", at(ms)) == "ok"
    assert j.check("/c", "cell", at(1000)) == "too_old"  # 2 s behind the encoder
    assert j.check("/c", "cell", at(1005)) == "too_old"  # its own stamps go forwards: lagging
    assert j.check("/c", "cell", at(2900)) == "ok"       # caught up
    assert j.check("/e", "enc", at(3000)) == "ok" and not j.jumps
    assert j.too_old == {"/c": 2} and not j.stale


def test_every_reading_ends_in_exactly_one_place():
    """fed (ok/jump/released) + stale + too_old + rejected + held = checked."""
    import random
    rng = random.Random(3)
    j = TimeJumps(max_lag=1.5)
    fed = checked = 0
    t = {"enc": 0, "cell": 0}
    for k in range(20000):
        sensor = "enc" if k % 5 else "cell"
        t[sensor] += 1 if sensor == "enc" else 5
        stamp = t[sensor]
        r = rng.random()
        if r < 0.002:
            stamp += rng.choice([-800, -300, 700, 5000])       # isolated stamps out of line
        elif r < 0.0025:
            for s in t:
                t[s] -= 3000                                   # a loop of both
        checked += 1
        v = j.check("/" + sensor, sensor, at(stamp))
        if v in ("ok", "jump"):
            fed += 1 + len(j.released())
    dropped = sum(j.stale.values()) + sum(j.too_old.values()) + sum(j.rejected.values())
    assert fed + dropped + j.held == checked
    assert j.rejected and j.jumps


# ------------------------------------------------------------------------------------------------
# check_block: the same verdicts and counts as check, reading by reading
def _stream(seed: int, n: int = 3000):
    """Readings of three sensors on two topics with loops, forward jumps, isolated bad stamps,
    pauses, a lagging sensor and jitter: (keys, stamps ns)."""
    rng = np.random.default_rng(seed)
    keys, stamps, t = [], [], 0
    for i in range(n):
        t += MS
        k = int(rng.integers(3))
        s = t + int(rng.normal(0, 2 * MS))
        r = rng.random()
        if r < 0.002:
            t -= int(rng.uniform(0.5, 3.0) * 1e9)          # a loop / clock reset
        elif r < 0.004:
            t += int(rng.uniform(0.6, 5.0) * 1e9)          # a pause or a jump forwards
        elif r < 0.008:
            s += int(rng.choice([-1, 1]) * rng.uniform(0.2, 10.0) * 1e9)   # one bad stamp
        elif r < 0.010:
            s -= int(rng.uniform(1.0, 4.0) * 1e9)          # a lagging reading
        if k == 2 and 500 <= i < 2000:
            s -= int(0.6 * MS * (min(i, 1500) - 500))    # the cell lags by up to 0.6 s
        keys.append(k)
        stamps.append(s)
    return np.array(keys), np.array(stamps, np.int64)


TOPICS, SENSORS = ("/e", "/e", "/c"), ("enc1", "enc2", "cell")


def _reference(j: TimeJumps, keys, stamps):
    fed, jumps = [], []
    for i, (k, t) in enumerate(zip(keys.tolist(), stamps.tolist())):
        v = j.check(TOPICS[k], SENSORS[k], t, i)
        if v == "jump":
            jumps.append(len(fed))
        if v in ("ok", "jump"):
            fed += j.released() + [i]
    return fed, jumps


def _blocked(j: TimeJumps, keys, stamps, size: int):
    fed, jumps = [], []
    for a in range(0, keys.size, size):
        events = j.check_block(TOPICS, SENSORS, keys[a:a + size], stamps[a:a + size], lambda i, a=a: a + i)
        for kind, x in events:
            if kind == "jump":
                jumps.append(len(fed))
            elif kind == "released":
                fed += list(x)
            else:
                fed += (np.asarray(x) + a).tolist()
    return fed, jumps


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("lag", [None, 0.3])
def test_check_block_gives_the_verdicts_and_counts_of_check(seed, lag):
    keys, stamps = _stream(seed)
    for size in (1, 97, 5000):
        a, b = TimeJumps(max_lag=lag), TimeJumps(max_lag=lag)
        assert _blocked(b, keys, stamps, size) == _reference(a, keys, stamps)
        for what in ("stale", "too_old", "rejected", "by_sensor", "jumps"):
            assert getattr(a, what) == getattr(b, what), what
        assert (a.held, a.newest_ns, a._last) == (b.held, b.newest_ns, b._last)


def test_check_block_of_steady_readings_is_one_feed():
    keys = np.tile([0, 1, 2], 1000)
    stamps = np.repeat(np.arange(1000, dtype=np.int64) * MS, 3)
    j = TimeJumps()
    assert [(k, x.tolist()) for k, x in j.check_block(TOPICS, SENSORS, keys, stamps, int)] == \
        [("feed", list(range(3000)))]


def test_after_forget_time_a_new_time_line_starts_without_a_jump():
    """The managed node's activate: readings 10 s on (past max_time_gap) are in line at once."""
    j = TimeJumps(max_time_gap=2.0)
    steady(j, 1000)
    assert j.check("/e", "enc", at(11000), "e1") == "held"         # a held reading is rejected
    j.forget_time()
    assert j.rejected == {"/e": 1} and j.held == 0
    steady(j, 11100, start_ms=11000)
    assert not j.jumps and j.newest_ns == at(11099)
