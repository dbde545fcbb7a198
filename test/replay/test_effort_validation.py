"""The held-out effort fit of `mbfg identify --validate`: on a simulated pendulum's run that no
model saw, the truth's friction, armature, offsets and encoder offset fit the recorded torque
better than the nominal model; what it cannot score is refused naming the recording."""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from support.identification_rigs import MASS_FACTOR, readings, truth_trajectory, write_configs
from mbfg_ros.errors import MbfgError
from mbfg_ros.estimation.smoothing_io import Readings
from mbfg_ros.model.mechanism import load_mechanism
from mbfg_ros.replay.effort_validation import held_out_fit


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    nominal, truth = write_configs(tmp_path_factory.mktemp("validate"))
    mech = load_mechanism(truth)
    rod = mech.model.inertias[1]                # the simulated rod is MASS_FACTOR heavier than the URDF's
    mech.model.inertias[1] = pin.Inertia(MASS_FACTOR * rod.mass, rod.lever, MASS_FACTOR * rod.inertia)
    return load_mechanism(nominal), mech, readings(truth_trajectory(truth, 3.0, seed=5), seed=6)


def test_the_truth_fits_a_held_out_run_better_than_the_nominal_model(run):
    nominal, truth, r = run
    fit = held_out_fit(r, nominal, truth, "held_out.csv")
    assert fit.joints == ["pivot"] and fit.name == "held_out.csv"
    assert 2.5 < fit.span < 3.0                                   # (the zero-phase window's ends left out)
    assert fit.identified[0] < 0.5 * fit.config[0], (fit.identified, fit.config)
    same = held_out_fit(r, nominal, nominal, "held_out.csv")
    np.testing.assert_allclose(same.identified, same.config)


def test_what_cannot_be_scored_is_refused_naming_the_recording(run):
    nominal, truth, r = run
    with pytest.raises(MbfgError, match="--validate x.csv: no encoder readings of pivot"):
        held_out_fit(Readings({}, r.commands), nominal, truth, "x.csv")
    with pytest.raises(MbfgError, match="--validate x.csv: no recorded effort"):
        held_out_fit(Readings(r.sensors, {}), nominal, truth, "x.csv")
    short = Readings({k: (t[:20], y[:20]) for k, (t, y) in r.sensors.items()}, r.commands)
    with pytest.raises(MbfgError, match="--validate x.csv: too short"):
        held_out_fit(short, nominal, truth, "x.csv")
