"""CdrLayout: fixed-layout CDR messages decoded at once, bit for bit as rosbags decodes each."""
from __future__ import annotations

import numpy as np
import pytest

from mbfg_ros.io import messages as msgs
from mbfg_ros.io.cdr_layout import CdrLayout

EPOCH_NS = 1_700_000_000_000_000_000
STORE = msgs.typestore()
SPECIAL = [np.nan, -0.0, np.inf, -np.inf, 5e-324, 1.7976931348623157e308]


def _values(rng, n: int, k: int) -> np.ndarray:
    v = rng.normal(size=(n, k)) * 10.0 ** rng.integers(-8, 8, size=(n, k))
    v.flat[:len(SPECIAL)] = SPECIAL[:v.size]
    return v


def _messages(kind: str, n: int, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    stamps = EPOCH_NS + np.cumsum(rng.integers(1, 2_000_000_000, n))
    if kind == "joint_state":
        p, v, e = _values(rng, n, 3), _values(rng, n, 3), _values(rng, n, 3)
        return [msgs.joint_state(int(s), ["a", "bb", "ccc"], p[i], v[i], e[i]) for i, s in enumerate(stamps)]
    if kind == "imu":
        w, c = _values(rng, n, 3), rng.uniform(1e-4, 1.0, size=(n, 1))
        return [msgs.imu(int(s), "gyro_link", w[i], float(c[i, 0])) for i, s in enumerate(stamps)]
    if kind == "wrench":
        f, t = _values(rng, n, 3), _values(rng, n, 3)
        return [msgs.wrench_stamped(int(s), "cell", f[i], t[i]) for i, s in enumerate(stamps)]
    if kind == "dynamic":
        q, a = _values(rng, n, 2), _values(rng, n, 2)
        return [msgs.dynamic_joint_state(int(s), ["j1", "j2"], {"position": q[i], "acceleration": a[i]})
                for i, s in enumerate(stamps)]
    F = STORE.types["std_msgs/msg/Float64"]
    return [F(data=float(x)) for x in _values(rng, n, 1)[:, 0]]


def _rows(messages) -> tuple[list[bytes], np.ndarray]:
    raws = [bytes(msgs.serialize(m)) for m in messages]
    return raws, np.frombuffer(b"".join(raws), np.uint8).reshape(len(raws), -1)


def _learn(raw: bytes, msgtype: str) -> CdrLayout | None:
    return CdrLayout.learn(raw, msgtype, STORE.deserialize_cdr, STORE.serialize_cdr)


FIELDS = {"joint_state": ["position", "velocity", "effort"],
          "imu": ["orientation", "angular_velocity", "angular_velocity_covariance", "linear_acceleration"],
          "wrench": ["wrench.force", "wrench.torque"],
          "dynamic": ["interface_values.0.values", "interface_values.1.values"],
          "float64": ["data"]}


def _field(msg, path: str) -> np.ndarray:
    obj = msg
    for part in path.split("."):
        obj = obj[int(part)] if part.isdigit() else getattr(obj, part)
    if hasattr(obj, "x"):
        return np.array([getattr(obj, a) for a in ("x", "y", "z", "w") if hasattr(obj, a)], float)
    return np.atleast_1d(np.asarray(obj, float))


@pytest.mark.parametrize("kind", list(FIELDS))
def test_values_and_stamps_are_those_of_the_per_message_deserialization(kind):
    messages = _messages(kind, 50)
    raws, rows = _rows(messages)
    layout = _learn(raws[0], messages[0].__msgtype__)
    assert layout is not None
    assert layout.matches(rows).all()
    fixed = layout.decode(rows)
    for path in FIELDS[kind]:
        got = fixed.values(path)
        for i, raw in enumerate(raws):
            want = _field(STORE.deserialize_cdr(raw, messages[0].__msgtype__), path)
            assert got[i].tobytes() == want.tobytes(), (path, i)
    if kind != "float64":
        want = [msgs.time_to_ns(STORE.deserialize_cdr(r, messages[0].__msgtype__).header.stamp) for r in raws]
        assert fixed.stamps_ns().tolist() == want


def test_rows_with_other_names_frames_or_lengths_do_not_match():
    messages = _messages("joint_state", 10)
    other_name = msgs.joint_state(EPOCH_NS, ["a", "bX", "ccc"], [1, 2, 3], [1, 2, 3], [1, 2, 3])
    other_frame = msgs.joint_state(EPOCH_NS, ["a", "bb", "ccc"], [1, 2, 3], [1, 2, 3], [1, 2, 3], frame_id="x")
    raws, rows = _rows(messages[:5] + [other_name, other_frame] + messages[5:])
    assert rows.ndim == 2                         # (the same length: padding)
    layout = _learn(raws[0], msgs.JOINT_STATE)
    assert layout.matches(rows).tolist() == [True] * 5 + [False, False] + [True] * 5
    longer = _rows([msgs.joint_state(EPOCH_NS, ["a", "bb", "ccc", "d"], [1, 2, 3, 4])])[1]
    assert longer.shape[1] != rows.shape[1] and not layout.matches(longer).any()


def test_a_message_that_does_not_deserialize_has_no_layout():
    assert _learn(b"\x00\x01garbage", msgs.JOINT_STATE) is None
