"""Sensor residuals of a replay: each used reading minus the model's prediction at the estimate.

The state at a reading's stamp comes from the two keyframe estimates around it, interpolated
as the estimator does (:func:`~mbfg_ros.estimation.step_interpolation.interpolate_motion`: q from the
quintic Hermite on q, v and a, v from the cubic Hermite on v and a; linear on a, the multipliers
and the inputs; the gyro biases of the keyframe before); before the first keyframe and after the last it is carried from the
nearest one at constant acceleration (q + v dt + a dt^2 / 2, v + a dt). At speed this matters: on
a slider-crank at 80 rad/s, carrying the keyframe before a gyro reading 1 ms on at constant
acceleration is off by several gyro sigmas at a dead centre. Predictions use each sensor's numeric
model (its kind's :meth:`~mbfg_ros.sensors.base.SensorModel.value`) on the config mechanism:

- encoder: y - q_joint - offset (wrapped to [-pi, pi) for single-turn angle encoders only);
- gyro: y[axes] - (scale gyro(q, v) + bias) - estimated bias (rad/s, sensor frame, the config's
  measured axes);
- load cell: y - (scale load_cell(q, v, a, lam, u, tau) + offset) with tau the known input
  efforts (the replay's commands, linear between them);
- accelerometer: y[axes] - specific_force(q, v, a) - bias (m/s^2, sensor frame).

A reading is compared at the time it was taken: its stamp minus its sensor's ``time_offset``
(the estimator takes it there too). The acceleration, multipliers and inputs a sensor reads
(load cells, accelerometers) are linear between the keyframes.

Residuals are in the sensor's unit; ``sigma`` is the config's noise, so r / sigma should look
like unit-variance noise when the estimator and the config agree with the rig.

With ``predicted=True`` the state comes from the newest keyframe strictly before the reading
(more than :data:`PREDICTION_EPS` earlier), so with the filtered estimates of a replay every
residual is a one-step prediction error (an innovation: the reading was not used yet), also for
readings stamped at a keyframe (`mbfg tune` uses these); the acceleration, multipliers and
inputs a load cell reads are then extrapolated linearly from the two keyframes before it
instead of held.
"""
from __future__ import annotations

from array import array
from dataclasses import dataclass, field

import numpy as np

from mbfg_ros.model.channels import command_channel
from mbfg_ros.estimation.layout import StateLayout
from mbfg_ros.estimation.step_interpolation import interpolate_motion
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.replay.estimate_log import EstimateSeries

DEFAULT_MAX_SAMPLES = 20_000
"""Residuals are evaluated for at most this many readings per sensor (evenly spaced)."""

PREDICTION_EPS = 1e-6
"""s: with ``predicted``, a keyframe this close to a reading's stamp counts as at the reading."""


