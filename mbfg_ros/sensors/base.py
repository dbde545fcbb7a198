"""What a sensor kind is: the interface every kind module of :mod:`mbfg_ros.sensors` fills in.

A kind (:class:`SensorKind`) owns one section of the mechanism config (``encoders``, ``gyros``,
...): its dataclass and its parser, and how a sensor of that section is compiled against the
mechanism into a :class:`SensorModel`. The compiled model is everything the rest of the package
asks of one sensor:

- its numeric model (:meth:`SensorModel.value`: the noise-free reading at a state, pinocchio),
  which the simulator samples, the replay's residuals and ``mbfg check``'s observability use;
- its whitened residual as CasADi SX (:meth:`SensorModel.residual`), which the estimator's step
  function stacks into its rows (:mod:`mbfg_ros.estimation.step_function`);
- its synthesis faults for the simulator (:meth:`SensorModel.add_bias`,
  :meth:`SensorModel.finish_sample`) and its message part (:meth:`SensorModel.message_part`);
- its message decoding: the :class:`TopicInput` of its message type, which turns a message
  (read by attribute: rclpy and rosbags messages alike) or many messages of one fixed layout into
  readings and counts what it cannot use;
- its tuning hook (:meth:`SensorModel.tuned_fields`), its facts for ``mbfg check`` and its TF
  mount frame;
- its calibration (:meth:`SensorModel.calibration`): the constants of its model that ``mbfg
  identify`` estimates (an encoder's offset, a gyro's scale and bias, a load cell's scale and
  offset). Its symbolic residual takes each through ``sym.constant(sensor, field, value)``, so
  that a symbolic model with parameters (:mod:`mbfg_ros.model.parameters`) can make it one.

Nothing here imports ROS, the estimator, the simulator or io: the estimator, the simulator, the
input router and the node iterate the registry (:mod:`mbfg_ros.sensors.registry`) and call these.

Coordinates are the mechanism's (``q``, ``v``, ``a`` of its joints, ``lam`` the closure
multipliers, ``u`` the unknown input efforts, ``tau`` the known ones; see
:mod:`mbfg_ros.model.mechanism`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Protocol

import numpy as np

from mbfg_ros.model.yaml_reader import YamlNode


@dataclass(frozen=True)
class Reading:
    """One decoded reading: the sensor (or ``command:<joint>``), its stamp (ns), its values."""
    sensor: str
    stamp_ns: int
    value: np.ndarray


@dataclass(frozen=True)
class ReadingRows:
    """One sensor's readings from N messages of one layout: stamps (N,) int64 ns, values (N, k);
    ``rank``: where :meth:`TopicInput.decode` puts them in one message's list of readings."""
    sensor: str
    stamp_ns: np.ndarray
    value: np.ndarray
    rank: int


@dataclass(frozen=True)
class StateParts:
    """Symbolic parts of the state at a reading's stamp (see :mod:`mbfg_ros.estimation.layout`):
    joint positions, velocities, accelerations, closure multipliers, unknown inputs, the
    biases (the whole bias block), the gravity and mass scales, the model-error forces."""
    q: Any
    v: Any
    a: Any
    lam: Any
    u: Any
    b: Any
    gravity_scale: Any
    mass_scale: Any
    e: Any = None


@dataclass(frozen=True)
class Calibration:
    """One calibration constant of a sensor: its config ``field`` (``offset``, ``scale``,
    ``bias_x``, ...: a field of a vector per axis is suffixed with the axis), its config value
    and unit ("" for a scale), and the sensor axis (0-2) of a vector field (-1 otherwise)."""
    field: str
    value: float
    unit: str
    axis: int = -1


class InputReport(Protocol):
    """Where a :class:`TopicInput` counts what it cannot use, for its topic."""

    def problem(self, reason: str, n: int = 1) -> None:
        """``n`` messages of the topic held no usable reading, for ``reason``."""

    def disagree(self, what: str, n: int = 1) -> None:
        """``n`` messages were used although they say ``what`` differs from the config."""


def stamp_ns(msg) -> int:
    """The header stamp of a message in ns."""
    st = msg.header.stamp
    return int(st.sec) * 1_000_000_000 + int(st.nanosec)


