"""A simulated truth whose constant parameters differ from a rig's config: what `mbfg identify`
is validated against (tools/identification_table.py, test/sim/test_perturbed_truth.py).

:func:`write_configs` writes, for one of the example rigs (:data:`IDENTIFICATION_RIGS`), the
nominal config (the repository's, its driven joints ``unknown`` inputs whose effort the estimator
estimates) and the truth's config, which the simulator runs:

- every moving link's mass and inertia tensor times their own random factors within +-20 %
  (centres of mass kept; a URDF copy beside the configs);
- every joint with the rig's Coulomb and viscous friction and armature (:attr:`Rig.drive`);
- every encoder 0.01 rad off (``offset``), a gyro's scale 2 % off and its bias 0.01 rad/s, a
  load cell's scale 3 % off and its offset 1.5 noise sigmas;
- optionally (``time_offsets``) sensors whose clocks lag: the truth's ``time_offset``;
- the driven joints' efforts ``known`` (so that the simulator writes them to the bag, where
  ``mbfg identify --known-inputs`` reads them and the replay scores the estimate).

:func:`combination_truth` gives the truth of what an identified parameter stands for and
:func:`within_tolerance` the validation's test: within 3 standard deviations and 5 % of it (of
its natural size, when that is larger). No ROS.
"""
from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import yaml

from mbfg_ros.errors import MbfgError
from mbfg_ros.model.config import load_rig_config
from mbfg_ros.model.mechanism import Mechanism

ROOT = Path(__file__).resolve().parent.parent.parent
"""The repository (the example configs are under config/)."""
ENCODER_OFFSET = 0.01
"""rad: every encoder's offset in the truth."""
MASS_RANGE = (0.8, 1.2)
"""The range of the truth's factors on each link's mass and (separately) its inertia tensor."""


@dataclasses.dataclass(frozen=True)
class Rig:
    """A validation rig: its config (relative to the repository), the joints driven by random
    efforts, the input (amplitude N m, knot rate Hz; ``scale``: a factor per joint), the truth's
    drive per joint (viscous N m s/rad, coulomb N m, armature kg m^2), its initial DOF
    positions (rad), and ``noise``: estimator.noise values of a second effort comparison (both
    configs), beside the config's."""
    config: str
    driven: tuple[str, ...]
    amplitude: float
    frequency: float
    drive: dict[str, tuple[float, float, float]]
    initial: dict[str, float] = dataclasses.field(default_factory=dict)
    scale: dict[str, float] = dataclasses.field(default_factory=dict)
    noise: dict[str, float] = dataclasses.field(default_factory=dict)

    def simulate_options(self) -> list[str]:
        """`mbfg simulate`'s input options for this rig (random efforts from t = 0)."""
        return (["--input", "random", "--input-amplitude", f"{self.amplitude:g}", "--input-frequency",
                 f"{self.frequency:g}", "--input-start", "0"]
                + [f"--input-scale={j}={f:g}" for j, f in self.scale.items()])


