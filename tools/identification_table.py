#!/usr/bin/env python3
"""Validates `mbfg identify` against the simulator: prints, per rig, every identified
parameter beside the simulated truth (of the combination it stands for), and the estimator's
effort error with the config before and after identification.

For each rig (the four-bar, the 6-DOF arm, the double pendulum) it writes a truth: the rig's
URDF with every moving link's mass and inertia tensor scaled by their own random factors within
+-20 % (centres of mass kept), every joint with Coulomb and viscous friction and an armature
that differ from the config's, every encoder 0.01 rad off (the config's ``offset``), a gyro's
scale 2 % off and its bias 0.01 rad/s, a load cell's scale 3 % off and its offset 1.5 noise
sigmas, the driven joints' efforts known (so that the simulator writes them); then, with the
repository's commands:

    mbfg simulate truth.yaml --duration 60 --input random ... --out bag
    mbfg identify bag --config nominal.yaml --known-inputs --out identified.yaml --json identified.json
    mbfg replay bag --config nominal.yaml --json before.json      (and --config identified.yaml)

where nominal.yaml is the repository's config (the four-bar's crank made an ``unknown`` input, so
that its effort is estimated and scored). A parameter passes when it is within 3 standard
deviations and 5 % of its truth (of its natural size, when that is larger: see reference()). Usage (from the repository root):

    .venv/bin/python tools/identification_table.py [--rigs four_bar,arm6,double_pendulum] \\
        [--duration 60] [--out build/identification] [--seed 1]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mbfg_ros.model.config import load_rig_config  # noqa: E402
from mbfg_ros.model.mechanism import Mechanism  # noqa: E402
from mbfg_ros.model.parameters import model_parameters  # noqa: E402


@dataclasses.dataclass(frozen=True)
class Rig:
    """A validation rig: its config, the joints driven by known random efforts, the input
    (amplitude N m, knot rate Hz, a factor per joint), the truth's drive per joint (viscous,
    coulomb, armature) and its initial DOF positions."""
    config: str
    driven: tuple[str, ...]
    amplitude: float
    frequency: float
    drive: dict[str, tuple[float, float, float]]
    initial: dict[str, float] = dataclasses.field(default_factory=dict)
    scale: dict[str, float] = dataclasses.field(default_factory=dict)
    noise: dict[str, float] = dataclasses.field(default_factory=dict)
    """estimator.noise values of a second effort comparison (both configs), beside the config's."""


RIGS = {
    "four_bar": Rig("config/four_bar.yaml", ("crank_joint",), 50.0, 2.0,
                    {"crank_joint": (3.0, 8.0, 2.0), "coupler_joint": (1.0, 3.0, 0.0), "rocker_joint": (1.5, 4.0, 0.0)}),
    "arm6": Rig("config/arm6.yaml", ("shoulder_pan", "shoulder_lift", "elbow", "wrist_1_joint", "wrist_2_joint",
                                     "wrist_3_joint"), 2.0, 1.0,
                {"shoulder_pan": (0.6, 0.3, 0.05), "shoulder_lift": (0.6, 0.3, 0.05), "elbow": (0.36, 0.2, 0.02),
                 "wrist_1_joint": (0.12, 0.05, 0.002), "wrist_2_joint": (0.12, 0.05, 0.002),
                 "wrist_3_joint": (0.12, 0.05, 0.001)},
                {"shoulder_pan": 0.0, "shoulder_lift": 3.0, "elbow": 0.2, "wrist_1_joint": 0.1},
                {"wrist_1_joint": 0.3, "wrist_2_joint": 0.15, "wrist_3_joint": 0.15}),
    "double_pendulum": Rig("config/double_pendulum.yaml", ("shoulder", "elbow"), 0.5, 2.0,
                           {"shoulder": (0.03, 0.17, 0.0041), "elbow": (0.025, 0.14, 0.0041)},
                           noise={"dynamics": 0.02, "input_random_walk": 2.0}),
}


def run(cmd: list[str], ok: tuple[int, ...] = (0,)) -> int:
    print("$ " + " ".join(cmd), flush=True)
    rc = subprocess.run(cmd, cwd=ROOT).returncode
    if rc not in ok:
        raise SystemExit(f"failed (exit status {rc}): {' '.join(cmd)}")
    return rc


