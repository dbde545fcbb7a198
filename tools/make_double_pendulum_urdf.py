#!/usr/bin/env python3
"""Writes urdf/double_pendulum.urdf from the DFKI double pendulum's identified parameters.

The source is ``model_parameters.yml`` of dfki-ric-underactuated-lab/double_pendulum
(data/system_identification/identified_parameters/<design>/<model>/, BSD-3-Clause; the copy used
here is test/fixtures/double_pendulum/model_parameters.yml, design C.0, model 3.0). Its plant
(src/python/double_pendulum/model/plant.py, "UnderactuatedLecture" formulas) reads, with angles
from hanging down, q2 relative to link 1, c2 = cos(q2):

    M = [[I1 + I2 + m2 l1^2 + 2 m2 l1 r2 c2 + gr^2 Ir + Ir,   I2 + m2 l1 r2 c2 - gr Ir],
         [I2 + m2 l1 r2 c2 - gr Ir,                           I2 + gr^2 Ir            ]]
    M qdd + C(q, qd) qd - G(q) + F(qd) = tau,    F_i = b_i qd_i + cf_i atan(100 qd_i)

so I1, I2 are inertias about the pivots (not about the centres of mass, where the repository's
generated URDFs put them), r1, r2 the distances of the centres of mass, and the rotors enter as
follows: rotor 1 (on the base) turns at gr qd1: gr^2 Ir on joint 1; rotor 2 (carried by link 1)
turns at qd1 - gr qd2: gr^2 Ir on joint 2, Ir on joint 1 and -gr Ir off the diagonal. This
generator writes

- ``armature`` gr^2 Ir on both joints (printed for the config's ``joints:``; pinocchio's
  model.armature);
- rotor 2's own Ir added to link 1's rotational inertia (it rides on link 1);
- the off-diagonal -gr Ir (6e-4 kg m^2 for model 3.0, 1-3 % of M12) is not representable by a
  tree of rigid bodies with a diagonal armature and is left out;
- the friction as the config's smooth Coulomb: coulomb = cf pi / 2 (atan saturates at pi / 2),
  coulomb_velocity = pi / 200 rad/s (the same slope at zero velocity: cf 100), viscous = b.

Only the base parameters I1 + m2 l1^2, I2, m2 r2 and m1 r1 + m2 l1 enter these equations (the
identification fitted m1 r1, I1, Ir, m2 r2, m2 and I2 with l1, l2, r1 fixed), and model 3.0's are
not physically consistent as given: link 2's pivot inertia I2 = 0.0539 kg m^2 is below
m2 r2^2 = 0.0582 kg m^2 (a negative inertia about its centre of mass, which ``mbfg check``
refuses). The generator keeps the four base parameters exactly and picks a consistent split:
where a link's pivot inertia is below m r^2, its centre of mass moves towards the pivot until
its own inertia is ``COM_FRACTION`` (10 %) of its pivot inertia (between a tip mass, 0, and a
uniform rod, 25 %), its mass changes to keep m r, and link 1's I1 and r1 absorb the change of
m2 l1^2 and m2 l1. The equations of motion are the published ones either way (up to the rotor
coupling above); only the masses and centres the URDF shows differ. Each link's inertia about
its centre of mass is isotropic (only the component about the joint axis matters in the plane).

Frames: z up, gravity -z; both joints turn about the base's -y (so x = l1 sin q1, z = -l1 cos q1
as in the plant's forward kinematics); link frames hang along their -z.

Run from the repository root: ``python tools/make_double_pendulum_urdf.py [model_parameters.yml
[out.urdf]]`` writes the URDF (default urdf/double_pendulum.urdf) and prints the config's ``joints:``
entries. The example rigs built with it: design C.0 model 3.0 (urdf/double_pendulum.urdf), design
A.0 models 2.0 and 1.0 (urdf/double_pendulum_a0.urdf, urdf/double_pendulum_a0_model1.urdf; their
parameters in test/fixtures/double_pendulum/design_A.0/).
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PARAMETERS = ROOT / "test" / "fixtures" / "double_pendulum" / "model_parameters.yml"
OUTPUT = ROOT / "urdf" / "double_pendulum.urdf"
COM_FRACTION = 0.1
"""A link's inertia about its centre of mass as a fraction of its pivot inertia, where the
published split is inconsistent."""
TANH_VELOCITY = math.pi / 200.0
"""rad/s: tanh(v / this) has the slope of (2 / pi) atan(100 v) at v = 0."""


@dataclass(frozen=True)
class Link:
    """A link as the URDF holds it: mass (kg), centre-of-mass distance from its pivot along the
    link (m), inertia about the centre of mass (kg m^2, isotropic), length to the next pivot (m)."""
    mass: float
    com: float
    inertia: float
    length: float


def consistent_links(p: dict) -> tuple[Link, Link]:
    """Links 1 and 2 with the published base parameters (see the module docstring)."""
    l1, l2 = float(p["l1"]), float(p["l2"])
    m1, m2, r1, r2 = (float(p[k]) for k in ("m1", "m2", "r1", "r2"))
    I1, I2, Ir = float(p["I1"]), float(p["I2"]), float(p["Ir"])
    base_1 = I1 + m2 * l1 ** 2              # joint 1's constant inertia beyond I2
    gravity_1 = m1 * r1 + m2 * l1           # joint 1's gravity moment / g
    moment_2 = m2 * r2
    if I2 - m2 * r2 ** 2 <= 0.0:
        r2 = (1.0 - COM_FRACTION) * I2 / moment_2
        m2 = moment_2 / r2
    I1 = base_1 - m2 * l1 ** 2
    r1 = (gravity_1 - m2 * l1) / m1
    if I1 - m1 * r1 ** 2 <= 0.0:
        raise SystemExit(f"link 1 has no consistent split (I1 {I1:g} < m1 r1^2 {m1 * r1 ** 2:g})")
    return (Link(m1, r1, I1 - m1 * r1 ** 2 + Ir, l1),      # rotor 2 rides on link 1
            Link(m2, r2, I2 - m2 * r2 ** 2, l2))


def drive(p: dict) -> dict[str, dict[str, float]]:
    """The config's joints entries: armature, viscous and smooth Coulomb friction."""
    armature = float(p["gr"]) ** 2 * float(p["Ir"])
    return {joint: {"viscous": float(p[f"b{i}"]), "coulomb": float(p[f"cf{i}"]) * math.pi / 2,
                    "coulomb_velocity": TANH_VELOCITY, "armature": armature}
            for i, joint in ((1, "shoulder"), (2, "elbow"))}