IDENTIFICATION_RIGS = {
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
"""The four-bar (its crank driven), the 6-DOF arm (hanging, every joint driven, the wrists with
a fraction of the torque) and the double pendulum (both joints driven)."""


def write_truth_urdf(src: Path, out: Path, links: list[str], rng: np.random.Generator) -> dict[str, tuple]:
    """The URDF with each of ``links``' mass and inertia tensor times its own factor within
    :data:`MASS_RANGE`; returns the factors {link: (mass, inertia)}."""
    tree = ET.parse(src)
    factors = {}
    for lk in tree.getroot().findall("link"):
        if lk.get("name") not in links or lk.find("inertial") is None:
            continue
        fm, fi = rng.uniform(*MASS_RANGE, 2)
        inertial = lk.find("inertial")
        mass = inertial.find("mass")
        mass.set("value", repr(float(mass.get("value")) * float(fm)))
        it = inertial.find("inertia")
        for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz"):
            it.set(k, repr(float(it.get(k, "0")) * float(fi)))
        factors[lk.get("name")] = (float(fm), float(fi))
    tree.write(out)
    return factors


def write_configs(rig: Rig, out: Path, seed: int, native_code: str | None = None,
                  time_offsets: dict[str, float] | None = None) -> tuple[Path, Path]:
    """(truth.yaml, nominal.yaml) of ``rig`` in ``out`` (absolute URDF paths; the truth's URDF
    truth.urdf and its factors factors.json beside them); ``native_code``: the configs'
    ``estimator.native_code`` (None: the rig's; "off" spares a short run the compilation);
    ``time_offsets``: s per sensor name, the truth's ``time_offset`` of those sensors (their
    clocks lag: the simulator stamps each reading that much after it was taken; the nominal
    config keeps 0)."""
    src = ROOT / rig.config
    doc = yaml.safe_load(src.read_text())
    urdf = (src.parent / doc["mechanism"]["urdf"]).resolve()
    nominal = json.loads(json.dumps(doc))
    nominal["mechanism"]["urdf"] = str(urdf)
    joints = nominal.setdefault("joints", {}) or {}
    nominal["joints"] = joints
    for j in rig.driven:
        joints.setdefault(j, {})["actuation"] = "unknown"
    if native_code is not None:
        nominal["estimator"] = dict(nominal.get("estimator") or {}, native_code=native_code)
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
        enc["offset"] = ENCODER_OFFSET
    for gyro in truth["sensors"].get("gyros", []):        # a calibration off by a few per cent
        gyro.update(scale=[1.02, 0.98, 1.01], bias=[0.01, -0.005, 0.003])
    for cell in truth["sensors"].get("load_cells", []):
        cell.update(scale=1.03, offset=1.5 * cell["noise"])
    set_time_offsets(truth, time_offsets or {})
    (out / "nominal.yaml").write_text(yaml.safe_dump(nominal, sort_keys=False))
    (out / "truth.yaml").write_text(yaml.safe_dump(truth, sort_keys=False))
    (out / "factors.json").write_text(json.dumps(factors, indent=1))
    return out / "truth.yaml", out / "nominal.yaml"


def set_time_offsets(doc: dict, time_offsets: dict[str, float]) -> None:
    """Set the ``time_offset`` (s) of the named sensors in a config document; MbfgError naming
    a sensor the config does not have."""
    items = {item.get("name"): item for section in (doc.get("sensors") or {}).values() for item in section or []}
    for name, offset in time_offsets.items():
        if name not in items:
            raise MbfgError(f"no sensor {name!r} to give a time offset (sensors: {', '.join(map(str, items))})")
        items[name]["time_offset"] = float(offset)


def with_noise(src: Path, out: Path, noise: dict[str, float]) -> Path:
    """A copy of a config with these ``estimator.noise`` values (beside it, so that a relative
    URDF still resolves)."""
    doc = yaml.safe_load(src.read_text())
    est = doc.get("estimator") or {}
    est.setdefault("noise", {}).update(noise)
    doc["estimator"] = est
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


def combination_truth(name: str, combination, truth: dict[str, float], nominal: dict[str, float]) -> float:
    """The truth of what an identified parameter stands for: its own plus the multiples
    (``combination`` [(name, coefficient)]) of the unidentified ones' errors."""
    return truth[name] + sum(c * (truth[u] - nominal[u]) for u, c in combination)


def within_tolerance(value: float, truth: float, sigma: float, scale: float) -> bool:
    """The validation's test: within 3 standard deviations and 5 % of the truth (of the
    parameter's natural size ``scale``, when that is larger: a parameter whose truth is 0 or
    small is judged by how much it matters)."""
    err = abs(value - truth)
    return err <= 3.0 * sigma and err <= 0.05 * max(abs(truth), scale)
