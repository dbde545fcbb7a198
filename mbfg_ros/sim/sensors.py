"""Synthetic sensor samples from a simulated truth (the sensors of a mechanism config).

Each sensor of the config (encoders, gyros, load cells, accelerometers) and each known-input
joint (a ``command``: the effort a controller sends, published as sensor_msgs/JointState effort)
is a *channel* sampled at its rate; the value is the sensor's numeric model (its kind's, in
:mod:`mbfg_ros.sensors`) evaluated on the truth at the sample's own time, plus the faults of
:class:`SensorOptions` (all off by default except the Gaussian noise and the encoder quantisation
the config describes).

Timing: a channel at rate r has nominal sample times k / r, k = 0, 1, ... while k / r is below
the duration (10 s at 1 kHz: exactly 10 000 samples). Encoders that share a topic and a rate
are read together (one JointState message), and so are the known inputs of one topic and the
gyro and accelerometer of one Imu topic and the load cells of one topic (one WrenchStamped: a
force-torque sensor's components; these need one rate): they share their sample times, jitter
and dropouts. Every other sensor has its own.

Values (units and frames):
- encoder: (1,) the joint position, rad or m, + noise, then quantised; a single-turn angle
  encoder (``multi_turn: false``) wraps it into [-pi, pi), a multi-turn one does not;
- gyro: (3,) angular velocity of the sensor frame (``frame`` rotated by ``rotation_rpy``) in
  that frame, rad/s, all three axes even if the config measures fewer, + noise and bias;
- load_cell: (1,) the config's reading (N or N m) + noise;
- accelerometer: (3,) specific force (acceleration minus gravity) of the sensor frame's origin in
  that frame, m/s^2, all three axes, + noise;
- command: (1,) the known input effort, N m or N (exact: no noise, no outliers).

A sensor's ``time_offset`` (s, its config field: its clock lags the rig's) makes the reading
stamped t carry the truth at t - time_offset; a stamp whose truth time falls outside the run
gives no sample of that sensor (the others of its message are kept). The transport ``delay`` of
:class:`SensorOptions` moves the receive time instead and leaves the stamps true.

Random streams are seeded per channel from (seed, channel name), so a given seed always gives
the same samples, and adding a sensor does not change the others'.
"""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from mbfg_ros.errors import MbfgError
from mbfg_ros.model.channels import channel_names
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.sensors.base import SensorModel
from mbfg_ros.sensors.registry import KIND_NAMES, channels as input_channels
from mbfg_ros.sim.scenario import truth_mechanism

if TYPE_CHECKING:        # a type only: reading a bag's truth topics then needs no scipy.integrate
    from mbfg_ros.sim.forward import Trajectory

SENSOR_KINDS = KIND_NAMES
"""The kinds of channel; also the keys of SensorOptions.rates that apply to a whole kind."""


@dataclass(frozen=True)
class SensorOptions:
    """How sensor samples are synthesized. Every fault is off by default.

    Attributes:
        rates: Hz, overrides of the sample rates, keyed by a kind (``encoder``, ``gyro``,
            ``load_cell``, ``accelerometer``, ``command``: every channel of that kind) or by a
            sensor name (or ``command:<joint>``; that channel only). Precedence: sensor name,
            then kind, then the config's ``rate`` of the sensor (whose defaults are 1000, 400,
            200, 400 Hz), then 1000 Hz for commands.
        noise: add Gaussian noise with the config's standard deviation (``noise``).
        quantize: round encoder readings to the config's ``resolution`` (when > 0).
        gyro_bias: rad/s, standard deviation of a constant gyro bias drawn per gyro and axis.
        gyro_bias_walk: add a bias random walk with the config's ``bias_instability``
            (rad/s per sqrt(s)), starting from the constant bias.
        jitter: s, standard deviation of the sample-time jitter: the true sample time (the
            stamp) is the nominal time plus N(0, jitter), clipped to the run (and kept in
            order); the value is the truth at the stamp.
        delay: s, transport delay: a sample is received at stamp + delay.
        dropout: probability that a sample (a message) is lost.
        outlier_rate: probability that a sensor sample is an outlier: every component is
            moved by outlier_scale standard deviations with a random sign.
        outlier_scale: size of an outlier, in standard deviations of the sensor's noise.
        seed: seed of every random draw (noise, bias, jitter, dropouts, outliers).

    Timing faults (jitter, delay, dropout) apply to every channel, commands included; value
    faults (noise, bias, outliers, quantisation) only to sensors.
    """
    rates: dict[str, float] = field(default_factory=dict)
    noise: bool = True
    quantize: bool = True
    gyro_bias: float = 0.0
    gyro_bias_walk: bool = False
    jitter: float = 0.0
    delay: float = 0.0
    dropout: float = 0.0
    outlier_rate: float = 0.0
    outlier_scale: float = 10.0
    seed: int = 0

    def __post_init__(self) -> None:
        for key, rate in self.rates.items():
            if not (isinstance(rate, (int, float)) and math.isfinite(rate) and rate > 0):
                raise MbfgError(f"sensor rate of {key!r} must be a positive number of Hz (value: {rate!r})")
        for name in ("gyro_bias", "jitter", "delay", "outlier_scale"):
            val = getattr(self, name)
            if not (math.isfinite(val) and val >= 0):
                raise MbfgError(f"sensor option {name} must be >= 0 (value: {val!r})")
        for name in ("dropout", "outlier_rate"):
            val = getattr(self, name)
            if not (0.0 <= val < 1.0):
                raise MbfgError(f"sensor option {name} is a probability in [0, 1) (value: {val!r})")


