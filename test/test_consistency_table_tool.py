"""tools/consistency_table.py's ``--set``: a config field changed for the replays, refused with
the config's own line when it is not one."""
from __future__ import annotations

import pytest

from conftest import CONFIG, load_tool
from mbfg_ros.errors import ConfigError


def test_set_changes_a_nested_field_and_the_config_checks_it():
    tool = load_tool("consistency_table")
    mech = tool.with_settings(CONFIG / "slider_crank.yaml", ["estimator.model_uncertainty.trigger=0",
                                                             "estimator.noise.dynamics=0.5"])
    assert mech.config.estimator.model_uncertainty.trigger == 0
    assert mech.config.estimator.noise.dynamics == 0.5
    assert tool.with_settings(CONFIG / "slider_crank.yaml", []).config.estimator.model_uncertainty.trigger == 1.5
    with pytest.raises(ConfigError, match="did you mean 'trigger'"):
        tool.with_settings(CONFIG / "slider_crank.yaml", ["estimator.model_uncertainty.trigerr=0"])
    with pytest.raises(SystemExit, match="expected KEY=VALUE"):
        tool.with_settings(CONFIG / "slider_crank.yaml", ["estimator"])
