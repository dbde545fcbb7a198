"""URDF loading into a pinocchio model, with messages a rig engineer can act on.

Supported joints: revolute, continuous, prismatic (one coordinate each) and fixed (merged into
its parent body by pinocchio, the child link stays available as a frame). ``continuous`` joints
are loaded as unbounded single-angle revolute joints so that every coordinate is one number
(configuration and velocity spaces coincide: nq == nv); their angle is not wrapped.
"""
from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pinocchio as pin

from mbfg_ros.errors import ConfigError

SUPPORTED_JOINTS = ("revolute", "continuous", "prismatic", "fixed")


@dataclass(frozen=True)
class UrdfJoint:
    """A movable URDF joint as loaded."""
    name: str
    type: str           # revolute | continuous | prismatic
    parent: str
    child: str
    axis: tuple[float, float, float]
    lower: float
    upper: float
    effort: float
    velocity: float

    @property
    def is_angular(self) -> bool:
        return self.type in ("revolute", "continuous")


@dataclass(frozen=True)
class TreeJoint:
    """Any URDF joint (fixed ones included): the edge parent -> child of the link tree."""
    name: str
    type: str
    parent: str
    child: str


@dataclass(frozen=True)
class UrdfDescription:
    """What mbfg_ros keeps of a URDF besides the pinocchio model."""
    robot_name: str
    root_link: str
    links: tuple[str, ...]
    joints: tuple[UrdfJoint, ...]
    fixed_joints: tuple[str, ...]
    source: str
    xml: str
    tree: tuple[TreeJoint, ...] = ()


def _fail(reason: str, source: str, field: str | None = None, value=ConfigError._MISSING) -> ConfigError:
    return ConfigError(reason, file=source, field=field, value=value)


def _floats(text: str | None, n: int, default: tuple[float, ...], source: str, field: str):
    if text is None:
        return default
    try:
        vals = tuple(float(x) for x in text.split())
    except ValueError:
        raise _fail(f"expected {n} numbers", source, field, text) from None
    if len(vals) != n or not all(math.isfinite(v) for v in vals):
        raise _fail(f"expected {n} finite numbers", source, field, text)
    return vals


def parse_urdf(xml: str, source: str) -> tuple[UrdfDescription, str]:
    """Validate URDF text; return its description and the XML pinocchio should load."""
    try:
        root = ET.fromstring(xml)
    except ET.ParseError as exc:
        line, col = exc.position
        raise _fail(f"malformed XML at line {line}, column {col + 1}: {exc.msg if hasattr(exc, 'msg') else exc}",
                    source) from None
    if root.tag != "robot":
        raise _fail("the root element must be <robot>", source, "<root>", root.tag)
    links = [l.get("name") for l in root.findall("link")]
    if not links or any(not n for n in links):
        raise _fail("every <link> needs a name, and there must be at least one", source, "link")
    dup = {n for n in links if links.count(n) > 1}
    if dup:
        raise _fail("link names must be unique", source, "link", sorted(dup)[0])
    joints: list[UrdfJoint] = []
    fixed: list[str] = []
    tree: list[TreeJoint] = []
    children: set[str] = set()
    names: set[str] = set()
    for j in root.findall("joint"):
        name = j.get("name")
        jt = j.get("type")
        if not name:
            raise _fail("a <joint> has no name", source, "joint")
        if name in names:
            raise _fail("joint names must be unique", source, f"joint[{name}]", name)
        names.add(name)
        f = f"joint[{name}]"
        if jt not in SUPPORTED_JOINTS:
            raise _fail(f"joint type not supported (supported: {', '.join(SUPPORTED_JOINTS)}); "
                        "model floating or planar bases with explicit joints", source, f + ".type", jt)
        parent = j.find("parent")
        child = j.find("child")
        pl = parent.get("link") if parent is not None else None
        cl = child.get("link") if child is not None else None
        for key, ln in (("parent", pl), ("child", cl)):
            if ln is None:
                raise _fail(f"<{key} link=...> is missing", source, f"{f}.{key}")
            if ln not in links:
                raise _fail(f"{key} link is not defined in this URDF", source, f"{f}.{key}", ln)
        if cl in children:
            raise _fail("link has two parent joints; close loops in the mechanism config "
                        "(closures:), not in the URDF", source, f"{f}.child", cl)
        children.add(cl)
        tree.append(TreeJoint(name, jt, pl, cl))
        origin = j.find("origin")
        if origin is not None:
            _floats(origin.get("xyz"), 3, (0, 0, 0), source, f + ".origin.xyz")
            _floats(origin.get("rpy"), 3, (0, 0, 0), source, f + ".origin.rpy")
        if jt == "fixed":
            fixed.append(name)
            continue
        ax = j.find("axis")
        axis = _floats(ax.get("xyz") if ax is not None else None, 3, (1.0, 0.0, 0.0), source, f + ".axis")
        if math.sqrt(sum(a * a for a in axis)) < 1e-9:
            raise _fail("axis must be non-zero", source, f + ".axis", axis)
        lim = j.find("limit")
        lower, upper, effort, velocity = -math.inf, math.inf, math.inf, math.inf
        if lim is not None:
            for key in ("lower", "upper", "effort", "velocity"):
                txt = lim.get(key)
                if txt is None:
                    continue
                try:
                    val = float(txt)
                except ValueError:
                    raise _fail("expected a number", source, f"{f}.limit.{key}", txt) from None
                if key == "lower":
                    lower = val
                elif key == "upper":
                    upper = val
                elif key == "effort":
                    effort = val
                else:
                    velocity = val
        elif jt in ("revolute", "prismatic"):
            raise _fail(f"a {jt} joint needs <limit lower=.. upper=.. effort=.. velocity=..> "
                        "(use type continuous for an unbounded revolute joint)", source, f + ".limit")
        if jt == "continuous":
            lower, upper = -math.inf, math.inf
        elif lower > upper:
            raise _fail("limit lower is above upper", source, f + ".limit", (lower, upper))
        joints.append(UrdfJoint(name, jt, pl, cl, axis, lower, upper, effort, velocity))
    _check_no_cycle(tree, source)
    roots = [l for l in links if l not in children]
    if len(roots) != 1:
        raise _fail("the URDF must be one tree with a single root link (found roots: "
                    f"{', '.join(roots)})", source, "link", roots)
    masses = {lk.get("name"): _check_inertial(lk, source) for lk in root.findall("link")}
    _check_moving_bodies(tree, masses, source)
    # Load continuous joints as bounded revolute joints with infinite limits: one angle each.
    for j in root.findall("joint"):
        if j.get("type") == "continuous":
            j.set("type", "revolute")
            lim = j.find("limit")
            if lim is None:
                lim = ET.SubElement(j, "limit")
            lim.set("lower", "-1e300")
            lim.set("upper", "1e300")
            lim.set("effort", lim.get("effort", "1e300"))
            lim.set("velocity", lim.get("velocity", "1e300"))
    desc = UrdfDescription(robot_name=root.get("name", "robot"), root_link=roots[0],
                           links=tuple(links), joints=tuple(joints), fixed_joints=tuple(fixed),
                           source=source, xml=xml, tree=tuple(tree))
    return desc, ET.tostring(root, encoding="unicode")


