"""The sensor kinds, in the order everything iterates them.

The config parser reads one section per kind, the Mechanism compiles the sensors in this order
(so the estimator's rows, its streams and the simulator's channels come in it), and the input
router, the simulator, ``mbfg tune``, the replay's residuals and the node iterate it. Adding a
kind is one module (a :class:`~mbfg_ros.sensors.base.SensorKind` and its
:class:`~mbfg_ros.sensors.base.SensorModel`) and its line here.
"""
from __future__ import annotations

from typing import Callable

from mbfg_ros.sensors import accelerometer, command, encoder, gyro, load_cell
from mbfg_ros.sensors.base import SensorKind, SensorModel, TopicInput

SENSOR_KINDS: tuple[SensorKind, ...] = (encoder.KIND, gyro.KIND, load_cell.KIND, accelerometer.KIND)
"""Every kind of measuring sensor, each with its config section."""

KIND_NAMES: tuple[str, ...] = tuple(k.name for k in SENSOR_KINDS) + (command.KIND,)
"""Every channel kind: the sensors' and ``command`` (a known input effort)."""

SECTIONS: tuple[str, ...] = tuple(k.section for k in SENSOR_KINDS)
"""The lists under ``sensors:`` of a config."""


def kind_named(name: str) -> SensorKind:
    """The sensor kind called ``name`` (KeyError for another)."""
    for k in SENSOR_KINDS:
        if k.name == name:
            return k
    raise KeyError(name)


def describe(facts: dict) -> str:
    """What a sensor of ``mbfg check``'s facts measures, in one phrase."""
    return kind_named(facts["kind"]).model.describe(facts)


def channels(mech) -> list[SensorModel]:
    """Every input of ``mech``: its sensors (in kind order), then its known inputs."""
    return [*mech.sensors, *command.known_inputs(mech)]


class TopicConflict(ValueError):
    """Two inputs that cannot share a topic (``model``: the second one)."""

    def __init__(self, message: str, model: SensorModel) -> None:
        super().__init__(message)
        self.model = model


def topic_inputs(models: list[SensorModel], topic_of: Callable[[str], str] = lambda t: t) -> dict[str, TopicInput]:
    """{topic: its TopicInput} of ``models`` (their topics mapped by ``topic_of``, e.g. resolved
    and remapped), in first-use order; TopicConflict when one topic would carry two message types
    or two inputs that cannot share it (two gyros, an Imu's sensors at different rates)."""
    out: dict[str, TopicInput] = {}
    for model in models:
        topic = topic_of(model.topic)
        route = out.get(topic)
        if route is None:
            route = out[topic] = model.input_type(topic)
        elif type(route) is not model.input_type:
            raise TopicConflict(f"topic {topic} is used by sensors of different message types", model)
        try:
            route.add(model)
        except ValueError as exc:
            raise TopicConflict(str(exc), model) from None
    return out
