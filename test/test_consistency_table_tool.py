"""tools/consistency_table.py's ``--set``: a config field changed for the replays, refused with
the config's own line when it is not one."""
from __future__ import annotations

import importlib.util

import pytest

from conftest import CONFIG, ROOT
from mbfg_ros.errors import ConfigError


def _tool():
    spec = importlib.util.spec_from_file_location("consistency_table", ROOT / "tools" / "consistency_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_set_changes_a_nested_field_and_the_config_checks_it():
    tool = _tool()
    mech = tool.with_settings(CONFIG / "slider_crank.yaml", ["estimator.model_uncertainty.trigger=0",
                                                             "estimator.noise.dynamics=0.5"])
    assert mech.config.estimator.model_uncertainty.trigger == 0
    assert mech.config.estimator.noise.dynamics == 0.5
    assert tool.with_settings(CONFIG / "slider_crank.yaml", []).config.estimator.model_uncertainty.trigger == 1.5
    with pytest.raises(ConfigError, match="did you mean 'trigger'"):
        tool.with_settings(CONFIG / "slider_crank.yaml", ["estimator.model_uncertainty.trigerr=0"])
    with pytest.raises(SystemExit, match="expected KEY=VALUE"):
        tool.with_settings(CONFIG / "slider_crank.yaml", ["estimator"])
