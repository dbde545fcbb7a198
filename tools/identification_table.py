#!/usr/bin/env python3
"""Validates `mbfg identify` against the simulator: prints, per rig, every identified
parameter beside the simulated truth (of the combination it stands for), and the estimator's
effort error with the config before and after identification.

For each rig of :data:`mbfg_ros.sim.perturbed_truth.IDENTIFICATION_RIGS` (the four-bar, the
6-DOF arm, the double pendulum) it writes a truth whose link masses and inertias are off by up to
20 %, with Coulomb and viscous friction, armature, every encoder 0.01 rad off and the sensors'
calibration off (:func:`~mbfg_ros.sim.perturbed_truth.write_configs`); then, with the
repository's commands:

    mbfg simulate truth.yaml --duration 60 --input random ... --out bag
    mbfg identify bag --config nominal.yaml --known-inputs --out identified.yaml --json identified.json
    mbfg replay bag --config nominal.yaml --json before.json      (and --config identified.yaml;
                                                                   and each with --lagged, --smooth)

where nominal.yaml is the repository's config (its driven joints ``unknown`` inputs, so that
their effort is estimated and scored). A parameter passes when it is within 3 standard
deviations and 5 % of its truth (of its natural size, when that is larger); a rig passes when
every identified parameter does and the identified config halves the effort error of the
lagged and the smoothed estimates (the filtered one is printed too). Usage (from the repository
root; the tables are also appended to OUT/tables.md):

    .venv/bin/python tools/identification_table.py [--rigs four_bar,arm6,double_pendulum] \\
        [--duration 60] [--out build/identification] [--seed 1]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mbfg_ros.model.config import load_rig_config  # noqa: E402
from mbfg_ros.model.mechanism import Mechanism  # noqa: E402
from mbfg_ros.model.parameters import model_parameters  # noqa: E402
from mbfg_ros.sim.perturbed_truth import (IDENTIFICATION_RIGS, Rig, combination_truth, with_noise,  # noqa: E402
                                          within_tolerance, write_configs)

MODES = (("filtered", []), ("lagged", ["--lagged"]), ("smoothed", ["--smooth"]))
"""The replays scored: what the node publishes, what leaves its lag window, the offline smoother."""


def run(cmd: list[str], ok: tuple[int, ...] = (0,)) -> int:
    print("$ " + " ".join(cmd), flush=True)
    rc = subprocess.run(cmd, cwd=ROOT).returncode
    if rc not in ok:
        raise SystemExit(f"failed (exit status {rc}): {' '.join(cmd)}")
    return rc


def effort_errors(path: Path) -> dict[str, float]:
    f = json.loads(path.read_text())
    return {j: v["effort"] for j, v in f["rmse"].items() if "effort" in v}


def validate(name: str, rig: Rig, args) -> bool:
    out = Path(args.out) / name
    out.mkdir(parents=True, exist_ok=True)
    truth_cfg, nominal_cfg = write_configs(rig, out, args.seed)
    mbfg = [sys.executable, "-m", "mbfg_ros.cli.main"]
    bag = out / "bag"
    run(mbfg + ["simulate", str(truth_cfg), "--duration", f"{args.duration:g}", "--seed", str(args.seed),
                "--out", str(bag), "--overwrite", "--no-progress"] + rig.simulate_options())
    run(mbfg + ["identify", str(bag), "--config", str(nominal_cfg), "--known-inputs", "--out",
                str(out / "identified.yaml"), "--json", str(out / "identified.json"), "--overwrite", "--no-progress"],
        ok=(0, 1))
    ident = json.loads((out / "identified.json").read_text())
    truth = {p.name: p.nominal for p in model_parameters(Mechanism(load_rig_config(truth_cfg)))}
    nominal = {p.name: p.nominal for p in model_parameters(Mechanism(load_rig_config(nominal_cfg)))}
    ok = True
    lines = [f"\n{name}: {sum(p['identified'] for p in ident['parameters'])} of {len(ident['parameters'])} parameters "
             f"identified from {args.duration:g} s ({ident['passes']} passes, {ident['wall_time']:.0f} s"
             f"{'' if ident['converged'] else ', NOT CONVERGED'})",
             "| parameter | config | truth | identified | sigma | error / sigma | error / reference | pass |",
             "|---|---|---|---|---|---|---|---|"]
    for p in ident["parameters"]:
        if not p["identified"]:
            continue
        n = p["name"]
        t = combination_truth(n, p["combination"], truth, nominal)
        err = p["value"] - t
        good = within_tolerance(p["value"], t, p["sigma"], p["scale"])
        ok &= good
        combo = " (comb.)" if p["combination"] else ""
        lines.append(f"| {n}{combo} | {p['config']:.6g} | {t:.6g} | {p['value']:.6g} | {p['sigma']:.3g} | "
                     f"{err / p['sigma']:+.2f} | {100 * err / max(abs(t), p['scale']):+.2f} % | "
                     f"{'yes' if good else 'NO'} |")
    names = [p["name"] for p in ident["parameters"] if not p["identified"]]
    lines.append(f"Not identifiable ({len(names)}): {', '.join(names)}")
    variants = [("the config's noises", nominal_cfg, out / "identified.yaml")]
    if rig.noise:
        label = ", ".join(f"{k} {v:g}" for k, v in rig.noise.items())
        variants.append((label, with_noise(nominal_cfg, out / "nominal_noise.yaml", rig.noise),
                         with_noise(out / "identified.yaml", out / "identified_noise.yaml", rig.noise)))
    lines += ["| joint | estimator noises | " + " | ".join(f"{m}: config -> identified (N m) | ratio" for m, _ in MODES)
              + " |", "|---|---|" + "---|---|" * len(MODES)]
    for v, (label, before_cfg, after_cfg) in enumerate(variants):
        errors = {}
        for mode, extra in MODES:
            for which, cfg in (("config", before_cfg), ("identified", after_cfg)):
                js = out / f"replay{v}_{mode}_{which}.json"
                run(mbfg + ["replay", str(bag), "--config", str(cfg), "--json", str(js), "--no-progress"] + extra)
                errors[mode, which] = effort_errors(js)
        for j in rig.driven:
            cells = []
            for mode, _ in MODES:
                e0, e1 = errors[mode, "config"][j], errors[mode, "identified"][j]
                cells.append(f"{e0:.4g} -> {e1:.4g} | {e1 / e0:.2f}")
                ok &= e1 <= 0.5 * e0 or mode == "filtered"
            lines.append(f"| {j} | {label} | " + " | ".join(cells) + " |")
    print("\n".join(lines), flush=True)
    with open(Path(args.out) / "tables.md", "a") as f:
        f.write("\n".join(lines) + "\n")
    return ok


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rigs", default=",".join(IDENTIFICATION_RIGS), help="comma-separated rigs (default: all)")
    p.add_argument("--duration", type=float, default=60.0, help="s simulated (default 60)")
    p.add_argument("--out", default=str(ROOT / "build" / "identification"), help="where to write the runs")
    p.add_argument("--seed", type=int, default=1, help="seed of the truth's factors, the inputs and the noise")
    args = p.parse_args(argv)
    ok = True
    for name in args.rigs.split(","):
        ok &= validate(name, IDENTIFICATION_RIGS[name], args)
    print("\nall passed" if ok else "\nSOME FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
