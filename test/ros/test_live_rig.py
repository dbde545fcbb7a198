"""The chunked live rig sends what the batch simulator writes to a bag (no ROS here)."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import mechanism
from mbfg_ros.errors import MbfgError
from mbfg_ros.io import messages as msgs
from mbfg_ros.ros.live_rig import LiveRig
from mbfg_ros.sim.forward import simulate
from mbfg_ros.sim.ground_truth import ground_truth
from mbfg_ros.sim.scenario import Scenario
from mbfg_ros.sim.sensors import SensorOptions, synthesize


def _run(rig: LiveRig) -> list:
    out = []
    while not rig.finished:
        out += rig.next_chunk()
    return out


def _decode(m):
    return msgs.typestore().deserialize_cdr(m.cdr, m.msgtype)


def test_chunks_match_the_batch_simulation_and_its_truth(four_bar):
    scenario = Scenario(duration=0.6, initial_dof_offset=0.1)
    rig = LiveRig(four_bar, scenario, SensorOptions(noise=False), epoch_ns=1_700_000_000_000_000_000)
    out = _run(rig)
    assert [m.time for m in out] == sorted(m.time for m in out)
    trajectory = simulate(four_bar, scenario)
    ref = [s for s in synthesize(trajectory, SensorOptions(noise=False)) if s.sensor == "crank_encoder"]
    enc = [m for m in out if m.topic == "encoders"]
    assert len(enc) == len(ref) == 600
    got = np.array([_decode(m).position[0] for m in enc])
    np.testing.assert_allclose(got, [s.value[0] for s in ref], atol=1e-12)
    stamps = np.array([m.stamp_ns for m in enc]) - rig.epoch_ns
    np.testing.assert_array_equal(stamps, np.arange(600) * 1_000_000)
    truth = [m for m in out if m.topic == "/truth/joint_states"]
    gt = ground_truth(trajectory, 200.0)
    assert len(truth) == gt.t.size == 120
    np.testing.assert_allclose([_decode(m).position for m in truth], gt.q, atol=1e-12)
    assert set(rig.topics) == {m.topic for m in out}


def test_delay_sets_the_publish_time_and_mute_silences_a_sensor(four_bar):
    rig = LiveRig(four_bar, Scenario(duration=0.3), SensorOptions(delay=0.02),
                  mute={"rocker_pin_load": 0.1}, publish_truth=False)
    out = _run(rig)
    enc = [m for m in out if m.topic == "encoders"]
    assert all(abs(m.time - ((m.stamp_ns - rig.epoch_ns) * 1e-9 + 0.02)) < 1e-9 for m in enc)
    cells = [m for m in out if m.topic == "rocker_pin/wrench"]
    assert len(cells) == 20 and max(m.stamp_ns - rig.epoch_ns for m in cells) < 100_000_000
    assert not any(m.topic.startswith("/truth") for m in out)


def test_a_gyro_bias_stays_constant_across_chunks():
    mech = mechanism("four_bar_gyro")
    opts = SensorOptions(noise=False, gyro_bias=0.05, seed=3)
    biased = _run(LiveRig(mech, Scenario(duration=0.3), opts, publish_truth=False))
    clean = _run(LiveRig(mech, Scenario(duration=0.3), SensorOptions(noise=False), publish_truth=False))
    def w(m):
        v = _decode(m).angular_velocity
        return np.array([v.x, v.y, v.z])
    diff = np.array([w(a) - w(b) for a, b in zip(biased, clean) if a.msgtype == msgs.IMU])
    assert diff.shape[0] == 120
    np.testing.assert_allclose(diff, np.broadcast_to(diff[0], diff.shape), atol=1e-12)
    assert np.all(np.abs(diff[0]) > 0)


def test_rates_that_do_not_fit_the_chunk_are_refused(four_bar):
    with pytest.raises(MbfgError, match="holds 33.3 samples of crank_encoder at 333 Hz"):
        LiveRig(four_bar, Scenario(duration=1.0), SensorOptions(rates={"encoder": 333.0}))
    with pytest.raises(MbfgError, match="cannot mute 'nope'"):
        LiveRig(four_bar, Scenario(duration=1.0), mute={"nope": 0.0})


def test_the_rig_keeps_only_the_current_chunks_dense_output(four_bar):
    """Audit case 16: the sim_rig node grew +2.4 MB/min because the simulator kept the dense
    output of every segment it ever integrated; a live rig keeps the current chunk's only.
    The full soak (``make soak``) measures the node's memory slope; this checks the cause."""
    rig = LiveRig(four_bar, Scenario(duration=1e4, initial_dof_offset=0.2), SensorOptions(),
                  chunk=0.1)
    kept = []
    for _ in range(40):                      # 4 s of rig time, 40 segments integrated
        rig.next_chunk()
        kept.append(len(rig.sim._eval.segments))
    assert max(kept) <= 2, kept
    assert rig.sim.stats(0.0).segments >= 40


def _by_topic(rig: LiveRig) -> dict[str, list[tuple]]:
    out: dict[str, list[tuple]] = {}
    for m in _run(rig):
        out.setdefault(m.topic, []).append((m.time, m.msgtype, m.stamp_ns, m.cdr))
    return out


@pytest.mark.parametrize("name, options, by_message", [
    # jitter clipped at a chunk's start puts two encoder samples on one stamp in chunk 3: the
    # per-message path makes one message of them, so that chunk goes message by message
    ("four_bar", SensorOptions(jitter=0.0005, delay=0.003, dropout=0.1, outlier_rate=0.05, seed=4), 1),
    ("four_bar_imu", SensorOptions(seed=2), 0),        # an Imu of a gyro and an accelerometer
    ("slider_crank", SensorOptions(seed=3), 0),        # known inputs (JointState effort)
    ("fast_crank", SensorOptions(seed=5), 0),          # encoder, gyro, load cell
])
def test_the_templates_send_the_per_message_bytes(name, options, by_message):
    """Every message from the byte templates is the one the per-message path builds and
    serializes, bit for bit (times, stamps, bytes, per topic), chunk after chunk."""
    mech = mechanism(name)
    scenario = Scenario(duration=0.5, initial_dof_offset=0.1)
    fast = LiveRig(mech, scenario, options, chunk=0.1)
    slow = LiveRig(mech, scenario, options, chunk=0.1, templates=False)
    got, want = _by_topic(fast), _by_topic(slow)
    assert fast.chunks_by_message == by_message and slow.chunks_by_message == 5
    assert set(got) == set(want) == set(fast.topics)
    for topic in want:
        assert got[topic] == want[topic], topic


def test_what_the_templates_do_not_cover_goes_message_by_message(four_bar):
    rig = LiveRig(four_bar, Scenario(duration=0.2), SensorOptions(), mute={"rocker_pin_load": 0.1})
    _run(rig)
    assert rig.templates is None and rig.chunks_by_message == 2
    shared = mechanism("arm6_ros2_control")        # a WrenchStamped of several load cells
    rig = LiveRig(shared, Scenario(duration=0.1), SensorOptions())
    assert rig.templates is not None and _run(rig) and rig.chunks_by_message == 1
