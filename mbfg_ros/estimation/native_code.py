"""CasADi functions compiled to native code when a C compiler is at hand (never required).

CasADi generates C for a function; compiled once (``cc -O1``) it runs about 7x faster than
CasADi's SX virtual machine (the four-bar's step 7.4 -> 0.9 us, the 6-DOF arm's 55 -> 8 us). The
shared library is cached on disk under a hash of the generated source, so each mechanism and
estimator configuration compiles once per machine (0.5-3 s) and later starts load it in
milliseconds. Without a compiler, or if compiling fails, the SX function is used as it is.

Where: ``$MBFG_ROS_CACHE`` or ``$XDG_CACHE_HOME/mbfg_ros`` (default ``~/.cache/mbfg_ros``);
``MBFG_ROS_NATIVE_CODE=off`` turns compiling off; ``CC`` picks the compiler.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import warnings
from pathlib import Path

import casadi as ca

FLAGS = ("-O1", "-shared", "-fPIC")


def cache_dir() -> Path:
    base = os.environ.get("MBFG_ROS_CACHE")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg) / "mbfg_ros"


def compiler() -> str | None:
    """The C compiler to use, or None (none found, or MBFG_ROS_NATIVE_CODE=off)."""
    if os.environ.get("MBFG_ROS_NATIVE_CODE", "").lower() in ("0", "off", "false", "no"):
        return None
    cc = os.environ.get("CC")
    if cc and shutil.which(cc):
        return cc
    for cand in ("cc", "gcc", "clang"):
        if shutil.which(cand):
            return cand
    return None


def native(fns: list[ca.Function]) -> list[ca.Function] | None:
    """``fns`` compiled to native code, in one shared library (from the disk cache if there), or
    None if that cannot be done here (no compiler, a failed build: a warning says why)."""
    cc = compiler()
    name = fns[0].name()
    with tempfile.TemporaryDirectory(prefix="mbfg_casadi_") as tmp:
        cg = ca.CodeGenerator(f"{name}.c", {"with_header": False})
        for fn in fns:
            cg.add(fn)
        cg.generate(tmp + os.sep)
        src = Path(tmp) / f"{name}.c"
        text = src.read_bytes()
        digest = hashlib.sha256(text + " ".join(FLAGS).encode() + ca.__version__.encode()).hexdigest()[:24]
        lib = cache_dir() / f"{name}-{digest}.so"
        if not lib.exists():
            if cc is None:
                return None
            try:
                lib.parent.mkdir(parents=True, exist_ok=True)
                part = lib.with_suffix(f".{os.getpid()}.tmp")
                subprocess.run([cc, *FLAGS, str(src), "-o", str(part)], check=True,
                               capture_output=True, timeout=600)
                os.replace(part, lib)
            except (OSError, subprocess.SubprocessError) as exc:
                detail = getattr(exc, "stderr", b"") or b""
                warnings.warn(f"compiling {name} with {cc} failed ({exc}; "
                              f"{detail.decode(errors='replace')[:200]}); using CasADi's virtual machine",
                              RuntimeWarning, stacklevel=2)
                return None
    try:
        return [ca.external(fn.name(), str(lib)) for fn in fns]
    except RuntimeError as exc:
        warnings.warn(f"loading {lib} failed ({exc}); using CasADi's virtual machine", RuntimeWarning,
                      stacklevel=2)
        return None
