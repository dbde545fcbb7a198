"""`mbfg tune` / replay.tuning: noises from a recording without its truth, judged against the truth.

The bag comes from `mbfg simulate` (four-bar, encoder + load cell) with a modelling error
(gravity 2 m/s^2 stronger than the config's): with a perfect model, trusting the model more is
never wrong and 10x too large sensor noises cost nothing, so the test would not measure tuning.
Starting from the config with its noises (sensor noises and ``estimator.noise.dynamics``) 10x too
large and, separately, 10x too small, the tuned config must cut the position RMSE against the
simulator's truth by >= 2x and end with every sensor's whitened innovation RMS in [0.8, 1.25]
(innovation: reading - prediction from the keyframe before it, the statistic the tuner sets).
The residual at the estimate that used the reading (`mbfg replay`'s) is checked for the encoder
only: the load cell's is far below 1 there (about 0.01-0.1: over-fitted), because the gravity
error is absorbed by a dynamics noise of ~100+ N m, which frees the closure force.
"""
from __future__ import annotations

import io
import json
import re
from contextlib import redirect_stdout

import numpy as np
import pytest

from conftest import CONFIG
from support.replay_bags import simulated_bag
from mbfg_ros.cli.main import main
from mbfg_ros.model.validation import load_rig
from mbfg_ros.replay.metrics import compare
from mbfg_ros.replay.session import ReplayOptions, replay_bag
from mbfg_ros.replay.tuning import (NoiseSettings, TuningOptions, apply_settings, current_settings, process_noises,
                                    tune, write_tuned_config)
from mbfg_ros.errors import MbfgError

FOUR_BAR = CONFIG / "four_bar.yaml"


def scaled_config(path, factor: float):
    """four_bar.yaml with its sensor noises and dynamics noise times ``factor``, written to ``path``."""
    cfg = load_rig(FOUR_BAR).mech.config
    s = current_settings(cfg, ("dynamics",))
    s = NoiseSettings({k: v * factor for k, v in s.sensors.items()}, {k: v * factor for k, v in s.process.items()})
    write_tuned_config(FOUR_BAR, path, s, f"four_bar.yaml with its noises x{factor:g}")
    return path


def position_rmse(bag, config) -> float:
    """RMS over the joints of the position RMSE against the bag's truth (first second skipped)."""
    mech = load_rig(config).mech
    res = replay_bag(bag, mech, ReplayOptions())
    c = compare(mech, res.estimates, res.truth, 1.0)
    return float(np.sqrt(np.mean([row["position"] ** 2 for row in c.rmse.values()])))


@pytest.fixture(scope="module")
def gravity_error_bag(tmp_path_factory):
    """3 s (2 s of statistics after the tuner's 1 s skip): measured 16 replays per tuning, the
    position RMSE cut 17x (too large) and 2.7x (too small), every whitened RMS within 2 % of 1."""
    bag = tmp_path_factory.mktemp("tune") / "fb"
    with redirect_stdout(io.StringIO()):
        assert main(["simulate", str(FOUR_BAR), "--duration", "3", "--gravity-error", "2", "--out", str(bag),
                     "--no-progress"]) == 0
    return bag


@pytest.mark.slow
def test_tuning_from_10x_too_large_and_too_small_noises(gravity_error_bag, tmp_path):
    bag = gravity_error_bag
    # too large: through the command line (JSON figures, written config)
    big = scaled_config(tmp_path / "big.yaml", 10.0)
    tuned = tmp_path / "big.tuned.yaml"
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = main(["tune", str(bag), "--config", str(big), "--out", str(tuned), "--json", str(tmp_path / "t.json"),
                   "--no-progress"])
    assert rc == 0, buf.getvalue()
    facts = json.loads((tmp_path / "t.json").read_text())
    assert facts["converged"] and facts["runs"] <= 30
    for name, s in facts["after"]["sensors"].items():
        assert 0.8 <= s["whitened_rms"] <= 1.25, (name, s)
    assert 0.8 <= facts["after"]["sensors"]["crank_encoder"]["whitened_rms_at_estimate"] <= 1.25
    text = buf.getvalue()
    assert "crank_encoder" in text and "rocker_pin_load" in text and f"Wrote {tuned}" in text
    written = tuned.read_text()
    assert "# rad (1 deg, the benchmark's encoder)" in written       # comments kept
    assert load_rig(tuned).mech.config.sensors.encoders[0].noise == pytest.approx(
        facts["after"]["sensors"]["crank_encoder"]["noise"], rel=1e-3)
    before, after = position_rmse(bag, big), position_rmse(bag, tuned)
    assert after * 2 <= before, (before, after)

    # too small: through the Python API
    small = scaled_config(tmp_path / "small.yaml", 0.1)
    mech = load_rig(small).mech
    res = tune(bag, mech, TuningOptions())
    assert res.converged and res.runs <= 30
    for name, s in res.after.sensors.items():
        assert 0.8 <= s.whitened <= 1.25, (name, s)
    assert res.before.sensors["crank_encoder"].whitened > 5          # 10x too small: ~10 sigma
    write_tuned_config(small, tmp_path / "small.tuned.yaml", res.after.settings)
    before, after = position_rmse(bag, small), position_rmse(bag, tmp_path / "small.tuned.yaml")
    assert after * 2 <= before, (before, after)


