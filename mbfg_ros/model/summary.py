"""What a rig (URDF + mechanism config) describes, as facts and as readable text (`mbfg check`)."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from mbfg_ros.model.speed import integration_sigmas, needed_keyframe_rate, rad_per_keyframe, rate_for_default_noise
from mbfg_ros.model.closures import ROWS
from mbfg_ros.model.config import KEYFRAME_RATE_RANGE
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.model.observability import observability
from mbfg_ros.model.validation import SINGULAR_CONDITION, load_rig
from mbfg_ros.sensors.registry import describe as describe_sensor


def _sensor_facts(mech: Mechanism) -> list[dict[str, Any]]:
    return [{**s.facts(mech), "time_offset": s.time_offset} for s in mech.sensors]


TIGHT_RELINEARIZATION = 1e-4
"""rad: the relinearisation threshold a scale estimated without direct position sensing needs
(measured on the benchmark four-bar with one coupler gyro, see estimator_tuning)."""


def _model_error_warning(mech, est, obs) -> str | None:
    """Why the estimator's model-error state or gravity / mass scale may go wrong here (None if
    nothing to say). Both want the DOF positions sensed directly (encoders). Sensed only through
    velocities and the dynamics (gyros): a free force on the DOF can hold the estimate at a wrong
    pose (the four-bar with a coupler gyro settles 1.8 rad away); a gravity or mass scale holds
    only with a tight linearisation (the four-bar's collapsed at relinearize_threshold 3e-3 and
    held in 256 of 256 benchmark runs at 1e-4)."""
    if set(obs.direct_positions) >= set(mech.dof_names):
        return None
    missing = ", ".join(n for n in mech.dof_names if n not in obs.direct_positions)
    where = f"with the DOF positions ({missing}) seen only through the dynamics"
    if est.model_error.enabled:
        return (f"estimator.model_error {where}: a free force there can hold the estimate at a wrong "
                "pose; add an encoder on the DOF or switch it off unless a recording shows it holds")
    scales = [w for w, on in (("estimate_gravity", est.estimate_gravity),
                              ("estimate_mass_link", bool(est.estimate_mass_link))) if on]
    if scales and est.relinearize_threshold > TIGHT_RELINEARIZATION:
        return (f"{' and '.join(scales)} {where} and relinearize_threshold {est.relinearize_threshold:g}: "
                "nothing corrects a linearisation error, the scale can drift and the estimate take "
                f"another motion; set relinearize_threshold to {TIGHT_RELINEARIZATION:g} or less")
    return None


def _speed_warning(mech: Mechanism, needed: float) -> str | None:
    """The `mbfg check` warning when ``keyframe_rate`` is below what the top speed needs (or the
    need is beyond the estimator's largest rate), else None."""
    cfg, est = mech.config, mech.config.estimator
    if not cfg.top_speed or est.keyframe_rate >= needed - 1e-9:
        return None
    top = KEYFRAME_RATE_RANGE[1]
    why = (f"({rad_per_keyframe(mech.dof_positions_sensed):g} rad per keyframe"
           f"{'' if mech.dof_positions_sensed else ', no encoder on a DOF'})")
    if needed > top:
        return (f"a top speed of {cfg.top_speed:g} rad/s needs {needed:g} Hz {why}, beyond the {top:g} Hz the "
                f"estimator allows: keyframe_rate {est.keyframe_rate:g} Hz takes "
                f"{cfg.top_speed / est.keyframe_rate:.2f} rad per keyframe at top speed; the adaptive Gauss-Newton "
                "and integration noise hold short, rough motions there (the IFToMM squeezer at 1140 rad/s), but "
                "watch the divergence reports")
    return (f"keyframe_rate {est.keyframe_rate:g} Hz is below the {needed:g} Hz a top speed of "
            f"{cfg.top_speed:g} rad/s needs {why}: readings between keyframes will not be explained and the "
            f"divergence test will flag them; set keyframe_rate: {needed:g} (or auto)")


def summarize(config_path: str | Path) -> dict[str, Any]:
    """Load, validate and assemble a rig; return its facts (raises MbfgError on bad input)."""
    rig = load_rig(config_path)
    mech, q0, v0 = rig.mech, rig.q0, rig.v0
    data = mech.create_data()
    phi, _ = mech.closure_position(data, q0)
    obs = observability(mech, data, q0)
    cfg = mech.config
    coords = []
    for i, name in enumerate(mech.joint_names):
        j = next(x for x in mech.urdf.joints if x.name == name)
        jc = cfg.joint(name)
        coords.append({"index": i, "name": name, "type": j.type, "axis": list(j.axis),
                       "lower": None if math.isinf(j.lower) else j.lower,
                       "upper": None if math.isinf(j.upper) else j.upper,
                       "actuation": jc.actuation, "viscous": jc.viscous, "coulomb": jc.coulomb,
                       "coulomb_velocity": jc.coulomb_velocity, "armature": jc.armature, "offset": jc.offset,
                       "dof": name in mech.dof_names, "initial": float(q0[i])})
    closures = []
    for c, rows in zip(cfg.closures, mech.closure_rows):
        closures.append({"name": c.name, "type": c.type, "frame_a": c.frame_a, "frame_b": c.frame_b,
                         "rows": ROWS[c.type], "residual": float(np.max(np.abs(phi[rows])))})
    est = cfg.estimator
    h = 1.0 / est.keyframe_rate
    sq, sv = integration_sigmas(est.noise.integration_position, est.noise.integration_velocity, h, cfg.top_speed)
    needed = needed_keyframe_rate(cfg.top_speed, mech.dof_positions_sensed)
    speed = {"top_speed": cfg.top_speed or None,
             "needed_keyframe_rate": needed if cfg.top_speed else None,
             "rad_per_keyframe": rad_per_keyframe(mech.dof_positions_sensed),
             "dof_positions_sensed": mech.dof_positions_sensed,
             "keyframe_rate_for_configured_integration_noise": rate_for_default_noise(
                 est.noise.integration_velocity, cfg.top_speed) or None,
             "integration_position": sq, "integration_velocity": sv,
             "integration_noise_raised": bool(sq > est.noise.integration_position or sv > est.noise.integration_velocity),
             "warning": _speed_warning(mech, needed)}
    return {
        "name": cfg.name,
        "config": str(Path(config_path)),
        "urdf": str(cfg.urdf),
        "base_frame": mech.base_frame,
        "gravity": [float(g) for g in mech.gravity],
        "links": list(mech.link_names),
        "coordinates": coords,
        "closures": closures,
        "closure_rows": mech.m,
        "closure_rank": rig.ranks.closures,
        "closure_condition": rig.closure_condition,
        "dof_condition": rig.dof_condition,
        "singular_condition_limit": SINGULAR_CONDITION,
        "dof": rig.dof,
        "dof_joints": list(mech.dof_names),
        "initial_q": [float(x) for x in q0],
        "initial_v": [float(x) for x in v0],
        "springs": [{"name": sp.name, "frame_a": sp.frame_a, "frame_b": sp.frame_b, "stiffness": sp.stiffness,
                     "rest_length": sp.rest_length, "damping": sp.damping} for sp in cfg.springs],
        "sensors": _sensor_facts(mech),
        "observable": obs.observable,
        "unobservable": obs.unobservable,
        "positions_sensed_directly": obs.direct_positions,
        "velocities_sensed_directly": obs.direct_velocities,
        "inputs_estimated": list(mech.input_joints),
        "inputs_known": list(mech.known_input_joints),
        "estimator": {"keyframe_rate": est.keyframe_rate, "lag": est.lag,
                      "integrator": est.integrator, "robust_loss": est.robust_loss.type,
                      "estimate_gravity": est.estimate_gravity,
                      "estimate_mass_link": est.estimate_mass_link or None,
                      "model_error_random_walk": est.model_error.random_walk,
                      "keyframe_rate_auto": est.keyframe_rate_auto,
                      "input_model": est.input_model if mech.n_u else None,
                      "input_walk": est.input_walk if mech.n_u else None},
        "model_error_warning": _model_error_warning(mech, est, obs),
        "speed": speed,
    }


def _drive_text(c: dict[str, Any]) -> str:
    """A coordinate's drive model as text: friction, armature, offset (what the config sets)."""
    out = ""
    if c["viscous"] or c["coulomb"]:
        out += f" friction v={c['viscous']:g} c={c['coulomb']:g}"
        if c["coulomb"]:
            out += f" (tanh scale {c['coulomb_velocity']:g})"
    if c.get("armature"):
        out += f" armature {c['armature']:g}"
    if c.get("offset"):
        out += f" offset {c['offset']:g}"
    return out


def format_summary(f: dict[str, Any]) -> str:
    """The facts as text for a person."""
    lines = [f"{f['name']}: {f['config']} (URDF {f['urdf']})",
             f"  gravity ({', '.join(f'{g:g}' for g in f['gravity'])}) m/s^2, base frame '{f['base_frame']}'",
             f"Links ({len(f['links'])}): {', '.join(f['links'])}",
             f"Coordinates ({len(f['coordinates'])}):"]
    lines.append(f"  {'#':>2}  {'joint':<18} {'type':<11} {'axis':<16} {'limits':<20} {'actuation':<9} {'initial':>9}")
    for c in f["coordinates"]:
        lim = "-" if c["lower"] is None and c["upper"] is None else f"[{c['lower']:.4g}, {c['upper']:.4g}]"
        axis = "(" + ", ".join(f"{a:g}" for a in c["axis"]) + ")"
        mark = " DOF" if c["dof"] else ""
        fr = _drive_text(c)
        lines.append(f"  {c['index']:>2}  {c['name']:<18} {c['type']:<11} {axis:<16} {lim:<20} "
                     f"{c['actuation']:<9} {c['initial']:>9.4f}{mark}{fr}")
    cond = (f", condition number {f['closure_condition']:.3g} (DOF block {f['dof_condition']:.3g}; "
            f"limit {f['singular_condition_limit']:g})" if f["closures"] else "")
    lines.append(f"Closures ({len(f['closures'])}, {f['closure_rows']} rows, rank {f['closure_rank']}{cond}):")
    for c in f["closures"]:
        lines.append(f"  {c['name']:<20} {c['type']:<16} {c['frame_a']} -> {c['frame_b']}  "
                     f"{c['rows']} rows, residual after assembly {c['residual']:.1e}")
    if not f["closures"]:
        lines.append("  none (an open chain)")
    lines.append(f"Degrees of freedom: {f['dof']} (independent coordinates: {', '.join(f['dof_joints'])})")
    for sp in f["springs"]:
        lines.append(f"Spring {sp['name']}: {sp['frame_a']} -> {sp['frame_b']}, stiffness {sp['stiffness']:g} N/m, "
                     f"rest length {sp['rest_length']:g} m, damping {sp['damping']:g} N s/m")
    lines.append(f"Sensors ({len(f['sensors'])}):")
    wn = max([18] + [len(s["name"]) for s in f["sensors"]])
    wk = max([9] + [len(s["kind"]) for s in f["sensors"]])
    for s in f["sensors"]:
        what = describe_sensor(s)
        lines.append(f"  {s['name']:<{wn}} {s['kind']:<{wk}} {what:<44} {s['topic']:<22} "
                     f"{s['rate']:>7g} Hz  noise {s['noise']:g} {s['unit']}"
                     + (f"  clock {s['time_offset'] * 1e3:g} ms late" if s.get("time_offset") else ""))
    if f["inputs_estimated"] or f["inputs_known"]:
        lines.append(f"Inputs: estimated {', '.join(f['inputs_estimated']) or '-'}; "
                     f"known {', '.join(f['inputs_known']) or '-'}")
    if f["observable"]:
        direct = ", ".join(f["positions_sensed_directly"]) or "none (through velocities and the dynamics)"
        lines.append(f"Observability: every DOF is observable; positions sensed directly: {direct}")
    else:
        lines.append(f"Observability: NOT observable: {', '.join(f['unobservable'])} "
                     "(add a sensor that sees them)")
    e = f["estimator"]
    extra = []
    if e["estimate_gravity"]:
        extra.append("estimates gravity")
    if e["estimate_mass_link"]:
        extra.append(f"estimates the mass of {e['estimate_mass_link']}")
    if e.get("input_model"):
        unit = {"random_walk": "N m per sqrt(s)", "integrated": "N m/s per sqrt(s)",
                "jerk": "rad/s^3 per sqrt(s)"}[e["input_model"]]
        extra.append(f"inputs: {e['input_model']} ({e['input_walk']:g} {unit})")
    if e.get("model_error_random_walk"):
        extra.append(f"model-error forces (random walk {e['model_error_random_walk']:g} per sqrt(s))")
    lines.append(f"Estimator: keyframes {e['keyframe_rate']:g} Hz, lag {e['lag']:g} s "
                 f"({int(round(e['keyframe_rate'] * e['lag']))} keyframes), {e['integrator']}, "
                 f"robust loss {e['robust_loss']}" + (f", {', '.join(extra)}" if extra else ""))
    if f.get("model_error_warning"):
        lines.append(f"WARNING: {f['model_error_warning']}")
    sp = f.get("speed") or {}
    if sp.get("top_speed"):
        auto = " (keyframe_rate: auto)" if e.get("keyframe_rate_auto") else ""
        why = "" if sp["dof_positions_sensed"] else ", no encoder reads a DOF position"
        lines.append(f"Speed: top speed {sp['top_speed']:g} rad/s needs keyframes at {sp['needed_keyframe_rate']:g} Hz "
                     f"or faster ({sp['rad_per_keyframe']:g} rad per keyframe{why}){auto}; the configured integration "
                     "noise would hold unraised from "
                     f"{sp['keyframe_rate_for_configured_integration_noise']:.0f} Hz")
        if sp["integration_noise_raised"]:
            lines.append(f"  at {e['keyframe_rate']:g} Hz the integration noise is raised to the rows' truncation "
                         f"error at top speed: position {sp['integration_position']:.3g}, velocity "
                         f"{sp['integration_velocity']:.3g} per step")
        if sp.get("warning"):
            lines.append(f"WARNING: {sp['warning']}")
    else:
        lines.append("Speed: no mechanism.top_speed given: keyframes at the configured rate, integration noise "
                     "as configured (a rig faster than ~40 rad/s needs more than 200 Hz: give its top speed)")
    return "\n".join(lines)