class SampleLog:
    """The readings the estimator accepted, per sensor (stamps s, values as given, era), kept
    as flat arrays (8 bytes per stamp, value and era: hour-long bags)."""

    def __init__(self) -> None:
        self._t: dict[str, array] = {}
        self._y: dict[str, array] = {}
        self._era: dict[str, array] = {}
        self._dim: dict[str, int] = {}

    def add(self, sensor: str, stamp: float, value: np.ndarray, era: int = 0) -> None:
        ts = self._t.get(sensor)
        v = np.asarray(value, float).reshape(-1)
        if ts is None:
            ts = self._t[sensor] = array("d")
            self._y[sensor] = array("d")
            self._era[sensor] = array("q")
            self._dim[sensor] = v.size
        if v.size != self._dim[sensor]:
            raise ValueError(f"{sensor}: a reading of {v.size} values after readings of {self._dim[sensor]}")
        ts.append(stamp)
        self._y[sensor].extend(v)
        self._era[sensor].append(era)

    def extend(self, sensor: str, t: np.ndarray, y: np.ndarray, era: int = 0) -> None:
        """Many readings at once: stamps t (N,), values y (N, k)."""
        if not np.size(t):
            return
        y = np.asarray(y, float).reshape(np.size(t), -1)
        if sensor not in self._t:
            self._t[sensor], self._y[sensor], self._era[sensor] = array("d"), array("d"), array("q")
            self._dim[sensor] = y.shape[1]
        self._t[sensor].extend(np.asarray(t, float))
        self._y[sensor].extend(y.reshape(-1))
        self._era[sensor].extend(np.full(np.size(t), era, np.int64))

    @property
    def sensors(self) -> list[str]:
        return list(self._t)

    def columns(self, sensor: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(t (N,), y (N, k), era (N,)) in the order added."""
        if sensor not in self._t:
            return np.zeros(0), np.zeros((0, 1)), np.zeros(0, int)
        t = np.frombuffer(self._t[sensor], float).copy()
        y = np.frombuffer(self._y[sensor], float).reshape(t.size, self._dim[sensor]).copy()
        return t, y, np.frombuffer(self._era[sensor], np.int64).astype(int)

    def arrays(self, sensor: str, era: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(t (N,), y (N, k)) sorted by stamp (of one era if given)."""
        t, y, eras = self.columns(sensor)
        if not t.size:
            return t, np.zeros((0, 1))
        if era is not None:
            keep = eras == era
            t, y = t[keep], y[keep]
        order = np.argsort(t, kind="stable")
        return t[order], y[order]

    def eras(self, sensor: str) -> np.ndarray:
        return self.columns(sensor)[2]

    def count(self, sensor: str) -> int:
        return len(self._t.get(sensor, ()))


@dataclass
class Residuals:
    """Residuals of one sensor: r (N, k) in ``unit`` at stamps t (N,) s; ``of`` readings in all."""
    sensor: str
    kind: str
    unit: str
    sigma: float
    axes: list[str]
    t: np.ndarray
    r: np.ndarray
    of: int = 0
    stats: dict = field(default_factory=dict)

    def summary(self) -> dict:
        """mean, rms (sensor unit) and rms in sigmas per axis; fraction beyond 3 sigma."""
        if not self.t.size:
            return {"samples": 0, "of": self.of}
        r = self.r
        return {"samples": int(self.t.size), "of": self.of, "unit": self.unit, "axes": self.axes,
                "mean": r.mean(axis=0).tolist(), "rms": np.sqrt((r * r).mean(axis=0)).tolist(),
                "rms_sigma": (np.sqrt((r * r).mean(axis=0)) / self.sigma).tolist(),
                "beyond_3_sigma": float(np.mean(np.abs(r) > 3 * self.sigma))}


def load_cell_unit(mech: Mechanism, k: int) -> str:
    """N or N m: a force component, or an actuator effort of a prismatic joint, is in N."""
    return mech.load_cells[k].unit(mech)


def _state_at(est: EstimateSeries, t: np.ndarray, era: np.ndarray, predicted: bool = False):
    """Index of the keyframe before each t (of the sample's era; with ``predicted`` strictly
    before it) and the time since it."""
    k = np.zeros(t.size, int)
    for e in np.unique(era):
        rows = np.flatnonzero(est.era == e)
        if not rows.size:
            rows = np.arange(len(est))
        rows = rows[np.argsort(est.t[rows], kind="stable")]
        sel = era == e
        if predicted:
            i = np.searchsorted(est.t[rows], t[sel] - PREDICTION_EPS, side="left") - 1
        else:
            i = np.searchsorted(est.t[rows], t[sel], side="right") - 1
        i = np.clip(i, 0, rows.size - 1)
        k[sel] = rows[i]
    return k, t - est.t[k]


def _samples(samples: SampleLog, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(t, y, era) of a sensor, sorted by (era, stamp)."""
    t, y, era = samples.columns(name)
    if not t.size:
        return t, np.zeros((0, 1)), np.zeros(0, int)
    order = np.lexsort((t, era))
    return t[order], y[order], era[order]


def _readings(est: EstimateSeries, samples: SampleLog, name: str, limit: int, predicted: bool = False,
              lag: float = 0.0):
    """(t, y, era, i, q, v, j, s) of at most ``limit`` readings of a sensor spread over the run,
    or None without readings: t the times they were taken (their stamps minus the sensor's time
    offset ``lag``, s), i is the keyframe before each reading, q and v (samples, n) the
    estimate at the reading's stamp, interpolated between keyframes i and j = i + 1 at the
    fraction s (module docstring; with ``predicted``, or past the last keyframe, j = i and the
    estimate is carried from i at constant acceleration)."""
    t, y, era = _samples(samples, name)
    if not t.size:
        return None
    sel = _pick(t.size, limit)
    t, y, era = t[sel] - lag, y[sel], era[sel]
    i, dt = _state_at(est, t, era, predicted)
    j = np.minimum(i + 1, len(est) - 1)
    H = est.t[j] - est.t[i]
    inside = ~predicted & (j > i) & (est.era[j] == est.era[i]) & (H > 0) & (dt >= 0) & (dt <= H)
    j = np.where(inside, j, i)
    s = np.where(inside, dt / np.where(inside, H, 1.0), 0.0)
    h = dt[:, None]
    q = est.q[i] + est.v[i] * h + 0.5 * est.a[i] * h * h
    v = est.v[i] + est.a[i] * h
    if inside.any():
        k = np.flatnonzero(inside)
        a, b = i[k], j[k]
        q[k], v[k] = interpolate_motion(est.q[a], est.v[a], est.a[a], est.q[b], est.v[b], est.a[b],
                                        s[k][:, None], H[k][:, None])
    return t, y, era, i, q, v, j, s


def _extrapolated(est: EstimateSeries, values: np.ndarray, i: np.ndarray, dt: np.ndarray) -> np.ndarray:
    """values[i] carried ``dt`` s on along the line through keyframes i - 1 and i (of one era);
    held where keyframe i has no predecessor."""
    prev = np.maximum(i - 1, 0)
    h = est.t[i] - est.t[prev]
    ok = (i > 0) & (est.era[prev] == est.era[i]) & (h > 0)
    w = np.where(ok, dt / np.where(ok, h, 1.0), 0.0)[:, None]
    return values[i] + (values[i] - values[prev]) * w


def _pick(n: int, limit: int) -> np.ndarray:
    if n <= limit:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, limit).round().astype(int))


def sensor_residuals(mech: Mechanism, layout: StateLayout, est: EstimateSeries, samples: SampleLog,
                     max_samples: int = DEFAULT_MAX_SAMPLES, predicted: bool = False) -> dict[str, Residuals]:
    """{sensor: Residuals} of every sensor with used readings (nothing without estimates);
    ``predicted``: from the keyframe strictly before each reading (see the module docstring)."""
    out: dict[str, Residuals] = {}
    if not len(est):
        return out
    commands: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
    for name in mech.known_input_joints:
        for era in np.unique(samples.eras(command_channel(name))):
            t, y = samples.arrays(command_channel(name), int(era))
            commands[(mech.index[name], int(era))] = (t, y[:, 0])

    def tau_at(stamp: float, era: int) -> np.ndarray:
        """Known input efforts (linear between commands, held beyond them; 0 without any)."""
        tau = np.zeros(mech.n)
        for (j, e), (t, y) in commands.items():
            if e == era:
                tau[j] = np.interp(stamp, t, y)
        return tau

    for k, model in enumerate(mech.sensors):
        name = model.name
        if (got := _readings(est, samples, name, max_samples, predicted, model.time_offset)) is None:
            continue
        t, y, era, i, q, v, j, s = got
        a = lam = u = tau = None
        if model.level >= 2:
            if predicted:
                dt = t - est.t[i]
                a, lam, u = (_extrapolated(est, x, i, dt) for x in (est.a, est.lam, est.u))
            else:
                w = s[:, None]
                a, lam, u = ((1 - w) * x[i] + w * x[j] for x in (est.a, est.lam, est.u))
            tau = np.array([tau_at(t[r], int(era[r])) for r in range(t.size)]).reshape(t.size, mech.n)
        pred = model.measured(model.values(mech, q, v, a, lam, u, tau))
        bias_cols = layout.bias_slices[k]
        if bias_cols is not None:
            pred = pred + est.bias[i][:, bias_cols]
        r = model.difference(model.measured(y) - pred)
        out[name] = Residuals(name, model.kind, model.unit(mech), model.noise, model.axes(), t,
                              r.reshape(t.size, -1), samples.count(name))
    return out