@dataclass(frozen=True)
class Sample:
    """One sensor sample.

    Attributes:
        sensor: the config's sensor name, or ``command:<joint>`` for a known input.
        kind: encoder | gyro | load_cell | accelerometer | command.
        stamp: s from the start of the run: the true sample time (the message's header.stamp
            minus the bag's epoch).
        receive: s, when the sample arrives (stamp + delay; the bag's log time minus the epoch).
        value: encoder (1,) rad or m; gyro (3,) rad/s in the sensor frame; load_cell (1,) N or
            N m; accelerometer (3,) m/s^2 in the sensor frame; command (1,) N m or N.
    """
    sensor: str
    kind: str
    stamp: float
    receive: float
    value: np.ndarray


@dataclass(frozen=True)
class SensorChannel:
    """One stream of samples: a sensor of the config or a known-input joint (``model``).

    ``index`` is the sensor's index among the Mechanism's sensors of its kind, or the joint's
    coordinate index for a command. ``frame_id`` is the header frame id of its messages (empty
    for JointState); ``group`` names the channels read together (same times)."""
    name: str
    kind: str
    topic: str
    rate: float
    noise: float
    index: int
    frame_id: str
    group: str
    joint: str = ""          # encoders and commands: the joint (the JointState name)
    model: SensorModel | None = field(default=None, compare=False, repr=False)


@dataclass
class SensorSeries:
    """The samples of one channel as columns: ``stamp``/``receive`` (K,) s, ``value`` (K, d)
    with faults, ``true_value`` (K, d) the noise-free, bias-free model value at the stamp (at
    stamp - the sensor's ``time_offset``: the time it was taken)."""
    channel: SensorChannel
    stamp: np.ndarray
    receive: np.ndarray
    value: np.ndarray
    true_value: np.ndarray


def check_rates(mech: Mechanism, rates: dict[str, float]) -> None:
    """Raise MbfgError for a rate key that is neither a kind nor a channel of ``mech``."""
    known = channel_names(mech)
    for key in rates:
        if key not in SENSOR_KINDS and key not in known:
            raise MbfgError(f"unknown sensor or kind {key!r} in the sensor rates (kinds: "
                            f"{', '.join(SENSOR_KINDS)}; sensors of this rig: {', '.join(known) or 'none'})")


def sensor_channels(mech: Mechanism, options: SensorOptions | None = None) -> list[SensorChannel]:
    """The channels of ``mech``'s config with their effective rates (see SensorOptions.rates).
    Channels sampled together (one group) must keep one rate: MbfgError otherwise."""
    options = options or SensorOptions()
    check_rates(mech, options.rates)
    rates = options.rates
    out: list[SensorChannel] = []
    counts: dict[str, int] = {}
    group_rates: dict[str, tuple[SensorModel, float]] = {}
    for model in input_channels(mech):
        r = float(rates.get(model.name, rates.get(model.kind, model.rate)))
        index = counts.get(model.kind, 0) if model.measuring else model.index   # a command's: its joint
        counts[model.kind] = counts.get(model.kind, 0) + 1
        group = model.sample_group(mech, r)
        first, first_rate = group_rates.setdefault(group, (model, r))
        if first_rate != r:
            kinds = f"{first.kind.replace('_', ' ')}s " if first.kind == model.kind else ""
            raise MbfgError(f"{kinds}{first.name} and {model.name} share the topic {model.topic} (one "
                            f"message holds both): give them one rate (values: {first_rate:g} and {r:g} Hz)")
        out.append(SensorChannel(model.name, model.kind, model.topic, r, model.noise, index,
                                 model.header_frame(mech), group, model.joint, model))
    return out


def sample_times(duration: float, rate: float) -> np.ndarray:
    """Nominal sample times k / rate (s) for k = 0 .. while below ``duration``."""
    count = int(math.ceil(duration * rate - 1e-9))
    return np.arange(max(count, 0)) / rate


def _rng(seed: int, name: str, purpose: str) -> np.random.Generator:
    return np.random.default_rng([int(seed) & 0xFFFFFFFF, zlib.crc32(name.encode()),
                                  zlib.crc32(purpose.encode())])


