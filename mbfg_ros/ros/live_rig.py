"""A simulated rig as an endless stream of timed messages, simulated chunk by chunk (no ROS).

The ``sim_rig`` node publishes what this produces. It drives the simulator's own pieces, so a
live rig sends exactly what ``mbfg simulate`` writes to a bag for the same scenario and sensor
options: :class:`~mbfg_ros.sim.forward.ForwardSimulator` integrates the truth ahead in chunks
of ``chunk`` seconds; :func:`~mbfg_ros.sim.sensors.synthesize` and
:func:`~mbfg_ros.sim.ground_truth.ground_truth` sample each chunk; the messages come from
:mod:`mbfg_ros.io.simulation_messages`. Each message is serialized (CDR) with the time (s of
rig time) at which a rig would publish it: a sensor message at its receive time (stamp +
``delay``), a truth message at its stamp. Stamps are ``epoch + t``.

Chunks: every rate (sensors, known inputs, truth) must give a whole number of samples per chunk
so that samples stay on their k / rate grid across chunks (0.1 s fits 1000, 400, 200 Hz).
Random draws are seeded per chunk from (seed, chunk index), so a seed gives the same run;
a constant gyro bias and its random walk are drawn here (they span chunks). ``mute`` silences
sensors from a given rig time on (fault tests: a sensor that goes quiet).
"""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, replace

import numpy as np

from mbfg_ros.errors import MbfgError
from mbfg_ros.io import messages as msgs
from mbfg_ros.io.simulation_messages import sensor_messages, sensor_topics, truth_messages, truth_topics
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.sim.forward import ForwardSimulator
from mbfg_ros.sim.ground_truth import ground_truth
from mbfg_ros.sim.scenario import Scenario, truth_mechanism
from mbfg_ros.sim.sensors import SensorOptions, sensor_channels, synthesize


@dataclass(frozen=True)
class TimedMessage:
    """One message to publish at rig time ``time`` (s): topic, ROS type, header stamp (ns), CDR."""
    time: float
    topic: str
    msgtype: str
    stamp_ns: int
    cdr: bytes


class _ChunkView:
    """The simulated truth over [t0, t0 + duration] seen with its own time starting at 0 (what
    synthesize() and ground_truth() read from a Trajectory)."""

    def __init__(self, sim: ForwardSimulator, scenario: Scenario, t0: float, duration: float) -> None:
        self.mechanism = sim.mech
        self.scenario = scenario
        self._sim = sim
        self._t0 = t0
        self.duration = duration

    def state_at(self, times, level: int = 2):
        t = np.atleast_1d(np.asarray(times, float)) + self._t0
        # the simulator's evaluator computes only what ``level`` asks for (positions only for
        # encoders); ForwardSimulator.state_at always computes accelerations
        evaluator = getattr(self._sim, "_eval", None)
        if evaluator is not None:
            q, v, a, lam, tau, u, _ = evaluator.evaluate(t, level)
        else:
            q, v, a, lam, tau, u, _ = self._sim.state_at(t)
        return q, v, a, lam, tau, u

    def input_efforts(self, times):
        return self._sim.inputs.efforts(np.atleast_1d(np.asarray(times, float)) + self._t0)


