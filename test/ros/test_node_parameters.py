"""Parameter tables of the nodes: validation messages name the parameter, value and range."""
from __future__ import annotations

import pytest

from mbfg_ros.ros.node_parameters import ParameterError, ParameterSpec, check_value, describe

RATE = ParameterSpec("keyframe_rate", float, 0.0, "keyframe rate", "Hz", 1.0, 2000.0,
                     zero_means="the config's")


def test_numbers_accept_integers_and_zero_means_default():
    assert check_value(RATE, 200) == 200.0 and isinstance(check_value(RATE, 200), float)
    assert check_value(RATE, 0) == 0.0


@pytest.mark.parametrize("value, words", [
    (-5.0, "is out of range"), (5000, "is out of range"), ("abc", "must be a number"),
    (True, "must be a number"), (float("nan"), "must be finite")])
def test_bad_numbers_name_the_parameter_value_and_range(value, words):
    with pytest.raises(ParameterError) as info:
        check_value(RATE, value)
    text = str(info.value)
    assert "'keyframe_rate'" in text and words in text and repr(value) in text
    assert "1 <= value <= 2000" in text


def test_choices_lists_and_booleans():
    qos = ParameterSpec("sensor_qos", str, "sensor_data", "qos", choices=("sensor_data", "reliable"))
    assert check_value(qos, "reliable") == "reliable"
    with pytest.raises(ParameterError, match="one of: sensor_data, reliable"):
        check_value(qos, "fast")
    flag = ParameterSpec("publish_tf", bool, True, "tf")
    with pytest.raises(ParameterError, match="true or false"):
        check_value(flag, 1)
    names = ParameterSpec("mute_sensors", "str_list", [], "names")
    assert check_value(names, None) == [] and check_value(names, ["a", ""]) == ["a"]
    values = ParameterSpec("initial_error", "float_list", [0.0], "rad")
    assert check_value(values, [1, 2.5]) == [1.0, 2.5] and check_value(values, 0.3) == [0.3]
    with pytest.raises(ParameterError, match="a list of numbers"):
        check_value(values, ["x"])


def test_the_nodes_tables_are_documented():
    from mbfg_ros.ros.parameter_tables import ESTIMATOR_PARAMETERS, SIM_RIG_PARAMETERS
    for table in (ESTIMATOR_PARAMETERS, SIM_RIG_PARAMETERS):
        names = [s.name for s in table]
        assert len(names) == len(set(names))
        for spec in table:
            assert spec.description
            check_value(spec, spec.default)                # every default is valid
        text = describe(table)
        assert all(f"`{n}`" in text for n in names)
