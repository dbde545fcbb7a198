"""The ``estimator_lifecycle`` node: the estimator as a managed (lifecycle) node.

Run: ``ros2 run mbfg_ros estimator_lifecycle --ros-args -p config:=/path/rig.yaml`` (pip
environment: ``python -m mbfg_ros.ros.lifecycle_node ...``; launch: ``estimator.launch.py
managed:=true``), then drive it through the lifecycle services (``ros2 lifecycle set
/mbfg_estimator configure``, lifecycle_msgs/srv/ChangeState and GetState). Same node name,
parameters, topics and outputs as the plain ``estimator`` (:mod:`mbfg_ros.ros.estimator_node`,
which stays the default); the transitions (README "Managed mode"):

- start: the parameters are declared (a malformed one still stops the process, exit status 2);
  unconfigured, no subscriptions, no outputs;
- **configure**: load and validate the config and URDF (the validation of ``mbfg check``), build
  the estimator, its subscriptions and publishers. A refusal is a FAILED
  transition (the node stays unconfigured) and the log says why in the line ``mbfg check``
  prints: ``configure refused: <line>``. The latched outputs (``~/robot_description``,
  /tf_static) go out here: they describe the configured rig;
- **activate**: the sensor messages that waited in DDS are discarded, the estimator is reset
  with a fresh time line (:meth:`~mbfg_ros.intake.feeder.Feeder.resume`; it starts as at a
  first run, from the encoders' pose with ``initial_pose: sensors``), then readings are taken
  and every output published (lifecycle publishers);
- **deactivate**: readings are no longer taken (those arriving are dropped before decoding) nor
  fed (those already taken are dropped and counted, :meth:`~mbfg_ros.intake.feeder.Feeder.pause`),
  the publishers are disabled and /diagnostics stops (it judges the sensors only while active);
- **cleanup** (from inactive): estimating stops, every subscription, publisher, timer and
  service of configure is destroyed and the estimator freed; configure may run again (with
  changed parameters);
- **shutdown** (from unconfigured, inactive or active): as cleanup; the node is finalized and
  spins on until the process is stopped.

Parameters read at configure can change while the node is unconfigured (``ros2 param set``);
the run-time ones (:mod:`mbfg_ros.ros.runtime_parameters`) in any state.
"""
from __future__ import annotations

import gc
import sys
import traceback

from rclpy.lifecycle import LifecycleNodeMixin, LifecycleState, TransitionCallbackReturn
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile

from mbfg_ros.errors import MbfgError
from mbfg_ros.ros.estimator_node import NODE_NAME, EstimatorNode
from mbfg_ros.ros.node_runner import run_node
from mbfg_ros.ros.node_parameters import check_value, declare_node_parameters
from mbfg_ros.ros.parameter_tables import ESTIMATOR_PARAMETERS
from mbfg_ros.ros.rclpy_compat import take_waiting
from mbfg_ros.ros.runtime_parameters import RuntimeParameters