class LiveRig:
    """Simulates ``scenario`` on the rig of ``mech``'s config chunk by chunk (see module doc)."""

    def __init__(self, mech: Mechanism, scenario: Scenario, sensors: SensorOptions | None = None,
                 *, epoch_ns: int = int(msgs.DEFAULT_EPOCH * 1e9), chunk: float = 0.1,
                 truth_rate: float = 200.0, publish_truth: bool = True,
                 mute: dict[str, float] | None = None) -> None:
        self.sensors = sensors or SensorOptions()
        self.scenario = scenario
        self.truth = truth_mechanism(mech, scenario)
        self.channels = sensor_channels(self.truth, self.sensors)
        self.epoch_ns = int(epoch_ns)
        self.chunk = float(chunk)
        self.truth_rate = float(truth_rate)
        self.publish_truth = publish_truth
        names = {ch.name for ch in self.channels}
        self.mute = dict(mute or {})
        for name in self.mute:
            if name not in names:
                raise MbfgError(f"cannot mute {name!r}: not a sensor of this rig (sensors: "
                                f"{', '.join(sorted(names))})")
        rates = [(ch.name, ch.rate) for ch in self.channels]
        if publish_truth:
            rates.append(("ground truth", self.truth_rate))
        for name, rate in rates:
            count = self.chunk * rate
            if abs(count - round(count)) > 1e-6 * max(1.0, count) or round(count) < 1:
                raise MbfgError(f"the rig's chunk of {self.chunk:g} s holds {count:g} samples of "
                                f"{name} at {rate:g} Hz: choose a chunk that holds a whole number "
                                "of samples of every sensor (e.g. 0.1 s for 1000/400/200 Hz)")
        self.sim = ForwardSimulator(self.truth, scenario)
        self.index = 0                     # next chunk
        self._bias_rng = {}
        self._bias = {}
        self._bias_t = {}
        for ch in self.channels:
            if ch.kind == "gyro":
                rng = np.random.default_rng([int(self.sensors.seed) & 0xFFFFFFFF,
                                             zlib.crc32(ch.name.encode()), 0xB1A5])
                self._bias_rng[ch.name] = rng
                self._bias[ch.name] = self.sensors.gyro_bias * rng.standard_normal(3)
                self._bias_t[ch.name] = 0.0

    @property
    def topics(self) -> dict[str, str]:
        """{topic: message type} of everything the rig publishes."""
        out = dict(sensor_topics(self.truth))
        if self.publish_truth:
            out.update(truth_topics(self.truth))
        return out

    @property
    def simulated(self) -> float:
        """Rig time simulated so far (s)."""
        return self.index * self.chunk if self.index * self.chunk < self.duration else self.duration

    @property
    def duration(self) -> float:
        return float(self.scenario.duration)

    @property
    def finished(self) -> bool:
        return self.index * self.chunk >= self.duration - 1e-9

    def next_chunk(self) -> list[TimedMessage]:
        """Simulate the next chunk; its messages sorted by publish time (empty when finished)."""
        if self.finished:
            return []
        t0 = self.index * self.chunk
        t1 = min(t0 + self.chunk, self.duration)
        seed = int(np.random.SeedSequence([int(self.sensors.seed) & 0xFFFFFFFF, self.index])
                   .generate_state(1)[0])
        self.index += 1
        self.sim.advance_to(t1)
        self.sim.forget_before(t0)        # only this chunk is evaluated: memory stays flat
        view = _ChunkView(self.sim, self.scenario, t0, t1 - t0)
        options = replace(self.sensors, seed=seed, gyro_bias=0.0, gyro_bias_walk=False)
        samples = self._faults(synthesize(view, options), t0)
        base_ns = self.epoch_ns + msgs.seconds_to_ns(t0)
        out: list[TimedMessage] = []
        for m in sensor_messages(samples, self.truth, base_ns, self.channels):
            out.append(TimedMessage((m.log_time_ns - self.epoch_ns) * 1e-9, m.topic, m.msgtype,
                                    msgs.time_to_ns(m.msg.header.stamp), bytes(msgs.serialize(m.msg))))
        if self.publish_truth:
            gt = ground_truth(view, self.truth_rate)
            for m in truth_messages(gt, self.truth, base_ns):
                out.append(TimedMessage((m.log_time_ns - self.epoch_ns) * 1e-9, m.topic, m.msgtype,
                                        msgs.time_to_ns(m.msg.header.stamp), bytes(msgs.serialize(m.msg))))
        out.sort(key=lambda m: m.time)
        return out

    def _faults(self, samples, t0: float):
        """Gyro bias (constant + walk, continuous across chunks) and muted sensors."""
        walk_on = self.sensors.gyro_bias_walk
        out = []
        for s in samples:
            t = t0 + s.stamp
            if s.sensor in self.mute and t >= self.mute[s.sensor]:
                continue
            if s.kind == "gyro" and (self.sensors.gyro_bias or walk_on):
                if walk_on:
                    k = next(i for i, ch in enumerate(self.channels) if ch.name == s.sensor)
                    walk = self.truth.gyros[self.channels[k].index].config.bias_instability
                    dt = max(t - self._bias_t[s.sensor], 0.0)
                    self._bias[s.sensor] = self._bias[s.sensor] + walk * math.sqrt(dt) * \
                        self._bias_rng[s.sensor].standard_normal(3)
                    self._bias_t[s.sensor] = t
                s = replace(s, value=s.value + self._bias[s.sensor])
            out.append(s)
        return out