class TopicInput:
    """How the messages of one topic become readings: the message types it accepts and the sensors
    (and known inputs) it feeds. A kind's model names its class (:attr:`SensorModel.input_type`);
    sensors of kinds with the same class may share a topic (:meth:`add` says whether they can,
    :meth:`check` whether all of them can read its messages together)."""

    types: tuple[str, ...] = ()
    """The accepted message types (a class's; a topic may accept fewer, see :meth:`check`)."""

    def __init__(self, topic: str) -> None:
        self.topic = topic

    @property
    def sensors(self) -> tuple[str, ...]:
        """The sensor names (and ``command:<joint>``) the topic feeds, in decoding order."""
        raise NotImplementedError

    def add(self, model: "SensorModel") -> None:
        """Feed ``model`` from this topic too; ValueError if it cannot share the topic."""
        raise NotImplementedError

    def check(self) -> None:
        """ValueError unless the sensors added can read the topic's messages together (rules
        over all of them, which the input router applies once every sensor is added; a
        mechanism that breaks them still loads). None here."""

    def decode(self, msgtype: str, msg, receive_ns: int | None, report: InputReport) -> list[Reading]:
        """The readings in one message of type ``msgtype`` (one of :attr:`types`)."""
        raise NotImplementedError

    def decode_rows(self, msgtype: str, rows, receive_ns: np.ndarray, report: InputReport) -> list[ReadingRows]:
        """The readings in N messages of one layout (:class:`~mbfg_ros.io.cdr_layout.FixedRows`,
        ``receive_ns`` (N,) their receive times): what :meth:`decode` gives message by message,
        with the same problems counted N times."""
        raise NotImplementedError


