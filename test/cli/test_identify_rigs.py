"""`mbfg identify` against the simulator on an example rig whose truth is perturbed as issue 23's
first done-when asks (:mod:`mbfg_ros.sim.perturbed_truth`): the double pendulum with its link
masses and inertias off by up to 20 %, Coulomb and viscous friction, armature and both encoders
0.01 rad off, 6 s of random torques. `mbfg identify --known-inputs` gives every identifiable
parameter back within 3 standard deviations and 5 % (of its natural size when that is larger),
names the unidentifiable ones, and the smoothed effort estimate with the identified config is
about half as far off as with the config's.

The lean version of tools/identification_table.py, which runs the four-bar, the arm and the
double pendulum on 60 s (README "mbfg identify" has its tables): the four-bar and the arm need
longer recordings than a test can afford to separate their parameters."""
from __future__ import annotations

import json

import pytest

from mbfg_ros.cli.main import main
from mbfg_ros.model.mechanism import load_mechanism
from mbfg_ros.model.parameters import model_parameters
from mbfg_ros.sim.perturbed_truth import (IDENTIFICATION_RIGS, combination_truth, with_noise, within_tolerance,
                                          write_configs)

RIG = "double_pendulum"
DURATION = 6.0
EFFORT_RATIO = 0.4
"""The smoothed effort error with the identified config over the config's, at most (measured
0.24 and 0.20 for the shoulder and the elbow on these 6 s, the smoother at the online estimator's
model-uncertainty scale, 0.32 here; 0.53 and 0.45 at the configured noises before; the 60 s
table has the full figures)."""

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def identified(tmp_path_factory):
    rig = IDENTIFICATION_RIGS[RIG]
    out = tmp_path_factory.mktemp(RIG)
    truth_cfg, nominal_cfg = write_configs(rig, out, seed=1)
    bag = out / "bag"
    assert main(["simulate", str(truth_cfg), "--duration", f"{DURATION:g}", "--seed", "1", "--out", str(bag),
                 "--no-progress"] + rig.simulate_options()) == 0
    assert main(["identify", str(bag), "--config", str(nominal_cfg), "--known-inputs", "--out",
                 str(out / "identified.yaml"), "--json", str(out / "identified.json"), "--no-progress"]) == 0
    errors = {}
    for which, cfg in (("config", nominal_cfg), ("identified", out / "identified.yaml")):
        noisy = with_noise(cfg, out / f"{which}_noise.yaml", rig.noise)      # the rig's estimator noises
        js = out / f"replay_{which}.json"
        assert main(["replay", str(bag), "--config", str(noisy), "--smooth", "--json", str(js), "--no-progress"]) == 0
        errors[which] = {j: v["effort"] for j, v in json.loads(js.read_text())["rmse"].items() if "effort" in v}
    truth = {p.name: p.nominal for p in model_parameters(load_mechanism(truth_cfg))}
    nominal = {p.name: p.nominal for p in model_parameters(load_mechanism(nominal_cfg))}
    return json.loads((out / "identified.json").read_text()), truth, nominal, errors


def test_every_identifiable_parameter_within_three_sigma_and_five_percent(identified):
    result, truth, nominal, _ = identified
    assert result["converged"]
    got = [p for p in result["parameters"] if p["identified"]]
    assert {p["group"] for p in got} == {"inertia", "friction", "armature", "offset"}
    assert {"upper_link.iyy", "lower_link.iyy", "shoulder.coulomb", "elbow.viscous", "elbow.armature"} <= \
        {p["name"] for p in got}
    bad = [(p["name"], p["value"], combination_truth(p["name"], p["combination"], truth, nominal), p["sigma"])
           for p in got if not within_tolerance(p["value"], combination_truth(p["name"], p["combination"], truth,
                                                                              nominal), p["sigma"], p["scale"])]
    assert not bad


def test_the_unidentifiable_ones_are_named(identified):
    result, _, _, _ = identified
    named = {p["name"]: p["note"] for p in result["parameters"] if not p["identified"]}
    # a link turning about a fixed hinge: its mass; in the plane: the other axes' inertia; an
    # encoder's offset on a hinge gravity loads turns the link's centre of mass instead
    assert {"upper_link.mass", "upper_link.ixx", "lower_link.izz", "shoulder_encoder.offset",
            "elbow_encoder.offset"} <= set(named)
    assert all(named.values())


def test_the_identified_config_cuts_the_effort_error(identified):
    _, _, _, errors = identified
    for j in IDENTIFICATION_RIGS[RIG].driven:
        assert errors["identified"][j] <= EFFORT_RATIO * errors["config"][j], (j, errors)