def _check_no_cycle(tree: list[TreeJoint], source: str) -> None:
    """A URDF is a tree: a chain of joints that leads back to its start is refused, naming it."""
    parent_joint = {j.child: j for j in tree}
    done: set[str] = set()
    for start in parent_joint:
        path: list[str] = []
        link = start
        while link in parent_joint and link not in done and link not in path:
            path.append(link)
            link = parent_joint[link].parent
        if link in path:                        # came back: a cycle
            cycle = path[path.index(link):]
            joints = [parent_joint[l] for l in reversed(cycle)]
            chain = joints[0].parent + "".join(f" --{j.name}--> {j.child}" for j in joints)
            raise _fail(f"the joints form a cycle: {chain}; a URDF must be a tree: "
                        "close kinematic loops in the mechanism config (closures:), not in the URDF",
                        source, f"joint[{parent_joint[cycle[0]].name}]",
                        [parent_joint[l].name for l in reversed(cycle)])
        done.update(path)


INERTIA_TOLERANCE = 1e-9
"""Relative tolerance of the inertia checks (positive definite, triangle inequality), times the
largest principal moment."""


def _check_inertial(link: ET.Element, source: str) -> float:
    """Validate a link's <inertial> (mass >= 0; inertia finite, zero without mass, and with mass
    positive definite and obeying the triangle inequality); return its mass (0 without one)."""
    name = link.get("name")
    inertial = link.find("inertial")
    if inertial is None:
        return 0.0
    f = f"link[{name}].inertial"
    mass_el = inertial.find("mass")
    mass = 0.0
    if mass_el is not None:
        mass = _floats(mass_el.get("value"), 1, (0.0,), source, f + ".mass")[0]
        if mass < 0:
            raise _fail("mass must not be negative", source, f + ".mass", mass)
        if mass > 1e9:
            raise _fail("mass must be at most 1e9 kg", source, f + ".mass", mass)
    _floats((inertial.find("origin").get("xyz") if inertial.find("origin") is not None else None),
            3, (0.0, 0.0, 0.0), source, f + ".origin.xyz")
    it = inertial.find("inertia")
    values = {}
    for key in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz"):
        text = it.get(key) if it is not None else None
        try:
            values[key] = float(text) if text is not None else 0.0
        except ValueError:
            raise _fail("expected a number", source, f"{f}.inertia.{key}", text) from None
        if not math.isfinite(values[key]) or abs(values[key]) > 1e12:
            raise _fail("expected a finite number of at most 1e12 kg m^2", source,
                        f"{f}.inertia.{key}", text)
    g = values.get
    inertia = np.array([[g("ixx"), g("ixy"), g("ixz")], [g("ixy"), g("iyy"), g("iyz")],
                        [g("ixz"), g("iyz"), g("izz")]])
    shown = {k: v for k, v in values.items() if v}
    if mass == 0.0:
        if np.any(inertia != 0.0):
            raise _fail("a link without mass cannot have rotational inertia (mass 0 with a non-zero "
                        "inertia): give its mass or remove the inertia", source, f + ".inertia", shown)
        return 0.0
    moments = np.linalg.eigvalsh(inertia)
    tol = INERTIA_TOLERANCE * max(abs(moments).max(), 1e-300)
    if moments[0] <= tol:
        raise _fail(f"the inertia of a link with mass {mass:g} kg must be positive definite (its "
                    f"principal moments are {', '.join(f'{x:.4g}' for x in moments)} kg m^2)",
                    source, f + ".inertia", shown)
    if moments[0] + moments[1] < moments[2] - tol:
        raise _fail(f"the inertia is not physically possible: the principal moments "
                    f"{', '.join(f'{x:.4g}' for x in moments)} kg m^2 break the triangle inequality "
                    "(the two smaller must add up to at least the largest)", source, f + ".inertia", shown)
    return mass


