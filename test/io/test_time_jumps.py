"""TimeJumps: the ROS node's time-jump rules on a bag's receive order."""
from __future__ import annotations

import numpy as np

from mbfg_ros.io.sensor_inputs import Reading
from mbfg_ros.replay.time_jumps import TimeJumps

MS = 1_000_000


def r(sensor: str, ms: float) -> Reading:
    return Reading(sensor, int(round(ms * MS)), np.zeros(1))


def test_steady_interleaved_stamps_are_ok_even_slightly_out_of_order():
    j = TimeJumps()
    verdicts = [j.check("/e", r("enc", ms)) for ms in range(100)]
    verdicts += [j.check("/c", r("cell", ms)) for ms in range(0, 100, 5)]     # late but in the era
    verdicts.append(j.check("/e", r("enc", 99 - 50)))                          # 50 ms back: jitter
    assert set(verdicts) == {"ok"} and not j.jumps and not j.stale


def test_a_loop_is_a_backward_jump_and_the_other_sensors_are_stale_until_they_catch_up():
    j = TimeJumps()
    for ms in range(0, 3000, 5):
        j.check("/e", r("enc", ms))
        j.check("/c", r("cell", ms))
    assert j.check("/e", r("enc", 0)) == "jump"
    jump = j.jumps[0]
    assert (jump.direction, jump.from_ns, jump.to_ns, jump.sensor) == ("backwards", 2995 * MS, 0, "enc")
    assert "backwards by 2.995 s on enc" in jump.reason
    assert j.check("/c", r("cell", 2995 + 5)) == "stale"       # left over from before the loop
    assert j.check("/c", r("cell", 5)) == "ok"                 # fits the new time
    assert j.check("/c", r("cell", 3000)) == "jump"            # now a new jump of its own
    assert j.stale == {"/c": 1}


def test_a_stamp_beyond_the_gap_is_a_forward_jump_and_going_back_another():
    j = TimeJumps(max_time_gap=2.0)
    for ms in range(0, 1000, 5):
        assert j.check("/e", r("enc", ms)) == "ok" and j.check("/c", r("cell", ms)) == "ok"
    assert j.check("/e", r("enc", 1000 + 1_000_000)) == "jump"          # a corrupt stamp
    assert j.check("/c", r("cell", 1000)) == "stale"
    assert j.check("/e", r("enc", 1000)) == "jump"
    assert [x.direction for x in j.jumps] == ["forwards", "backwards"]
    assert "more than max_time_gap 2 s" in j.jumps[0].reason
    assert j.check("/c", r("cell", 1005)) == "ok"
    assert j.stale == {"/c": 1}
