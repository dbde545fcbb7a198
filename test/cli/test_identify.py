"""`mbfg identify` end to end: a simulated pendulum bag (its truth off the config in friction,
armature, a torque offset, mass and an encoder offset) identified into a config and a URDF that
load and carry the truth's values; a log through an import map with --known-inputs; bad input
as one line and exit status 2."""
from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from support.identification_rigs import MASS_FACTOR, truth_trajectory, write_configs
from mbfg_ros.cli.main import main
from mbfg_ros.model.mechanism import load_mechanism
from mbfg_ros.sim.sensors import SensorOptions, synthesize_series

DURATION = 5.0


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    d = tmp_path_factory.mktemp("identify")
    nominal, truth = write_configs(d)
    bag = d / "bag"
    assert main(["simulate", str(truth), "--duration", f"{DURATION:g}", "--input", "random", "--input-amplitude", "3",
                 "--input-frequency", "2", "--input-start", "0", "--mass-error", f"rod={MASS_FACTOR}",
                 "--seed", "1", "--out", str(bag), "--no-progress"]) == 0
    return d, nominal, truth, bag


def test_a_bag_is_identified_into_a_config_and_a_urdf(rig, tmp_path, capsys):
    d, nominal, truth, bag = rig
    capsys.readouterr()
    out, js = tmp_path / "id.yaml", tmp_path / "id.json"
    assert main(["identify", str(bag), "--config", str(nominal), "--out", str(out), "--json", str(js),
                 "--no-progress"]) == 0
    text = capsys.readouterr().out
    for what in ("Identified (standard deviations", "pivot.viscous", "Combinations", "rod.izz + 1 pivot.armature",
                 "Not identifiable from this recording", "rod.mass", "equation of motion pivot", "effort fit",
                 "Excitation", f"Wrote {out}", f"Wrote {tmp_path / 'id.urdf'} (inertials of rod)"):
        assert what in text, what
    f = json.loads(js.read_text())
    got = {p["name"]: p for p in f["parameters"]}
    assert got["pivot.viscous"]["identified"] and got["pivot.viscous"]["value"] == pytest.approx(0.07, rel=0.05)
    assert got["pivot.offset"]["value"] == pytest.approx(0.05, abs=3 * got["pivot.offset"]["sigma"] + 0.005)
    assert not got["rod.mass"]["identified"] and got["rod.mass"]["sigma"] is None
    assert f["converged"] and f["urdf"] == str(tmp_path / "id.urdf") and "joints.pivot.viscous" in f["changed"]
    mech = load_mechanism(out)                  # the identified rig loads, with the new URDF
    assert mech.config.urdf == (tmp_path / "id.urdf").resolve()
    assert mech.config.joint("pivot").viscous == pytest.approx(got["pivot.viscous"]["value"], rel=1e-5)
    assert "# the drive" in out.read_text()
    body = mech.model.inertias[1]
    assert float(body.mass * body.lever[0]) == pytest.approx(got["rod.mx"]["value"], rel=1e-6)


def test_a_log_through_a_map_with_known_inputs(rig, tmp_path, capsys):
    """The config's joint is an unknown input (its effort estimated); the log holds the measured
    torque, which --known-inputs and the map's inputs: take as known."""
    d, nominal, truth, _ = rig
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text(nominal.read_text().replace("actuation: known", "actuation: unknown"))
    log, held_out = _write_log(tmp_path / "run.csv", truth, DURATION, 1), _write_log(tmp_path / "held.csv", truth, 3.0, 4)
    m = tmp_path / "run.map.yaml"
    m.write_text("time: {column: t}\nrepeats: keep\nsensors: {pivot_encoder: angle}\ninputs: {pivot: torque}\n")
    capsys.readouterr()
    out = tmp_path / "id.yaml"
    assert main(["identify", str(log), "--map", str(m), "--config", str(unknown), "--known-inputs", "--out", str(out),
                 "--parameters", "friction,offset", "--json", "-", "--no-progress", "--validate", str(held_out)]) == 0
    f = json.loads(capsys.readouterr().out)
    got = {p["name"]: p for p in f["parameters"]}
    assert set(got) == {"pivot.viscous", "pivot.coulomb", "pivot.offset"}
    assert got["pivot.viscous"]["value"] == pytest.approx(0.07, rel=0.1)
    # a held-out run (another motion) fits better with the identified friction and offset
    [h] = f["held_out"]
    assert h["recording"] == "held.csv" and h["span"] > 2.5
    fit = h["joints"]["pivot"]
    assert fit["identified"] < 0.85 * fit["config"], fit          # (0.082 against 0.112: mass and armature stay off)
    text = out.read_text()
    assert "actuation: unknown" in text and "urdf:" in text
    assert not (tmp_path / "id.urdf").exists()                   # no inertia identified: no URDF


def _write_log(path, truth, duration: float, seed: int):
    """A CSV log (t, angle, torque) of a simulated run of the truth config."""
    series = {s.channel.name: s for s in synthesize_series(truth_trajectory(truth, duration, seed),
                                                            SensorOptions(seed=seed + 1))}
    enc, cmd = series["pivot_encoder"], series["command:pivot"]
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["t", "angle", "torque"])
        for t, y in zip(enc.stamp, enc.value[:, 0]):
            w.writerow([f"{t:.6f}", f"{y:.9f}", f"{np.interp(t, cmd.stamp, cmd.value[:, 0]):.9f}"])
    return path


@pytest.mark.parametrize("extra, message", [
    (["--parameters", "masses"], "--parameters: unknown group masses"),
    (["--max-iterations", "0"], "--max-iterations: must be at least 1"),
    (["--model-accuracy", "0"], "--model-accuracy: must be above 0"),
    (["--remap", "joint_commands:=/nothing"], "has no topic /nothing (the efforts of pivot"),
])
def test_bad_input_is_one_line_and_exit_2(rig, tmp_path, capsys, extra, message):
    d, nominal, _, bag = rig
    capsys.readouterr()
    code = main(["identify", str(bag), "--config", str(nominal), "--out", str(tmp_path / "x.yaml"), "--no-progress"]
                + extra)
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and message in err, err


def test_missing_bag_and_existing_output(rig, tmp_path, capsys):
    d, nominal, _, bag = rig
    capsys.readouterr()
    assert main(["identify", str(tmp_path / "nothing"), "--config", str(nominal)]) == 2
    assert "no such bag" in capsys.readouterr().err
    assert main(["identify", str(bag), "--config", str(nominal), "--validate", str(tmp_path / "held")]) == 2
    assert "no such bag: " in capsys.readouterr().err
    (tmp_path / "x.yaml").write_text("")
    assert main(["identify", str(bag), "--config", str(nominal), "--out", str(tmp_path / "x.yaml")]) == 2
    assert "exists (use --overwrite" in capsys.readouterr().err
