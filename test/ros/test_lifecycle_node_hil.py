"""The managed estimator (``estimator_lifecycle``) driven through the lifecycle services
(lifecycle_msgs ChangeState / GetState) as separate processes over real DDS: the rig and the
managed node on a random ROS_DOMAIN_ID, the test's monitor calling the services.

Walked: configure -> activate -> deactivate -> activate -> (deactivate: cleanup starts from
inactive) -> cleanup -> shutdown. Judged by states
and counts (never by wall time; the rig's truth is the clock):
- inactive after configure: nothing published while 1 s of the rig's time goes by;
- active: estimates arrive and /diagnostics comes;
- deactivate: the estimator makes no keyframe until the next activate (the node's own count)
  and the 8 s of rig time inactive are a hole of more than 4 s in the estimates' stamps;
- activate again: the estimator restarts from the sensors: a reset counted, and its first
  estimate at the pose the encoder reads (crank error < 0.1 rad; the RMSE from 1 s on is
  printed);
- cleanup: the outputs' publishers are gone; shutdown: finalized.
A bad config makes configure fail with the line ``mbfg check`` prints, the node stays
unconfigured, and configures once its ``config`` parameter is fixed.
"""
from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from conftest import CONFIG
from mbfg_ros.ros.launch_description import Description, NodeSpec, sim_rig_description
from mbfg_ros.ros.message_classes import message_class
from mbfg_ros.testing.hil import HilError, HilRun

pytestmark = pytest.mark.ros

FOUR_BAR = CONFIG / "four_bar.yaml"
NODE = "/mbfg_estimator"
UNCONFIGURED, INACTIVE, ACTIVE, FINALIZED = 1, 2, 3, 4       # lifecycle_msgs/msg/State ids


def managed(description: Description) -> Description:
    """``description`` with its estimator started as the managed node."""
    nodes = [replace(n, executable="estimator_lifecycle", module="mbfg_ros.ros.lifecycle_node")
             if n.executable == "estimator" else n for n in description.nodes]
    return replace(description, nodes=nodes)


GOAL = {"configure": INACTIVE, "activate": ACTIVE, "deactivate": INACTIVE, "cleanup": UNCONFIGURED,
        "shutdown": FINALIZED}
"""The state each transition ends in when it succeeds."""


def change_state(run: HilRun, label: str) -> bool:
    """ChangeState with the transition's label (configure, activate, ...); whether it succeeded.
    A transition is not sent twice: if its reply is lost (HilRun.call's ``resend``), the node's
    state says whether it happened."""
    srv = message_class("lifecycle_msgs/srv/ChangeState")
    request = srv.Request()
    request.transition.label = label
    try:
        return bool(run.call("lifecycle_msgs/srv/ChangeState", f"{NODE}/change_state", request,
                             timeout=60.0).success)
    except HilError as exc:
        if "did not answer" not in str(exc):
            raise
        return state(run) == GOAL[label]


def state(run: HilRun) -> int:
    return int(run.call("lifecycle_msgs/srv/GetState", f"{NODE}/get_state", timeout=60.0,
                        resend=5.0).current_state.id)


def truth_stamp(run: HilRun) -> int:
    return run.monitor.truth[-1][0] if run.monitor.truth else 0


def wait_rig_time(run: HilRun, seconds: float, what: str, timeout: float = 120.0) -> None:
    """Until the rig's truth has moved ``seconds`` of its time beyond where it is now (or, before
    the rig started, beyond its first sample)."""
    run.wait_for_status(lambda m: bool(m.truth), timeout, f"the rig's truth ({what})")
    start = truth_stamp(run)
    run.wait_for_status(lambda m: m.truth[-1][0] >= start + seconds * 1e9, timeout,
                        f"{seconds:g} s of rig time ({what})")