def write_truth_urdf(src: Path, out: Path, links: list[str], rng: np.random.Generator) -> dict[str, tuple]:
    """The URDF with each link's mass and inertia tensor times its own factor in [0.8, 1.2]."""
    tree = ET.parse(src)
    factors = {}
    for lk in tree.getroot().findall("link"):
        if lk.get("name") not in links or lk.find("inertial") is None:
            continue
        fm, fi = rng.uniform(0.8, 1.2, 2)
        inertial = lk.find("inertial")
        mass = inertial.find("mass")
        mass.set("value", repr(float(mass.get("value")) * float(fm)))
        it = inertial.find("inertia")
        for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz"):
            it.set(k, repr(float(it.get(k, "0")) * float(fi)))
        factors[lk.get("name")] = (float(fm), float(fi))
    tree.write(out)
    return factors


def configs(name: str, rig: Rig, out: Path, seed: int) -> tuple[Path, Path]:
    """(truth.yaml, nominal.yaml) in ``out`` (absolute URDF paths)."""
    src = ROOT / rig.config
    doc = yaml.safe_load(src.read_text())
    urdf = (src.parent / doc["mechanism"]["urdf"]).resolve()
    nominal = json.loads(json.dumps(doc))
    nominal["mechanism"]["urdf"] = str(urdf)
    joints = nominal.setdefault("joints", {}) or {}
    nominal["joints"] = joints
    for j in rig.driven:
        joints.setdefault(j, {})["actuation"] = "unknown"
    truth = json.loads(json.dumps(nominal))
    mech = Mechanism(load_rig_config(src))
    links = [j.child for j in mech.urdf.joints]
    factors = write_truth_urdf(urdf, out / "truth.urdf", links, np.random.default_rng(seed))
    truth["mechanism"]["urdf"] = str(out / "truth.urdf")
    if rig.initial:
        truth["mechanism"].setdefault("initial", {}).setdefault("positions", {}).update(rig.initial)
    for j, (visc, coul, arm) in rig.drive.items():
        t = truth["joints"].setdefault(j, {})
        t.update(viscous=visc, coulomb=coul, armature=arm)
        if j in rig.driven:
            t["actuation"] = "known"
    for enc in truth["sensors"]["encoders"]:
        enc["offset"] = 0.01
    for gyro in truth["sensors"].get("gyros", []):        # a calibration off by a few per cent
        gyro.update(scale=[1.02, 0.98, 1.01], bias=[0.01, -0.005, 0.003])
    for cell in truth["sensors"].get("load_cells", []):
        cell.update(scale=1.03, offset=1.5 * cell["noise"])
    (out / "nominal.yaml").write_text(yaml.safe_dump(nominal, sort_keys=False))
    (out / "truth.yaml").write_text(yaml.safe_dump(truth, sort_keys=False))
    (out / "factors.json").write_text(json.dumps(factors, indent=1))
    return out / "truth.yaml", out / "nominal.yaml"


def reference(truth: float, scale: float) -> float:
    """What 5 % is taken of: the truth, at least the parameter's natural size (what `mbfg
    identify` identifies to 1 %: a body's mass, mass x radius of gyration, ...; an effort's RMS
    for a Coulomb friction or an offset; 0.1 rad for an encoder's offset; see
    mbfg_ros.estimation.identification.parameter_scales), so that a parameter whose truth is 0
    or small is judged by how much it matters."""
    return max(abs(truth), scale)


def effort_errors(path: Path) -> dict[str, float]:
    f = json.loads(path.read_text())
    return {j: v["effort"] for j, v in f["rmse"].items() if "effort" in v}


