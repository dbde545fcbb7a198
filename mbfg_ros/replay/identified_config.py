"""The identified parameters written into a copy of the rig config (`mbfg identify`).

The user's YAML is edited as text at the places PyYAML marks (the editor `mbfg tune` uses,
:class:`~mbfg_ros.model.yaml_edit.YamlTextEdits`): comments, order and layout stay byte for byte;
only the identified numbers change or are added (``joints.<j>.viscous / coulomb / armature /
offset``, an encoder's ``offset``, a gyro's ``scale`` and ``bias``, a load cell's ``scale`` and
``offset``, a sensor's ``time_offset``), and ``mechanism.urdf`` names the URDF with the
identified inertials when there is one (else a relative path is made absolute when the file
moves to another directory); with a parameter of the equations of motion identified,
``estimator.model_uncertainty.trigger: 0`` (the model's uncertainty chosen from the innovations
from the start of every run, not only when they look wrong at the configured noises).
A joint value the config cannot hold (a friction or armature below 0, which an identified
combination can be) is written as 0 and reported.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

from mbfg_ros.model.parameters import DYNAMICS_GROUPS, Parameter
from mbfg_ros.model.yaml_edit import YamlTextEdits, float_text, yaml_number

DIGITS = 6
"""Significant digits of the numbers written."""
NONNEGATIVE = ("viscous", "coulomb", "armature")
"""Joint fields the config holds at or above 0."""


def _text(x: float) -> str:
    return float_text(float(f"{x:.{DIGITS}g}"))


def _path_text(path: str) -> str:
    return path if re.fullmatch(r"[\w./+-]+", path) else json.dumps(path)


def write_identified_config(source: str | Path, out: str | Path, values: dict[Parameter, float],
                            urdf: str | Path | None = None, note: str = "") -> tuple[list[str], list[str]]:
    """Write ``source`` to ``out`` with the joint and sensor parameters of ``values``
    (parameter -> value; inertial parameters are the URDF's, see ``urdf``: the new URDF file the
    written config names). Returns (fields changed, notes: values the config cannot hold)."""
    source, out = Path(source), Path(out)
    doc = YamlTextEdits(source.read_text(encoding="utf-8"))
    get = doc.get
    changed: list[str] = []
    notes: list[str] = []

    def put(mapping, key: str, text: str, label: str, old_value=None) -> None:
        node = get(mapping, key)
        if node is not None:
            if old_value is not None and yaml_number(node) is not None and _text(yaml_number(node)) == text:
                return
            doc.replace(node, text)
        else:
            doc.insert(mapping, key, text)
        changed.append(label)

    joints: dict[str, dict[str, float]] = {}
    sensors: dict[str, dict[str, float | dict[int, float]]] = {}
    for par, value in values.items():
        if par.group in ("friction", "armature", "offset"):
            if par.field in NONNEGATIVE and value < 0:
                notes.append(f"{par.name}: identified {value:.4g}, written as 0 (the config holds it at or above 0)")
                value = 0.0
            joints.setdefault(par.owner, {})[par.field] = value
        elif par.group in ("encoder", "load_cell", "timing"):
            sensors.setdefault(par.owner, {})[par.field] = value
        elif par.group == "gyro":
            kind, _ = par.field.split("_")
            sensors.setdefault(par.owner, {}).setdefault(kind, {})[par.axis] = value
    if any(par.group in DYNAMICS_GROUPS for par in values):     # (first: its edit may be at the end too)
        _search_always(doc, put, changed)
    # joints
    section = get(doc.root, "joints")
    new_joints: list[str] = []
    for joint, fields in joints.items():
        node = get(section, joint)
        if node is not None and node.tag == "tag:yaml.org,2002:map":
            for f, v in fields.items():
                put(node, f, _text(v), f"joints.{joint}.{f}", v)
            continue
        flow = "{" + ", ".join(f"{f}: {_text(v)}" for f, v in fields.items()) + "}"
        changed += [f"joints.{joint}.{f}" for f in fields]
        if section is not None and section.tag == "tag:yaml.org,2002:map" and section.value:
            doc.insert(section, joint, flow)
        else:
            new_joints.append(f"  {joint}: {flow}\n")
    if new_joints:
        doc.append("joints:\n" + "".join(new_joints))
    # sensors
    by_kind = get(doc.root, "sensors")
    for kind in ("encoders", "gyros", "load_cells", "accelerometers"):
        seq = get(by_kind, kind)
        for item in (seq.value if seq is not None and seq.tag == "tag:yaml.org,2002:seq" else []):
            name = getattr(get(item, "name"), "value", None)
            if name not in sensors:
                continue
            for f, v in sensors[name].items():
                if isinstance(v, dict):                           # a gyro's per-axis scale / bias
                    default = 1.0 if f == "scale" else 0.0
                    node = get(item, f)
                    old = _vector(node, default)
                    for axis, x in v.items():
                        old[axis] = x
                    put(item, f, "[" + ", ".join(_text(x) for x in old) + "]", f"sensors.{kind}[{name}].{f}")
                else:
                    put(item, f, _text(v), f"sensors.{kind}[{name}].{f}", v)
    # the URDF
    mech_node = get(doc.root, "mechanism")
    urdf_node = get(mech_node, "urdf")
    if urdf is not None and urdf_node is not None:
        target = Path(urdf).resolve()
        rel = os.path.relpath(target, out.resolve().parent)
        doc.replace(urdf_node, _path_text(rel))
        changed.append("mechanism.urdf")
    elif urdf_node is not None and urdf_node.tag == "tag:yaml.org,2002:str" \
            and not os.path.isabs(os.path.expanduser(urdf_node.value)) \
            and source.resolve().parent != out.resolve().parent:
        doc.replace(urdf_node, _path_text(str((source.resolve().parent / os.path.expanduser(urdf_node.value)).resolve())))
        changed.append("mechanism.urdf")
    head = "".join(f"# {line}\n" if line else "#\n" for line in note.splitlines())
    tmp = out.with_name(out.name + ".part")
    tmp.write_text(head + doc.result(), encoding="utf-8")
    tmp.replace(out)
    return changed, notes


def _search_always(doc: YamlTextEdits, put, changed: list[str]) -> None:
    """``estimator.model_uncertainty.trigger: 0``: the identified model's uncertainty chosen from
    the innovations from the start of every run. The configured noises were chosen for the model
    before identification; with the identified one the innovations look right at them and would
    not start the search (a simulated arm's identified config at scale 1: filtered effort errors
    1.2-1.9 times the config's on its three big joints; with the search, 0.1: 0.2-0.5). Not
    where ``adapt`` is off."""
    label = "estimator.model_uncertainty.trigger"
    est = doc.get(doc.root, "estimator")
    if est is None or est.tag != "tag:yaml.org,2002:map":
        if est is None:
            doc.append("estimator:\n  model_uncertainty: {trigger: 0}\n")
            changed.append(label)
        return
    mu = doc.get(est, "model_uncertainty")
    if mu is None:
        doc.insert(est, "model_uncertainty", "{trigger: 0}")
        changed.append(label)
        return
    adapt = doc.get(mu, "adapt")
    if mu.tag != "tag:yaml.org,2002:map" or (adapt is not None and str(adapt.value).lower() in ("false", "no", "off")):
        return
    put(mu, "trigger", "0", label, 0.0)


def _vector(node, default: float) -> list[float]:
    """A flow or block list of 3 numbers (or one number for every axis), else the default."""
    if node is None:
        return [default] * 3
    if node.tag == "tag:yaml.org,2002:seq" and len(node.value) == 3:
        return [float(yaml_number(x)) if yaml_number(x) is not None else default for x in node.value]
    x = yaml_number(node)
    return [x] * 3 if x is not None else [default] * 3
