"""A simulated rig as an endless stream of timed messages, simulated chunk by chunk (no ROS).

The ``sim_rig`` node publishes what this produces. It drives the simulator's own pieces, so a
live rig sends exactly what ``mbfg simulate`` writes to a bag for the same scenario and sensor
options: :class:`~mbfg_ros.sim.forward.ForwardSimulator` integrates the truth ahead in chunks
of ``chunk`` seconds; :func:`~mbfg_ros.sim.sensors.synthesize` and
:func:`~mbfg_ros.sim.ground_truth.ground_truth` sample each chunk (a chunk's truth is
evaluated once per time and level: the truth and a load cell at one rate share it). Each message
is serialized (CDR) with the time (s of rig time) at which a rig would publish it: a sensor
message at its receive time (stamp + ``delay``), a truth message at its stamp. Stamps are
``epoch + t``.

Serialisation: a chunk's messages of one topic are filled at once into byte templates
(:mod:`mbfg_ros.io.simulation_templates`); a chunk the templates do not cover (muted sensors, a
gyro bias, a wrench of several load cells) is built message by message by
:mod:`mbfg_ros.io.simulation_messages` and serialized one by one. Both give the same bytes
(test/ros/test_live_rig.py).

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
from mbfg_ros.io.simulation_templates import SimulationTemplates, TopicRows
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.sim.forward import ForwardSimulator
from mbfg_ros.sim.ground_truth import ground_truth
from mbfg_ros.sim.scenario import Scenario, truth_mechanism
from mbfg_ros.sim.sensors import SensorOptions, samples_from_series, sensor_channels, synthesize_series


@dataclass(frozen=True)
class TimedMessage:
    """One message to publish at rig time ``time`` (s): topic, ROS type, header stamp (ns), CDR."""
    time: float
    topic: str
    msgtype: str
    stamp_ns: int
    cdr: bytes


@dataclass
class MessageBlock:
    """A chunk's messages sorted by publish time: ``time`` (K,) s of rig time; per message its
    topic, ROS type, header stamp (ns) and CDR bytes."""
    time: np.ndarray
    topic: list[str]
    msgtype: list[str]
    stamp_ns: np.ndarray
    cdr: list[bytes]

    def __len__(self) -> int:
        return len(self.cdr)

    def messages(self) -> list[TimedMessage]:
        return [TimedMessage(float(t), topic, mt, int(st), cdr)
                for t, topic, mt, st, cdr in zip(self.time, self.topic, self.msgtype, self.stamp_ns, self.cdr)]

    @classmethod
    def of_rows(cls, rows: list[TopicRows], epoch_ns: int) -> "MessageBlock":
        """The messages of ``rows`` (publish time = receive time) in publish-time order."""
        if not rows:
            return cls(np.zeros(0), [], [], np.zeros(0, np.int64), [])
        receive = np.concatenate([r.receive_ns for r in rows])
        order = np.argsort(receive, kind="stable")
        topic = [r.topic for r in rows for _ in range(len(r.receive_ns))]
        msgtype = [r.msgtype for r in rows for _ in range(len(r.receive_ns))]
        cdr = [row.tobytes() for r in rows for row in r.rows]
        return cls((receive[order] - epoch_ns) * 1e-9, [topic[i] for i in order], [msgtype[i] for i in order],
                   np.concatenate([r.stamp_ns for r in rows])[order], [cdr[i] for i in order])


class _ChunkView:
    """The simulated truth over [t0, t0 + duration] seen with its own time starting at 0 (what
    synthesize() and ground_truth() read from a Trajectory)."""

    def __init__(self, sim: ForwardSimulator, scenario: Scenario, t0: float, duration: float) -> None:
        self.mechanism = sim.mech
        self.scenario = scenario
        self._sim = sim
        self._t0 = t0
        self.duration = duration
        self._evaluated: dict[bytes, tuple[int, tuple]] = {}    # times -> (level, truth)

    def state_at(self, times, level: int = 2):
        rel = np.atleast_1d(np.asarray(times, float))
        key = rel.tobytes()
        seen = self._evaluated.get(key)
        if seen is not None and seen[0] >= level:
            return seen[1]
        t = rel + self._t0
        # the simulator's evaluator computes only what ``level`` asks for (positions only for
        # encoders); ForwardSimulator.state_at always computes accelerations
        evaluator = getattr(self._sim, "_eval", None)
        if evaluator is not None:
            q, v, a, lam, tau, u, _ = evaluator.evaluate(t, level)
        else:
            q, v, a, lam, tau, u, _ = self._sim.state_at(t)
            level = 2
        self._evaluated[key] = (level, (q, v, a, lam, tau, u))
        return q, v, a, lam, tau, u

    def input_efforts(self, times):
        return self._sim.inputs.efforts(np.atleast_1d(np.asarray(times, float)) + self._t0)


class LiveRig:
    """Simulates ``scenario`` on the rig of ``mech``'s config chunk by chunk (see module doc)."""

    def __init__(self, mech: Mechanism, scenario: Scenario, sensors: SensorOptions | None = None,
                 *, epoch_ns: int = int(msgs.DEFAULT_EPOCH * 1e9), chunk: float = 0.1,
                 truth_rate: float = 200.0, publish_truth: bool = True,
                 mute: dict[str, float] | None = None, templates: bool = True) -> None:
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
                                "of samples of every sensor (e.g. 0.1 or 0.5 s for 1000/400/200 Hz)")
        self.sim = ForwardSimulator(self.truth, scenario)
        # byte templates unless every chunk needs the per-message path (see the module docstring)
        covered = templates and not self.mute and not (self.sensors.gyro_bias or self.sensors.gyro_bias_walk)
        self.templates = SimulationTemplates(self.truth, self.channels) if covered else None
        self.chunks_by_message = 0         # chunks the templates did not cover
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
        return self.next_block().messages()

    def next_block(self) -> MessageBlock:
        """Simulate the next chunk; its messages sorted by publish time (empty when finished)."""
        if self.finished:
            return MessageBlock.of_rows([], self.epoch_ns)
        t0 = self.index * self.chunk
        t1 = min(t0 + self.chunk, self.duration)
        seed = int(np.random.SeedSequence([int(self.sensors.seed) & 0xFFFFFFFF, self.index])
                   .generate_state(1)[0])
        self.index += 1
        self.sim.advance_to(t1)
        self.sim.forget_before(t0)        # only this chunk is evaluated: memory stays flat
        view = _ChunkView(self.sim, self.scenario, t0, t1 - t0)
        options = replace(self.sensors, seed=seed, gyro_bias=0.0, gyro_bias_walk=False)
        series = synthesize_series(view, options)
        gt = ground_truth(view, self.truth_rate) if self.publish_truth else None
        base_ns = self.epoch_ns + msgs.seconds_to_ns(t0)
        if self.templates is not None:
            rows = self.templates.sensor_rows(series, base_ns)
            truth = self.templates.truth_rows(gt, base_ns) if gt is not None else []
            if rows is not None and truth is not None:
                return MessageBlock.of_rows(rows + truth, self.epoch_ns)
        return self._block_by_message(series, gt, t0, base_ns)

    def _block_by_message(self, series, gt, t0: float, base_ns: int) -> MessageBlock:
        """The chunk's messages built and serialized one by one (the faults applied here)."""
        self.chunks_by_message += 1
        samples = self._faults(samples_from_series(series), t0)
        out: list[TimedMessage] = []
        for m in sensor_messages(samples, self.truth, base_ns, self.channels):
            out.append(TimedMessage((m.log_time_ns - self.epoch_ns) * 1e-9, m.topic, m.msgtype,
                                    msgs.time_to_ns(m.msg.header.stamp), bytes(msgs.serialize(m.msg))))
        if gt is not None:
            for m in truth_messages(gt, self.truth, base_ns):
                out.append(TimedMessage((m.log_time_ns - self.epoch_ns) * 1e-9, m.topic, m.msgtype,
                                        msgs.time_to_ns(m.msg.header.stamp), bytes(msgs.serialize(m.msg))))
        out.sort(key=lambda m: m.time)
        return MessageBlock(np.array([m.time for m in out]), [m.topic for m in out], [m.msgtype for m in out],
                            np.array([m.stamp_ns for m in out], np.int64), [m.cdr for m in out])

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
