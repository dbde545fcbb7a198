"""`mbfg import`'s core: logs (CSV, .mat, .npz) with messy time columns to the rig's sensor
messages, decoded back with the estimator's own decoder (InputRouter)."""
from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
import scipy.io

from support.simulations import config_mechanism
from mbfg_ros.io.bag_reader import bag_custom_data, read_bag
from mbfg_ros.io.log_import import import_log
from mbfg_ros.io.log_map import parse_log_map
from mbfg_ros.io.log_tables import LogError, read_log_table
from mbfg_ros.io.sensor_inputs import InputRouter

OFFSET = 1_600_000_000.0
PERIOD = 0.002


def messy_times(n: int = 400, seed: int = 0) -> np.ndarray:
    """s: 500 Hz rows with 0.1 ms RMS jitter and one 30 ms gap after row 200."""
    rng = np.random.default_rng(seed)
    t = np.arange(n) * PERIOD + rng.normal(0.0, 1e-4, n)
    t[200:] += 0.030
    return t


def motion(t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return 0.3 * np.sin(2.0 * t) + 0.5, 0.1 * np.cos(3.0 * t)


def readings(bag, mech) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{sensor: (stamps int64 ns, values)} as the estimator's decoder reads the bag."""
    router = InputRouter(mech, namespace="/")
    out = defaultdict(list)
    for rec in read_bag(bag):
        for r in router.decode(rec.topic, rec.msgtype, rec.msg, rec.log_time_ns):
            out[r.sensor].append((r.stamp_ns, np.asarray(r.value, float)))
    return {k: (np.array([s for s, _ in v], dtype=np.int64), np.array([x for _, x in v])) for k, v in out.items()}


def slider_map(**extra) -> dict:
    """The slider-crank's two encoders and its known crank torque."""
    doc = {"time": {"column": "t", "unit": "s", "offset": OFFSET},
           "sensors": {"crank_encoder": "crank", "slider_encoder": {"column": "slider", "scale": 0.001}},
           "inputs": {"crank_joint": "torque"}}
    doc.update(extra)
    return doc


def test_a_messy_csv_is_written_with_every_loss_counted(tmp_path):
    """Semicolon-delimited, a comment line, jittered stamps, a gap, repeated rows (a logger
    holding the last value), NaN cells and a repeated stamp: each sensor's count is exact."""
    mech = config_mechanism("slider_crank")
    t = messy_times()
    crank, slider_m = motion(t)
    slider = slider_m * 1000.0                                      # the log's mm
    torque = 0.2 * np.sin(t)
    crank[50:55] = crank[49]                                         # a held encoder: 5 repeats
    torque[100:103] = torque[99]                                     # a held command: 3 repeats
    slider_cells = [repr(x) for x in slider.tolist()]
    slider_cells[120] = ""                                           # empty cell
    slider_cells[121] = "nan"
    t[301] = t[300]                                                  # a repeated stamp, new values
    lines = ["# logged by a test rig", "t;crank;slider;torque"]
    lines += [f"{a!r};{b!r};{c};{d!r}" for a, b, c, d in zip(t.tolist(), crank.tolist(), slider_cells, torque.tolist())]
    log = tmp_path / "run.csv"
    log.write_text("\n".join(lines) + "\n")
    res = import_log(log, parse_log_map(slider_map()), mech, tmp_path / "bag")
    assert res.format == "csv" and res.delimiter == ";" and res.rows == 400 and res.rows_without_time == 0
    c = {ch.channel: ch for ch in res.channels}
    assert (c["crank_encoder"].repeats, c["crank_encoder"].nan, c["crank_encoder"].same_stamp) == (5, 0, 1)
    assert (c["slider_encoder"].repeats, c["slider_encoder"].nan, c["slider_encoder"].same_stamp) == (0, 2, 1)
    assert (c["command:crank_joint"].repeats, c["command:crank_joint"].same_stamp) == (3, 1)
    assert c["crank_encoder"].written == 400 - 5 - 1
    assert c["slider_encoder"].written == 400 - 2 - 1
    for ch in c.values():                   # the 30 ms gap; the five held crank rows leave 12 ms
        gaps = [t[49] - t[0], t[199] - t[0]] if ch.channel == "crank_encoder" else [t[199] - t[0]]
        np.testing.assert_allclose(ch.gap_starts, gaps, atol=1e-9)
        assert ch.gaps == len(gaps) and ch.largest_gap == pytest.approx(0.032, abs=0.002)
        assert ch.rate == pytest.approx(1 / PERIOD, rel=0.02)
    assert 1e-4 < c["slider_encoder"].jitter < 5e-4           # the jitter, and the NaN and same-stamp holes
    got = readings(tmp_path / "bag", mech)
    ts, ys = got["slider_encoder"]
    keep = np.ones(400, bool)
    keep[[120, 121, 301]] = False
    np.testing.assert_allclose((ts - round(OFFSET * 1e9)) / 1e9, t[keep], atol=1e-9)
    np.testing.assert_allclose(ys[:, 0], slider_m[keep], rtol=1e-12)     # mm scaled to m
    tc, yc = got["command:crank_joint"]
    assert tc.size == 400 - 3 - 1
    assert bag_custom_data(tmp_path / "bag")["mbfg.import"]


def test_a_time_going_backwards_is_refused_with_its_row_and_line(tmp_path):
    t = messy_times(50)
    t[31] = t[30] - 0.001
    crank, slider = motion(t)
    log = tmp_path / "run.csv"
    rows = zip(t.tolist(), crank.tolist(), slider.tolist())
    log.write_text("t,crank,slider,torque\n# a comment\n" + "".join(f"{a!r},{b!r},{c!r},0\n" for a, b, c in rows))
    with pytest.raises(LogError) as err:
        import_log(log, parse_log_map(slider_map()), config_mechanism("slider_crank"), tmp_path / "bag")
    msg = str(err.value)
    assert "goes backwards at row 32 (line 34)" in msg and "row 31 (line 33)" in msg and "\n" not in msg
    assert not (tmp_path / "bag").exists()


def test_mat_file_with_struct_fields_matrix_columns_and_ms_times(tmp_path):
    """A .mat log: time in ms in a struct field, encoders in columns of a matrix, a NaN, a
    held value and a gap; a backwards step is refused with its row."""
    mech = config_mechanism("slider_crank")
    t = messy_times(300, seed=1)
    crank, slider = motion(t)
    crank[10:13] = crank[9]
    slider[40] = np.nan
    data = np.column_stack([crank, slider])
    log = tmp_path / "run.mat"
    scipy.io.savemat(log, {"log": {"time_ms": t * 1e3, "torque": 0.1 * t}, "enc": data, "label": "run 1"})
    doc = {"time": {"column": "log.time_ms", "unit": "ms"},
           "sensors": {"crank_encoder": "enc[0]", "slider_encoder": "enc[1]"}, "inputs": {"crank_joint": "log.torque"}}
    res = import_log(log, parse_log_map(doc), mech, tmp_path / "bag")
    c = {ch.channel: ch for ch in res.channels}
    assert res.format == "mat" and res.rows == 300
    assert (c["crank_encoder"].written, c["crank_encoder"].repeats) == (297, 3)
    assert (c["slider_encoder"].written, c["slider_encoder"].nan) == (299, 1)
    assert c["crank_encoder"].gaps == 1
    ts, ys = readings(tmp_path / "bag", mech)["slider_encoder"]
    np.testing.assert_allclose(ts / 1e9, np.delete(t, 40), atol=1e-9)
    np.testing.assert_allclose(ys[:, 0], np.delete(slider, 40), rtol=1e-12)
    t[150] = t[100]
    scipy.io.savemat(log, {"log": {"time_ms": t * 1e3, "torque": 0.1 * t}, "enc": data})
    with pytest.raises(LogError, match=r"goes backwards at row 151: "):
        import_log(log, parse_log_map(doc), mech, tmp_path / "bag2")


def test_a_mat_v73_file_is_refused_with_what_to_do(tmp_path):
    log = tmp_path / "big.mat"
    log.write_bytes(b"MATLAB 7.3 MAT-file, Platform: GLNXA64, Created on: Mon Jan  1 00:00:00 2024 HDF5 schema 1.00 ."
                    + bytes(512))
    with pytest.raises(LogError, match=r"v7\.3 .*HDF5.*-v7"):
        read_log_table(log)


def test_npz_with_integer_nanosecond_stamps_gyro_axes_and_a_load_cell(tmp_path):
    """A 3-axis gyro (columns per axis, deg/s scaled to rad/s) and a load cell from an .npz
    whose time is int64 ns since the epoch: stamps kept to the nanosecond."""
    mech = config_mechanism("spatial_rsur")
    n = 200
    rng = np.random.default_rng(2)
    ns = 1_650_000_000_123_456_789 + np.arange(n, dtype=np.int64) * 2_500_000 + rng.integers(-20_000, 20_000, n)
    gyro = rng.normal(0.0, 30.0, (n, 3))                                     # deg/s
    gyro[70] = gyro[69]                                                      # repeated
    force = rng.normal(0.0, 5.0, n)
    log = tmp_path / "run.npz"
    np.savez(log, stamp=ns, gyro=gyro, force=force, crank=np.linspace(0, 1, n))
    doc = {"time": {"column": "stamp", "unit": "ns"},
           "sensors": {"crank_encoder": "crank", "coupler_axial": "force",
                       "coupler_gyro": {"columns": {"x": "gyro[0]", "y": "gyro[1]", "z": "gyro[2]"},
                                        "scale": np.pi / 180}}}
    res = import_log(log, parse_log_map(doc), mech, tmp_path / "bag")
    c = {ch.channel: ch for ch in res.channels}
    assert (c["coupler_gyro"].written, c["coupler_gyro"].repeats) == (199, 1)
    assert c["coupler_gyro"].topic == "coupler/imu"
    got = readings(tmp_path / "bag", mech)
    tg, yg = got["coupler_gyro"]
    keep = np.arange(n) != 70
    assert np.array_equal(tg, ns[keep])                                    # to the nanosecond
    np.testing.assert_allclose(yg, np.radians(gyro[keep]), rtol=1e-12)
    tf, yf = got["coupler_axial"]
    np.testing.assert_allclose(yf[:, 0], force, rtol=1e-12)
    back = ns.copy()
    back[120] = back[119] - 1
    np.savez(log, stamp=back, gyro=gyro, force=force, crank=np.linspace(0, 1, n))
    with pytest.raises(LogError, match="goes backwards at row 121: "):
        import_log(log, parse_log_map(doc), mech, tmp_path / "bag2")


def test_repeats_keep_writes_held_values_and_jitter_is_the_steps_rms_deviation(tmp_path):
    mech = config_mechanism("slider_crank")
    t = np.arange(400) * PERIOD + np.random.default_rng(5).normal(0.0, 1e-4, 400)
    crank, slider = motion(t)
    crank[20:30] = crank[19]
    log = tmp_path / "run.csv"
    rows = zip(t.tolist(), crank.tolist(), slider.tolist())
    log.write_text("t,crank,slider,torque\n" + "".join(f"{a!r},{b!r},{c!r},0.5\n" for a, b, c in rows))
    res = import_log(log, parse_log_map(slider_map(repeats="keep")), mech, tmp_path / "bag")
    assert all(ch.repeats == 0 and ch.written == 400 and ch.gaps == 0 for ch in res.channels)
    assert res.channels[0].jitter == pytest.approx(np.sqrt(2) * 1e-4, rel=0.2)   # steps of N(0, 1e-4) stamps


def test_a_single_axis_gyro_reads_one_column(tmp_path):
    mech = config_mechanism("fast_crank")
    t = np.arange(50) * 0.0025
    log = tmp_path / "run.tsv"
    log.write_text("time\tw\n" + "".join(f"{a!r}\t{3 * a!r}\n" for a in t.tolist()))
    res = import_log(log, parse_log_map({"time": {"column": "time"}, "sensors": {"crank_gyro": "w"}}), mech,
                     tmp_path / "bag")
    assert res.delimiter == "\t" and res.unmapped == ["crank_encoder", "wrist_pin_load"]
    _, y = readings(tmp_path / "bag", mech)["crank_gyro"]        # the Imu's x, y, z: the gyro reads z
    np.testing.assert_allclose(y[:, 2], 3 * t, rtol=1e-12)
    assert not np.any(y[:, :2])


def test_an_npz_column_shorter_than_the_time_is_named(tmp_path):
    log = tmp_path / "run.npz"
    np.savez(log, t=np.arange(10) * 0.001, q=np.zeros(9), params=np.arange(3.0))
    with pytest.raises(LogError, match="column 'q' has 9 rows, the time column 10"):
        import_log(log, parse_log_map({"time": {"column": "t"}, "sensors": {"crank_encoder": "q"}}),
                   config_mechanism("slider_crank"), tmp_path / "bag")
