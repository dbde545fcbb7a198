"""Fingerprint of the estimator's replays, to show that a refactoring left every estimate bit for
bit the same (or to see what a change moved).

Simulates a fixed set of short recordings (fixed seeds: the same bags on every run), replays each
through the estimator and writes, per case, a SHA-256 of every estimate's stamp, state and
effort and of the sensor counts, with the health counts and the position RMSE:

    .venv/bin/python tools/replay_fingerprint.py --out /tmp/before.json      # on the old code
    .venv/bin/python tools/replay_fingerprint.py --compare /tmp/before.json  # on the new code

``--compare`` prints "identical" or what differs per case and exits 1 when anything does.
Cases: the four-bar (filtered and lagged), its coupler gyro alone, the five-bar's two coupler
gyros (lagged), the fast crank (all sensors), the spatial RSUR, and the long crank's rod gyro
alone from a start search and from a lost start (``initial_pose: config``, speed unknown), and
an open chain, the 6-DOF arm (Cholesky elimination; on this recording its encoders fit their
noise, so its model-uncertainty search does not start: the scale stays 1).
A case the baseline does not have is reported as differing.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import io
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mbfg_ros.cli.main import main as mbfg  # noqa: E402
from mbfg_ros.model.config import SensorsConfig  # noqa: E402
from mbfg_ros.model.mechanism import Mechanism, load_mechanism  # noqa: E402
from mbfg_ros.replay.metrics import compare  # noqa: E402
from mbfg_ros.replay.session import ReplayOptions, replay_bag  # noqa: E402

FAST = ["--input", "sine", "--input-amplitude", "2.5", "--input-offset", "2.3", "--input-frequency", "3",
        "--input-start", "0", "--truth-rate", "1000"]
LONG = ["--input", "sine", "--input-amplitude", "10", "--input-offset", "24", "--input-frequency", "1",
        "--input-start", "0", "--truth-rate", "1000"]
BAGS = {"four_bar": ("four_bar", []), "four_bar_gyro": ("four_bar_gyro", []), "five_bar_gyro": ("five_bar_gyro", []),
        "fast_crank": ("fast_crank", FAST), "spatial_rsur": ("spatial_rsur", []), "long_crank": ("long_crank", LONG),
        "long_crank_off": ("long_crank", LONG + ["--initial-error", "0.5"]), "arm6": ("arm6", [])}


def _gyro_alone(mech: Mechanism, **estimator) -> Mechanism:
    cfg = dataclasses.replace(mech.config, sensors=SensorsConfig(gyros=mech.config.sensors.gyros))
    if "velocity" in estimator:
        cfg = dataclasses.replace(cfg, initial=dataclasses.replace(
            cfg.initial, velocities={mech.dof_names[0]: estimator.pop("velocity")}))
    if estimator:
        cfg = dataclasses.replace(cfg, estimator=dataclasses.replace(cfg.estimator, **estimator))
    return Mechanism(cfg)


def cases() -> list[tuple[str, str, callable, bool]]:
    """(name, bag key, mechanism maker, lagged)."""
    rig = lambda name: (lambda: load_mechanism(ROOT / "config" / f"{name}.yaml"))  # noqa: E731
    long_crank = rig("long_crank")
    return [("four_bar", "four_bar", rig("four_bar"), False),
            ("four_bar_lagged", "four_bar", rig("four_bar"), True),
            ("four_bar_gyro", "four_bar_gyro", rig("four_bar_gyro"), False),
            ("five_bar_gyro_lagged", "five_bar_gyro", rig("five_bar_gyro"), True),
            ("fast_crank", "fast_crank", rig("fast_crank"), False),
            ("spatial_rsur", "spatial_rsur", rig("spatial_rsur"), False),
            ("long_crank_gyro_search", "long_crank_off", lambda: _gyro_alone(long_crank(), velocity=0.0), False),
            ("long_crank_gyro_lost", "long_crank", lambda: _gyro_alone(long_crank(), velocity=0.0,
                                                                        initial_pose="config"), False),
            ("arm6", "arm6", rig("arm6"), False)]


def fingerprint(mech: Mechanism, bag: Path, lagged: bool) -> dict:
    res = replay_bag(bag, mech, ReplayOptions(lagged=lagged, progress=False))
    e = res.estimates
    digest = hashlib.sha256()
    for a in (e.t, e.q, e.v, e.a, e.lam, e.u, e.bias, e.effort):
        digest.update(np.ascontiguousarray(a, float).tobytes())
    counts = {k: [c.received, c.used, c.late, c.too_old, c.rejected_nonfinite, c.rejected_duplicate,
                  c.downweighted, c.discarded] for k, c in sorted(res.counts.items())}
    digest.update(json.dumps(counts).encode())
    h = res.health
    c = compare(mech, e, res.truth, skip=1.0)
    return {"estimates": int(len(e.t)), "sha256": digest.hexdigest(),
            "health": {"keyframes": h.keyframes, "recoveries": h.recoveries, "resets": h.resets,
                       "relinearizations": h.relinearizations, "reinitialisations": h.reinitialisations,
                       "gauss_newton_iterations": h.gauss_newton_iterations, "start_searches": h.start_searches,
                       "divergence_periods": len(h.divergence.periods)},
            "position_rmse": {j: c.rmse[j]["position"] for j in mech.dof_names}}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", help="write the fingerprint (JSON)")
    p.add_argument("--compare", help="compare with a fingerprint written by --out")
    p.add_argument("--duration", type=float, default=3.0, help="s per recording (default 3)")
    args = p.parse_args()
    result = {}
    with tempfile.TemporaryDirectory() as tmp:
        bags = {}
        for key, (rig, extra) in BAGS.items():
            bags[key] = Path(tmp) / key
            with contextlib.redirect_stdout(io.StringIO()):
                assert mbfg(["simulate", str(ROOT / "config" / f"{rig}.yaml"), "--out", str(bags[key]),
                             "--duration", str(args.duration), "--no-progress", "--seed", "1", *extra]) == 0
        for name, key, make, lagged in cases():
            result[name] = fingerprint(make(), bags[key], lagged)
            print(f"{name}: {result[name]['estimates']} estimates, {result[name]['sha256'][:16]}", file=sys.stderr)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    if args.compare:
        ref = json.loads(Path(args.compare).read_text())
        bad = 0
        for name, f in result.items():
            r = ref.get(name)
            if r is not None and r["sha256"] == f["sha256"]:
                print(f"{name}: identical")
                continue
            bad += 1
            print(f"{name}: DIFFERS: {json.dumps({'before': r and {k: r[k] for k in ('health', 'position_rmse')}, 'after': {k: f[k] for k in ('health', 'position_rmse')}})}")
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
