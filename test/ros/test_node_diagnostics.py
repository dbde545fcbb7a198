"""The node's own statuses and the sensor changes it logs (no ROS needed)."""
from __future__ import annotations

from mbfg_ros.intake.sensor_health import ERROR, OK, WARN
from mbfg_ros.io import messages as msgs
from mbfg_ros.ros.node_diagnostics import SensorChangeLog

PREFIX = "/mbfg_estimator: sensor "


def status(name: str, level: int, message: str):
    T = msgs.typestore().types
    return T["diagnostic_msgs/msg/DiagnosticStatus"](level=level, name=PREFIX + name, message=message,
                                                      hardware_id="/encoders", values=[])


def test_a_sensor_change_is_logged_once_and_its_return_too():
    log = SensorChangeLog(PREFIX)
    assert log.lines([status("enc", WARN, "no data yet")]) == []
    assert log.lines([status("enc", WARN, "silent for 0.60 s")]) == [
        ("warning", "sensor enc (/encoders) is silent for 0.60 s; estimating from the others")]
    assert log.lines([status("enc", WARN, "silent for 1.60 s")]) == []
    assert log.lines([status("enc", OK, "ok")]) == [("info", "sensor enc (/encoders) is back")]
    lost = status("enc", ERROR, "diverged: ...")
    assert log.lines([lost]) == [("error", "sensor enc (/encoders): diverged: ...")]
    assert log.lines([lost]) == []                    # once per period
    assert log.lines([status("enc", OK, "ok"), lost]) == [("error", "sensor enc (/encoders): diverged: ...")]
    other = msgs.typestore().types["diagnostic_msgs/msg/DiagnosticStatus"](
        level=WARN, name="/mbfg_estimator: solver", message="x", hardware_id="", values=[])
    assert log.lines([other]) == []
