"""`mbfg identify <bag> --config <config.yaml> [--out identified.yaml]`: the rig's constant
parameters from a recording.

A thin face over :mod:`mbfg_ros.estimation.identification` (the offline smoother with the
parameters as one more variable of its graph) and :mod:`mbfg_ros.replay.identification` (the
bags read as `mbfg replay --smooth` reads them): prints each identified value with its standard
deviation, the parameters the recording cannot identify, the fit before and after, and writes a
copy of the config (comments kept) and, when inertias were identified, of the URDF; with
``--validate``, each held-out recording's effort fit by the config's and the identified model
(:mod:`mbfg_ros.replay.effort_validation`).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

from mbfg_ros.errors import CliError
from mbfg_ros.model.parameters import GROUPS


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("bags", nargs="+", metavar="BAG",
                   help="the recording(s): rosbag2 directories (mcap or sqlite3), rosbag1 .bag files, or with --map "
                        "logs (CSV, .mat, .npz); several are identified together")
    p.add_argument("--config", required=True, metavar="YAML", help="the rig config whose parameters are identified")
    p.add_argument("--map", metavar="YAML",
                   help="the recordings are logs: import them through this mbfg import map (with --config's sensors)")
    p.add_argument("--out", metavar="YAML",
                   help="where to write the identified config (default: <config>.identified.yaml beside the config)")
    p.add_argument("--urdf-out", metavar="URDF",
                   help="where to write the URDF with the identified inertials (default: --out with .urdf; "
                        "written only when inertias were identified)")
    p.add_argument("--overwrite", action="store_true", help="replace existing --out / --urdf-out files")
    p.add_argument("--remap", action="append", default=[], metavar="FROM:=TO",
                   help="read the config's topic FROM from the bag's topic TO (repeatable)")
    p.add_argument("--parameters", metavar="GROUPS",
                   help=f"comma-separated parameter groups to identify ({', '.join(GROUPS)}; default: every group "
                        "the rig has but timing (the sensors' time offsets, when named), the dynamics groups only "
                        "when every driving effort is known)")
    p.add_argument("--known-inputs", action="store_true",
                   help="take the config's unknown inputs as known: their measured effort is in the recording "
                        "(the joint's topic; with --map, the map's inputs:)")
    p.add_argument("--model-accuracy", type=float, default=0.01, metavar="FRACTION",
                   help="how closely the model is trusted to explain each joint's effort, as a share of its RMS "
                        "(default 0.01; raise it when the sensors fit far worse than their noise after identifying)")
    p.add_argument("--max-iterations", type=int, default=20, metavar="N",
                   help="passes (smoothing and parameter step) at most (default 20)")
    p.add_argument("--validate", nargs="+", default=[], metavar="BAG",
                   help="held-out recordings of the same rig (read as BAG: with --map, logs; their measured efforts "
                        "needed): the effort fit of the config's and of the identified model on each, by the offline "
                        "inverse dynamics of its encoder positions, so that a model that fits only its own run shows")
    p.add_argument("--json", metavar="FILE", help="write the result as JSON to FILE ('-' = stdout)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (it shows only on a terminal)")


def _validate(args: argparse.Namespace) -> tuple[Path, Path]:
    for bag in args.bags + args.validate:
        if not Path(bag).exists():
            raise CliError(f"no such {'log' if args.map else 'bag'}: {bag!r}")
    if args.max_iterations < 1:
        raise CliError(f"--max-iterations: must be at least 1 (value: {args.max_iterations})")
    if not (math.isfinite(args.model_accuracy) and 0 < args.model_accuracy <= 10):
        raise CliError(f"--model-accuracy: must be above 0 and at most 10 (value: {args.model_accuracy:g})")
    if args.parameters is not None:
        groups = [g.strip() for g in args.parameters.split(",") if g.strip()]
        bad = [g for g in groups if g not in GROUPS]
        if bad or not groups:
            raise CliError(f"--parameters: unknown group {', '.join(bad) or repr(args.parameters)} "
                           f"(groups: {', '.join(GROUPS)})")
    config = Path(args.config)
    out = Path(args.out) if args.out else config.with_name(config.stem + ".identified.yaml")
    urdf = Path(args.urdf_out) if args.urdf_out else out.with_suffix(".urdf")
    for option, path in (("--out", out), ("--urdf-out", urdf)):
        if path.exists() and not args.overwrite:
            raise CliError(f"{option}: {str(path)!r} exists (use --overwrite to replace it)")
        if path.is_dir() or not path.resolve().parent.is_dir():
            raise CliError(f"{option}: cannot write {str(path)!r} (not a file in an existing directory)")
    if out.exists() and out.resolve() == config.resolve():
        raise CliError(f"--out: {str(out)!r} is the config being identified; write the identified one elsewhere")
    if args.json and args.json != "-":
        j = Path(args.json)
        if j.is_dir() or not j.resolve().parent.is_dir():
            raise CliError(f"--json: cannot write {args.json!r} (not a file in an existing directory)")
    return out, urdf


def _fmt(x: float) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.6g}"


def _combination(terms: list[tuple[str, float]], most: int = 4) -> str:
    ranked = sorted(terms, key=lambda t: -abs(t[1]))
    text = " ".join(f"{'-' if c < 0 else '+'} {abs(c):.4g} {n}" for n, c in ranked[:most])
    return text + (f" + {len(ranked) - most} more" if len(ranked) > most else "")


def facts(res, written: dict) -> dict:
    """The result as plain data (the --json output)."""
    def fits(p) -> dict:
        return {k: {"kind": f.kind, "unit": f.unit, "sigma": f.sigma, "whitened_rms": f.whitened_rms, "rms": f.rms,
                    "count": f.count, **({"effort_rms": f.effort_rms} if f.kind == "dynamics" else {})}
                for k, f in p.fits.items()}
    return {
        "parameters": [{"name": p.name, "group": p.parameter.group, "unit": p.parameter.unit,
                        "config": p.parameter.nominal, "value": p.value, "sigma": p.sigma if p.identified else None,
                        "identified": p.identified, "combination": [list(t) for t in p.combination],
                        "note": p.note, "scale": p.scale} for p in res.parameters],
        "groups": list(res.groups), "groups_note": res.note,
        "before": fits(res.before), "after": fits(res.after),
        "excitation": dict(zip(res.joints, map(float, res.after.excitation))),
        "cost": {"before": res.before.cost, "after": res.after.cost, "rows": res.after.rows},
        "passes": res.passes, "converged": res.converged, "wall_time": res.wall_time, "cpu_time": res.cpu_time,
        "keyframes": res.keyframes, "duration": res.duration, **written}


def format_summary(res, written: dict) -> str:
    lines = [f"Identified from {res.duration:.1f} s of recording ({res.keyframes} keyframes) in {res.passes} passes, "
             f"{res.wall_time:.1f} s wall time" + ("" if res.converged else
                                                   " (NOT converged: raise --max-iterations)")]
    if res.note:
        lines.append(f"Left out: the inertias, friction, armature and offsets: {res.note}")
    ident = res.identified()
    lines.append("Identified (standard deviations from the information matrix: the sensors' noises, each equation of "
                 "motion's " + ", ".join(f"{j} {s:.3g}" for j, s in zip(res.joints, res.after.sigma)) + "):")
    lines.append(f"  {'parameter':<30} {'config':>12} {'identified':>12} {'sigma':>10} {'change':>9}  unit")
    for p in ident:
        lines.append(f"  {p.name:<30} {_fmt(p.parameter.nominal):>12} {_fmt(p.value):>12} {p.sigma:>10.3g} "
                     f"{p.change_sigmas:>+6.1f} sd  {p.parameter.unit}")
    combos = [p for p in ident if p.combination]
    if combos:
        lines.append("Combinations (an identified value stands for the parameter plus these multiples of the "
                     "unidentified ones' errors, which stay at the config's values):")
        lines += [f"  {p.name} {_combination(p.combination)}" for p in combos]
    un = res.unidentified()
    if un:
        lines.append(f"Not identifiable from this recording ({len(un)}, kept at the config's values):")
        for note in dict.fromkeys(p.note for p in un):
            names = [p.name for p in un if p.note == note]
            lines.append(f"  {note}: {', '.join(names)}")
    lines.append("Fit at the smoothed states, RMS (whitened by the config's noise), before -> after:")
    for key, fb in res.before.fits.items():
        fa = res.after.fits[key]
        if not fa.count:
            continue
        what = f"equation of motion {fa.name}" if fa.kind == "dynamics" else f"{fa.kind} {fa.name}"
        line = (f"  {what:<34} {_fmt(fb.rms):>10} -> {_fmt(fa.rms):<10} {fa.unit:<6} "
                f"({fb.whitened_rms:.3g} -> {fa.whitened_rms:.3g} sigma)")
        if fa.kind == "dynamics" and fa.effort_rms > 0:
            line += (f"; effort fit {100 * fb.rms / fa.effort_rms:.2f} % -> {100 * fa.rms / fa.effort_rms:.2f} % "
                     f"of the effort's RMS {fa.effort_rms:.4g} {fa.unit}")
        lines.append(line)
    lines.append("Excitation (RMS acceleration / RMS of its standard deviation; below about 10 the inertias are "
                 "biased towards the states' noise): " + ", ".join(f"{j} {x:.3g}" for j, x in
                                                                     zip(res.joints, res.after.excitation)))
    if written.get("output"):
        lines.append(f"Wrote {written['output']} ({len(written['changed'])} fields changed"
                     + (f": {', '.join(written['changed'])}" if written["changed"] else "") + ")")
    if written.get("urdf"):
        lines.append(f"Wrote {written['urdf']} (inertials of {', '.join(written['links'])})")
    lines += [f"Note: {n}" for n in written.get("notes", [])]
    lines += held_out_summary(written.get("held_out", []))
    return "\n".join(lines)


def held_out_summary(held_out: list[dict]) -> list[str]:
    """The --validate lines: each held-out recording's effort fit, config -> identified, and a
    note when the identified model fits worse on any joint."""
    if not held_out:
        return []
    lines = ["Held-out recordings, effort fit of each model (offline inverse dynamics of the encoder positions, "
             "zero-phase Savitzky-Golay derivatives; normalised RMSE: RMSE / RMS of the recorded effort, "
             "1.0 = zero effort), config -> identified:"]
    worse = total = 0
    for h in held_out:
        era = f" (era {h['era'] + 1})" if h["era"] else ""
        lines.append(f"  {h['recording']}{era}, {h['span']:.1f} s: " + ", ".join(
            f"{j} {v['config']:.3g} -> {v['identified']:.3g}" for j, v in h["joints"].items()))
        for v in h["joints"].values():
            total += 1
            worse += v["identified"] > v["config"]
    if worse:
        lines.append(f"Note: the identified model fits the held-out efforts worse than the config's on {worse} of "
                     f"{total} joints: what it identified includes its recordings' own model error (identify on "
                     "several runs together, or fewer --parameters, and validate again)")
    return lines


def run(args: argparse.Namespace) -> int:
    from mbfg_ros.estimation.identification import IdentificationOptions
    from mbfg_ros.model.mechanism import Mechanism
    from mbfg_ros.model.validation import load_rig
    from mbfg_ros.replay.bag_input import parse_remap
    from mbfg_ros.replay.identification import identify_bags, with_known_inputs

    out, urdf_out = _validate(args)
    rig = load_rig(args.config).mech
    mech = Mechanism(with_known_inputs(rig.config)) if args.known_inputs else rig
    groups = tuple(g.strip() for g in args.parameters.split(",") if g.strip()) if args.parameters else None
    opt = IdentificationOptions(groups=groups, max_iterations=args.max_iterations, model_accuracy=args.model_accuracy,
                                progress=not args.no_progress and sys.stderr.isatty())
    with tempfile.TemporaryDirectory(prefix="mbfg-identify-") as tmp:
        res = identify_bags(_bags(args.bags, args, mech, Path(tmp)), mech, opt, parse_remap(args.remap, mech))
        written = _write(args, res, rig, out, urdf_out)
        identified = load_rig(out).mech          # the written files must load as a rig
        if args.validate:
            from mbfg_ros.replay.effort_validation import held_out_fits
            fits = held_out_fits(_bags(args.validate, args, mech, Path(tmp) / "held_out"), mech, identified,
                                 parse_remap(args.remap, mech), [Path(v).name for v in args.validate])
            written["held_out"] = [{"recording": h.name, "era": h.era, "span": h.span,
                                    "joints": {j: {"config": float(h.config[k]), "identified": float(h.identified[k]),
                                                   "effort_rms": float(h.effort_rms[k])}
                                               for k, j in enumerate(h.joints)}} for h in fits]
    f = facts(res, written)
    if args.json and args.json != "-":
        Path(args.json).write_text(json.dumps(f, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(f, indent=2) if args.json == "-" else format_summary(res, written), flush=True)
    return 0 if res.converged else 1


def _bags(paths: list[str], args: argparse.Namespace, mech, tmp: Path) -> list:
    """The recordings as bags: with --map each log imported into ``tmp`` (its import summary
    printed unless the JSON goes to stdout)."""
    if not args.map:
        return list(paths)
    from mbfg_ros.cli.import_log import format_import
    from mbfg_ros.io.log_import import import_log
    from mbfg_ros.io.log_map import load_log_map
    log_map = load_log_map(args.map)
    tmp.mkdir(parents=True, exist_ok=True)
    bags = []
    for i, log in enumerate(paths):
        bag = tmp / f"{i}_{Path(log).stem}"
        result = import_log(log, log_map, mech, bag)
        if args.json != "-":
            print(format_import(result.facts()), flush=True)
        bags.append(bag)
    return bags


def _write(args: argparse.Namespace, res, rig, out: Path, urdf_out: Path) -> dict:
    """Write the identified config (and URDF); what was written, for the summary."""
    from mbfg_ros.model.urdf_inertials import write_identified_urdf
    from mbfg_ros.replay.identified_config import write_identified_config

    values = {p.parameter: p.value for p in res.identified()}
    inertial = {p.name: v for p, v in values.items() if p.group == "inertia"}
    written: dict = {"output": str(out), "urdf": None, "links": [], "notes": []}
    note = (f"Parameters identified by `mbfg identify {' '.join(Path(b).name for b in args.bags)}` from "
            f"{Path(args.config).name} ({len(res.identified())} identified, {len(res.unidentified())} kept; "
            f"{res.passes} passes).")
    urdf = None
    if inertial:
        free = {p.name for p in res.unidentified() if p.parameter.group == "inertia" and p.no_information}
        links = write_identified_urdf(rig, inertial, urdf_out, note, free)
        written["links"] = [li.link for li in links if not li.problem]
        written["notes"] += [f"link {li.link}: the identified inertial is not physically possible ({li.problem}); "
                             "the URDF keeps the config's" for li in links if li.problem]
        if written["links"]:
            urdf = urdf_out
            written["urdf"] = str(urdf_out)
        else:
            urdf_out.unlink()
    changed, notes = write_identified_config(args.config, out, {p: v for p, v in values.items()
                                                                 if p.group != "inertia"}, urdf, note)
    written["changed"], written["notes"] = changed, written["notes"] + notes
    return written
