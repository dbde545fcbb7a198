"""BatchMessages: a batch of keyframes serialised at once equals the node's messages, on every
example rig; OutputWriter: batches written in bulk (here or in the writer process) give the
bag of the message-by-message path."""
from __future__ import annotations

import numpy as np
import pytest

from mbfg_ros.estimation.forces_batch import BatchForces
from mbfg_ros.estimation.layout import StateLayout
from mbfg_ros.estimation.outputs import Estimate
from mbfg_ros.io import messages as msgs
from mbfg_ros.io.estimate_messages import DIAGNOSTIC_ARRAY, OutputNames, estimate_messages, tf_message
from mbfg_ros.model.assembly import initial_state
from mbfg_ros.io.bag_reader import bag_topics
from mbfg_ros.replay.output_bag import OutputBag
from mbfg_ros.model.joint_transforms import quaternions
from mbfg_ros.io.output_templates import BatchMessages
from mbfg_ros.replay.output_batch import OutputWriter, diagnostics_due
from mbfg_ros.replay.pipeline import WriterProcess
from support.simulations import config_mechanism


def test_quaternions_are_pinocchios_bit_for_bit():
    import pinocchio as pin
    rng = np.random.default_rng(2)
    R = np.array([pin.exp3(rng.standard_normal(3) * 2) for _ in range(20000)]
                 + [np.eye(3), np.diag([1.0, -1, -1]), np.diag([-1.0, 1, -1]), np.diag([-1.0, -1, 1])])
    assert (np.trace(R, axis1=1, axis2=2) <= 0).sum() > 5000         # both of Eigen's branches
    want = np.array([pin.Quaternion(r).coeffs() for r in R])
    assert quaternions(R).tobytes() == want.tobytes()
    assert quaternions(R.reshape(4, -1, 3, 3)).shape == (4, R.shape[0] // 4, 4)


@pytest.mark.parametrize("spread", [0.01, 3.0])
def test_batch_messages_equal_the_per_keyframe_ones(example, spread):
    mech = example
    names = OutputNames("/rig/est", "p/")
    lay = StateLayout.for_mechanism(mech, mech.config.estimator)
    d = mech.create_data()
    q0, v0 = initial_state(mech, d)
    rng = np.random.default_rng(4)
    N = 3 if spread < 1 else 100                    # (far from the assembly: any rotation)
    X = np.stack([lay.pack(q0 + spread * rng.standard_normal(mech.n), v0 + rng.standard_normal(mech.n),
                           rng.standard_normal(mech.n), rng.standard_normal(mech.m)) for _ in range(N)])
    effort = rng.standard_normal((N, mech.n))
    n = mech.n
    F, T, cells = BatchForces(mech)(X[:, :n], X[:, n:2 * n], X[:, 2 * n:3 * n], X[:, lay.L], X[:, lay.U],
                                    np.zeros((N, n)))
    stamps = 1_700_000_000_000_000_000 + np.arange(N) * 5_000_000
    batch = BatchMessages(mech, names)
    args = (X[:, :n], X[:, n:2 * n], X[:, 2 * n:3 * n], effort, F, T, cells)
    assert batch.usable(int(stamps[0]), *args)
    got = batch.serialize(stamps, *args)
    ests = [Estimate(0.0, i, True, X[i], lay, effort[i]) for i in range(N)]
    forces = BatchForces(mech).as_forces(ests, F, T, cells)
    for i in range(N):
        ref = {topic: bytes(msgs.serialize(m)) for topic, _, m in
               estimate_messages(mech, ests[i], forces[i], int(stamps[i]), names)}
        ref["/tf"] = bytes(msgs.serialize(tf_message(mech, d, X[i, :n], int(stamps[i]), names)))
        assert {topic: data[i].tobytes() for topic, _, data in got} == ref


def _keyframes(mech, N: int, seed: int):
    """N keyframes of random states: stamps, the arrays OutputWriter takes, estimates, forces."""
    lay = StateLayout.for_mechanism(mech, mech.config.estimator)
    q0, v0 = initial_state(mech, mech.create_data())
    rng = np.random.default_rng(seed)
    n = mech.n
    X = np.stack([lay.pack(q0 + 0.01 * rng.standard_normal(n), v0 + rng.standard_normal(n),
                           rng.standard_normal(n), rng.standard_normal(mech.m)) for _ in range(N)])
    effort = rng.standard_normal((N, n))
    bf = BatchForces(mech)
    F, T, cells = bf(X[:, :n], X[:, n:2 * n], X[:, 2 * n:3 * n], X[:, lay.L], X[:, lay.U], np.zeros((N, n)))
    t = 0.004 + 0.005 * np.arange(N)
    ests = [Estimate(float(t[i]), i, True, X[i], lay, effort[i]) for i in range(N)]
    stamps = 1_700_000_000_000_000_000 + np.round(t * 1e9).astype(np.int64)
    return t, stamps, (X[:, :n], X[:, n:2 * n], X[:, 2 * n:3 * n], effort, F, T, cells), ests, \
        bf.as_forces(ests, F, T, cells)


def _write(out, mech, names, batch: bool, t, stamps, arrays, ests, forces, calls) -> None:
    """The keyframes through an OutputWriter in calls of the given sizes, /diagnostics every 0.5 s."""
    w = OutputWriter(out, mech, names, batch=batch, rows=256)
    T = msgs.typestore().types
    next_t, s = -np.inf, 0
    for size in calls:
        sl = slice(s, s + size)
        due, next_t = diagnostics_due(t[sl], next_t, 0.5)
        w.write(stamps[sl], tuple(x[sl] for x in arrays), ests[sl], lambda sl=sl: forces[sl], due,
                lambda i, s=s: T[DIAGNOSTIC_ARRAY](header=msgs.header(int(stamps[s + i]), ""), status=[]))
        s += size
    assert s == len(ests)
    w.flush()
    assert w.exact is batch


def test_diagnostics_due_once_per_period():
    due, nxt = diagnostics_due([0.0, 0.2, 0.5, 0.7, 1.01, 1.02], -np.inf, 0.5)
    assert (due, nxt) == ([0, 2, 4], 1.5)
    assert diagnostics_due([1.2, 1.49], nxt, 0.5) == ([], 1.5)


def test_output_writer_bulk_bag_is_the_per_message_bag(example, tmp_path):
    """Batches held and written in bulk (flushes of 256 keyframes, diagnostics between keyframes)
    give the bag the message-by-message path writes, byte for byte."""
    mech = example
    names = OutputNames("/rig/est", "p/")
    t, stamps, arrays, ests, forces = _keyframes(mech, 700, 1)
    calls = [1, 1, 5, 300, 2, 1, 250, 140]
    for kind in ("per", "bulk"):
        (tmp_path / kind).mkdir()
        with OutputBag(tmp_path / kind / "bag", mech, names) as out:
            _write(out, mech, names, kind == "bulk", t, stamps, arrays, ests, forces, calls)
    assert (tmp_path / "per" / "bag" / "bag.mcap").read_bytes() == (tmp_path / "bulk" / "bag" / "bag.mcap").read_bytes()
    assert (tmp_path / "per" / "bag" / "metadata.yaml").read_text() == \
        (tmp_path / "bulk" / "bag" / "metadata.yaml").read_text()
    topics = bag_topics(tmp_path / "bulk" / "bag")
    assert topics["/diagnostics"]["count"] == 7 and topics["/tf_static"]["count"] == 1
    assert topics["/rig/est/joint_states"]["count"] == topics["/tf"]["count"] == 700


def test_the_writer_process_writes_the_same_bag(tmp_path):
    """Keyframe arrays pickled to the writer process, serialised and written there: the bag of
    the in-process OutputBag."""
    mech = config_mechanism("four_bar")
    names = OutputNames()
    t, stamps, arrays, ests, forces = _keyframes(mech, 3000, 2)
    calls = [1] * 50 + [1200, 1750]
    (tmp_path / "here").mkdir()
    (tmp_path / "there").mkdir()
    with OutputBag(tmp_path / "here" / "bag", mech, names) as out:
        _write(out, mech, names, True, t, stamps, arrays, ests, forces, calls)
    with WriterProcess(tmp_path / "there" / "bag", mech.config.source, names) as out:
        _write(out, mech, names, True, t, stamps, arrays, ests, forces, calls)
    assert out.summary()["topics"] == bag_topics(tmp_path / "there" / "bag") == bag_topics(tmp_path / "here" / "bag")
    assert (tmp_path / "here" / "bag" / "bag.mcap").read_bytes() == (tmp_path / "there" / "bag" / "bag.mcap").read_bytes()
