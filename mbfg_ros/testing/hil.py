"""Hardware-in-the-loop runs: the simulated rig and the estimator as separate processes, watched.

:class:`HilRun` starts the ``sim_rig`` and ``estimator`` nodes of
:func:`~mbfg_ros.ros.launch_description.sim_rig_description` (the launch file's own description)
as processes on a private DDS domain (random ``ROS_DOMAIN_ID``, localhost only, logs in
``log_dir``), and an :class:`~mbfg_ros.ros.output_monitor.OutputMonitor` in this process that
records the estimator's outputs, the rig's ground truth and /diagnostics. A test then waits
(for estimates, for the rig to finish, for the estimator to catch up) and compares::

    with HilRun("config/my_rig.yaml", tmp_path, duration=6.0,
                rig={"initial_error": [0.05]}) as run:
        run.wait_for_estimates(timeout=60)
        run.wait_for_rig(timeout=60)
        run.wait_caught_up(timeout=60)
        errors = run.monitor.tracking(after=2.0)      # RMSE per joint vs the truth
        assert errors["crank_joint"]["q_rmse"] < 0.01, run.logs_tail()

Every process is stopped when the block ends (also on failure); :meth:`HilRun.logs_tail` gives
the end of every node's log for assertion messages. Nothing here mocks ROS: it is real rclpy
and Fast DDS between real processes.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from mbfg_ros.io.estimate_messages import OutputNames
from mbfg_ros.model.mechanism import load_mechanism
from mbfg_ros.ros.launch_description import ESTIMATOR_EXECUTABLES, Description, sim_rig_description
from mbfg_ros.ros.output_monitor import MonitorThread, OutputMonitor
from mbfg_ros.ros.processes import NodeProcesses, ros_environment


class HilError(AssertionError):
    """A HIL run did not get where it was asked to go (the message has the logs' tails)."""


class HilRun:
    """The rig and the estimator of ``config`` live over DDS (see the module docstring).

    Args:
        config: the mechanism config both nodes use.
        log_dir: where the processes' logs, params files and ROS logs go.
        duration: rig time (s); the rig process exits after it.
        rig: extra sim_rig parameters (scenario, faults, ``publish_clock`` is set from
            ``use_sim_time``).
        estimator: extra estimator parameters.
        use_sim_time: the rig publishes /clock and the estimator follows it.
        description: start this Description instead (e.g. a replay); ``config`` still tells
            the monitor which mechanism to expect.
        watch: the estimator outputs the monitor records (e.g. ``("joint_states",
            "/diagnostics")``; default: all). The estimator does not build outputs nobody
            subscribes to, so a lean watch list keeps a loaded machine faster.
    """

    def __init__(self, config: str | Path, log_dir: str | Path, *, duration: float = 8.0,
                 rig: dict[str, Any] | None = None, estimator: dict[str, Any] | None = None,
                 use_sim_time: bool = False, description: Description | None = None,
                 domain_id: int | None = None, watch: tuple[str, ...] | None = None) -> None:
        self.config = str(config)
        self.log_dir = Path(log_dir)
        self.duration = float(duration)
        self.mech = load_mechanism(self.config)
        # the rig starts once the estimator and this process's monitor subscribe
        rig = {"wait_for_truth": True, **(rig or {})}
        self.description = description or sim_rig_description(
            self.config, use_sim_time=use_sim_time, duration=self.duration, rig_parameters=rig,
            estimator_parameters=estimator)
        self.env = ros_environment(self.log_dir, domain_id)
        self.domain_id = int(self.env["ROS_DOMAIN_ID"])
        self.processes = NodeProcesses(self.description, self.log_dir, self.env)
        self.watch = watch
        self._monitor: MonitorThread | None = None
        est = next((n for n in self.description.nodes if n.executable in ESTIMATOR_EXECUTABLES), None)
        ns = (est.namespace.strip("/") + "/") if est is not None and est.namespace else ""
        self.names = OutputNames("/" + ns + (est.name if est is not None else "mbfg_estimator"))
        rig_node = next((n for n in self.description.nodes if n.executable == "sim_rig"), None)
        self.rig_process = (self.processes.process_name(rig_node) if rig_node is not None
                            else "sim_rig")
        """The rig's process name (``<namespace>_sim_rig`` in a namespace)."""

    # ------------------------------------------------------------------------------------------
    @property
    def monitor(self) -> OutputMonitor:
        if self._monitor is None:
            raise RuntimeError("the HIL run is not started")
        return self._monitor.monitor

    def start(self) -> "HilRun":
        self.log_dir.mkdir(parents=True, exist_ok=True)
        # a rig that waits for the monitor's truth subscription then also waits, in effect, for
        # the estimates to reach the monitor (see OutputMonitor's truth_after_estimator)
        rig_node = next((n for n in self.description.nodes if n.executable == "sim_rig"), None)
        has_estimator = any(n.executable in ESTIMATOR_EXECUTABLES for n in self.description.nodes)
        gated = (has_estimator and rig_node is not None
                 and bool(rig_node.parameters.get("wait_for_truth", False)))
        self._monitor = MonitorThread(self.mech, self.domain_id, self.names, outputs=self.watch,
                                      truth_after_estimator=gated)
        try:
            self.processes.start()
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> dict[str, int | None]:
        """Stop every process (SIGINT, then harder) and the monitor; the exit statuses."""
        codes = self.processes.stop() if self.processes.procs else {}
        if self._monitor is not None:
            self._monitor.close()
            self._monitor = None
        return codes

    def __enter__(self) -> "HilRun":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------------------------------
    def logs_tail(self, lines: int = 25) -> str:
        """The end of every process's log (for assertion messages)."""
        out = []
        for name in self.processes.logs:
            text = self.processes.log_text(name).splitlines()
            out.append(f"--- {name} (exit {self.processes.poll().get(name)}), last {lines} lines:")
            out.extend(text[-lines:])
        return "\n".join(out)

    def _fail(self, what: str) -> HilError:
        return HilError(f"{what} (ROS_DOMAIN_ID {self.domain_id}, logs in {self.log_dir})\n"
                        + self.logs_tail())

    def _check_alive(self, allow_exit: set[str] = frozenset()) -> None:
        for name, rc in self.processes.exited().items():
            if name not in allow_exit or rc != 0:
                raise self._fail(f"{name} exited with status {rc}")

    def wait_for_estimates(self, count: int = 1, timeout: float = 60.0) -> None:
        """Until ``count`` estimates arrived on ~/joint_states."""
        end = time.monotonic() + timeout
        while len(self.monitor.estimates) < count:
            self._check_alive({self.rig_process})
            if time.monotonic() > end:
                raise self._fail(f"fewer than {count} estimates after {timeout:g} s "
                                 f"({len(self.monitor.estimates)} arrived)")
            time.sleep(0.1)

    def wait_for_rig(self, timeout: float = 120.0) -> None:
        """Until the rig process finished its run (exit status 0)."""
        end = time.monotonic() + timeout
        while self.rig_process not in self.processes.exited():
            self._check_alive({self.rig_process})
            if time.monotonic() > end:
                raise self._fail(f"the rig did not finish within {timeout:g} s")
            time.sleep(0.1)
        self._check_alive({self.rig_process})

    def wait_caught_up(self, margin: float = 0.1, timeout: float = 120.0, settle: float = 1.0) -> None:
        """Until the newest estimate is within ``margin`` s of the newest truth stamp (the
        estimator has processed everything the rig sent, even if it ran behind real time) and,
        once the rig has finished, neither has grown for ``settle`` s (this process, on a loaded
        machine, may still be receiving what was published)."""
        end = time.monotonic() + timeout
        last, since = None, time.monotonic()
        while True:
            est = self.monitor.estimates[-1][0] if self.monitor.estimates else None
            tru = self.monitor.truth[-1][0] if self.monitor.truth else None
            counts = (len(self.monitor.estimates), len(self.monitor.truth))
            if counts != last:
                last, since = counts, time.monotonic()
            settled = self.rig_process in self.processes.exited() and time.monotonic() - since >= settle
            if est is not None and tru is not None and est >= tru - margin * 1e9 and settled:
                return
            self._check_alive({self.rig_process})
            if time.monotonic() > end:
                lag = "no estimates" if est is None or tru is None else f"{(tru - est) * 1e-9:.2f} s behind"
                raise self._fail(f"the estimator did not catch up with the rig within {timeout:g} s ({lag})")
            time.sleep(0.1)

    def wait_for_status(self, predicate, timeout: float = 30.0, what: str = "a status") -> None:
        """Until ``predicate(monitor)`` holds (monitor lock held while it runs)."""
        if not self.monitor.wait_for(predicate, timeout):
            raise self._fail(f"{what} did not happen within {timeout:g} s")

    def call_reset(self, timeout: float = 10.0):
        """Call the estimator's ``~/reset`` service (std_srvs/Trigger); the response."""
        return self.call("std_srvs/srv/Trigger", self.names.topic("reset"), timeout=timeout)

    def call(self, srv_type: str, service: str, request=None, timeout: float = 10.0,
             resend: float | None = None):
        """Call ``service`` (of type ``srv_type``, e.g. "lifecycle_msgs/srv/ChangeState") from
        the monitor's node with ``request`` (default: an empty one); the response. Raises
        HilError when the service does not appear or answer within ``timeout`` s.

        ``resend``: s after which an unanswered request is sent again (the first answer wins),
        for a request that may be repeated (a query, setting the same value): a server whose
        reply writer has not yet discovered this client's reply reader drops the reply (Fast DDS
        logs "failed to send response (timeout)"), seen on a loaded machine; wait_for_service
        only sees the request side matched. None: sent once (a lifecycle transition)."""
        from mbfg_ros.ros.message_classes import message_class
        node = self.monitor
        srv = message_class(srv_type)
        client = node.create_client(srv, service)
        try:
            if not client.wait_for_service(timeout_sec=timeout):
                raise self._fail(f"no service {service} within {timeout:g} s")
            request = request if request is not None else srv.Request()
            futures = [client.call_async(request)]
            end = time.monotonic() + timeout
            sent = time.monotonic()
            while not any(f.done() for f in futures):
                now = time.monotonic()
                if now > end:
                    raise self._fail(f"the service {service} did not answer within {timeout:g} s"
                                     + (f" ({len(futures)} requests)" if len(futures) > 1 else ""))
                if resend is not None and now - sent > resend:
                    futures.append(client.call_async(request))
                    sent = now
                time.sleep(0.02)
            return next(f for f in futures if f.done()).result()
        finally:
            node.destroy_client(client)


def start_estimator_expecting_failure(parameters: dict[str, Any], log_dir: str | Path,
                                      timeout: float = 60.0) -> tuple[int | None, str]:
    """Start the estimator alone with ``parameters``; (exit status, its output) once it exits
    (None if it was still running after ``timeout`` s and had to be stopped)."""
    from mbfg_ros.ros.launch_description import Description, NodeSpec
    node = NodeSpec("mbfg_estimator", "estimator", "mbfg_ros.ros.estimator_node",
                    parameters=dict(parameters))
    procs = NodeProcesses(Description("estimator", [node]), log_dir, ros_environment(log_dir))
    with procs:
        done = procs.wait(timeout=timeout, any_required=False)
        rc = done.get("mbfg_estimator")
    return rc, procs.log_text("mbfg_estimator")