@pytest.fixture(scope="module")
def walk(tmp_path_factory):
    """The rig (300 s of time, stopped at the end) and the managed node, walked through every
    transition; what each step saw, for the tests below."""
    description = managed(sim_rig_description(
        str(FOUR_BAR), duration=300.0, rig_parameters={"wait_for_truth": True, "initial_error": [0.1]},
        estimator_parameters={"diagnostics_period": 0.25}))
    run = HilRun(FOUR_BAR, tmp_path_factory.mktemp("lifecycle"), description=description,
                 watch=("joint_states", "/diagnostics"))
    seen: dict = {}
    with run:
        m = run.monitor
        seen["start"] = state(run)
        seen["configure"] = change_state(run, "configure")
        seen["after configure"] = state(run)
        wait_rig_time(run, 1.0, "inactive after configure")
        seen["estimates while inactive"] = len(m.estimates)
        seen["diagnostics while inactive"] = m.topics["/diagnostics"].count

        seen["activate"] = change_state(run, "activate")
        seen["after activate"] = state(run)
        run.wait_for_estimates(count=400, timeout=120)
        run.wait_for_status(lambda mon: mon.node_status("solver") is not None, 60, "/diagnostics")
        seen["resets after activate"] = int(m.node_status("solver").values["resets"])

        seen["deactivate"] = change_state(run, "deactivate")
        seen["after deactivate"] = state(run)
        n = len(m.estimates)
        wait_rig_time(run, 8.0, "inactive")
        seen["estimates at pause"] = n
        seen["activate again"] = change_state(run, "activate")
        seen["after activate again"] = state(run)
        run.wait_for_estimates(count=len(m.estimates) + 600, timeout=120)
        # the pause is a hole in the estimates' stamps; what follows it is the resumed run
        stamps = np.array([e[0] for e in m.estimates], np.int64)
        order = np.argsort(stamps, kind="stable")
        gaps = np.diff(stamps[order])
        hole = int(np.argmax(gaps))
        seen["longest gap"] = float(gaps[hole]) * 1e-9
        resumed_from = int(stamps[order][hole + 1])
        run.wait_for_status(lambda mon: int(mon.node_status("solver").values["resets"])
                            > seen["resets after activate"], 60, "the reset of the second activate")
        seen["resets after resuming"] = int(m.node_status("solver").values["resets"])
        # tracking from 1 s after resuming, against the truth at the estimates' stamps (once the
        # truth, which this process may receive later than the estimates, covers them)
        newest = int(stamps.max())
        run.wait_for_status(lambda mon: mon.truth[-1][0] >= newest, 120, "the truth up to the estimates")
        truth_t = np.array([t[0] for t in m.truth], float)
        truth_q = np.array([t[1][0] for t in m.truth])

        def crank_error(start_ns: int, end_ns: float) -> np.ndarray:
            err = [e[2][0] - np.interp(e[0], truth_t, truth_q) for e in m.estimates
                   if start_ns <= e[0] < end_ns and truth_t[0] <= e[0] <= truth_t[-1]]
            return (np.array(err) + np.pi) % (2 * np.pi) - np.pi

        seen["first 0.2 s after resuming"] = crank_error(resumed_from, resumed_from + 200_000_000)
        crank = crank_error(resumed_from + 1_000_000_000, np.inf)
        seen["crank rmse after resuming"] = (float(np.sqrt(np.mean(crank ** 2))) if crank.size else np.nan,
                                             crank.size)

        seen["deactivate again"] = change_state(run, "deactivate")
        seen["cleanup"] = change_state(run, "cleanup")
        seen["after cleanup"] = state(run)
        topic = run.names.topic("joint_states")
        run.wait_for_status(lambda mon: mon.count_publishers(topic) == 0, 60,
                            "the estimator's ~/joint_states publisher gone after cleanup")
        seen["shutdown"] = change_state(run, "shutdown")
        seen["after shutdown"] = state(run)
        seen["log"] = run.processes.log_text("mbfg_estimator")
        seen["tail"] = run.logs_tail()
    return seen


def test_configure_leaves_it_inactive_and_silent(walk):
    assert walk["start"] == UNCONFIGURED, walk["tail"]
    assert walk["configure"] and walk["after configure"] == INACTIVE, walk["tail"]
    assert walk["estimates while inactive"] == 0 and walk["diagnostics while inactive"] == 0


def keyframe_counts(log: str) -> list[int]:
    """The node's own count of keyframes made, at each activate and deactivate."""
    return [int(x) for x in re.findall(r"\((\d+) keyframes made before\)", log)]


def test_activate_publishes_and_deactivate_stops_publishing(walk):
    assert walk["activate"] and walk["after activate"] == ACTIVE
    assert walk["estimates at pause"] >= 400
    assert walk["deactivate"] and walk["after deactivate"] == INACTIVE
    # the node's own counts: the estimator made no keyframe between the deactivate and the
    # second activate (counted by the node: a late delivery to this test cannot blur it) ...
    at_activate, at_deactivate, at_activate_again, _ = keyframe_counts(walk["log"])
    assert at_activate == 0 and at_deactivate >= 400 and at_activate_again == at_deactivate, walk["log"]
    # ... and nothing went out: the 8 s of rig time inactive are a hole in the stamps of what
    # arrived here (its ends blurred by the rig's lag behind real time on a loaded machine)
    assert walk["longest gap"] > 4.0, walk["longest gap"]


