"""Identified inertial parameters written into a copy of a URDF (`mbfg identify`).

A moving body's 10 standard parameters (:mod:`mbfg_ros.model.parameters`: mass, first moments
and inertia about its joint's frame) hold its link and the links fixed to it; a change of them
is given to the link its joint carries (whose frame is the joint's), and that link's
``<inertial>`` is rewritten as mass, centre of mass (``origin xyz``, ``rpy`` 0) and the inertia
tensor about the centre of mass in the link's frame. Components of the inertia about the
frame's origin that the recording carries no information about (``free``: a pendulum's inertia
about axes other than its hinge) follow the centre of mass instead of staying where they were:
the link keeps the config's inertia about its (new) centre of mass there, so that a moved
centre of mass does not leave an inertia that is not physical (and the recording's fit, which
they do not enter, is the same); where that still breaks the triangle inequality (a thin rod's
inertia about its length fixed at the config's while the one about its hinge moved), those free
components move the least that makes it physical (the second moment of mass
tr(I)/2 - I positive semi-definite, scipy's SLSQP). Everything else in the file (comments,
layout, the other links) stays as it was: the text is edited at the inertial's place only.
A link whose new inertial is not physically possible (what :mod:`mbfg_ros.model.urdf` refuses)
is left as it was and reported.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass

import numpy as np

from mbfg_ros.errors import ConfigError
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.model.parameters import INERTIAL, body_link, body_parameters
from mbfg_ros.model.symbolic import _Inertia
from mbfg_ros.model.urdf import _check_inertial, link_inertia


@dataclass(frozen=True)
class LinkInertial:
    """A link's inertial as URDF writes it: mass (kg), centre of mass in the link's frame (m),
    inertia about the centre of mass in the link's frame (kg m^2); ``problem``: why it cannot
    be written ("" if it can)."""
    link: str
    mass: float
    com: np.ndarray
    inertia: np.ndarray
    problem: str = ""


def identified_inertials(mech: Mechanism, values: dict[str, float], free: set[str] | frozenset = frozenset()
                         ) -> list[LinkInertial]:
    """The new inertial of every link whose body's parameters ``values`` (name -> value, as
    :class:`~mbfg_ros.model.parameters.Parameter` names them) change; ``free``: the names of
    parameters without any information (see the module docstring)."""
    out = []
    for jid in range(1, mech.model.njoints):
        link = body_link(mech, jid)
        names = [f"{link}.{f}" for f in INERTIAL]
        if not any(n in values for n in names):
            continue
        body = body_parameters(_Inertia.of(mech.model.inertias[jid]))
        new = np.array([values.get(n, body[i]) for i, n in enumerate(names)])
        delta = new - body
        if not np.any(delta):
            continue
        config = link_inertia(mech.urdf, link)
        own = body_parameters(_Inertia.of(config)) + delta
        m, h = float(own[0]), own[1:4]
        com = h / m if m > 0 else np.zeros(3)
        shift = m * (float(com @ com) * np.eye(3) - np.outer(com, com))      # parallel axes
        kept = np.asarray(config.inertia) + shift          # the config's inertia about the new centre
        Io = np.zeros((3, 3))
        for k, (a, b) in enumerate(_COMPONENTS):
            Io[a, b] = Io[b, a] = kept[a, b] if names[4 + k] in free else own[4 + k]
        Ic = Io - shift
        free_ic = [k for k in range(6) if names[4 + k] in free]
        if free_ic and _problem(link, m, com, Ic, mech.urdf.source):
            Ic = _nearest_physical(Ic, free_ic)
        out.append(LinkInertial(link, m, com, Ic, _problem(link, m, com, Ic, mech.urdf.source)))
    return out


_COMPONENTS = ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))


def _nearest_physical(Ic: np.ndarray, free: list[int]) -> np.ndarray:
    """``Ic`` with its components ``free`` (indices of :data:`_COMPONENTS`) changed the least
    (relative to the inertia's size) so that tr(I)/2 - I is positive semi-definite (with a
    margin of 1e-6 of the largest moment): the triangle inequality, and I positive definite."""
    from scipy.optimize import minimize
    scale = max(float(np.abs(np.linalg.eigvalsh(Ic)).max()), 1e-12)
    x0 = np.array([Ic[_COMPONENTS[k]] for k in free]) / scale

    def full(x: np.ndarray) -> np.ndarray:
        I = Ic / scale
        for v, k in zip(x, free):
            a, b = _COMPONENTS[k]
            I[a, b] = I[b, a] = v
        return I

    def margin(x: np.ndarray) -> np.ndarray:
        I = full(x)
        return np.concatenate([np.linalg.eigvalsh(0.5 * np.trace(I) * np.eye(3) - I),
                               np.linalg.eigvalsh(I)]) - 1e-6
    sol = minimize(lambda x: float((x - x0) @ (x - x0)), x0, method="SLSQP",
                   constraints=[{"type": "ineq", "fun": margin}], options={"maxiter": 200, "ftol": 1e-14})
    return full(sol.x) * scale


def _element(li: LinkInertial) -> ET.Element:
    el = ET.Element("link", name=li.link)
    inertial = ET.SubElement(el, "inertial")
    ET.SubElement(inertial, "origin", xyz=" ".join(_num(x) for x in li.com), rpy="0 0 0")
    ET.SubElement(inertial, "mass", value=_num(li.mass))
    I = li.inertia
    ET.SubElement(inertial, "inertia", ixx=_num(I[0, 0]), ixy=_num(I[0, 1]), ixz=_num(I[0, 2]),
                  iyy=_num(I[1, 1]), iyz=_num(I[1, 2]), izz=_num(I[2, 2]))
    return el


def _problem(link: str, m: float, com: np.ndarray, Ic: np.ndarray, source: str) -> str:
    """Why the inertial cannot be written ("" if it can): what the URDF loader would refuse."""
    if not m > 0:
        return f"mass {m:.4g} kg"
    try:
        _check_inertial(_element(LinkInertial(link, m, com, Ic)), source)
    except ConfigError as exc:
        return exc.reason
    return ""


def _num(x: float) -> str:
    return f"{float(x):.9g}"


def write_identified_urdf(mech: Mechanism, values: dict[str, float], out, note: str = "",
                          free: set[str] | frozenset = frozenset()) -> list[LinkInertial]:
    """Write the config's URDF with the identified inertials to ``out`` (a new file); returns
    the links considered (those with a ``problem`` are left as they were)."""
    text = open(mech.config.urdf, encoding="utf-8").read()
    links = identified_inertials(mech, values, free)
    for li in links:
        if li.problem:
            continue
        text = _replace_inertial(text, li)
    if note:
        comment = "<!-- " + note.replace("--", "- -") + " -->\n"
        decl = re.match(r"\s*<\?xml[^>]*\?>\s*\n?", text)
        at = decl.end() if decl else 0
        text = text[:at] + comment + text[at:]
    with open(out, "w", encoding="utf-8") as f:
        f.write(text)
    return links


def _replace_inertial(text: str, li: LinkInertial) -> str:
    """The URDF text with ``li.link``'s <inertial> element replaced (or added)."""
    start = re.search(r'<link\s[^>]*name\s*=\s*"' + re.escape(li.link) + r'"[^>]*?(/?)>', text)
    if start is None:
        raise ConfigError(f"link {li.link!r} not found in the URDF text")
    line_start = text.rfind("\n", 0, start.start()) + 1
    indent = re.match(r"[ \t]*", text[line_start:]).group(0)
    inner = indent + "  "
    I = li.inertia
    block = (f"{inner}<inertial>\n"
             f"{inner}  <origin xyz=\"{' '.join(_num(x) for x in li.com)}\" rpy=\"0 0 0\"/>\n"
             f"{inner}  <mass value=\"{_num(li.mass)}\"/>\n"
             f"{inner}  <inertia ixx=\"{_num(I[0, 0])}\" ixy=\"{_num(I[0, 1])}\" ixz=\"{_num(I[0, 2])}\" "
             f"iyy=\"{_num(I[1, 1])}\" iyz=\"{_num(I[1, 2])}\" izz=\"{_num(I[2, 2])}\"/>\n"
             f"{inner}</inertial>")
    if start.group(1) == "/":                     # <link name="x"/>: make it an element
        opening = text[start.start():start.end() - 2].rstrip() + ">"
        return text[:start.start()] + opening + "\n" + block + "\n" + indent + "</link>" + text[start.end():]
    end = text.find("</link>", start.end())
    body = text[start.end():end]
    old = re.search(r"[ \t]*<inertial\b.*?</inertial>", body, re.S)
    if old is not None:
        body = body[:old.start()] + block + body[old.end():]
    else:
        body = "\n" + block + body if not body.startswith("\n") else "\n" + block + body
    return text[:start.end()] + body + text[end:]
