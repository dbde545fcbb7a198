"""The heap helpers the long-running nodes call (glibc's malloc_trim and mallopt)."""
from __future__ import annotations

import sys

import pytest

from mbfg_ros.ros import free_memory


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
def test_the_heap_thresholds_can_be_fixed_and_trimming_is_paced(monkeypatch):
    monkeypatch.setattr(free_memory, "_last", 0.0)
    assert free_memory.fix_heap_thresholds()
    assert free_memory.release_free_memory(now=1e9)                  # first call trims
    assert not free_memory.release_free_memory(now=1e9 + 1.0)        # not again within PERIOD
    assert free_memory.release_free_memory(now=1e9 + free_memory.PERIOD + 1.0)
