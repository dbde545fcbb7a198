"""The corpus of bad rigs of the reliability audit (issue 14, cases 1-3 and 8-11): configs and
URDFs each test writes for itself, with the words the one-line error must hold.

Every case is refused the same way by ``mbfg check``, ``mbfg replay``, ``mbfg simulate`` and the
estimator node at start-up (one line naming the file, the field and the value; exit status 2),
because they all load a rig through :func:`mbfg_ros.model.validation.load_rig`.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Callable

import yaml

ROOT = Path(__file__).resolve().parent.parent.parent
FOUR_BAR_YAML = ROOT / "config" / "four_bar.yaml"
FOUR_BAR_URDF = ROOT / "urdf" / "four_bar.urdf"


def _rocker_dead_centre(d):
    """The rocker as DOF at its dead centre: crank and coupler in line (|P - A| = 10 m)."""
    d["mechanism"]["dof"] = ["rocker_joint"]
    d["mechanism"]["initial"] = {"positions": {"rocker_joint": math.acos(-0.25)},
                                 "hint": {"crank_joint": 1.0, "coupler_joint": -0.7}}


def _toggle(d):
    """A four-bar that folds flat (rocker 4 m): at crank = pi every link is in line (rank 1)."""
    d["frames"][1]["xyz"] = [4.0, 0.0, 0.0]
    d["mechanism"]["initial"] = {"positions": {"crank_joint": math.pi},
                                 "hint": {"coupler_joint": -math.pi + 0.01, "rocker_joint": math.pi - 0.01}}


def _coupler_as_second_dof(d):
    """The four-bar with the coupler declared a DOF too, its value given only as a hint."""
    d["mechanism"]["dof"] = ["crank_joint", "coupler_joint"]


def _coupler_as_second_dof_at_the_flat_pose(d):
    """The folding four-bar of :func:`_toggle` with the coupler declared a DOF too, held at the
    flat pose: the closure Jacobian has rank 1 there, and a count at that pose alone found the
    2 DOF declared."""
    _toggle(d)
    d["mechanism"]["dof"] = ["crank_joint", "coupler_joint"]
    d["mechanism"]["initial"]["hint"] = {"coupler_joint": -math.pi, "rocker_joint": math.pi}


def _no_sensors(d):
    d["sensors"] = {"encoders": [], "load_cells": []}


CONFIG_CASES: dict[str, tuple[Callable, tuple[str, ...]]] = {
    # case 1: what the node used to start on
    "closure_cannot_assemble": (lambda d: d["frames"][1].update(xyz=[50.0, 0.0, 0.0]),
                                ("mechanism.initial", "cannot be assembled", "coupler_rocker")),
    "two_dof_on_a_one_dof_loop": (lambda d: d["mechanism"].update(dof=["crank_joint", "rocker_joint"]),
                                  ("mechanism.dof", "1 degree(s) of freedom", "['crank_joint', 'rocker_joint']")),
    # issue 21 step 4: the DOF count from the rank at a generic pose, not at the initial one
    "coupler_as_second_dof": (_coupler_as_second_dof, ("mechanism.dof", "1 degree(s) of freedom",
                                                       "[crank_joint, coupler_joint]",
                                                       "['crank_joint', 'coupler_joint']")),
    "coupler_as_second_dof_at_the_flat_pose": (_coupler_as_second_dof_at_the_flat_pose,
                                               ("mechanism.dof", "1 degree(s) of freedom",
                                                "[crank_joint, coupler_joint]",
                                                "['crank_joint', 'coupler_joint']")),
    "keyframe_rate_1e9": (lambda d: d["estimator"].update(keyframe_rate=1e9),
                          ("estimator.keyframe_rate", "must be from 1 to 2000 Hz", "1000000000.0")),
    # case 2: unbounded lag and keyframe rate
    "keyframe_rate_2e11": (lambda d: d["estimator"].update(keyframe_rate=2e11),
                           ("estimator.keyframe_rate", "must be from 1 to 2000 Hz", "200000000000.0")),
    "huge_lag": (lambda d: d["estimator"].update(lag=1e6), ("estimator.lag", "must be from 0.01 to 60 s")),
    "huge_window": (lambda d: d["estimator"].update(lag=60.0, keyframe_rate=2000.0),
                    ("estimator.lag", "the window would hold 120000 keyframes", "at most 20000")),
    "sensor_rate_1e9": (lambda d: d["sensors"]["encoders"][0].update(rate=1e9),
                        ("sensors.encoders[0].rate", "must be from 0.01 to 100000 Hz")),
    "tiny_noise": (lambda d: d["sensors"]["encoders"][0].update(noise=1e-300),
                   ("sensors.encoders[0].noise", "must be from 1e-09 to 1e+09", "1e-300")),
    "huge_factor_noise": (lambda d: d["estimator"].update(noise={"dynamics": 1e300}),
                          ("estimator.noise.dynamics", "must be from 1e-09 to 1e+09")),
    # case 3: gravity
    "gravity_1e300": (lambda d: d["mechanism"].update(gravity=[0.0, -1e300, 0.0]),
                      ("mechanism.gravity", "at most 1e+09 in magnitude", "-1e+300")),
    "gravity_5000": (lambda d: d["mechanism"].update(gravity=[0.0, -5000.0, 0.0]),
                     ("mechanism.gravity", "at most 1000 m/s^2", "-5000.0")),
    # case 9: singular poses
    "rocker_dead_centre": (_rocker_dead_centre, ("mechanism.dof", "cannot drive the mechanism",
                                                 "condition number", "limit 1e+06")),
    "toggle_pose": (_toggle, ("mechanism.initial.positions", "singular or nearly so",
                              "condition number", "limit 1e+06")),
    # case 10
    "no_sensors": (_no_sensors, ("field 'sensors'", "lists no sensor")),
}

URDF_CASES: dict[str, tuple[Callable[[str], str], tuple[str, ...]]] = {
    # case 8: physically invalid inertia, a moving link without inertial
    "negative_izz": (lambda x: x.replace('izz="42.666666666666664"', 'izz="-42.6"'),
                     ("link[coupler].inertia", "positive definite", "'izz': -42.6")),
    "mass_zero_inertia_kept": (lambda x: x.replace('<mass value="8.0"/>', '<mass value="0"/>'),
                               ("link[coupler].inertia", "without mass cannot have rotational inertia")),
    "triangle_inequality": (lambda x: x.replace('iyy="42.666666666666664"', 'iyy="1.0"'),
                            ("link[coupler].inertia", "triangle inequality")),
    "no_inertial": (lambda x: _drop_inertial(x, "coupler"),
                    ("link[coupler].inertial", "moves (joint 'coupler_joint') but has no mass")),
    # case 11
    "joint_cycle": (lambda x: _cycle(x), ("the joints form a cycle", "closures:")),
}


def _drop_inertial(xml: str, link: str) -> str:
    start = xml.index(f'<link name="{link}">')
    a = xml.index("<inertial>", start)
    b = xml.index("</inertial>", a) + len("</inertial>")
    return xml[:a] + xml[b:]


def _cycle(xml: str) -> str:
    """Two extra links joined in a loop (a -> b -> a), beside the real tree."""
    extra = ('<link name="loop_a"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" '
             'ixy="0" ixz="0" iyz="0"/></inertial></link>'
             '<link name="loop_b"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" '
             'ixy="0" ixz="0" iyz="0"/></inertial></link>'
             '<joint name="loop_ab" type="continuous"><parent link="loop_a"/><child link="loop_b"/>'
             '<axis xyz="0 0 1"/></joint>'
             '<joint name="loop_ba" type="continuous"><parent link="loop_b"/><child link="loop_a"/>'
             '<axis xyz="0 0 1"/></joint>')
    return xml.replace("</robot>", extra + "</robot>")


def write_case(tmp: Path, name: str) -> tuple[Path, tuple[str, ...]]:
    """Write the case's config (and URDF) under ``tmp``; (config path, words of the error)."""
    tmp.mkdir(parents=True, exist_ok=True)
    doc = yaml.safe_load(FOUR_BAR_YAML.read_text())
    doc["mechanism"]["urdf"] = str(FOUR_BAR_URDF)
    if name in CONFIG_CASES:
        mutate, words = CONFIG_CASES[name]
        mutate(doc)
    else:
        mutate, words = URDF_CASES[name]
        urdf = tmp / f"{name}.urdf"
        urdf.write_text(mutate(FOUR_BAR_URDF.read_text()))
        doc["mechanism"]["urdf"] = str(urdf)
        words = (str(urdf), *words)
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path, words


ALL_CASES = [*CONFIG_CASES, *URDF_CASES]
