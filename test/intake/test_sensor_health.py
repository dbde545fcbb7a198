"""SensorHealth: the node's per-sensor verdicts over a rolling window (audit cases 13-15)."""
from __future__ import annotations

from mbfg_ros.intake.sensor_health import WARN, RollingCounts, SensorFigures, SensorHealth


class Feed:
    """A 1 kHz encoder and a 200 Hz load cell, one diagnostics tick per second."""

    def __init__(self, window: float = 5.0) -> None:
        self.health = SensorHealth({"enc": 1000.0, "cell": 200.0}, {"enc": "/e", "cell": "/c"}, window)
        self.now = 0.0
        self.c = {s: {"arrived": 0, "usable": 0, "nan": 0, "dup": 0, "stamp": None} for s in ("enc", "cell")}
        self.unusable = {"/e": {}}

    def second(self, enc=1000, cell=200, enc_nan=0, cell_nan=0, enc_dup=0, stamps=1.0, unusable=0):
        for s, n, bad in (("enc", enc, enc_nan), ("cell", cell, cell_nan)):
            c = self.c[s]
            c["arrived"] += n
            c["usable"] += n - bad
            c["nan"] += bad
            c["stamp"] = (c["stamp"] or 0.0) + stamps
        self.c["enc"]["arrived"] += enc_dup
        self.c["enc"]["dup"] += enc_dup
        if unusable:
            self.unusable["/e"]["joint j has no position"] = self.unusable["/e"].get("joint j has no position", 0) + unusable
        self.now += 1.0
        self.health.update(self.now, {s: SensorFigures(c["arrived"], c["usable"],
                                                       {"not finite": c["nan"], "duplicate stamps": c["dup"]},
                                                       c["dup"], c["stamp"]) for s, c in self.c.items()},
                           {t: dict(r) for t, r in self.unusable.items()})
        return self.health.verdicts()


def test_rolling_counts_give_the_increase_over_the_window():
    r = RollingCounts(3.0)
    for t in range(10):
        r.update(float(t), {"x": t * 10})
    assert r.span == 3.0 and r.delta("x") == 30 and r.last_step("x") == 10


def test_clean_inputs_have_no_verdict():
    f = Feed()
    for _ in range(8):
        assert f.second() == {}


def test_a_sensor_sending_only_nan_is_warn_with_the_reason_and_it_clears():
    f = Feed()
    for _ in range(3):
        f.second()
    for _ in range(6):
        v = f.second(cell_nan=200)
    assert v["cell"][0] == WARN and v["cell"][1].startswith("none of its 1000 readings in the last 5 s was usable")
    assert "1000 not finite" in v["cell"][1] and "enc" not in v
    for _ in range(5):
        v = f.second()
    assert v == {}                                     # gone for a window: cleared


def test_every_sensor_nan_says_so_for_each():
    f = Feed()
    for _ in range(7):
        v = f.second(enc_nan=1000, cell_nan=200)
    assert set(v) == {"enc", "cell"} and all("was usable" in m for _, m in v.values())


def test_messages_without_readings_are_warn_with_the_decoder_reason():
    f = Feed()
    for _ in range(7):
        v = f.second(enc=0, unusable=1000, stamps=0.0)
    assert v["enc"] == (WARN, "messages on /e arrive but none holds a usable reading in the last 5 s: "
                              "5000 x joint j has no position")


def test_loss_is_judged_per_window_and_a_burst_later_does_not_hide_it():
    f = Feed()
    f.second()
    verdicts = []
    for _ in range(5):
        verdicts.append(f.second(enc=600))             # 40 % lost
    assert "40 % of the readings its configured 1000 Hz gives are missing" in verdicts[-1]["enc"][1]
    for _ in range(3):
        f.second(enc=2000)                             # a burst at twice the rate
    for _ in range(6):
        v = f.second()
    assert v == {}
    assert 1900 <= f.health.missing_total["enc"] <= 2100       # 5 s x 400 lost, the burst not netted
    assert f.health.window_values("enc")["missing_total_estimate"] == round(f.health.missing_total["enc"])


def test_duplicates_count_as_unused_not_as_delivered():
    f = Feed()
    for _ in range(7):
        v = f.second(enc=1000, enc_dup=300)
    assert "not used: 1500 duplicate stamps" in v["enc"][1]


def test_a_restart_forgets_the_window():
    f = Feed()
    for _ in range(6):
        f.second(cell_nan=200)
    f.health.restart()
    assert f.health.verdicts() == {}


def test_a_failing_sensor_is_a_warning_while_the_estimate_holds_and_an_error_once_lost():
    from mbfg_ros.estimation.divergence import DivergenceMonitor
    from mbfg_ros.intake.sensor_health import ERROR, WARN, divergence_verdicts
    mon = DivergenceMonitor(window=0.5, limit=5.0)
    for k in range(100):
        mon.add("crank_encoder", k * 0.005, [1.0])
        mon.add("crank_gyro", k * 0.005, [12.0, 12.0])
    v = divergence_verdicts(mon)
    assert list(v) == ["crank_gyro"]
    level, why = v["crank_gyro"]
    assert level == WARN and why.startswith("fitted worse than its noise")
    assert "12.0 sigma" in why and "0.5 s" in why and "limit 5 sigma" in why and "while the estimate holds" in why
    mon.open["crank_gyro"].note = "encoders show 72 rad/s: set mechanism.top_speed: 72"
    mon.lose("crank_gyro", "no sensor agrees with the estimate")
    level, why = divergence_verdicts(mon)["crank_gyro"]
    assert level == ERROR and why.startswith("diverged: ") and "the estimate is lost (no sensor agrees" in why
    assert why.endswith("encoders show 72 rad/s: set mechanism.top_speed: 72")