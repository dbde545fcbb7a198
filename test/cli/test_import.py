"""`mbfg import` and `mbfg replay LOG --map`: the command line, and the round trip of a
simulated rig through a CSV log (the estimate is the same as from the simulator's bag)."""
from __future__ import annotations

import json
from collections import defaultdict

import numpy as np
import pytest
import yaml

from conftest import CONFIG
from support.replay_bags import simulated_bag
from support.simulations import config_mechanism
from mbfg_ros.cli.main import main
from mbfg_ros.io import messages as msgs
from mbfg_ros.io.bag_reader import read_bag
from mbfg_ros.io.sensor_inputs import InputRouter
from mbfg_ros.replay.metrics import compare
from mbfg_ros.replay.session import ReplayOptions, replay_bag

EPOCH = msgs.DEFAULT_EPOCH


def held_csv(bag, mech, path) -> int:
    """The bag's readings as a logger's table: one row per encoder reading (1 kHz), the load
    cell's last reading held in every row until its next (200 Hz): the load cell repeats."""
    router = InputRouter(mech, namespace="/")
    got = defaultdict(list)
    for rec in read_bag(bag, ["/encoders", "/rocker_pin/wrench"]):
        for r in router.decode(rec.topic, rec.msgtype, rec.msg, rec.log_time_ns):
            got[r.sensor].append((r.stamp_ns, float(r.value[0])))
    epoch_ns = msgs.seconds_to_ns(EPOCH)
    enc_ns = np.array([s for s, _ in got["crank_encoder"]], dtype=np.int64)
    load_ns = np.array([s for s, _ in got["rocker_pin_load"]], dtype=np.int64)
    load = np.array([y for _, y in got["rocker_pin_load"]])
    held = load[np.searchsorted(load_ns, enc_ns, side="right") - 1]
    rows = [f"{(s - epoch_ns) / 1e9!r},{q!r},{f!r}"
            for s, (_, q), f in zip(enc_ns.tolist(), got["crank_encoder"], held.tolist())]
    path.write_text("time_s,crank_rad,pin_force_N\n" + "\n".join(rows) + "\n")
    return len(load)


@pytest.fixture(scope="module")
def four_bar_log(tmp_path_factory):
    """(simulated bag, its CSV export, the map) of 3 s of the four-bar."""
    d = tmp_path_factory.mktemp("four_bar_log")
    bag = simulated_bag(d / "sim", "four_bar", duration=3.0)
    csv = d / "log.csv"
    loads = held_csv(bag, config_mechanism("four_bar"), csv)
    m = d / "map.yaml"
    m.write_text(yaml.safe_dump({"config": str(CONFIG / "four_bar.yaml"),
                                 "time": {"column": "time_s", "unit": "s", "offset": EPOCH},
                                 "sensors": {"crank_encoder": "crank_rad", "rocker_pin_load": "pin_force_N"}}))
    return bag, csv, m, loads


def test_round_trip_through_a_csv_log_gives_the_same_estimate(four_bar_log, tmp_path, capsys):
    bag, csv, map_file, loads = four_bar_log
    out = tmp_path / "imported"
    assert main(["import", str(csv), "--map", str(map_file), "--out", str(out),
                 "--json", str(tmp_path / "i.json")]) == 0
    text = capsys.readouterr().out
    assert "rocker_pin_load" in text and "Wrote 2 topics" in text
    facts = json.loads((tmp_path / "i.json").read_text())
    load = facts["channels"]["rocker_pin_load"]
    assert load["written"] == loads and load["repeats"] == 3000 - loads       # the held rows dropped
    assert facts["channels"]["crank_encoder"]["written"] == 3000
    assert load["rate"] == pytest.approx(200.0) and load["jitter"] < 1e-9
    mech = config_mechanism("four_bar")
    original = replay_bag(bag, mech, ReplayOptions())
    imported = replay_bag(out, mech, ReplayOptions())
    assert imported.truth is None and imported.epoch_ns == original.epoch_ns
    a = compare(mech, original.estimates, original.truth).rmse
    b = compare(mech, imported.estimates, original.truth).rmse
    for joint in a:
        for what in ("position", "velocity", "acceleration"):
            assert b[joint][what] == pytest.approx(a[joint][what], rel=1e-9), (joint, what)
    assert a["crank_joint"]["position"] < 0.05


def test_replay_reads_a_log_through_its_map(four_bar_log, tmp_path, capsys):
    _, csv, map_file, _ = four_bar_log
    j = tmp_path / "r.json"
    assert main(["replay", str(csv), "--map", str(map_file), "--config", str(CONFIG / "four_bar.yaml"),
                 "--json", str(j), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Imported ") and "Replayed " in out
    facts = json.loads(j.read_text())
    assert facts["keyframes"] >= 590 and facts["counts"]["crank_encoder"]["used"] == 3000


def test_a_time_going_backwards_exits_2_with_one_line(tmp_path, capsys):
    log = tmp_path / "bad.csv"
    log.write_text("time_s,crank_rad\n0.0,0.1\n0.001,0.1\n0.0005,0.2\n")
    m = tmp_path / "map.yaml"
    m.write_text(yaml.safe_dump({"time": {"column": "time_s"}, "sensors": {"crank_encoder": "crank_rad"}}))
    code = main(["import", str(log), "--map", str(m), "--config", str(CONFIG / "four_bar.yaml"),
                 "--out", str(tmp_path / "bag")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert "bad.csv: the time column 'time_s' goes backwards at row 3 (line 4): 0.0005 s after 0.001 s" in err
    assert not (tmp_path / "bag").exists()


def test_a_map_without_config_needs_one_on_the_command_line(tmp_path, capsys):
    log = tmp_path / "log.csv"
    log.write_text("t,q\n0,0\n")
    m = tmp_path / "map.yaml"
    m.write_text(yaml.safe_dump({"time": {"column": "t"}, "sensors": {"crank_encoder": "q"}}))
    assert main(["import", str(log), "--map", str(m), "--out", str(tmp_path / "bag")]) == 2
    assert "names no config" in capsys.readouterr().err
    assert main(["import", str(log), "--map", str(m), "--out", str(tmp_path / "bag"),
                 "--config", str(CONFIG / "five_bar.yaml")]) == 2
    assert "field 'sensors.crank_encoder': unknown sensor; did you mean 'crank" in capsys.readouterr().err
