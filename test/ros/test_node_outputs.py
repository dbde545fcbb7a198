"""The estimator node's outputs from byte templates: the bytes it publishes are the bytes of the
messages built and serialised one by one (every output topic, TF and forces included), and the
node falls back to that path with ``publish_covariance``. A real node in a process of its own
(rclpy initialised there, once per case; the cases one after the other in that one process),
fed random keyframe states."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from conftest import CONFIG
from mbfg_ros.ros.processes import ros_environment

pytestmark = pytest.mark.ros

PROBE = textwrap.dedent("""
    import sys, time, traceback
    import numpy as np
    import rclpy
    from mbfg_ros.estimation.layout import StateLayout
    from mbfg_ros.estimation.outputs import Estimate
    from mbfg_ros.model.assembly import initial_state
    from mbfg_ros.ros import estimator_node

    def probe(config, covariance):
        rclpy.init(args=["probe", "--ros-args", "-p", f"config:={config}", "-p", f"publish_covariance:={covariance}"])
        node = estimator_node.EstimatorNode()
        mech = node.mech
        lay = StateLayout.for_mechanism(mech, mech.config.estimator)
        q0, v0 = initial_state(mech, mech.create_data())
        rng = np.random.default_rng(3)
        ests = [Estimate(0.004 + 0.005 * i, i, False,
                         lay.pack(q0 + 0.01 * rng.standard_normal(mech.n), v0 + rng.standard_normal(mech.n),
                                  rng.standard_normal(mech.n), rng.standard_normal(mech.m)),
                         lay, rng.standard_normal(mech.n)) for i in range(7)]
        node.feeder.epoch_ns = 1_700_000_000_000_000_000
        node._wanted_at = time.monotonic() + 3600              # every output has a subscriber
        node._wanted_topics = set(node._pub) | {"/tf"}
        fast = node._messages(ests[:1]) + node._messages(ests[1:])
        print("templates", bool(node._templates))
        node._templates = False
        slow = node._messages(ests[:1]) + node._messages(ests[1:])
        assert [(t, s) for t, _, s in fast] == [(t, s) for t, _, s in slow]
        missing = {t for t in node._wanted_topics if t != "/diagnostics" and "covariance" not in t} - {t for t, _, _ in slow}
        assert not missing, missing
        bad = [t for (t, a, _), (_, b, _) in zip(fast, slow) if a != b]
        assert not bad, bad
        print("compared", len(slow), "messages on", len({t for t, _, _ in slow}), "topics")
        node.stop()
        node.destroy_node()
        rclpy.try_shutdown()

    for i, (config, covariance) in enumerate(zip(sys.argv[1::2], sys.argv[2::2])):
        print(f"=== case {i}", flush=True)
        try:
            probe(config, covariance)
            print("case passed", flush=True)
        except BaseException:
            traceback.print_exc(file=sys.stdout)
            rclpy.try_shutdown()
""")


CASES = [("four_bar.yaml", False), ("arm6_ros2_control.yaml", False), ("four_bar.yaml", True)]


@pytest.fixture(scope="module")
def probed(tmp_path_factory) -> tuple[list[str], str]:
    """Every case of :data:`CASES` one after the other in one process (rclpy initialised and
    shut down for each): each case's output, and the process's stderr."""
    args = [a for config, covariance in CASES for a in (str(CONFIG / config), str(covariance).lower())]
    out = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=600,
                         env=ros_environment(tmp_path_factory.mktemp("outputs")))
    assert out.returncode == 0, out.stdout + out.stderr
    cases = out.stdout.split("=== case ")[1:]
    assert len(cases) == len(CASES), out.stdout + out.stderr
    return cases, out.stderr


@pytest.mark.parametrize("case", range(len(CASES)), ids=[f"{c}-{v}" for c, v in CASES])
def test_published_bytes_are_the_serialised_messages(probed, case):
    cases, stderr = probed
    out = cases[case]
    covariance = CASES[case][1]
    assert "case passed" in out, out + stderr
    assert f"templates {not covariance}" in out, out
    assert "compared" in out, out