def validate(name: str, rig: Rig, args) -> bool:
    out = Path(args.out) / name
    out.mkdir(parents=True, exist_ok=True)
    truth_cfg, nominal_cfg = configs(name, rig, out, args.seed)
    mbfg = [sys.executable, "-m", "mbfg_ros.cli.main"]
    bag = out / "bag"
    run(mbfg + ["simulate", str(truth_cfg), "--duration", f"{args.duration:g}", "--input", "random",
                "--input-amplitude", f"{rig.amplitude:g}", "--input-frequency", f"{rig.frequency:g}",
                "--input-start", "0", "--seed", str(args.seed), "--out", str(bag), "--overwrite", "--no-progress"]
        + [f"--input-scale={j}={f:g}" for j, f in rig.scale.items()])
    run(mbfg + ["identify", str(bag), "--config", str(nominal_cfg), "--known-inputs", "--out",
                str(out / "identified.yaml"), "--json", str(out / "identified.json"), "--overwrite", "--no-progress"],
        ok=(0, 1))
    ident = json.loads((out / "identified.json").read_text())
    truth = {p.name: p.nominal for p in model_parameters(Mechanism(load_rig_config(truth_cfg)))}
    nominal = {p.name: p.nominal for p in model_parameters(Mechanism(load_rig_config(nominal_cfg)))}
    ok = True
    print(f"\n{name}: {sum(p['identified'] for p in ident['parameters'])} of {len(ident['parameters'])} parameters "
          f"identified ({ident['passes']} passes, {ident['wall_time']:.0f} s)")
    print("| parameter | config | truth | identified | sigma | error / sigma | error / reference | pass |")
    print("|---|---|---|---|---|---|---|---|")
    for p in ident["parameters"]:
        if not p["identified"]:
            continue
        n = p["name"]
        t = truth[n] + sum(c * (truth[u] - nominal[u]) for u, c in p["combination"])
        err = p["value"] - t
        ref = reference(t, p["scale"])
        good = abs(err) <= 3 * p["sigma"] and abs(err) <= 0.05 * ref
        ok &= good
        combo = " (comb.)" if p["combination"] else ""
        print(f"| {n}{combo} | {p['config']:.6g} | {t:.6g} | {p['value']:.6g} | {p['sigma']:.3g} | "
              f"{err / p['sigma']:+.2f} | {100 * err / ref:+.2f} % | {'yes' if good else 'NO'} |")
    names = [p["name"] for p in ident["parameters"] if not p["identified"]]
    print(f"Not identifiable ({len(names)}): {', '.join(names)}")
    variants = [("the config's noises", nominal_cfg, out / "identified.yaml")]
    if rig.noise:
        label = ", ".join(f"{k} {v:g}" for k, v in rig.noise.items())
        variants.append((label, with_noise(nominal_cfg, out / "nominal_noise.yaml", rig.noise),
                         with_noise(out / "identified.yaml", out / "identified_noise.yaml", rig.noise)))
    print("| joint | estimator noises | effort RMSE filtered: config -> identified (N m) | ratio "
          "| smoothed: config -> identified (N m) | ratio |")
    print("|---|---|---|---|---|---|")
    for v, (label, before_cfg, after_cfg) in enumerate(variants):
        errors = {}
        for mode, extra in (("filtered", []), ("smoothed", ["--smooth"])):
            for which, cfg in (("config", before_cfg), ("identified", after_cfg)):
                js = out / f"replay{v}_{mode}_{which}.json"
                run(mbfg + ["replay", str(bag), "--config", str(cfg), "--json", str(js), "--no-progress"] + extra)
                errors[mode, which] = effort_errors(js)
        for j in rig.driven:
            f0, f1 = errors["filtered", "config"][j], errors["filtered", "identified"][j]
            s0, s1 = errors["smoothed", "config"][j], errors["smoothed", "identified"][j]
            ok &= f1 <= 0.5 * f0 or v < len(variants) - 1
            print(f"| {j} | {label} | {f0:.4g} -> {f1:.4g} | {f1 / f0:.2f} | {s0:.4g} -> {s1:.4g} | {s1 / s0:.2f} |")
    return ok


def with_noise(src: Path, out: Path, noise: dict[str, float]) -> Path:
    """A copy of a config (beside it, so that a relative URDF still resolves) with these noises."""
    doc = yaml.safe_load(src.read_text())
    est = doc.get("estimator") or {}
    est.setdefault("noise", {}).update(noise)
    doc["estimator"] = est
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rigs", default=",".join(RIGS), help="comma-separated rigs (default: all)")
    p.add_argument("--duration", type=float, default=60.0, help="s simulated (default 60)")
    p.add_argument("--out", default=str(ROOT / "build" / "identification"), help="where to write the runs")
    p.add_argument("--seed", type=int, default=1, help="seed of the truth's factors, the inputs and the noise")
    args = p.parse_args(argv)
    ok = True
    for name in args.rigs.split(","):
        ok &= validate(name, RIGS[name], args)
    print("\nall passed" if ok else "\nSOME FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
