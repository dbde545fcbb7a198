"""The replay report's lines (mbfg_ros/replay/report.py)."""
from mbfg_ros.replay.report import strongest_notes

ROUGH = ("the motion is {} times rougher than the integration noise at 200 Hz allows (velocity rows' "
         "truncation; a heavy link on a light crank swings its speed within a turn): set keyframe_rate: {}")
SPEED = "encoders show {} rad/s: set mechanism.top_speed: {} (keyframe_rate auto) or keyframe_rate: {}"


def test_a_sensors_spans_give_each_kind_of_note_once_the_highest_rate_kept():
    notes = [ROUGH.format(158.6, 1650), "", ROUGH.format(243.4, 1900), ROUGH.format(39.6, 1050),
             SPEED.format(72, 72, 400), SPEED.format(60, 60, 350)]
    assert strongest_notes(notes) == sorted([ROUGH.format(243.4, 1900), SPEED.format(72, 72, 400)])


def test_no_notes():
    assert strongest_notes(["", ""]) == []