def _check_moving_bodies(tree: list[TreeJoint], masses: dict[str, float], source: str) -> None:
    """Every body a movable joint carries (its child link and the links fixed to it) needs mass."""
    fixed_children: dict[str, list[str]] = {}
    for j in tree:
        if j.type == "fixed":
            fixed_children.setdefault(j.parent, []).append(j.child)
    for j in tree:
        if j.type == "fixed":
            continue
        body, stack = [], [j.child]
        while stack:
            link = stack.pop()
            body.append(link)
            stack.extend(fixed_children.get(link, []))
        if sum(masses.get(l, 0.0) for l in body) <= 0.0:
            what = (f"neither it nor a link fixed to it ({', '.join(body[1:])}) has a mass"
                    if len(body) > 1 else "has no mass")
            raise _fail(f"link '{j.child}' moves (joint '{j.name}') but {what}: every moving body "
                        "needs an <inertial> with a mass > 0 and a positive-definite inertia",
                        source, f"link[{j.child}].inertial")


def load_urdf(path: str | Path | None = None, *, xml: str | None = None,
              source: str | None = None) -> tuple[pin.Model, UrdfDescription]:
    """Load a URDF file (or ``xml`` text, e.g. robot_description) into a pinocchio Model."""
    if xml is None:
        if path is None:
            raise ValueError("load_urdf needs a path or xml text")
        p = Path(path)
        source = source or str(p)
        if not p.is_file():
            raise _fail("no such URDF file", source)
        try:
            xml = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise _fail(f"cannot read the URDF: {exc}", source) from None
    source = source or "<robot_description>"
    desc, pin_xml = parse_urdf(xml, source)
    try:
        model = pin.buildModelFromXML(pin_xml)
    except (RuntimeError, ValueError) as exc:
        raise _fail(f"pinocchio could not load the URDF: {exc}", source) from None
    if model.nq != model.nv:
        raise _fail("the model has joints with more than one configuration number per velocity "
                    "(ball or floating joints); only 1-DOF joints are supported", source)
    if model.nv == 0:
        raise _fail("the URDF has no movable joint", source)
    model.lowerPositionLimit = np.where(np.abs(model.lowerPositionLimit) > 1e299, -np.inf,
                                        model.lowerPositionLimit)
    model.upperPositionLimit = np.where(np.abs(model.upperPositionLimit) > 1e299, np.inf,
                                        model.upperPositionLimit)
    return model, desc


def link_inertia(desc: UrdfDescription, link: str) -> pin.Inertia:
    """The spatial inertia of a URDF link, in the link's frame (zero if it has none).

    Pinocchio merges link inertias into their joint's body when it loads a URDF; this reads the
    link's own ``<inertial>`` so that a single link can be scaled or isolated.
    """
    root = ET.fromstring(desc.xml)
    for lk in root.findall("link"):
        if lk.get("name") != link:
            continue
        inertial = lk.find("inertial")
        if inertial is None:
            return pin.Inertia.Zero()
        origin = inertial.find("origin")
        xyz = _floats(origin.get("xyz") if origin is not None else None, 3, (0.0, 0.0, 0.0), desc.source, link)
        rpy = _floats(origin.get("rpy") if origin is not None else None, 3, (0.0, 0.0, 0.0), desc.source, link)
        mass_el = inertial.find("mass")
        mass = float(mass_el.get("value", "0")) if mass_el is not None else 0.0
        I = np.zeros((3, 3))
        it = inertial.find("inertia")
        if it is not None:
            g = lambda k: float(it.get(k, "0"))  # noqa: E731
            I = np.array([[g("ixx"), g("ixy"), g("ixz")], [g("ixy"), g("iyy"), g("iyz")],
                          [g("ixz"), g("iyz"), g("izz")]])
        R = pin.rpy.rpyToMatrix(*rpy)
        return pin.Inertia(mass, np.asarray(xyz, float), R @ I @ R.T)
    raise KeyError(link)
