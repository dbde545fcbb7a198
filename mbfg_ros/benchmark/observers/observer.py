"""What every benchmark observer does, and the loop that runs one over a recording.

An observer advances in fixed time steps of ``dt`` seconds (the benchmark's 5 ms). At step 0 it
holds the config's initial state (the observer does not know the truth's initial error); at
every later step it first predicts from the previous step, then, when readings were taken at
that step's time, updates with them. Its output after each step is a full
:class:`~mbfg_ros.benchmark.observers.independent_model.MechanismState` of its model.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from mbfg_ros.benchmark.observers.independent_model import MechanismState


class Observer(Protocol):
    """A filter on the mechanism model (see the module docstring)."""
    name: str

    def predict(self) -> None:
        """Advance the estimate by one time step (the model's transition)."""

    def update(self, names: list[str], values: list[np.ndarray]) -> None:
        """Correct the estimate with the readings of sensors ``names`` taken at this step."""

    def output(self) -> MechanismState:
        """The current estimate of the full state."""


@dataclass
class ObserverTrack:
    """The estimates of every step: q, v, a (N, n), lam (N, m)."""
    q: np.ndarray
    v: np.ndarray
    a: np.ndarray
    lam: np.ndarray


def run_observer(observer: Observer, readings: list[list[tuple[str, np.ndarray]]]) -> ObserverTrack:
    """Run ``observer`` over ``len(readings)`` steps; ``readings[i]`` are the (sensor, value) pairs
    taken at step i. Returns the estimate after each step."""
    out: list[MechanismState] = []
    for i, step in enumerate(readings):
        if i:
            observer.predict()
        if step:
            observer.update([name for name, _ in step], [value for _, value in step])
        s = observer.output()
        out.append(MechanismState(s.q.copy(), s.v.copy(), s.a.copy(), s.lam.copy()))
    return ObserverTrack(np.array([s.q for s in out]), np.array([s.v for s in out]),
                         np.array([s.a for s in out]), np.array([s.lam for s in out]))
