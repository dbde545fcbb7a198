"""The managed estimator in this process (real rclpy, its lifecycle state machine, no DDS peer):
what each transition creates and frees, configure's refusals, parameters by state. The services
and the outputs over DDS are test_lifecycle_node_hil.py's."""
from __future__ import annotations

import pytest
import rclpy
from rclpy.parameter import Parameter

from conftest import CONFIG
from mbfg_ros.ros.lifecycle_node import ManagedEstimatorNode
from mbfg_ros.ros.processes import fresh_domain_id

pytestmark = pytest.mark.ros

FOUR_BAR = str(CONFIG / "four_bar.yaml")


@pytest.fixture()
def node():
    context = rclpy.Context()
    rclpy.init(args=[], context=context, domain_id=fresh_domain_id())
    n = ManagedEstimatorNode(context=context, enable_rosout=False,
                             parameter_overrides=[Parameter("config", value=FOUR_BAR)])
    try:
        yield n
    finally:
        n.stop()
        n.destroy_node()
        rclpy.try_shutdown(context=context)


def entities(n) -> tuple[int, int, int, int]:
    return (len(list(n.publishers)), len(list(n.subscriptions)), len(list(n.timers)), len(list(n.services)))


def ok(result) -> bool:
    return result.name == "SUCCESS"


def test_configure_creates_and_cleanup_frees_everything(node):
    start = entities(node)
    assert ok(node.trigger_configure()) and node.estimator is not None
    configured = entities(node)
    assert all(c >= s for c, s in zip(configured, start)) and configured != start
    assert node.queue is not None and not node.queue.closed
    assert ok(node.trigger_cleanup())
    assert entities(node) == start and node.estimator is None and node.queue is None
    assert ok(node.trigger_configure()) and entities(node) == configured     # again, the same
    assert ok(node.trigger_shutdown()) and entities(node) == start


def test_a_refused_configure_leaves_nothing_behind_and_a_fixed_parameter_configures(node):
    start = entities(node)
    assert node.set_parameters([Parameter("world_frame", value="crank")])[0].successful
    assert node.trigger_configure().name == "FAILURE"
    assert node._state_machine.current_state[1] == "unconfigured" and entities(node) == start
    assert node.set_parameters([Parameter("world_frame", value="map")])[0].successful
    assert ok(node.trigger_configure())


def test_parameters_read_at_configure_change_only_while_unconfigured(node):
    assert node.set_parameters([Parameter("lag", value=2.0)])[0].successful
    assert ok(node.trigger_configure()) and node.estimator.cfg.lag == 2.0
    refused = node.set_parameters([Parameter("lag", value=0.5)])[0]
    assert not refused.successful and "read at configure" in refused.reason
    assert node.set_parameters([Parameter("diagnostics_period", value=0.5)])[0].successful
    assert node._diag_timer.is_canceled()          # inactive: no /diagnostics, whatever the period
    assert ok(node.trigger_activate()) and not node._diag_timer.is_canceled()
    assert node._diag_timer.timer_period_ns == 500_000_000
