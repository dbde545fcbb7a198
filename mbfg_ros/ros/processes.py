"""Start the nodes of a launch description as processes (``mbfg run``, ``mbfg demo``, HIL tests).

The pip environment has no ``ros2 launch``; this runs the same :class:`Description` with plain
subprocesses: each node as ``python -m <module> --ros-args ...`` with its parameters in a
params file, each process's output in ``<log_dir>/<name>.log`` (and optionally echoed with a
``[name]`` prefix). :meth:`NodeProcesses.stop` sends SIGINT (a clean rclpy shutdown), then
SIGTERM, then SIGKILL, and on Linux every child gets SIGTERM if its runner dies, so children
never outlive their runner. ``ros_environment`` gives a
private DDS domain (random ``ROS_DOMAIN_ID``, localhost only, its own ROS_LOG_DIR).
Each process's CPU time is read off ``/proc/<pid>/stat`` (:class:`CpuSamples`) whenever
:meth:`NodeProcesses.poll` looks at it, the last time just before it is reaped, so a process that
ended on its own has its whole CPU time recorded.
"""
from __future__ import annotations

import atexit
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import yaml

from mbfg_ros.ros.launch_description import Description, NodeSpec, ProcessSpec
from mbfg_ros.termination import PARENT_PID_VARIABLE


_DOMAINS_USED: set[int] = set()

DOMAIN_CLAIMS = Path(tempfile.gettempdir()) / "mbfg_ros_domains"
"""Where the processes of this machine claim ROS domains (a file per domain holding the claiming
process's pid): two test runs, benchmarks or demos at once would otherwise meet on a shared
domain (a node of one taking the other's readings: a "time jump")."""


def fresh_domain_id() -> int:
    """A random ROS domain in 1..101 that this process has not handed out before (until all
    have been: nodes killed by an earlier run stay in their peers' discovery data until their
    lease expires, and a new run on the same domain would meet them) and that no other live
    process of this machine has claimed (:data:`DOMAIN_CLAIMS`; released when this process
    exits; if every domain is claimed, one of this process's own again)."""
    free = [d for d in range(1, 102) if d not in _DOMAINS_USED]
    if not free:
        _DOMAINS_USED.clear()
        free = list(range(1, 102))
    random.shuffle(free)
    domain = next((d for d in free if _claim(d)), free[0])
    _DOMAINS_USED.add(domain)
    return domain


def _claim(domain: int) -> bool:
    """Claim ``domain`` for this process: True if it is ours now (unclaimed, or its claimant
    is gone)."""
    path = DOMAIN_CLAIMS / str(domain)
    try:
        DOMAIN_CLAIMS.mkdir(exist_ok=True)
        try:
            owner = int(path.read_text() or 0)
        except (FileNotFoundError, ValueError):
            owner = 0
        if owner == os.getpid():
            return True
        if owner and _alive(owner):
            return False
        path.unlink(missing_ok=True)
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
    except OSError:                        # another process won the race, or no temp dir
        return False
    with os.fdopen(fd, "w") as f:
        f.write(str(os.getpid()))
    if not _CLAIMED:
        atexit.register(_release_claims)
    _CLAIMED.add(domain)
    return True


_CLAIMED: set[int] = set()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:                # another user's live process
        return True
    return True


def _release_claims() -> None:
    for domain in _CLAIMED:
        path = DOMAIN_CLAIMS / str(domain)
        try:
            if int(path.read_text() or 0) == os.getpid():
                path.unlink()
        except (OSError, ValueError):
            pass


