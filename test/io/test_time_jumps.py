"""TimeJumps: the time-jump and lagging-sensor rules of the ROS node and of replay."""
from __future__ import annotations

from mbfg_ros.io.time_jumps import TimeJumps, lagging_limit

MS = 1_000_000


def at(ms: float) -> int:
    return int(round(ms * MS))


def test_steady_interleaved_stamps_are_ok_even_slightly_out_of_order():
    j = TimeJumps()
    verdicts = [j.check("/e", "enc", at(ms)) for ms in range(100)]
    verdicts += [j.check("/c", "cell", at(ms)) for ms in range(0, 100, 5)]     # late but in the era
    verdicts.append(j.check("/e", "enc", at(99 - 50)))                          # 50 ms back: jitter
    assert set(verdicts) == {"ok"} and not j.jumps and not j.stale


def test_a_loop_is_a_backward_jump_and_the_other_sensors_are_stale_until_they_catch_up():
    j = TimeJumps()
    for ms in range(0, 3000, 5):
        j.check("/e", "enc", at(ms))
        j.check("/c", "cell", at(ms))
    assert j.check("/e", "enc", at(0)) == "jump"
    jump = j.jumps[0]
    assert (jump.direction, jump.from_ns, jump.to_ns, jump.sensor) == ("backwards", 2995 * MS, 0, "enc")
    assert "backwards by 2.995 s on enc" in jump.reason
    assert j.check("/c", "cell", at(2995 + 5)) == "stale"       # left over from before the loop
    assert j.check("/c", "cell", at(5)) == "ok"                 # fits the new time
    assert j.check("/c", "cell", at(3000)) == "jump"            # now a new jump of its own
    assert j.stale == {"/c": 1}


def test_a_stamp_beyond_the_gap_is_a_forward_jump_and_going_back_another():
    j = TimeJumps(max_time_gap=2.0)
    for ms in range(0, 1000, 5):
        assert j.check("/e", "enc", at(ms)) == "ok" and j.check("/c", "cell", at(ms)) == "ok"
    assert j.check("/e", "enc", at(1000 + 1_000_000)) == "jump"          # a corrupt stamp
    assert j.check("/c", "cell", at(1000)) == "stale"
    assert j.check("/e", "enc", at(1000)) == "jump"
    assert [x.direction for x in j.jumps] == ["forwards", "backwards"]
    assert "more than max_time_gap 2 s" in j.jumps[0].reason
    assert j.check("/c", "cell", at(1005)) == "ok"
    assert j.stale == {"/c": 1}


def test_a_sensor_lagging_beyond_the_window_is_too_old_not_a_jump():
    j = TimeJumps(max_lag=lagging_limit(1.0))            # 1.5 s behind the newest stamp
    for ms in range(0, 3000, 5):
        assert j.check("/e", "enc", at(ms)) == "ok"
    assert j.check("/c", "cell", at(1000)) == "too_old"  # 2 s behind the encoder
    assert j.check("/c", "cell", at(1005)) == "too_old"  # its own stamps go forwards: lagging
    assert j.check("/c", "cell", at(2900)) == "ok"       # caught up
    assert j.check("/e", "enc", at(3000)) == "ok" and not j.jumps
    assert j.too_old == {"/c": 2} and not j.stale
