"""Estimation table of the IFToMM benchmark rigs (config/iftomm/, issue 21): each rig's simulated
bag replayed with the default estimator settings of its config with all sensors and of its
gyro-only twin (the same as ``mbfg replay BAG --config C --json J``), compared with the truth.
Usage (from the repository root; the bags as the README's "IFToMM rigs: estimation" writes them):

    .venv/bin/python tools/iftomm_table.py a02_n2 /tmp/a02_n2 [a04_bricard /tmp/a04 ...]

Per run: the DOF's position RMSE and velocity RMSE (also in % of the truth's velocity RMS), the
largest error of any joint after the skipped start (a branch switch or a slip shows there),
whole-turn slips, resets, recoveries and re-initialisations, the sensors the divergence test
flagged, and the closure forces: RMSE in % of the truth's RMS over the stamps away from the
singular passages (where the truth's closure Jacobian keeps its smallest kept singular value
above 10 % of its initial one) and, at the passages, the truth's and the estimate's largest
force magnitudes there; for a closure with rows redundant all along (Bricard's), also the RMSE
of the error's part off the self-stress the rigid model leaves undetermined.
"""
import sys

import numpy as np

from mbfg_ros.errors import MbfgError
from mbfg_ros.model.mechanism import load_mechanism
from mbfg_ros.replay.metrics import compare
from mbfg_ros.replay.session import ReplayOptions, replay_bag

SKIP = {"a03_andrews": 0.0}          # s skipped from the RMSE (A03 lasts 0.03 s)


def singular_ratio(mech, q: np.ndarray) -> np.ndarray:
    """Per row of q: the closure Jacobian's smallest kept singular value over its largest,
    relative to the same at the first row (NaN where q is)."""
    d = mech.create_data()
    ok = np.all(np.isfinite(q), axis=1)
    s = np.array([np.linalg.svd(mech.closure_position(d, qi)[1], compute_uv=False) for qi in q[ok]])
    r = int(np.sum(s[0] > 1e-9 * s[0, 0]))
    ratio = np.full(len(q), np.nan)
    ratio[ok] = s[:, r - 1] / s[:, 0]
    return ratio / ratio[ok][0]


def off_self_stress(mech, c, name: str, sel: np.ndarray) -> float | None:
    """For a closure whose rows are redundant all along (Phi_q^T has a null vector: a self-stress
    the rigid model cannot determine, e.g. Bricard's loop), the force RMSE (N) of the error's
    part off the self-stress wrenches; None when Phi_q has full row rank."""
    d = mech.create_data()
    idx = np.flatnonzero(sel)[::10]
    _, J = mech.closure_position(d, c.truth_q[idx[0]])
    s = np.linalg.svd(J, compute_uv=False)
    nullity = mech.m - int(np.sum(s > 1e-9 * s[0]))
    if nullity == 0:
        return None
    k = mech.closure_names.index(name)
    off = []
    for i in idx:
        _, J = mech.closure_position(d, c.truth_q[i])
        W = np.array([np.concatenate(mech.closure_wrenches_in_frame_b(d, c.truth_q[i], n)[k])
                      for n in np.linalg.svd(J.T)[2][-nullity:]]).T
        e = c.error_forces[name][i]
        off.append(e - W @ np.linalg.lstsq(W, e, rcond=None)[0])
    return float(np.sqrt(np.mean(np.sum(np.array(off)[:, :3] ** 2, axis=1))))


def row(rig: str, config: str, bag: str) -> str:
    mech = load_mechanism(config)
    sensors = "+".join(s.name for s in mech.config.sensors.all())
    try:
        res = replay_bag(bag, mech, ReplayOptions(progress=False))
    except MbfgError as exc:
        return f"| {rig} | {sensors} | replay failed: {exc} |"
    c = compare(mech, res.estimates, res.truth, skip=SKIP.get(rig, 1.0))
    u = c.used
    dof = mech.dof_names[0]
    j = mech.index[dof]
    r = c.rmse[dof]
    v_rms = float(np.sqrt(np.mean(c.truth_v[u, j] ** 2)))
    worst = float(np.nanmax(np.abs(c.error_q[u])))
    ratio = singular_ratio(mech, c.truth_q)
    away = u & (ratio > 0.1)
    near = u & (ratio <= 0.1)
    forces = []
    for name in mech.closure_names:
        err, tru = c.error_forces[name][:, :3], c.truth_forces[name][:, :3]
        if not np.any(np.abs(tru[u]) > 1e-9):
            continue
        rmse = np.sqrt(np.mean(np.sum(err[away] ** 2, axis=1)))
        rms = np.sqrt(np.mean(np.sum(tru[away] ** 2, axis=1)))
        text = f"{name} {100 * rmse / rms:.2f} % of {rms:.3g} N"
        off = off_self_stress(mech, c, name, away)
        if off is not None:
            text += f" ({100 * off / rms:.2f} % off the self-stress)"
        if near.any():
            t_max = np.max(np.linalg.norm(tru[near], axis=1))
            e_max = np.max(np.linalg.norm(tru[near] + err[near], axis=1))
            text += f" (at the passages: truth up to {t_max:.3g} N, estimate up to {e_max:.3g} N)"
        forces.append(text)
    health = res.health
    diverged = sorted({p.sensor for p in health.divergence.periods})
    return (f"| {rig} | {sensors} | {r['position'] * 1e3:.2f} | {r['velocity']:.4f} "
            f"({100 * r['velocity'] / v_rms:.2f} %) | {worst * 1e3:.2f} | {sum(c.turn_slips.values())} | "
            f"{health.resets} / {health.recoveries} / {health.reinitialisations} | {', '.join(diverged) or '-'} | "
            f"{'; '.join(forces) or '-'} | {mech.config.estimator.keyframe_rate:g} |")


def main(argv: list[str]) -> None:
    print("| rig | sensors | DOF position RMSE (mrad) | DOF velocity RMSE (rad/s, % of RMS) | largest joint "
          "error (mrad) | turn slips | resets / recoveries / re-inits | diverged | closure forces | keyframes Hz |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for rig, bag in zip(argv[::2], argv[1::2]):
        for config in (f"config/iftomm/{rig}.yaml", f"config/iftomm/{rig}_gyro.yaml"):
            print(row(rig, config, bag), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
