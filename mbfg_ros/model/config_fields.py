"""Fields shared by the mechanism config's sections: the ranges of its numbers and the readers of a
sensor's common fields (rate, noise, topic, axes, time offset).

The config parser (:mod:`mbfg_ros.model.config`) and every sensor kind's own section
(:mod:`mbfg_ros.sensors`) read them the same way, so a rate, a noise or a topic is refused with
the same line whichever section it is in.
"""
from __future__ import annotations

from typing import Any

from mbfg_ros.model.yaml_reader import YamlNode

AXES = ("x", "y", "z")
"""The axes of a sensor frame, as the config names them."""

# Bounds of the numbers of a config (the node's parameters use the same ones). A value outside
# them is refused with the field and the range: an absurd number (a keyframe rate of 1e9 Hz, a
# gravity of 1e300) would otherwise exhaust memory or hang the estimator instead of failing.
KEYFRAME_RATE_RANGE = (1.0, 2000.0)
"""Hz: estimator.keyframe_rate (and the node's keyframe_rate parameter)."""
LAG_RANGE = (0.01, 60.0)
"""s: estimator.lag (and the node's lag parameter)."""
MAX_WINDOW_KEYFRAMES = 20000
"""keyframes: lag x keyframe_rate, the smoother's window (10 s at 2 kHz, 100 s at 200 Hz)."""
SENSOR_RATE_RANGE = (0.01, 100000.0)
"""Hz: a sensor's nominal rate."""
NOISE_RANGE = (1e-9, 1e9)
"""SI: every standard deviation (sensor noise, estimator.noise.*)."""
GRAVITY_LIMIT = 1000.0
"""m/s^2: the largest gravity magnitude (about 100 g)."""
ROBUST_THRESHOLD_RANGE = (0.01, 1000.0)
"""sigmas: estimator.robust_loss.threshold."""


def rate_field(node: YamlNode, default: float) -> float:
    """``rate``: a sensor's nominal rate, Hz, within :data:`SENSOR_RATE_RANGE`."""
    return node.float("rate", default, positive=True, min=SENSOR_RATE_RANGE[0],
                      max=SENSOR_RATE_RANGE[1], unit="Hz")


def noise_field(node: YamlNode, key: str = "noise", default: Any = None) -> float:
    """A standard deviation within :data:`NOISE_RANGE` (required without ``default``)."""
    if default is None:
        return node.float(key, positive=True, min=NOISE_RANGE[0], max=NOISE_RANGE[1])
    return node.float(key, default, positive=True, min=NOISE_RANGE[0], max=NOISE_RANGE[1])


def topic_field(node: YamlNode) -> str:
    """``topic``: relative (resolved in the node's namespace, the default) or absolute; not
    private (``~``), which would differ between the rig and the estimator."""
    topic = node.str("topic")
    if not topic or " " in topic or topic.endswith("/") or "//" in topic:
        raise node.error("topic", "not a valid ROS topic name", topic)
    if topic.startswith("~"):
        raise node.error("topic", "a private (~) name would differ between the rig and the "
                         "estimator; use a relative or absolute name", topic)
    return topic


def axes_field(node: YamlNode) -> tuple[str, ...]:
    """``axes``: the measured axes of a sensor frame (a list of x, y, z; default all three)."""
    axes = node.str_list("axes", list(AXES))
    for a in axes:
        if a not in AXES:
            raise node.error("axes", "axes are a list of x, y, z", axes)
    return tuple(axes)


TIME_OFFSET_LIMIT = 1.0
"""s: the largest magnitude of a sensor's ``time_offset`` (a lag of a second is a clock set
wrong, or milliseconds written as seconds)."""


def time_offset_field(node: YamlNode) -> float:
    """``time_offset`` (s, default 0): the sensor's clock lags the rig's by this much; its
    reading stamped t was taken at t - time_offset (the estimator takes it there). Within
    +-:data:`TIME_OFFSET_LIMIT`."""
    return node.float("time_offset", 0.0, min=-TIME_OFFSET_LIMIT, max=TIME_OFFSET_LIMIT, unit="s")


SCALE_RANGE = (1e-3, 1e3)
"""A sensor's calibration scale factor."""


def scale_field(node: YamlNode, key: str, length: int) -> tuple[float, ...]:
    """A sensor's calibration scale factor(s): ``length`` numbers (a gyro's per axis; a single
    number applies to every axis), each within :data:`SCALE_RANGE` (default 1)."""
    value = node.raw(key, None)
    if value is None:
        return (1.0,) * length
    out = node.vector(key, length) if isinstance(value, (list, tuple)) else (node.float(key),) * length
    for v in out:
        if not SCALE_RANGE[0] <= v <= SCALE_RANGE[1]:
            raise node.error(key, "a scale factor is a number from 0.001 to 1000", value)
    return tuple(float(v) for v in out)
