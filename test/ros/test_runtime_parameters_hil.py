"""Parameters changed on the running estimator through the parameter services (rcl_interfaces
SetParameters / DescribeParameters), the rig live over DDS on a random ROS_DOMAIN_ID.

Judged by counts of the node's outputs, with the rig's keyframes as the clock (never wall time):
- the descriptors: run-time ones writable, the others read-only;
- ``publish_forces`` off: no force message stamped in the last 2 s of the 4 s of keyframes
  waited after the switch; on again: they come back, every one stamped at a keyframe of ~/joint_states;
- ``diagnostics_period`` 1 s -> 0.2 s: the spacing of /diagnostics (the node's stamps) follows;
- refused with the reason: a read-only parameter (``lag``), an output the node started without
  (``publish_accelerations``), a value out of range or of the wrong type.
"""
from __future__ import annotations

import numpy as np
import pytest

from conftest import CONFIG
from mbfg_ros.ros.message_classes import message_class
from mbfg_ros.testing.hil import HilRun

pytestmark = pytest.mark.ros

FOUR_BAR = CONFIG / "four_bar.yaml"
FORCES = "forces/coupler_rocker"


def set_parameter(run: HilRun, name: str, value):
    """SetParameters with one parameter; its SetParametersResult."""
    from rclpy.parameter import Parameter
    srv = message_class("rcl_interfaces/srv/SetParameters")
    request = srv.Request(parameters=[Parameter(name, value=value).to_parameter_msg()])
    (result,) = run.call("rcl_interfaces/srv/SetParameters", run.names.topic("set_parameters"),
                         request, timeout=60.0, resend=5.0).results
    return result


def wait_keyframes(run: HilRun, count: int, what: str) -> None:
    """Until ``count`` more estimates arrived on ~/joint_states."""
    start = len(run.monitor.estimates)
    run.wait_for_status(lambda m: len(m.estimates) >= start + count, 120,
                        f"{count} more estimates ({what})")


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """The rig (300 s, stopped at the end of the module) and the plain estimator without
    ~/dynamic_joint_states."""
    run = HilRun(FOUR_BAR, tmp_path_factory.mktemp("runtime_parameters"), duration=300.0,
                 estimator={"publish_accelerations": False},
                 watch=("joint_states", FORCES, "/diagnostics"))
    with run:
        run.wait_for_estimates(count=200, timeout=120)
        yield run


def test_the_descriptors_say_which_parameters_change_at_run_time(live):
    srv = message_class("rcl_interfaces/srv/DescribeParameters")
    names = ["diagnostics_period", "publish_forces", "silence_timeout", "lag", "config", "publish_covariance"]
    response = live.call("rcl_interfaces/srv/DescribeParameters", live.names.topic("describe_parameters"),
                         srv.Request(names=names), timeout=60.0, resend=5.0)
    read_only = {d.name: d.read_only for d in response.descriptors}
    assert read_only == {"diagnostics_period": False, "publish_forces": False, "silence_timeout": False,
                         "lag": True, "config": True, "publish_covariance": True}


def test_a_publishing_switch_applies_at_a_keyframe_boundary(live):
    m = live.monitor
    forces = m.topics[live.names.topic(FORCES)]
    live.wait_for_status(lambda mon: forces.count >= 100, 60, "force estimates")
    result = set_parameter(live, "publish_forces", False)
    assert result.successful, result.reason
    wait_keyframes(live, 800, "publish_forces off")
    # the newest force message is more than 2 s of keyframes older than the newest estimate (by
    # stamps: a message delivered late to this process does not blur it)
    keyframes = m.topics[live.names.topic("joint_states")]
    assert max(keyframes.stamps) - max(forces.stamps) > 2_000_000_000, live.logs_tail()
    off = forces.count
    result = set_parameter(live, "publish_forces", True)
    assert result.successful, result.reason
    live.wait_for_status(lambda mon: forces.count >= off + 200, 120, "forces again")
    # every force message went out with its keyframe's ~/joint_states (same stamp)
    newest = max(forces.stamps)
    live.wait_for_status(lambda mon: max(keyframes.stamps) >= newest, 60, "the estimates up to the forces")
    keyframes = set(keyframes.stamps)
    assert set(forces.stamps) <= keyframes
    assert "parameters changed at run time: publish_forces = False" in live.processes.log_text("mbfg_estimator")


def test_the_diagnostics_period_changes_at_run_time(live):
    diagnostics = live.monitor.topics["/diagnostics"]
    live.wait_for_status(lambda mon: diagnostics.count >= 4, 60, "/diagnostics at the start-up period")
    before = np.diff(np.unique(diagnostics.stamps)) * 1e-9
    result = set_parameter(live, "diagnostics_period", 0.2)
    assert result.successful, result.reason
    start = diagnostics.count
    live.wait_for_status(lambda mon: diagnostics.count >= start + 12, 120, "/diagnostics at 0.2 s")
    after = np.diff(np.unique(diagnostics.stamps[start + 1:])) * 1e-9
    assert np.median(before) > 0.7 and np.median(after) < 0.4, (before, after)


@pytest.mark.parametrize("name, value, reason", [
    ("lag", 2.0, "read-only"),
    ("config", "/other/rig.yaml", "read-only"),
    ("publish_accelerations", True, "parameter 'publish_accelerations' cannot switch on at run time: "
                                    "the node started with it off"),
    ("diagnostics_period", 0.001, "diagnostics_period"),
    ("diagnostics_period", "fast", "parameter 'diagnostics_period' must be a number (value: 'fast')"),
])
def test_other_changes_are_refused_with_the_reason(live, name, value, reason):
    result = set_parameter(live, name, value)
    assert not result.successful and reason in result.reason, result.reason
