"""The `mbfg import` map is as strict as the rig config: every mistake is one line naming the
file, the field and the value, with a "did you mean" where a name is close."""
from __future__ import annotations

import numpy as np
import pytest
import yaml

from support.simulations import config_mechanism
from mbfg_ros.errors import ConfigError
from mbfg_ros.io.log_import import log_samples
from mbfg_ros.io.log_map import check_log_map, load_log_map, parse_log_map
from mbfg_ros.io.log_tables import LogError, read_log_table


def _map(tmp_path, doc) -> str:
    p = tmp_path / "map.yaml"
    p.write_text(yaml.safe_dump(doc))
    return str(p)


GOOD = {"config": "rig.yaml", "time": {"column": "t"}, "sensors": {"crank_encoder": "q"}}


@pytest.mark.parametrize("change, field, words", [
    ({"repeat": "keep"}, "repeat", "did you mean 'repeats'"),
    ({"time": {"column": "t", "units": "ms"}}, "time.units", "did you mean 'unit'"),
    ({"time": {"column": "t", "unit": "min"}}, "time.unit", "must be one of s, ms, us, ns"),
    ({"time": {"column": "t", "offset": -1}}, "time.offset", "from 0"),
    ({"time": {"unit": "s"}}, "time.column", "required"),
    ({"sensors": {"crank_encoder": {"column": "q", "scal": 2}}}, "sensors.crank_encoder.scal", "did you mean 'scale'"),
    ({"sensors": {"crank_encoder": {"scale": 2}}}, "sensors.crank_encoder", "give the log's column"),
    ({"sensors": {"crank_encoder": {"columns": {"w": "a"}}}}, "sensors.crank_encoder.columns.w", "x, y or z"),
    ({"sensors": {}}, "sensors", "at least one sensor"),
    ({"repeats": "maybe"}, "repeats", "drop, keep"),
    ({"gap_factor": 0.5}, "gap_factor", "from 1"),
    ({"delimiter": ",;"}, "delimiter", "one character"),
])
def test_a_bad_map_names_its_field(tmp_path, change, field, words):
    with pytest.raises(ConfigError) as err:
        load_log_map(_map(tmp_path, {**GOOD, **change}))
    msg = str(err.value)
    assert f"field '{field}'" in msg and words in msg and "map.yaml" in msg and "\n" not in msg


@pytest.mark.parametrize("rig, sensors, field, words", [
    ("slider_crank", {"crank_encodr": "q"}, "sensors.crank_encodr", "did you mean 'crank_encoder'"),
    ("spatial_rsur", {"coupler_gyro": {"columns": {"x": "a", "z": "c"}}}, "sensors.coupler_gyro",
     "one column per measured axis: x, y, z"),
    ("spatial_rsur", {"coupler_gyro": "a"}, "sensors.coupler_gyro", "one column per measured axis"),
    ("spatial_rsur", {"crank_encoder": {"columns": {"x": "a"}}}, "sensors.crank_encoder", "an encoder reads one column"),
    ("four_bar_imu", {"coupler_accelerometer": {"columns": {"x": "a", "z": "c"}}}, "sensors.coupler_accelerometer",
     "an accelerometer needs one column per measured axis: x, y"),
])
def test_a_map_that_does_not_fit_the_rig_names_its_field(tmp_path, rig, sensors, field, words):
    log_map = load_log_map(_map(tmp_path, {**GOOD, "sensors": sensors}))
    with pytest.raises(ConfigError) as err:
        check_log_map(log_map, config_mechanism(rig))
    assert f"field '{field}'" in str(err.value) and words in str(err.value)


def test_inputs_must_be_known_input_joints(tmp_path):
    mech = config_mechanism("slider_crank")
    with pytest.raises(ConfigError, match=r"field 'inputs.slider_joint'.*not a known input .*actuation: passive"):
        check_log_map(load_log_map(_map(tmp_path, {**GOOD, "inputs": {"slider_joint": "f"}})), mech)
    with pytest.raises(ConfigError, match=r"field 'inputs.crank'.*unknown joint; did you mean 'crank_joint'"):
        check_log_map(load_log_map(_map(tmp_path, {**GOOD, "inputs": {"crank": "f"}})), mech)


def test_the_config_path_is_relative_to_the_map(tmp_path):
    assert load_log_map(_map(tmp_path, GOOD)).config == (tmp_path / "rig.yaml").resolve()


def test_a_column_the_log_lacks_is_named_with_a_did_you_mean(tmp_path):
    log = tmp_path / "run.csv"
    log.write_text("time,crank_pos,slider_pos\n0,1,2\n0.001,1,2\n")
    log_map = parse_log_map({"time": {"column": "time"}, "sensors": {"crank_encoder": "crank_po"}}, tmp_path / "m.yaml")
    with pytest.raises(LogError, match=r"run.csv: no column 'crank_po' in the log; did you mean 'crank_pos'\? "
                                       r"\(it has: time, crank_pos, slider_pos\)"):
        log_samples(read_log_table(log), log_map, config_mechanism("slider_crank"))


@pytest.mark.parametrize("text, words", [
    ("t,q\n0,1\n0.1,x\n", "column 'q', row 2 (line 3): not a number ('x')"),
    ("t,q\n0,1\n0.1,1,3\n", "row 2 (line 3) has 3 cells, the header 2"),
    ("", "no header row"),
    ("t,t\n0,1\n", "names column 't' twice"),
])
def test_a_malformed_csv_is_one_line(tmp_path, text, words):
    log = tmp_path / "run.csv"
    log.write_text(text)
    log_map = parse_log_map({"time": {"column": "t"}, "sensors": {"crank_encoder": "q"}})
    with pytest.raises(LogError) as err:
        log_samples(read_log_table(log), log_map, config_mechanism("slider_crank"))
    assert words in str(err.value) and "\n" not in str(err.value)


def test_rows_without_a_time_are_skipped_and_counted(tmp_path):
    log = tmp_path / "run.csv"
    t = np.arange(20) * 0.001
    cells = [repr(x) for x in t.tolist()]
    cells[5] = ""
    log.write_text("t,q\n" + "".join(f"{c},{k}\n" for k, c in enumerate(cells)))
    res = log_samples(read_log_table(log), parse_log_map({"time": {"column": "t"}, "sensors": {"crank_encoder": "q"}}),
                      config_mechanism("slider_crank"))
    assert res.rows_without_time == 1 and res.channels[0].written == 19 and res.channels[0].nan == 0


def test_the_readmes_example_map_is_valid():
    import re

    from conftest import ROOT
    text = (ROOT / "README.md").read_text()
    section = text[text.index("### mbfg import"):text.index("### mbfg tune")]
    block = re.search(r"```yaml\n(.*?)```", section, re.S).group(1)
    log_map = parse_log_map(yaml.safe_load(block), ROOT / "example.map.yaml")
    assert log_map.time_unit == "ms" and log_map.time_offset == 1.7e9 and log_map.repeats == "drop"
    assert [c.channel for c in log_map.channels] == ["crank_encoder", "slider_encoder", "coupler_gyro", "pin_load",
                                                     "command:crank_joint"]
    assert log_map.channels[2].axes == (0, 1, 2) and log_map.channels[1].scale == 0.001