def ros_environment(log_dir: str | Path, domain_id: int | None = None,
                    base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment of child processes on their own DDS domain: ``ROS_DOMAIN_ID`` (random in
    1..101 and fresh in this process unless given: DDS ports of higher domains reach Linux's
    ephemeral port range),
    ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``, ``ROS_LOG_DIR`` under ``log_dir``,
    unbuffered Python output, no colour codes in the logs."""
    env = dict(os.environ if base is None else base)
    env["ROS_DOMAIN_ID"] = str(domain_id if domain_id is not None else fresh_domain_id())
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env["ROS_LOG_DIR"] = str(Path(log_dir) / "ros")
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONFAULTHANDLER"] = "1"          # a crash leaves its Python traceback in the log
    env["RCUTILS_COLORIZED_OUTPUT"] = "0"
    return env


def process_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` so far, all its threads (None once it is
    gone; an exited process not yet reaped still gives its total)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()      # after "pid (comm) ": state is fields[0]
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuSamples:
    """(wall time ns, CPU s) samples of one process, read off /proc."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.t: list[int] = []
        self.cpu: list[float] = []

    def sample(self) -> None:
        c = process_cpu_s(self.pid)
        if c is not None:
            self.t.append(time.time_ns())
            self.cpu.append(c)

    def between(self, t0_ns: int, t1_ns: int) -> float:
        """CPU seconds spent from ``t0_ns`` to ``t1_ns`` (linear between samples; the /proc
        counters tick every 10 ms)."""
        if len(self.t) < 2:
            return float("nan")
        t = np.asarray(self.t, dtype=np.float64)
        c = np.asarray(self.cpu)
        return float(np.interp(float(t1_ns), t, c) - np.interp(float(t0_ns), t, c))

    @property
    def total(self) -> float:
        """CPU seconds at the newest sample (nan before the first)."""
        return self.cpu[-1] if self.cpu else float("nan")


def tool_available(cmd: tuple[str, ...] | list[str]) -> bool:
    return shutil.which(cmd[0]) is not None or Path(cmd[0]).is_file()


class NodeProcesses:
    """The running processes of a description (a context manager that always stops them)."""

    def __init__(self, description: Description, log_dir: str | Path, env: dict[str, str] | None = None,
                 echo: bool = False, python: str | None = None) -> None:
        self.description = description
        self.log_dir = Path(log_dir)
        self.env = env if env is not None else ros_environment(self.log_dir)
        self.echo = echo
        self.python = python or sys.executable
        self.procs: dict[str, subprocess.Popen] = {}
        self.required: set[str] = set()
        self.logs: dict[str, Path] = {}
        self.cpu: dict[str, CpuSamples] = {}       # sampled by poll()
        self._threads: list[threading.Thread] = []

    # ------------------------------------------------------------------------------------------
    def commands(self) -> dict[str, list[str]]:
        """{process name: command line} (writes the nodes' params files)."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        out = {}
        for node in self.description.nodes:
            out[self._key(node.name, node.namespace)] = node.command(str(self._params_file(node)), self.python)
        for p in self.description.processes:
            cmd = list(p.cmd)
            if not tool_available(cmd) and p.pip_cmd is not None:
                cmd = list(p.pip_cmd)
            out[p.name] = cmd
        return out

    def process_name(self, node: NodeSpec) -> str:
        """The name of ``node``'s process (its log file, its key in :meth:`poll`)."""
        return self._key(node.name, node.namespace)

    def _key(self, name: str, namespace: str) -> str:
        return f"{namespace.strip('/').replace('/', '_')}_{name}" if namespace else name

    def _params_file(self, node: NodeSpec) -> Path:
        path = self.log_dir / f"{self._key(node.name, node.namespace)}.params.yaml"
        # under the node's own name (as launch_ros writes them): a name the node does not have is
        # then an error, while a wildcard section of the user's params file only warns
        data = {node.fully_qualified_name: {"ros__parameters": dict(node.parameters)}}
        path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        return path

    def start(self) -> "NodeProcesses":
        for name, cmd in self.commands().items():
            if not tool_available(cmd):
                raise FileNotFoundError(f"cannot start {name}: {cmd[0]} is not installed")
            log = self.log_dir / f"{name}.log"
            self.logs[name] = log
            fh = open(log, "wb")
            env = dict(self.env)
            env[PARENT_PID_VARIABLE] = str(os.getpid())
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE if self.echo else fh,
                                    stderr=subprocess.STDOUT, env=env, start_new_session=True)
            self.procs[name] = proc
            self.cpu[name] = CpuSamples(proc.pid)
            self.cpu[name].sample()
            if self.echo:
                t = threading.Thread(target=_tee, args=(proc, fh, name), daemon=True)
                t.start()
                self._threads.append(t)
            else:
                fh.close()
        names = [self._key(n.name, n.namespace) for n in self.description.nodes if n.required]
        names += [p.name for p in self.description.processes if p.required]
        self.required = set(names)
        return self

    def __enter__(self) -> "NodeProcesses":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ------------------------------------------------------------------------------------------
    def poll(self) -> dict[str, int | None]:
        """{name: exit status, or None while running}; samples the CPU time of every process
        not reaped yet (before reaping it)."""
        out = {}
        for name, p in self.procs.items():
            if p.returncode is None:
                self.cpu[name].sample()
            out[name] = p.poll()
        return out

    def exited(self) -> dict[str, int]:
        return {name: rc for name, rc in self.poll().items() if rc is not None}

    def wait(self, timeout: float | None = None, any_required: bool = True) -> dict[str, int]:
        """Wait until a required process (or every process) exits, or ``timeout`` s."""
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            done = self.exited()
            if (any_required and self.required & set(done)) or len(done) == len(self.procs):
                return done
            if end is not None and time.monotonic() >= end:
                return done
            time.sleep(0.05)

    def signal_all(self, sig: int) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    pass

    def stop(self, timeout: float = 5.0) -> dict[str, int]:
        """SIGINT, then SIGTERM, then SIGKILL (each after ``timeout`` s); the exit statuses."""
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
            if all(rc is not None for rc in self.poll().values()):
                break
            self.signal_all(sig)
            end = time.monotonic() + (timeout if sig != signal.SIGKILL else 2.0)
            while time.monotonic() < end and any(rc is None for rc in self.poll().values()):
                time.sleep(0.05)
        for t in self._threads:
            t.join(timeout=1.0)
        return {name: p.poll() for name, p in self.procs.items()}

    def log_text(self, name: str) -> str:
        path = self.logs.get(name)
        if path is None or not path.exists():
            return ""
        return path.read_text(encoding="utf-8", errors="replace")


def _tee(proc: subprocess.Popen, fh, name: str) -> None:
    """Copy a child's output to its log file and to stdout with a ``[name]`` prefix."""
    with fh:
        for line in iter(proc.stdout.readline, b""):
            fh.write(line)
            fh.flush()
            sys.stdout.write(f"[{name}] {line.decode(errors='replace')}")
            sys.stdout.flush()


def describe_processes(procs: NodeProcesses) -> str:
    """Lines naming every process, its command and its log file."""
    lines = []
    for name, cmd in procs.commands().items():
        lines.append(f"  {name}: {' '.join(cmd)}")
        lines.append(f"    log: {procs.log_dir / (name + '.log')}")
    return "\n".join(lines)


__all__ = ["NodeProcesses", "ros_environment", "describe_processes", "ProcessSpec", "CpuSamples",
           "process_cpu_s"]
