"""The DFKI double pendulum's real recordings (test/fixtures/double_pendulum: 3.5 s of a
system-identification run and of an acrobot swing-up, design C.0), imported with `mbfg import`,
replayed with config/double_pendulum.yaml (published parameters, encoder noise at the
quantisation, default estimator noises) and the estimated torques scored against the motor
drivers' current-based torque (tau_meas) as the normalised RMSE (RMSE / RMS of tau_meas: 1.0 is
what an estimate of zero scores), beside the causal and the zero-phase Savitzky-Golay
inverse-dynamics baselines of the same model.

The bounds are today's figures with a margin (x1.25 for the estimator, 2 % for the
deterministic baselines), so that a change that makes the estimate worse fails. With the stamp
jitter in each reading's noise and the model's uncertainty chosen online from the innovations
(issue 23 step 5; no `mbfg tune`) the filtered elbow torque scores 0.77 / 0.66 against the
causal baseline's 0.88 / 0.72 (it was 2.09 / 1.41), and the test holds it below that baseline;
no DIVERGED (lost) report.
Still bad: the shoulder, whose published model is poor even offline (zero-phase baseline
0.88-0.94; the acrobot's shoulder is passive, its recorded torque is the driver's noise), scores
2.1-2.8 filtered; the encoder residuals are 4-17 sigma of the datasheet noise, and the
divergence test flags the encoders (strained, WARN) for 0.09-0.54 s at the start, while the
estimator learns their level (it was 0.1-1.1 s before a failing period ended with the sensor's
recent residuals back within the limit; issue 23 step 6)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import CONFIG, ROOT
from mbfg_ros.replay.recorded_torque import score_recorded_run
from mbfg_ros.cli.main import main
from mbfg_ros.io.log_map import load_log_map
from mbfg_ros.model.mechanism import load_mechanism

FIXTURES = ROOT / "test" / "fixtures" / "double_pendulum"
RUNS = {"sys_id": "sys_id_trajectory_00_0-3.5s.csv", "acrobot": "acrobot_tvlqr_184506_8-11.5s.csv"}
TORQUE = {"shoulder": "tau_meas1", "elbow": "tau_meas2"}

# normalised torque RMSE measured on the fixtures (shoulder, elbow): filtered, lagged, causal
# baseline, zero-phase baseline; the first second skipped
MEASURED = {
    "sys_id": {"filtered": (2.11, 0.77), "lagged": (1.37, 0.49), "causal_baseline": (1.89, 0.88),
               "zero_phase_baseline": (0.88, 0.34)},
    "acrobot": {"filtered": (2.79, 0.66), "lagged": (1.94, 0.45), "causal_baseline": (3.49, 0.72),
                "zero_phase_baseline": (0.94, 0.55)},
}


@pytest.fixture(scope="module")
def scores():
    mech = load_mechanism(CONFIG / "double_pendulum.yaml")
    log_map = load_log_map(CONFIG / "double_pendulum.map.yaml")
    return {run: score_recorded_run(FIXTURES / f, log_map, mech, TORQUE) for run, f in RUNS.items()}


@pytest.mark.parametrize("run", sorted(RUNS))
def test_the_fixtures_import_with_their_timing(run, tmp_path, capsys):
    assert main(["import", str(FIXTURES / RUNS[run]), "--map", str(CONFIG / "double_pendulum.map.yaml"),
                 "--out", str(tmp_path / "bag"), "--json", str(tmp_path / "i.json")]) == 0
    f = json.loads((tmp_path / "i.json").read_text())
    rows = {"sys_id": 1743, "acrobot": 1694}[run]
    assert f["rows"] == rows and f["bag"]["topics"]["/encoders"]["count"] == rows
    for c in f["channels"].values():
        assert c["written"] == rows and c["repeats"] == 0 and c["nan"] == 0       # repeats: keep (see the map)
        assert c["rate"] == pytest.approx(500.0, rel=1e-3) and 5e-5 < c["jitter"] < 1e-3


@pytest.mark.parametrize("run", sorted(RUNS))
def test_the_estimated_torque_against_the_recorded_one(scores, run):
    s = scores[run]
    assert s.joints == ["shoulder", "elbow"] and s.span == pytest.approx(2.5, abs=0.01)
    for method, figures in MEASURED[run].items():
        got = s.scores[method]
        if method.endswith("baseline"):
            np.testing.assert_allclose(got, figures, rtol=0.02, err_msg=method)
        else:
            assert np.all(got <= 1.25 * np.array(figures)), (run, method, got)
    # no DIVERGED (lost) report: the encoders' level at the start is the one the search calibrates;
    # flagged (strained) at the start only: 0.09-0.54 s measured
    assert not any(s.lost.values()), s.lost
    assert max(s.diverged.values()) <= 0.7, s.diverged
    # the lagged estimate beats the filtered one on both joints; the filtered elbow the causal baseline
    assert np.all(s.scores["lagged"] < s.scores["filtered"])
    assert s.scores["filtered"][1] < s.scores["causal_baseline"][1]


def test_the_baselines_read_the_positions_less_the_encoders_offsets(tmp_path):
    """A config whose shoulder encoder reads 0.05 rad more (an identified offset) on a log whose
    readings are 0.05 rad more scores the same baselines as the plain config on the plain log."""
    lines = (FIXTURES / RUNS["sys_id"]).read_text().splitlines()[:700]          # 1.4 s
    head = lines[0].split(",")
    k = head.index("pos_meas1")
    shifted = [lines[0]] + [",".join(f"{float(x) + 0.05!r}" if i == k else x for i, x in enumerate(r.split(",")))
                            for r in lines[1:]]
    (tmp_path / "plain.csv").write_text("\n".join(lines) + "\n")
    (tmp_path / "shifted.csv").write_text("\n".join(shifted) + "\n")
    text = (CONFIG / "double_pendulum.yaml").read_text().replace("../urdf/", f"{ROOT / 'urdf'}/")
    offset = text.replace("{name: shoulder_encoder,", "{name: shoulder_encoder, offset: 0.05,")
    assert offset != text
    (tmp_path / "plain.yaml").write_text(text)
    (tmp_path / "offset.yaml").write_text(offset)
    log_map = load_log_map(CONFIG / "double_pendulum.map.yaml")
    plain, moved = (score_recorded_run(tmp_path / log, log_map, load_mechanism(tmp_path / cfg), TORQUE, skip=0.3)
                    for log, cfg in (("plain.csv", "plain.yaml"), ("shifted.csv", "offset.yaml")))
    for method in ("causal_baseline", "zero_phase_baseline"):
        np.testing.assert_allclose(moved.scores[method], plain.scores[method], rtol=1e-6, err_msg=method)