def _link(name: str, link: Link, radius: float) -> str:
    i = repr(link.inertia)
    return f"""  <link name="{name}">
    <inertial>
      <origin xyz="0 0 {-link.com!r}" rpy="0 0 0"/>
      <mass value="{link.mass!r}"/>
      <inertia ixx="{i}" ixy="0" ixz="0" iyy="{i}" iyz="0" izz="{i}"/>
    </inertial>
    <visual>
      <origin xyz="0 0 {-link.length / 2!r}" rpy="0 0 0"/>
      <geometry><cylinder radius="{radius}" length="{link.length!r}"/></geometry>
    </visual>
  </link>
"""


def _joint(name: str, parent: str, child: str, z: float) -> str:
    return f"""  <joint name="{name}" type="continuous">
    <parent link="{parent}"/>
    <child link="{child}"/>
    <origin xyz="0 0 {z!r}" rpy="0 0 0"/>
    <axis xyz="0 -1 0"/>
  </joint>
"""


def urdf(p: dict, source: str) -> str:
    link1, link2 = consistent_links(p)
    return f"""<?xml version="1.0"?>
<!-- The DFKI underactuated-lab double pendulum (github.com/dfki-ric-underactuated-lab/double_pendulum,
     BSD-3-Clause), from its identified parameters {source}.
     Generated by tools/make_double_pendulum_urdf.py: inertias about the centres of mass (the
     parameters' are about the pivots), rotor 2 on link 1, a consistent mass split with the
     published base parameters; the rotors' reflected inertia is the config's joint armature. -->
<robot name="double_pendulum">
  <link name="base_link"/>
{_joint("shoulder", "base_link", "upper_link", 0.0)}{_link("upper_link", link1, 0.015)}\
{_joint("elbow", "upper_link", "lower_link", -link1.length)}{_link("lower_link", link2, 0.01)}</robot>
"""


def main(argv: list[str]) -> int:
    src = Path(argv[1]) if len(argv) > 1 else DEFAULT_PARAMETERS
    out = Path(argv[2]).resolve() if len(argv) > 2 else OUTPUT
    p = yaml.safe_load(src.read_text(encoding="utf-8"))
    try:
        label = str(src.resolve().relative_to(ROOT))
    except ValueError:
        label = str(src)
    out.write_text(urdf(p, label), encoding="utf-8")
    print(f"wrote {out}")
    print("joints:")
    for joint, d in drive(p).items():
        print(f"  {joint}: {{" + ", ".join(f"{k}: {v!r}" for k, v in d.items()) + "}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