def _sensor_mechanism(trajectory: Trajectory, config_mechanism: Mechanism | None) -> Mechanism:
    """The truth Mechanism that carries the sensors of ``config_mechanism``'s config."""
    truth = trajectory.mechanism
    if config_mechanism is None:
        return truth
    a, b = config_mechanism.config, truth.config
    if (a.sensors == b.sensors and a.frames == b.frames and a.urdf == b.urdf
            and a.closures == b.closures
            and {k: (j.actuation, j.topic) for k, j in a.joints.items()}
            == {k: (j.actuation, j.topic) for k, j in b.joints.items()}):
        return truth
    mech = truth_mechanism(a, trajectory.scenario)
    if mech.joint_names != truth.joint_names:
        raise MbfgError("the sensors' config describes other joints than the simulated rig "
                        f"({', '.join(mech.joint_names)} vs {', '.join(truth.joint_names)})")
    return mech


def synthesize_series(trajectory: Trajectory, options: SensorOptions | None = None,
                      config_mechanism: Mechanism | None = None) -> list[SensorSeries]:
    """The samples of every channel, as columns (see :func:`synthesize`)."""
    options = options or SensorOptions()
    mech = _sensor_mechanism(trajectory, config_mechanism)
    channels = sensor_channels(mech, options)
    duration = trajectory.duration
    groups: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    series: list[SensorSeries] = []
    for ch in channels:
        # sample times (shared within a group) and which samples survive
        if ch.group not in groups:
            stamp = sample_times(duration, ch.rate)
            if options.jitter > 0:
                stamp = np.sort(np.clip(stamp + options.jitter * _rng(options.seed, ch.group, "jitter")
                                        .standard_normal(stamp.size), 0.0, duration))
            keep = np.ones(stamp.size, bool)
            if options.dropout > 0:
                keep = _rng(options.seed, ch.group, "dropout").random(stamp.size) >= options.dropout
            groups[ch.group] = (stamp, keep)
        stamp, keep = groups[ch.group]
        taken = stamp - ch.model.time_offset          # a lagging clock: the truth of an earlier time
        keep = keep & (taken >= 0.0) & (taken <= duration)
        true = np.full((stamp.size, ch.model.dim), np.nan)
        true[keep] = ch.model.true_values(mech, trajectory, taken[keep])
        value = true.copy()
        if ch.model.measuring:
            value = _add_faults(ch, options, stamp, value)
        series.append(SensorSeries(ch, stamp[keep], stamp[keep] + options.delay, value[keep], true[keep]))
    return series


def _add_faults(ch: SensorChannel, opt: SensorOptions, stamp: np.ndarray, value: np.ndarray) -> np.ndarray:
    """Noise, the sensor's bias, outliers, then what the sensor does to its reading (its kind's
    :meth:`~mbfg_ros.sensors.base.SensorModel.add_bias` and ``finish_sample``)."""
    K, dim = value.shape
    if opt.noise and ch.noise > 0:
        value = value + ch.noise * _rng(opt.seed, ch.name, "noise").standard_normal((K, dim))
    value = ch.model.add_bias(value, stamp, opt, lambda purpose: _rng(opt.seed, ch.name, purpose))
    if opt.outlier_rate > 0:
        rng = _rng(opt.seed, ch.name, "outliers")
        hit = rng.random(K) < opt.outlier_rate
        sign = np.where(rng.random((K, dim)) < 0.5, -1.0, 1.0)
        value = value + hit[:, None] * sign * opt.outlier_scale * ch.noise
    return ch.model.finish_sample(value, opt)


def samples_from_series(series: list[SensorSeries]) -> list[Sample]:
    """Flatten series into Samples sorted by receive time, ties by stamp, then channel order."""
    if not series:
        return []
    receive = np.concatenate([s.receive for s in series])
    stamp = np.concatenate([s.stamp for s in series])
    which = np.concatenate([np.full(s.stamp.size, i) for i, s in enumerate(series)])
    row = np.concatenate([np.arange(s.stamp.size) for s in series])
    order = np.lexsort((which, stamp, receive))
    out = []
    for i in order:
        s = series[which[i]]
        r = row[i]
        out.append(Sample(s.channel.name, s.channel.kind, float(stamp[i]), float(receive[i]),
                          s.value[r].copy()))
    return out


def synthesize(trajectory: Trajectory, options: SensorOptions | None = None,
               config_mechanism: Mechanism | None = None) -> list[Sample]:
    """Sensor samples of the simulated ``trajectory``, sorted by receive time (ties by stamp).

    ``config_mechanism`` chooses the sensor set: the sensors (and known inputs) of its config,
    evaluated on a truth Mechanism built from that config with the trajectory's scenario (so a
    four-bar trajectory can feed the sensors of four_bar_gyro.yaml); default: the trajectory's
    own config. Deterministic for a given ``options.seed``.
    """
    return samples_from_series(synthesize_series(trajectory, options, config_mechanism))
