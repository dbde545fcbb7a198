"""CdrIntake: serialized messages decoded in bulk give the readings, order and problem counts of
the per-message path (:meth:`InputRouter.decode` of each deserialized message)."""
from __future__ import annotations

import numpy as np

from conftest import CONFIG
from mbfg_ros.io import messages as msgs
from mbfg_ros.io.cdr_intake import BULK_MIN, CdrIntake
from mbfg_ros.io.sensor_inputs import IMU, JOINT_STATE, WRENCH_STAMPED, InputRouter
from mbfg_ros.model.validation import load_rig

T0 = 1_700_000_000_000_000_000


MECH = load_rig(CONFIG / "arm6_ros2_control.yaml").mech     # one JointState, a wrench, an Imu


def _router():
    return InputRouter(MECH)


def _joint_states(mech, rng, n: int) -> list[bytes]:
    names = list(mech.joint_names)
    out = [bytes(msgs.serialize(msgs.joint_state(T0 + k * 1_000_000, names, rng.standard_normal(len(names)),
                                                 rng.standard_normal(len(names)), rng.standard_normal(len(names)))))
           for k in range(n)]
    # irregular messages among them: joints in another order, one joint missing, not CDR at all
    out[3] = bytes(msgs.serialize(msgs.joint_state(T0 + 3_000_000, names[::-1], rng.standard_normal(len(names)))))
    out[5] = bytes(msgs.serialize(msgs.joint_state(T0 + 5_000_000, names[1:], rng.standard_normal(len(names) - 1))))
    out[8] = b"\x00\x01\x00\x00garbage"
    out[9] = bytes([0xFF]) * len(out[9])            # a layout's size, not its bytes
    return out


def _readings(intake: CdrIntake, topic: str, msgtype: str, raws: list[bytes], sizes: list[int]) -> list:
    out, s = [], 0
    for size in sizes:
        part = raws[s:s + size]
        out += [(sensor, stamp, np.asarray(value).tobytes())
                for sensor, stamp, value in intake.decode(topic, msgtype, part, list(range(s, s + len(part))))]
        s += size
    return out


def test_bulk_readings_are_the_per_message_ones():
    rng = np.random.default_rng(1)
    router, mech = _router(), MECH
    topics = {t: types[0] for t, types in router.topics.items()}
    js = next(t for t, m in topics.items() if m == JOINT_STATE)
    ft = next(t for t, m in topics.items() if m == WRENCH_STAMPED)
    imu = next(t for t, m in topics.items() if m == IMU)
    cases = {js: (JOINT_STATE, _joint_states(mech, rng, 40)),
             ft: (WRENCH_STAMPED, [bytes(msgs.serialize(msgs.wrench_stamped(T0 + k * 1_000_000, "ft_sensor",
                                                                             rng.standard_normal(3),
                                                                             rng.standard_normal(3))))
                                   for k in range(30)]),
             imu: (IMU, [bytes(msgs.serialize(msgs.imu(T0 + k * 1_000_000, "imu_link", rng.standard_normal(3), 0.01)))
                         for k in range(30)])}
    sizes = [1, 2, 1, 25, 1, BULK_MIN, 10]
    for topic, (msgtype, raws) in cases.items():
        one, bulk = CdrIntake(_router(), bulk=False), CdrIntake(_router(), bulk=True)
        want = _readings(one, topic, msgtype, raws, sizes)
        got = _readings(bulk, topic, msgtype, raws, sizes)
        assert got == want, topic
        assert want, topic
        assert bulk.bulk_messages > 0.5 * len(raws), (topic, bulk.bulk_messages)
        assert dict(bulk.router.problems.get(topic, {})) == dict(one.router.problems.get(topic, {}))
        assert dict(bulk.router.disagreements.get(topic, {})) == dict(one.router.disagreements.get(topic, {}))
    # the irregular messages were counted, not raised
    problems = CdrIntake(_router(), bulk=True)
    _readings(problems, js, JOINT_STATE, cases[js][1], [len(cases[js][1])])
    assert sum(problems.router.problems[js].values()) >= 2, problems.router.problems
