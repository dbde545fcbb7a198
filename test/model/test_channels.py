"""The known-input channel names: one definition (model/channels.py) that the estimator, the
simulator, the input router and the reports share."""
from __future__ import annotations

import subprocess
import sys

from conftest import ROOT
from mbfg_ros.model.channels import COMMAND_PREFIX, command_channel, command_joint


def test_a_command_channel_names_its_joint_and_a_sensor_name_none():
    assert command_channel("crank_joint") == "command:crank_joint" == COMMAND_PREFIX + "crank_joint"
    assert command_joint(command_channel("crank_joint")) == "crank_joint"
    assert command_joint("crank_encoder") is None


def test_the_prefix_is_the_estimators_and_the_input_router_does_not_load_the_estimator():
    """io/sensor_inputs imported the 900-line estimator for this one constant (issue 22)."""
    from mbfg_ros.estimation import estimator
    assert estimator.COMMAND_PREFIX is COMMAND_PREFIX
    code = ("import sys, mbfg_ros.io.sensor_inputs; "
            "print(sorted(m for m in sys.modules if m.startswith('mbfg_ros.estimation')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_channel_names_and_the_load_cell_frame_are_the_models(four_bar):
    """One rule for the simulator's synthesis, the truth and the estimator's outputs."""
    from mbfg_ros.model.channels import channel_names, load_cell_frame
    assert channel_names(four_bar) == ["crank_encoder", "rocker_pin_load"]
    assert load_cell_frame(four_bar, 0) == "rocker_tip"        # the closure's frame_b
    code = ("import sys, mbfg_ros.model.channels; "
            "print(sorted(m for m in sys.modules if m.startswith(('mbfg_ros.sim', 'mbfg_ros.io'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]", out.stdout