class SensorModel:
    """One compiled sensor (or known input): see the module docstring. Subclasses are frozen
    dataclasses with at least ``config``, the kind's config dataclass."""

    kind: ClassVar[str] = ""
    """The kind's name (``encoder``, ``gyro``, ...): Sample.kind, SensorStream.kind, ``--rate`` keys."""
    dim: ClassVar[int] = 1
    """Values per reading, as the messages carry them (a gyro's three axes)."""
    level: ClassVar[int] = 0
    """What of the state the reading depends on: 0 positions, 1 and velocities, 2 everything."""
    measuring: ClassVar[bool] = True
    """A sensor of the estimator's factors (False: a known input, an effort the model takes)."""
    observes: ClassVar[bool] = False
    """Counted in ``mbfg check``'s observability test (kinematic and inertial sensors)."""
    message_type: ClassVar[str] = ""
    """The message type the simulator writes for it."""
    message_group: ClassVar[str] = ""
    """Readings of one group, topic and stamp go into one message (a JointState of encoders, an
    Imu's gyro and accelerometer); "": each reading its own message."""
    input_type: ClassVar[type[TopicInput]] = TopicInput

    config: Any

    # -- identity ------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.config.name

    @property
    def topic(self) -> str:
        return self.config.topic

    @property
    def rate(self) -> float:
        return self.config.rate

    @property
    def noise(self) -> float:
        """One standard deviation of a reading, in :meth:`unit`."""
        return self.config.noise

    @property
    def time_offset(self) -> float:
        """s: its reading stamped t was taken at t - time_offset (the config's ``time_offset``;
        0 for a known input, whose stamps are the rig's clock)."""
        return float(getattr(getattr(self, "config", None), "time_offset", 0.0))

    @property
    def joint(self) -> str:
        """The joint a JointState carries it under ("" for other messages)."""
        return ""

    @property
    def residual_rows(self) -> int:
        """Rows of its residual (the measured part of a reading)."""
        return self.dim

    @property
    def needs_tau(self) -> bool:
        """Whether its prediction reads the known input efforts at the reading's stamp."""
        return False

    def unit(self, mech) -> str:
        raise NotImplementedError

    def axes(self) -> list[str]:
        """Labels of the residual rows (the joint, the axes, the component)."""
        return [self.name]

    # -- bias states (estimated by the step function's random walk) ----------------------------
    @property
    def bias_dim(self) -> int:
        """Bias states the estimator holds for it (one per measured axis, or none)."""
        return 0

    @property
    def bias_sigma(self) -> float:
        return 0.0

    @property
    def bias_instability(self) -> float:
        return 0.0

    # -- numeric model -------------------------------------------------------------------------
    def value(self, mech, data, q, v=None, a=None, lam=None, u=None, tau=None,
              gravity_scale: float = 1.0) -> np.ndarray:
        """The noise-free, bias-free reading (dim,) at a state (``data``: a MechanismData)."""
        raise NotImplementedError

    def values(self, mech, q, v=None, a=None, lam=None, u=None, tau=None) -> np.ndarray:
        """:meth:`value` at K states (arrays with K rows; None where not needed): (K, dim)."""
        data = mech.create_data()
        K = q.shape[0]
        out = np.empty((K, self.dim))
        row = lambda x, i: None if x is None else x[i]  # noqa: E731
        for i in range(K):
            out[i] = self.value(mech, data, q[i], row(v, i), row(a, i), row(lam, i), row(u, i), row(tau, i))
        return out

    def true_values(self, mech, trajectory, stamp: np.ndarray) -> np.ndarray:
        """(K, dim): the readings of a simulated ``trajectory`` (:class:`~mbfg_ros.sim.forward.
        Trajectory`) at ``stamp`` (s)."""
        q, v, a, lam, tau, u = trajectory.state_at(stamp, self.level)
        return self.values(mech, q, v, a, lam, u, tau)

    def measured(self, y: np.ndarray) -> np.ndarray:
        """The measured part of readings (..., dim) -> (..., residual_rows)."""
        return y

    def difference(self, r: np.ndarray) -> np.ndarray:
        """A residual (measured - predicted) as the estimator takes it (e.g. an angle wrapped)."""
        return r

    # -- symbolic residual ---------------------------------------------------------------------
    def residual(self, sym, z: StateParts, y, tau, bias):
        """(measured - predicted) / sigma as CasADi SX (residual_rows,): ``sym`` the mechanism's
        :class:`~mbfg_ros.model.symbolic.SymbolicMechanism`, ``z`` the state at the stamp, ``y``
        the reading's values (dim,), ``tau`` the known efforts at the stamp (n,) or None,
        ``bias`` the sensor's bias states (bias_dim,) or None."""
        raise NotImplementedError

    # -- simulation ----------------------------------------------------------------------------
    def header_frame(self, mech) -> str:
        """The header frame_id of its messages ("" for JointState)."""
        return ""

    def sample_group(self, mech, rate: float) -> str:
        """Channels of one group are sampled together (one message, shared times); the name also
        seeds the group's jitter and dropouts."""
        return f"{self.kind}|{self.name}"

    def add_bias(self, value: np.ndarray, stamp: np.ndarray, options, rng: Callable[[str], Any]) -> np.ndarray:
        """Simulated readings (K, dim) with the sensor's bias (after the noise); ``options`` the
        simulator's SensorOptions, ``rng(purpose)`` the channel's random stream."""
        return value

    def finish_sample(self, value: np.ndarray, options) -> np.ndarray:
        """Simulated readings as the sensor finally reports them (quantised, wrapped)."""
        return value

    def message_part(self, value: np.ndarray) -> dict[str, Any]:
        """What one reading puts into its message (fields of :attr:`message_type`, plain
        numbers; the simulator's io builds the message)."""
        raise NotImplementedError

    # -- calibration ---------------------------------------------------------------------------
    def calibration(self, mech) -> list[Calibration]:
        """The constants of its model a recording can calibrate (``mbfg identify``'s parameters
        of the kind's group; written back to the sensor's config fields): none here."""
        return []

    # -- tuning, check, TF ---------------------------------------------------------------------
    def tuned_fields(self) -> tuple[str, ...]:
        """Config fields of its process noises that ``mbfg tune`` searches (its ``noise`` is
        always tuned), e.g. ``bias_instability`` of a gyro with a bias random walk."""
        return ()

    def facts(self, mech) -> dict[str, Any]:
        """What ``mbfg check`` states about it (JSON)."""
        c = self.config
        return {"name": c.name, "kind": self.kind, "topic": c.topic, "rate": c.rate, "noise": c.noise,
                "unit": self.unit(mech), "message": self.message_type}

    @staticmethod
    def describe(facts: dict[str, Any]) -> str:
        """What it measures, in one phrase of ``mbfg check``'s text (from :meth:`facts`)."""
        raise NotImplementedError

    def mount(self, mech) -> tuple[str, str, tuple[float, float, float]] | None:
        """(frame, header frame_id, rotation rpy) of a sensor mounted on a frame whose messages
        name a frame of their own (for /tf_static), or None."""
        return None


class SensorKind:
    """One kind of sensor: its section of the config and how its sensors compile (module
    docstring). A kind module defines one instance; :mod:`mbfg_ros.sensors.registry` lists them."""

    name: ClassVar[str] = ""
    """The kind (``gyro``), as :attr:`SensorModel.kind`."""
    section: ClassVar[str] = ""
    """The list under ``sensors:`` in the config (``gyros``)."""
    default_rate: ClassVar[float] = 0.0
    model: ClassVar[type[SensorModel]] = SensorModel
    """The class of its compiled sensors."""

    def parse(self, node: YamlNode) -> Any:
        """The config dataclass of one item of the section (every field read; ``finish`` is the
        caller's)."""
        raise NotImplementedError

    def compile(self, mech, config: Any, root: YamlNode, field: str) -> SensorModel:
        """The sensor compiled against ``mech`` (names checked: a ConfigError at ``field``)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<sensor kind {self.name}>"