class ManagedEstimatorNode(LifecycleNodeMixin, EstimatorNode):
    """The estimator node under the lifecycle state machine (see the module docstring)."""

    _configuring = False                       # configure is creating publishers

    def __init__(self, node_name: str = NODE_NAME, ros_argv: list[str] | None = None, **kwargs) -> None:
        Node.__init__(self, node_name, **kwargs)
        self.settings = declare_node_parameters(self, ESTIMATOR_PARAMETERS, ros_argv,
                                                writable=[s.name for s in ESTIMATOR_PARAMETERS])
        LifecycleNodeMixin.__init__(self)
        self.configured = False
        self.active = False
        self._before: set[int] | None = None              # what existed before configure
        self.runtime = RuntimeParameters(self, configure_time=self._unconfigured)

    def _unconfigured(self) -> bool:
        return self._state_machine.current_state[1] == "unconfigured"

    # ------------------------------------------------------------------------------------------
    # what configure creates: publishers gated by the lifecycle, subscriptions gated by `active`
    def create_publisher(self, msg_type, topic, qos_profile, **kwargs):
        """While configuring, a lifecycle publisher (silent until activate); a latched
        (transient-local) publisher stays a plain one: the configured rig's description goes out
        at configure."""
        latched = (isinstance(qos_profile, QoSProfile)
                   and qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL)
        if self._configuring and not latched:
            return self.create_lifecycle_publisher(msg_type, topic, qos_profile, **kwargs)
        return Node.create_publisher(self, msg_type, topic, qos_profile, **kwargs)

    def create_subscription(self, msg_type, topic, callback, qos_profile, **kwargs):
        """A sensor subscription takes messages only while active (others, e.g. /clock, always)."""
        router = getattr(self, "router", None)
        if router is not None and topic in router.topics:
            inner = callback

            def callback(msg, inner=inner):
                if self.active:
                    inner(msg)
        return Node.create_subscription(self, msg_type, topic, callback, qos_profile, **kwargs)

    def _owned(self) -> list[tuple[str, object]]:
        return ([("publisher", e) for e in self.publishers] + [("subscription", e) for e in self.subscriptions]
                + [("timer", e) for e in self.timers] + [("service", e) for e in self.services])

    def _created(self) -> list[tuple[str, object]]:
        """What configure created, and what the node created since (a load-cell topic
        re-subscribed with its publisher's type); not the clock's /clock subscription."""
        if self._before is None:
            return []
        return [(kind, e) for kind, e in self._owned() if id(e) not in self._before
                and not (kind == "subscription" and e.topic_name == "/clock")]

    # ------------------------------------------------------------------------------------------
    # transitions
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._before = {id(e) for _, e in self._owned()}
        try:
            self.settings = {s.name: check_value(s, self.get_parameter(s.name).value)
                             for s in ESTIMATOR_PARAMETERS}
            self._configuring = True
            try:
                self._set_up(self.settings)
            finally:
                self._configuring = False
        except (MbfgError, LookupError) as exc:      # the rig or a parameter: one line
            self._tear_down()
            self.get_logger().error(f"configure refused: {exc}")
            return TransitionCallbackReturn.FAILURE
        except Exception:                            # noqa: BLE001 (rclpy would swallow it)
            self._tear_down()
            self.get_logger().error("configure failed:\n" + traceback.format_exc())
            return TransitionCallbackReturn.FAILURE
        self.configured = True
        self._diag_timer.cancel()                    # /diagnostics while active only
        return super().on_configure(state)

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        waited = self._discard_waiting()
        with self._lock:
            keyframes = self.estimator.health.keyframes
            self.feeder.resume("activate")
            self.health.restart()                    # the health window starts again too
        result = super().on_activate(state)          # the lifecycle publishers publish
        self.active = True
        self._diag_timer.reset()
        self.get_logger().info("active: taking readings from the sensors (estimator restarted; "
                               f"{waited} messages that waited in DDS discarded) and publishing "
                               f"({keyframes} keyframes made before)")
        return result

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.active = False
        with self._lock:                             # from here on nothing reaches the estimator
            self.feeder.pause()
            keyframes = self.estimator.health.keyframes
        self._drop_taken()
        self._diag_timer.cancel()                    # no health verdicts on readings not taken
        result = super().on_deactivate(state)        # the lifecycle publishers go silent
        self.get_logger().info("inactive: no readings taken or fed, nothing published "
                               f"({keyframes} keyframes made before)")
        return result

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._tear_down()
        self.get_logger().info("cleaned up: estimator, subscriptions and publishers freed")
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.active = False
        self._tear_down()
        return TransitionCallbackReturn.SUCCESS

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.active = False
        self._tear_down()
        return TransitionCallbackReturn.SUCCESS

    # ------------------------------------------------------------------------------------------
    def _taking(self) -> bool:
        """Sensor messages are taken while active only (inactive they wait in DDS, discarded at
        activate)."""
        return self.active

    def _estimates_published(self) -> int:
        """~/joint_states messages the node has published (one per estimate)."""
        return self.published.get(self.names.topic("joint_states"), 0)

    def _discard_waiting(self, most: int = 1_000_000) -> int:
        """Take and drop the sensor messages waiting in DDS (sent while inactive: a reliable
        subscription keeps ``qos_depth`` of them); how many. Runs in the executor's thread, as
        the subscriptions' callbacks do."""
        dropped = 0
        for _, sub in list(self._subs.values()):
            while dropped < most and take_waiting(sub) is not None:
                dropped += 1
        return dropped

    def _drop_taken(self, most: int = 10_000) -> None:
        """The readings taken but not fed yet (the input queue, a backlog) go through the paused
        feeder, which drops and counts them: none of them is fed after the next activate."""
        for _ in range(most):
            if not (self._ready or len(self.queue)):
                return
            self._estimate()

    def _tear_down(self) -> None:
        """Stop estimating, destroy what configure created, free the estimator."""
        self.active = False
        if getattr(self, "queue", None) is not None:
            with self._lock:
                self.feeder.pause()                  # a backlog waiting is dropped and counted
            EstimatorNode.stop(self)
        destroy = {"publisher": self.destroy_lifecycle_publisher, "subscription": self.destroy_subscription,
                   "timer": self.destroy_timer, "service": self.destroy_service}
        for kind, entity in self._created():
            destroy[kind](entity)
        self._before = None
        for name in ("estimator", "feeder", "order", "queue", "router", "mech", "health", "tf",
                     "_pub", "_subs", "_tf_data"):
            if hasattr(self, name):
                setattr(self, name, None)
        self.configured = False
        gc.collect()

    def stop(self) -> None:
        """Stop estimating if configured (main's clean exit)."""
        if self.configured:
            self._tear_down()


def main(args: list[str] | None = None) -> int:
    """Console script ``estimator_lifecycle``: exit 0 on Ctrl-C / shutdown, 2 on bad parameters."""
    return run_node(ManagedEstimatorNode, NODE_NAME, args)


if __name__ == "__main__":
    sys.exit(main())
