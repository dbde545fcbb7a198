"""Node processes' CPU time read off /proc: while they run, and the whole of it once they end."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from mbfg_ros.ros.launch_description import Description, ProcessSpec
from mbfg_ros.ros.processes import CpuSamples, NodeProcesses, process_cpu_s

BURN = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\n"


def test_process_cpu_is_read_off_proc():
    before = process_cpu_s(os.getpid())
    end = time.process_time() + 0.05
    while time.process_time() < end:
        pass
    assert process_cpu_s(os.getpid()) >= before + 0.03
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert process_cpu_s(gone.pid) is None


def test_cpu_between_samples_is_interpolated():
    s = CpuSamples(os.getpid())
    s.t, s.cpu = [0, 1_000_000_000, 2_000_000_000], [1.0, 1.5, 2.5]
    assert s.between(500_000_000, 1_500_000_000) == pytest.approx(0.75)
    assert s.between(0, 3_000_000_000) == pytest.approx(1.5)        # held beyond the samples
    assert s.total == 2.5


def test_a_process_that_ended_on_its_own_has_its_whole_cpu_time(tmp_path):
    """poll() reads a process's CPU before reaping it: the exited, unreaped process still has
    its total in /proc."""
    procs = NodeProcesses(Description("burn", [], [ProcessSpec("burn", (sys.executable, "-c", BURN))]),
                          tmp_path, env=dict(os.environ))
    procs.start()
    end = time.monotonic() + 60.0
    while procs.poll()["burn"] is None and time.monotonic() < end:
        time.sleep(0.05)
    assert procs.poll()["burn"] == 0
    assert procs.cpu["burn"].total >= 0.28