# ---- fast: the config writer, the process noises, the errors ---------------------------------
def test_written_config_keeps_everything_but_the_tuned_numbers(tmp_path):
    cfg = load_rig(FOUR_BAR).mech.config
    s = current_settings(cfg, ("dynamics", "integration_velocity", "integration_position"))
    s.sensors["crank_encoder"] = 0.0123456789
    s.process["integration_velocity"] = 0.002
    s.process["integration_position"] = 2e-5           # "2e-05" would be a string to PyYAML
    out = tmp_path / "sub" / "t.yaml"
    out.parent.mkdir()
    changed = write_tuned_config(FOUR_BAR, out, s, "tuned here")
    assert "sensors.encoders[crank_encoder].noise" in changed and "mechanism.urdf" in changed
    src, got = FOUR_BAR.read_text().splitlines(), out.read_text().splitlines()
    assert got[0] == "# tuned here"
    differing = [(a, b) for a, b in zip(src, got[1:]) if a != b]
    # the URDF (absolute now), the encoder's noise, the dynamics line (same value: 1.0) and the
    # new integration_velocity line shift nothing else
    assert any("noise: 0.01235" in b for _, b in differing)
    assert any("urdf: /" in b for _, b in differing)
    assert "    integration_velocity: 0.002" in got
    assert all(line in got for line in src if "urdf" not in line and "0.0174532" not in line)
    loaded = load_rig(out).mech.config
    assert loaded.sensors.encoders[0].noise == pytest.approx(0.01235)
    assert loaded.estimator.noise.integration_velocity == pytest.approx(0.002)
    assert loaded.estimator.noise.integration_position == pytest.approx(2e-5)
    unchanged = write_tuned_config(FOUR_BAR, tmp_path / "same.yaml",
                                   current_settings(cfg, ("dynamics", "mass_random_walk")))
    assert unchanged == ["mechanism.urdf"]          # the same noises: byte for byte but the URDF line
    same = [ln for ln in (tmp_path / "same.yaml").read_text().splitlines() if "urdf:" not in ln]
    assert same == [ln for ln in FOUR_BAR.read_text().splitlines() if "urdf:" not in ln]
    assert loaded.urdf == cfg.urdf


def test_process_noises_follow_the_rig(four_bar):
    assert process_noises(four_bar) == ("dynamics", "integration_velocity")


def test_a_sensors_own_process_noise_is_tuned_and_written(tmp_path):
    """The sensor kinds' tuning hook: an accelerometer's (and a gyro's) bias random walk is a
    process noise ``bias_instability:<sensor>``, applied to and written in its own section."""
    src = CONFIG / "four_bar_imu.yaml"
    text = re.sub(r"      bias_sigma: 0\.0 .*\n", "      bias_instability: 0.002\n      bias_sigma: 0.1\n",
                  src.read_text())
    cfg_path = tmp_path / "imu.yaml"
    cfg_path.write_text(text.replace("urdf: ../urdf/", f"urdf: {src.parent.parent}/urdf/"))
    mech = load_rig(cfg_path).mech
    assert process_noises(mech) == ("dynamics", "integration_velocity", "bias_instability:coupler_accelerometer")
    s = current_settings(mech.config, process_noises(mech))
    assert s.process["bias_instability:coupler_accelerometer"] == 0.002
    assert s.sensors == {"coupler_gyro": 0.017453292519943295, "coupler_accelerometer": 0.05}
    s.process["bias_instability:coupler_accelerometer"] = 0.004
    s.sensors["coupler_accelerometer"] = 0.07
    tuned = apply_settings(mech.config, s).sensors.accelerometers[0]
    assert (tuned.bias_instability, tuned.noise, tuned.bias_sigma) == (0.004, 0.07, 0.1)
    changed = write_tuned_config(cfg_path, tmp_path / "out.yaml", s)
    assert changed == ["sensors.accelerometers[coupler_accelerometer].noise",
                       "sensors.accelerometers[coupler_accelerometer].bias_instability"]
    assert load_rig(tmp_path / "out.yaml").mech.config.sensors.accelerometers[0] == tuned


