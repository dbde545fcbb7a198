"""The identified parameters written into a copy of the rig config: the numbers change or are
added where the parameters belong, everything else (comments, order, layout) is kept byte for
byte, the written file loads, and what the config cannot hold is written as the nearest it can
and reported."""
from __future__ import annotations

import shutil

from conftest import CONFIG
from support.identification_rigs import write_configs
from support.simulations import config_mechanism
from mbfg_ros.model.mechanism import load_mechanism
from mbfg_ros.model.parameters import model_parameters
from mbfg_ros.replay.identified_config import write_identified_config


def by_name(mech) -> dict:
    return {p.name: p for p in model_parameters(mech)}


def test_joint_and_encoder_fields_are_written_with_the_comments_kept(tmp_path):
    nominal, _ = write_configs(tmp_path)
    mech = load_mechanism(nominal)
    p = by_name(mech)
    out = tmp_path / "identified.yaml"
    values = {p["pivot.viscous"]: 0.0703, p["pivot.offset"]: 0.0497, p["pivot_encoder.offset"]: 0.0101,
              p["pivot.coulomb"]: -0.01}
    changed, notes = write_identified_config(nominal, out, values, note="identified\nby a test")
    assert set(changed) == {"joints.pivot.viscous", "joints.pivot.coulomb", "joints.pivot.offset",
                            "sensors.encoders[pivot_encoder].offset", "estimator.model_uncertainty.trigger"}
    assert notes == ["pivot.coulomb: identified -0.01, written as 0 (the config holds it at or above 0)"]
    text = out.read_text()
    assert text.startswith("# identified\n# by a test\n")
    for line in nominal.read_text().splitlines():
        if "pivot" not in line:
            assert line in text.splitlines(), line
    assert "# the drive" in text and "dynamics: 0.05          # N m" in text
    new = by_name(load_mechanism(out))
    assert new["pivot.viscous"].nominal == 0.0703 and new["pivot.offset"].nominal == 0.0497
    assert new["pivot.coulomb"].nominal == 0.0 and new["pivot_encoder.offset"].nominal == 0.0101
    assert new["pivot.armature"].nominal == 0.01                      # not identified: as it was
    # the identified model's uncertainty searched from the start of every run
    assert load_mechanism(out).config.estimator.model_uncertainty.trigger == 0.0
    # a calibration only (no parameter of the equations of motion) leaves it as it was
    write_identified_config(nominal, out, {p["pivot_encoder.offset"]: 0.0101})
    assert load_mechanism(out).config.estimator.model_uncertainty.trigger == 1.5


def test_the_search_trigger_goes_where_the_config_has_or_lacks_its_sections(tmp_path):
    nominal, _ = write_configs(tmp_path)
    p = by_name(load_mechanism(nominal))
    values = {p["pivot.viscous"]: 0.07}
    text = nominal.read_text()
    assert "\nestimator:" in text and "model_uncertainty" not in text
    for name, edit in (("has_mu.yaml", text.replace("\nestimator:\n", "\nestimator:\n  model_uncertainty:\n    seconds: 4.0\n", 1)),
                       ("off.yaml", text.replace("\nestimator:\n", "\nestimator:\n  model_uncertainty: {adapt: false}\n", 1)),
                       ("no_estimator.yaml", text[:text.index("\nestimator:")] + "\n")):
        src = tmp_path / name
        src.write_text(edit)
        out = tmp_path / ("id_" + name)
        changed, _ = write_identified_config(src, out, values)
        mu = load_mechanism(out).config.estimator.model_uncertainty
        if name == "off.yaml":
            assert not mu.adapt and mu.trigger == 1.5 and "estimator.model_uncertainty.trigger" not in changed
        else:
            assert mu.adapt and mu.trigger == 0.0 and "estimator.model_uncertainty.trigger" in changed
        if name == "has_mu.yaml":
            assert mu.seconds == 4.0


def test_gyro_load_cell_and_new_joint_fields_and_the_urdf(tmp_path):
    src = tmp_path / "rig.yaml"
    shutil.copy(CONFIG / "spatial_rsur.yaml", src)
    text = src.read_text().replace("../urdf/spatial_rsur.urdf", str(CONFIG.parent / "urdf" / "spatial_rsur.urdf"))
    src.write_text(text)
    mech = load_mechanism(src)
    p = by_name(mech)
    urdf = tmp_path / "new.urdf"
    shutil.copy(mech.config.urdf, urdf)
    values = {p["coupler_gyro.scale_y"]: 1.02, p["coupler_gyro.bias_z"]: -0.003,
              p["coupler_axial.offset"]: 0.5, p["coupler_axial.scale"]: 0.97, p["rocker_joint.viscous"]: 0.2}
    changed, _ = write_identified_config(src, tmp_path / "out.yaml", values, urdf=urdf)
    assert "mechanism.urdf" in changed and "joints.rocker_joint.viscous" in changed
    out = load_mechanism(tmp_path / "out.yaml")
    g, c = out.config.sensors.gyros[0], out.config.sensors.load_cells[0]
    assert g.scale == (1.0, 1.02, 1.0) and g.bias == (0.0, 0.0, -0.003)
    assert c.offset == 0.5 and c.scale == 0.97
    assert out.config.joint("rocker_joint").viscous == 0.2
    assert out.config.urdf == urdf.resolve()
    assert "urdf: new.urdf" in (tmp_path / "out.yaml").read_text()
    old_lines = [ln for ln in text.splitlines() if ln.strip().startswith("#")]
    new_text = (tmp_path / "out.yaml").read_text()
    assert all(ln in new_text for ln in old_lines)                       # every comment line kept
    assert config_mechanism("spatial_rsur").config.sensors.gyros[0].scale == (1.0, 1.0, 1.0)
