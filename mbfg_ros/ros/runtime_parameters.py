"""Parameters that change on a running estimator node (``ros2 param set``), and the refusals.

The parameter table (:data:`~mbfg_ros.ros.parameter_tables.ESTIMATOR_PARAMETERS`) marks the
run-time-safe parameters ``runtime=True``; they are declared writable, every other one read-only
(rclpy itself refuses those: "Trying to set a read-only parameter"). The managed node
(:mod:`mbfg_ros.ros.lifecycle_node`) also declares the others writable: they are read at
configure, so they may change while it is unconfigured and are refused in any other state.

:class:`RuntimeParameters` is the node's ``add_on_set_parameters_callback``. A change is checked
against the table (:func:`~mbfg_ros.ros.node_parameters.check_value`) and applied under the
node's estimator lock, so it lands between two batches of estimates (a keyframe boundary: every
message of a keyframe is built with one setting):

- ``diagnostics_period``: the /diagnostics timer's period;
- ``publish_tf``, ``publish_forces``, ``publish_accelerations``: the output switches (/tf,
  ``~/forces/*``, ``~/dynamic_joint_states``); switched off, their messages are neither built nor
  published. Switching on an output the node started without is refused (its publishers do not
  exist: restart the node with it on);
- ``silence_timeout``: the health check's silence threshold on /diagnostics.

Anything else is refused with the reason (``SetParametersResult(successful=False, reason=...)``).
The estimator's noise model is not a node parameter (it is the config's, fixed in the factors of
the window), so there is nothing of it to change here.
"""
from __future__ import annotations

from typing import Any, Callable

from mbfg_ros.ros.node_parameters import ParameterError, ParameterSpec, check_value
from mbfg_ros.ros.parameter_tables import ESTIMATOR_PARAMETERS

SWITCHES = {"publish_tf": "/tf", "publish_forces": "/forces/",
            "publish_accelerations": "/dynamic_joint_states"}
"""Output switch -> what names the output topics it gates (/tf, or a part of the topic name)."""


def switched_topics(name: str, topics) -> set[str]:
    """The topics among ``topics`` that the output switch ``name`` gates."""
    mark = SWITCHES[name]
    return {t for t in topics if (t == mark if mark == "/tf" else mark in t)}


class RuntimeParameters:
    """The set-parameters callback of an estimator node (see the module docstring).

    ``configure_time``: a callable telling whether parameters read at configure may change now
    (the managed node: while unconfigured); None for the plain node, whose other parameters are
    read-only."""

    def __init__(self, node, specs: tuple[ParameterSpec, ...] = ESTIMATOR_PARAMETERS,
                 configure_time: Callable[[], bool] | None = None) -> None:
        self.node = node
        self.specs = {s.name: s for s in specs}
        self.configure_time = configure_time
        node.add_on_set_parameters_callback(self._on_set)

    def _on_set(self, parameters) -> Any:
        from rcl_interfaces.msg import SetParametersResult
        staged: dict[str, Any] = {}
        for p in parameters:
            spec = self.specs.get(p.name)
            if spec is None:                     # use_sim_time, qos overrides: rclpy's own
                continue
            try:
                value = check_value(spec, p.value)
            except ParameterError as exc:
                return SetParametersResult(successful=False, reason=str(exc))
            if spec.runtime and self._running():
                reason = self._refusal(spec, value)
            elif not spec.runtime and self.configure_time is not None:
                reason = "" if self.configure_time() else (
                    f"parameter '{spec.name}' is read at configure: set it while the node is "
                    "unconfigured (cleanup, set it, configure)")
            else:
                reason = "" if spec.runtime else f"parameter '{spec.name}' is read-only"
            if reason:
                return SetParametersResult(successful=False, reason=reason)
            staged[spec.name] = value
        if staged:
            self._apply(staged)
        return SetParametersResult(successful=True)

    def _running(self) -> bool:
        """Whether the node has its estimator and outputs (the managed node: once configured)."""
        return bool(getattr(self.node, "configured", True))

    def _refusal(self, spec: ParameterSpec, value: Any) -> str:
        """Why a run-time change cannot be applied now ("" if it can)."""
        node = self.node
        if spec.name in SWITCHES and value:
            from mbfg_ros.io.estimate_messages import output_topics
            possible = set(output_topics(node.mech, node.names, node.settings["publish_covariance"]))
            missing = switched_topics(spec.name, possible) - set(node._pub)
            if spec.name == "publish_tf":
                missing = set() if node.tf is not None else {"/tf"}
            if missing:
                return (f"parameter '{spec.name}' cannot switch on at run time: the node started "
                        f"with it off and has no publisher of {', '.join(sorted(missing))}; restart "
                        "the node with it on")
        return ""

    def _apply(self, values: dict[str, Any]) -> None:
        """Apply checked values: under the estimator lock when the node runs (between two
        batches of estimates), else only recorded for the next configure."""
        node = self.node
        if not self._running():
            node.settings.update(values)
            return
        with node._lock:
            for name, value in values.items():
                if name in SWITCHES:
                    topics = switched_topics(name, [*node._pub, "/tf"])
                    if value:
                        node.muted -= topics
                    else:
                        node.muted |= topics
                elif name == "diagnostics_period":
                    timer = node._diag_timer
                    paused = timer.is_canceled()         # (the managed node while inactive)
                    timer.timer_period_ns = int(round(value * 1e9))
                    if not paused:
                        timer.reset()                    # the new period from now
                elif name == "silence_timeout":
                    node.order.set_silence_timeout(value)
                node.settings[name] = value
        node.get_logger().info("parameters changed at run time: "
                               + ", ".join(f"{k} = {v!r}" for k, v in values.items()))