def test_the_model_error_random_walk_is_tuned_and_written(tmp_path):
    text = FOUR_BAR.read_text().replace("    random_walk: 0.0 ", "    random_walk: 24.0")
    src = tmp_path / "me.yaml"
    src.write_text(text.replace("urdf: ", f"urdf: {FOUR_BAR.parent}/", 1) if "urdf: /" not in text else text)
    mech = load_rig(src).mech
    assert mech.config.estimator.model_error.random_walk == 24.0
    assert process_noises(mech)[-1] == "model_error.random_walk"
    s = current_settings(mech.config, process_noises(mech))
    s.process["model_error.random_walk"] = 3.5
    assert apply_settings(mech.config, s).estimator.model_error.random_walk == 3.5
    changed = write_tuned_config(src, tmp_path / "out.yaml", s)
    assert changed == ["estimator.model_error.random_walk"]
    assert load_rig(tmp_path / "out.yaml").mech.config.estimator.model_error.random_walk == 3.5


@pytest.fixture(scope="module")
def short_bag(tmp_path_factory):
    return simulated_bag(tmp_path_factory.mktemp("tune_bad") / "fb", "four_bar", 1.0, truth=False)


def _tune_cli(*args):
    out, err = io.StringIO(), io.StringIO()
    from contextlib import redirect_stderr
    with redirect_stdout(out), redirect_stderr(err):
        rc = main(["tune", *map(str, args)])
    return rc, out.getvalue() + err.getvalue()


def test_bag_without_a_sensor_topic_is_a_clear_error(short_bag, tmp_path):
    rc, text = _tune_cli(short_bag, "--config", FOUR_BAR, "--out", tmp_path / "t.yaml",
                         "--remap", "rocker_pin/wrench:=/nowhere")
    assert rc == 2
    assert "has no topic /nowhere" in text and "rocker_pin_load" in text and "/encoders" in text
    assert not (tmp_path / "t.yaml").exists()


def test_bad_options_are_clear_errors(short_bag, tmp_path):
    (tmp_path / "exists.yaml").write_text("x: 1\n")
    cases = [(["--out", tmp_path / "exists.yaml"], "exists (use --overwrite"),
             (["--out", tmp_path / "t.yaml", "--search", "gravity_random_walk"],
              "'gravity_random_walk' is not a process noise"),
             (["--out", tmp_path / "t.yaml", "--tolerance", "0"], "--tolerance: must be between 0 and 1"),
             (["--out", tmp_path / "t.yaml", "--max-runs", "0"], "--max-runs: must be at least 1")]
    for extra, message in cases:
        rc, text = _tune_cli(short_bag, "--config", FOUR_BAR, *extra)
        assert rc == 2 and message in text, (extra, text)
    rc, text = _tune_cli(tmp_path / "nope", "--config", FOUR_BAR)
    assert rc == 2 and "no such bag" in text


def test_too_short_a_recording_is_refused(short_bag):
    with pytest.raises(MbfgError, match="used readings after the first 1 s"):
        tune(short_bag, load_rig(FOUR_BAR).mech, TuningOptions(max_runs=2))


def test_written_config_without_a_noise_section_and_in_flow_style(tmp_path):
    for name in ("four_bar_gyro", "five_bar"):
        src = CONFIG / f"{name}.yaml"
        cfg = load_rig(src).mech.config
        s = current_settings(cfg, ("dynamics",))
        s.process["dynamics"] = 30.0
        s.sensors = {k: v * 2 for k, v in s.sensors.items()}
        out = tmp_path / f"{name}.yaml"
        changed = write_tuned_config(src, out, s)
        assert "estimator.noise.dynamics" in changed
        got = load_rig(out).mech.config
        assert got.estimator.noise.dynamics == 30.0
        assert [x.noise for x in got.sensors.all()] == [float(f"{x.noise * 2:.4g}") for x in cfg.sensors.all()]
        assert got.estimator.keyframe_rate == cfg.estimator.keyframe_rate and got.dof == cfg.dof


def test_a_restricted_search_changes_only_what_it_names(short_tune_bag):
    """--search dynamics,input_random_walk leaves integration_velocity as configured (it took it
    from 0.001 to 0.034 on a double pendulum recording); integration_position moves with the rescale."""
    mech = load_rig(FOUR_BAR).mech
    before = mech.config.estimator.noise.integration_velocity
    res = tune(short_tune_bag, mech, TuningOptions(search=("dynamics",), max_runs=4))
    assert res.searched == ("dynamics",)
    assert "integration_velocity" not in res.after.settings.process
    changed = write_tuned_config(FOUR_BAR, short_tune_bag.parent / "t.yaml", res.after.settings)
    assert "estimator.noise.integration_velocity" not in changed
    assert load_rig(short_tune_bag.parent / "t.yaml").mech.config.estimator.noise.integration_velocity == before


@pytest.fixture(scope="module")
def short_tune_bag(tmp_path_factory):
    return simulated_bag(tmp_path_factory.mktemp("tune_restricted") / "fb", "four_bar", 2.5, truth=False)
