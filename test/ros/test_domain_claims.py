"""fresh_domain_id's claims across the processes of a machine (mbfg_ros/ros/processes.py): a
domain a live process claimed is not handed out, a dead one's claim is taken over, and a
process's claims go when it exits."""
from __future__ import annotations

import os
import subprocess
import sys

from mbfg_ros.ros import processes


def test_claims_of_live_processes_are_respected_and_dead_ones_taken_over(tmp_path, monkeypatch):
    monkeypatch.setattr(processes, "DOMAIN_CLAIMS", tmp_path)
    monkeypatch.setattr(processes, "_DOMAINS_USED", set())
    monkeypatch.setattr(processes, "_CLAIMED", set())
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    for d in range(1, 102):                       # all but two claimed by a live process
        (tmp_path / str(d)).write_text(str(os.getppid()))
    (tmp_path / "7").write_text(dead)             # its claimant is gone
    (tmp_path / "42").unlink()                    # never claimed
    got = {processes.fresh_domain_id(), processes.fresh_domain_id()}
    assert got == {7, 42}
    assert (tmp_path / "7").read_text() == (tmp_path / "42").read_text() == str(os.getpid())


def test_a_process_releases_its_claims_when_it_exits(tmp_path):
    script = ("from mbfg_ros.ros import processes\n"
              f"processes.DOMAIN_CLAIMS = __import__('pathlib').Path({str(tmp_path)!r})\n"
              "print(processes.fresh_domain_id(), processes.fresh_domain_id())\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    claimed = [int(x) for x in out.stdout.split()]
    assert len(set(claimed)) == 2, out.stderr
    assert not any((tmp_path / str(d)).exists() for d in claimed)