def test_activate_again_resumes_from_the_sensors_without_a_stale_state(walk):
    assert walk["activate again"] and walk["after activate again"] == ACTIVE
    assert walk["log"].count("estimator restarted") == 2
    # the state before the pause is gone (a reset), and the first estimate is at the pose the
    # encoder reads now (initial_pose: sensors; within 0.1 rad, 6 sigma of its 1 deg noise,
    # measured up to 0.035 rad), 8 s of motion away from the old state
    assert walk["resets after resuming"] == walk["resets after activate"] + 1
    first = walk["first 0.2 s after resuming"]
    assert first.size >= 20 and abs(first[0]) < 0.1, first
    # how it tracks from there is the estimator's (printed): a start in mid-motion on a loaded
    # machine is lost now and then (about 1 run in 6 with a core kept busy: the estimate settles
    # ~0.2 rad off, logged as diverged)
    rmse, samples = walk["crank rmse after resuming"]
    print(f"\nresumed after a hole of {walk['longest gap']:.2f} s of rig time; crank error "
          f"{first[0]:+.2e} rad at the first estimate, {np.median(np.abs(first)):.2e} rad (median) "
          f"over the first 0.2 s, RMSE {rmse:.2e} rad over {samples} estimates from 1 s after resuming")


def test_cleanup_frees_the_estimator_and_shutdown_finalizes(walk):
    assert walk["deactivate again"] and walk["cleanup"] and walk["after cleanup"] == UNCONFIGURED
    assert "cleaned up: estimator, subscriptions and publishers freed" in walk["log"]
    assert walk["shutdown"] and walk["after shutdown"] == FINALIZED


def check_line(config) -> str:
    """The one line `mbfg check` prints for ``config`` (without its "error: ")."""
    out = subprocess.run([sys.executable, "-m", "mbfg_ros.cli.main", "check", str(config)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out
    (line,) = [x for x in out.stderr.splitlines() if x.startswith("error: ")]
    return line.removeprefix("error: ")


def test_a_bad_config_fails_configure_with_the_line_of_mbfg_check(tmp_path):
    from rclpy.parameter import Parameter
    broken = tmp_path / "broken.yaml"
    broken.write_text(FOUR_BAR.read_text().replace("urdf: ../urdf/four_bar.urdf",
                                                   f"urdf: {CONFIG.parent}/urdf/four_bar.urdf")
                      .replace("keyframe_rate: 200.0", "keyframe_rte: 200.0"))
    line = check_line(broken)
    node = NodeSpec("mbfg_estimator", "estimator_lifecycle", "mbfg_ros.ros.lifecycle_node",
                    parameters={"config": str(broken)})
    run = HilRun(FOUR_BAR, tmp_path / "run", description=Description("managed", [node]),
                 watch=("joint_states",))
    with run:
        assert state(run) == UNCONFIGURED
        assert not change_state(run, "configure")
        assert state(run) == UNCONFIGURED
        log = run.processes.log_text("mbfg_estimator")
        assert f"configure refused: {line}" in log, (line, log)
        # a parameter read at configure changes while unconfigured, and configure then succeeds
        srv = message_class("rcl_interfaces/srv/SetParameters")
        fix = srv.Request(parameters=[Parameter("config", value=str(FOUR_BAR)).to_parameter_msg()])
        (result,) = run.call("rcl_interfaces/srv/SetParameters", f"{NODE}/set_parameters", fix,
                               timeout=60.0, resend=5.0).results
        assert result.successful, result.reason
        assert change_state(run, "configure") and state(run) == INACTIVE, run.logs_tail()
        # configured, it is refused with the reason
        lag = srv.Request(parameters=[Parameter("lag", value=2.0).to_parameter_msg()])
        (result,) = run.call("rcl_interfaces/srv/SetParameters", f"{NODE}/set_parameters", lag,
                               timeout=60.0, resend=5.0).results
        assert not result.successful
        assert "parameter 'lag' is read at configure: set it while the node is unconfigured" in result.reason
        assert "Traceback" not in run.processes.log_text("mbfg_estimator")
