"""CdrTemplate: the messages it fills equal the ordinary CDR serialisation byte for byte."""
from __future__ import annotations

import numpy as np

from mbfg_ros.io import messages as msgs
from mbfg_ros.io.cdr_template import CdrTemplate


def test_filled_messages_equal_the_ordinary_serialisation():
    names = ["a", "bb", "ccc"]
    tpl = CdrTemplate(lambda ns, a: msgs.joint_state(ns, names, a[0], a[1], a[2]), [3, 3, 3])
    assert tpl.ok and tpl.stamp_offsets.size == 1 and tpl.value_offsets.size == 9
    rng = np.random.default_rng(0)
    N = 5
    stamps = 1_700_000_000_000_000_000 + np.arange(N) * 5_000_001
    arrays = [rng.standard_normal((N, 3)) for _ in range(3)]
    rows = tpl.fill(stamps, arrays)
    for i in range(N):
        ref = bytes(msgs.serialize(msgs.joint_state(int(stamps[i]), names, *(a[i] for a in arrays))))
        assert rows[i].tobytes() == ref
    assert tpl.matches(int(stamps[0]), [a[0] for a in arrays])


def test_a_message_whose_values_cannot_be_placed_is_refused():
    # the same value written twice: its place is ambiguous
    tpl = CdrTemplate(lambda ns, a: msgs.joint_state(ns, ["x"], a[0], a[0], a[0]), [1])
    assert not tpl.ok and not tpl.matches(0, [np.zeros(1)])
