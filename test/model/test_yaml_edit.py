"""YamlTextEdits: a YAML text edited at the places PyYAML marks, everything else byte for byte."""
from __future__ import annotations

import yaml

from mbfg_ros.model.yaml_edit import YamlTextEdits, float_text, yaml_number

TEXT = """# a rig
sensors:
  encoders:
    - {name: crank, noise: 0.001}     # rad
estimator:
  noise:
    dynamics: 1.0   # N m
  lag: 1.0
"""


def test_edits_keep_comments_and_layout():
    doc = YamlTextEdits(TEXT)
    est = doc.get(doc.root, "estimator")
    dyn = doc.get(doc.get(est, "noise"), "dynamics")
    assert yaml_number(dyn) == 1.0 and yaml_number(doc.get(est, "missing")) is None
    doc.replace(dyn, float_text(0.25))
    doc.insert(doc.get(est, "noise"), "integration_velocity", float_text(2e-3))
    enc = doc.get(doc.get(doc.root, "sensors"), "encoders").value[0]
    doc.replace(doc.get(enc, "noise"), float_text(1e-5))
    doc.insert(enc, "bias", "0.0")
    out = doc.result()
    assert out.splitlines()[0] == "# a rig" and "dynamics: 0.25  # N m" in out   # the comment keeps its column
    assert "- {name: crank, noise: 1.0e-05, bias: 0.0}     # rad" in out
    data = yaml.safe_load(out)
    assert data["estimator"]["noise"] == {"dynamics": 0.25, "integration_velocity": 0.002}
    assert data["sensors"]["encoders"][0]["noise"] == 1e-5 and data["estimator"]["lag"] == 1.0


def test_float_text_is_a_number_for_yaml_1_1():
    for x in (1e-5, 2.5e10, 0.1, 3.0):
        assert yaml.safe_load(float_text(x)) == x
