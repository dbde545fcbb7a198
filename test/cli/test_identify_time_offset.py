"""`mbfg identify --parameters timing` against the simulator: the double pendulum (its efforts
known) with a gyro on the lower link whose clock lags by 3 ms (the truth's ``time_offset``; the
simulator stamps each reading 3 ms after it was taken), 4 s of random torques. The identified
offsets (the gyro's and the elbow encoder's, the shoulder encoder the reference) are within 3
standard deviations of the truth (3 ms and 0), the written config holds them, and the estimator
with it fits the gyro better than with the config's 0: the filtered estimate's fit (each
reading's residual at the estimate it was solved in) and the smoothed estimate's residual RMS."""
from __future__ import annotations

import json

import pytest
import yaml

from mbfg_ros.cli.main import main
from mbfg_ros.model.config import load_rig_config
from mbfg_ros.sim.perturbed_truth import IDENTIFICATION_RIGS, ROOT, set_time_offsets

LAG = 0.003
"""s: the gyro's lag in the truth."""
DURATION = 4.0
GYRO = {"name": "lower_gyro", "frame": "lower_link", "noise": 0.005, "topic": "imu", "rate": 500.0, "axes": ["y"]}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("time_offset")
    rig = IDENTIFICATION_RIGS["double_pendulum"]
    doc = yaml.safe_load((ROOT / rig.config).read_text())
    doc["mechanism"]["urdf"] = str((ROOT / "config" / doc["mechanism"]["urdf"]).resolve())
    for j in rig.driven:
        doc["joints"][j]["actuation"] = "known"
    doc["estimator"] = {"native_code": "off"}
    doc["sensors"]["gyros"] = [GYRO]
    nominal, truth = out / "nominal.yaml", out / "truth.yaml"
    nominal.write_text(yaml.safe_dump(doc, sort_keys=False))
    set_time_offsets(doc, {"lower_gyro": LAG})
    truth.write_text(yaml.safe_dump(doc, sort_keys=False))
    bag = out / "bag"
    assert main(["simulate", str(truth), "--duration", f"{DURATION:g}", "--seed", "1", "--out", str(bag),
                 "--no-progress", "--json", str(out / "simulate.json")] + rig.simulate_options()) == 0
    assert json.loads((out / "simulate.json").read_text())["sensors"]["lower_gyro"]["time_offset"] == LAG
    identified = out / "identified.yaml"
    assert main(["identify", str(bag), "--config", str(nominal), "--parameters", "timing", "--out", str(identified),
                 "--json", str(out / "identified.json"), "--no-progress"]) == 0
    replays = {}
    for which, cfg in (("config", nominal), ("identified", identified)):
        for mode in ("filtered", "smooth"):
            js = out / f"{which}_{mode}.json"
            assert main(["replay", str(bag), "--config", str(cfg), "--json", str(js), "--no-progress"]
                        + (["--smooth"] if mode == "smooth" else [])) == 0
            replays[which, mode] = json.loads(js.read_text())
    return json.loads((out / "identified.json").read_text()), identified, replays


def test_the_lag_comes_back_within_three_sigma(run):
    result, identified, _ = run
    assert result["converged"]
    got = {p["name"]: p for p in result["parameters"]}
    assert set(got) == {"elbow_encoder.time_offset", "lower_gyro.time_offset"}
    for name, truth in (("lower_gyro.time_offset", LAG), ("elbow_encoder.time_offset", 0.0)):
        p = got[name]
        assert p["identified"] and p["unit"] == "s"
        assert abs(p["value"] - truth) <= 3.0 * p["sigma"], p
    assert got["lower_gyro.time_offset"]["sigma"] < 0.1 * LAG
    cfg = load_rig_config(identified)
    assert cfg.sensors.gyros[0].time_offset == pytest.approx(got["lower_gyro.time_offset"]["value"], rel=1e-5)


def test_the_estimator_with_the_identified_offset_fits_the_gyro_better(run):
    _, _, replays = run
    fit = {which: replays[which, "filtered"]["fit_sigma"]["lower_gyro"] for which in ("config", "identified")}
    assert fit["identified"] < fit["config"], fit
    smooth = {which: replays[which, "smooth"]["residuals"]["lower_gyro"]["rms_sigma"][0]
              for which in ("config", "identified")}
    assert smooth["identified"] < 0.6 * smooth["config"], smooth
    assert smooth["identified"] < 1.2                 # (about its noise)
