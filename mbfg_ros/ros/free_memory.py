"""Give the C heap's free pages back to the operating system now and then.

A long-running node allocates in several threads (DDS's and rclpy's, its own); glibc keeps a
heap per thread and hands freed pages back only from the top of each, so a process whose live
memory is flat still shows its resident size creeping up for many minutes while those heaps
settle (the estimator node: +3.7 MB over the first 15 minutes of a 30-minute soak, flat after).
``malloc_trim`` returns every free page; the node calls it every ``PERIOD`` seconds.

Trimming cannot return a heap that grew and fragmented: glibc raises its mmap threshold each
time a large mmapped block is freed (up to 32 MB), after which large temporaries (GTSAM's
matrices of a bigger update while the worker catches up on a backlog) come from the thread's
heap and leave it larger (soaks on a loaded machine: the estimator's memory rose in steps
of 3-5 MB at each backlog, in a worker heap). :func:`fix_heap_thresholds` sets the mmap and
trim thresholds explicitly, which keeps them where they are: blocks of ``MMAP_THRESHOLD``
bytes or more are mapped and unmapped on their own. Elsewhere than glibc both do nothing.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import time

PERIOD = 30.0
"""s between two trims."""

try:
    _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    _trim = _libc.malloc_trim
    _trim.argtypes = [ctypes.c_size_t]
except (OSError, AttributeError):
    _trim = None

_last = 0.0

MMAP_THRESHOLD = 128 * 1024
"""bytes: glibc's initial mmap threshold, made fixed."""
TRIM_THRESHOLD = 128 * 1024
"""bytes of free memory at a heap's top that glibc returns at once (its initial value, fixed)."""
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3        # mallopt parameters (malloc.h)


def fix_heap_thresholds() -> bool:
    """Fix glibc's mmap and trim thresholds (module docstring); whether it could."""
    try:
        mallopt = _libc.mallopt
    except (NameError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))


def release_free_memory(now: float | None = None) -> bool:
    """Trim the C heaps if ``PERIOD`` s have passed since the last time; whether it did."""
    global _last
    now = time.monotonic() if now is None else now
    if _trim is None or now - _last < PERIOD:
        return False
    _last = now
    _trim(0)
    return True
