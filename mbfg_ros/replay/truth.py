"""The simulator's ground truth read back from a bag, as time series that can be interpolated.

Topics (see :mod:`mbfg_ros.io.simulation_messages`), under the config's truth namespace:
``joint_states`` (q, v, actuator effort of every joint), ``dynamic_joint_states`` (a),
``forces/<closure>`` (the closure's reaction on frame_b's body, in frame_b, N and N m) and
``forces/<load cell>`` (the cell's reading times its axis; read back as axis . force or
torque). Times are seconds relative to the replay's epoch. Each topic keeps its own time
vector; repeated stamps (a bag that loops) keep their first value and are counted.
"""
from __future__ import annotations

from array import array
from dataclasses import dataclass, field

import numpy as np

from mbfg_ros.io.cdr_layout import FixedRows
from mbfg_ros.io.messages import joint_values, time_to_ns
from mbfg_ros.io.sensor_inputs import axis_component
from mbfg_ros.io.simulation_messages import truth_topics
from mbfg_ros.model.mechanism import Mechanism


@dataclass
class Series:
    """Samples y (N, k) at increasing times t (N,) s."""
    t: np.ndarray
    y: np.ndarray

    def at(self, times: np.ndarray) -> np.ndarray:
        """Linear interpolation at ``times`` (NaN outside the covered span)."""
        times = np.asarray(times, float)
        out = np.full((times.size, self.y.shape[1]), np.nan)
        if self.t.size == 0:
            return out
        inside = (times >= self.t[0]) & (times <= self.t[-1])
        for j in range(self.y.shape[1]):
            out[inside, j] = np.interp(times[inside], self.t, self.y[:, j])
        return out

    def hermite(self, times: np.ndarray, rate: "Series") -> np.ndarray:
        """Cubic Hermite interpolation at ``times`` through the samples and their time
        derivatives ``rate`` (taken at this series' stamps, linearly; NaN outside the covered
        span). Where a derivative is not finite the interpolation is linear. At 1 kHz a fast
        crank's velocity is off by h^2/8 times its jerk midway between linear samples (0.25 rad/s
        at 2e6 rad/s^3); the Hermite through the accelerations is off by h^4/384 times its fourth
        derivative."""
        out = self.at(times)
        if self.t.size < 2:
            return out
        times = np.asarray(times, float)
        inside = (times >= self.t[0]) & (times <= self.t[-1])
        d = rate.at(self.t)
        i = np.clip(np.searchsorted(self.t, times[inside], side="right") - 1, 0, self.t.size - 2)
        h = (self.t[i + 1] - self.t[i])[:, None]
        x = (times[inside][:, None] - self.t[i][:, None]) / h
        x2, x3 = x * x, x * x * x
        val = ((2 * x3 - 3 * x2 + 1) * self.y[i] + (x3 - 2 * x2 + x) * h * d[i]
               + (3 * x2 - 2 * x3) * self.y[i + 1] + (x3 - x2) * h * d[i + 1])
        ok = np.isfinite(val)
        sub = out[inside]
        sub[ok] = val[ok]
        out[inside] = sub
        return out


@dataclass
class TruthSeries:
    """Ground truth of one run; any series the bag lacks is None."""
    joint_names: list[str]
    q: Series | None = None
    v: Series | None = None
    a: Series | None = None
    effort: Series | None = None
    closure_force: dict[str, Series] = field(default_factory=dict)    # (N, 3) in frame_b
    closure_torque: dict[str, Series] = field(default_factory=dict)   # (N, 3) in frame_b
    load_cells: dict[str, Series] = field(default_factory=dict)       # (N, 1) N or N m
    repeated: dict[str, int] = field(default_factory=dict)            # topic -> repeated stamps dropped

    @property
    def span(self) -> tuple[float, float] | None:
        s = self.q
        return (float(s.t[0]), float(s.t[-1])) if s is not None and s.t.size else None


class TruthCollector:
    """Collects the truth messages of a mechanism's config (``add`` each, then ``series``)."""

    def __init__(self, mech: Mechanism) -> None:
        self.mech = mech
        ns = (mech.config.truth_namespace or "/truth").rstrip("/")
        self.topics = truth_topics(mech)
        self.js_topic = ns + "/joint_states"
        self.acc_topic = ns + "/dynamic_joint_states"
        self.closure_topics = {ns + f"/forces/{c}": c for c in mech.closure_names}
        self.cell_topics = {ns + f"/forces/{c.config.name}": k for k, c in enumerate(mech.load_cells)}
        # per topic: stamps (ns) and values, flat (a message's values are consecutive): compact
        # for hour-long bags (8 bytes per value)
        self._data: dict[str, tuple[array, array]] = {t: (array("q"), array("d")) for t in self.topics}
        self._index: dict[tuple[str, ...], np.ndarray] = {}
        self.unmatched: int = 0       # joint_states messages without the config's joints

    def _columns(self, names) -> np.ndarray | None:
        key = tuple(names)
        idx = self._index.get(key)
        if idx is None:
            pos = {n: i for i, n in enumerate(key)}
            if not all(n in pos for n in self.mech.joint_names):
                return None
            idx = self._index[key] = np.array([pos[n] for n in self.mech.joint_names])
        return idx

    def add(self, topic: str, msg) -> None:
        """One truth message of ``topic`` (or N of one layout: :class:`FixedRows`)."""
        if isinstance(msg, FixedRows):
            self.add_rows(topic, msg)
            return
        ts, ys = self._data[topic]
        if topic == self.js_topic:
            idx = self._columns(msg.name)
            if idx is None:
                self.unmatched += 1
                return
            eff = np.asarray(msg.effort, float)
            vals = np.concatenate((np.asarray(msg.position, float)[idx], np.asarray(msg.velocity, float)[idx],
                                   eff[idx] if eff.size else np.zeros(idx.size)))
        elif topic == self.acc_topic:
            vals = joint_values(msg, "acceleration", self.mech.joint_names)
            if vals is None:
                self.unmatched += 1
                return
        elif topic in self.closure_topics:
            f, t = msg.wrench.force, msg.wrench.torque
            vals = (f.x, f.y, f.z, t.x, t.y, t.z)
        else:
            cell = self.mech.load_cells[self.cell_topics[topic]]
            w = msg.wrench.force if cell.config.component == "force" else msg.wrench.torque
            vals = (float(axis_component(cell.axis, float(w.x), float(w.y), float(w.z))),)
        stamp = time_to_ns(msg.header.stamp)
        ys.extend(np.asarray(vals, float))
        ts.append(stamp)

    def add_rows(self, topic: str, rows: FixedRows) -> None:
        """:meth:`add` for N messages of one layout at once (the same values, counts and order)."""
        ts, ys = self._data[topic]
        msg = rows.template
        N = len(rows)
        if topic == self.js_topic:
            idx = self._columns(msg.name)
            if idx is None:
                self.unmatched += N
                return
            eff = rows.values("effort")[:, idx] if len(msg.effort) else np.zeros((N, idx.size))
            vals = np.hstack((rows.values("position")[:, idx], rows.values("velocity")[:, idx], eff))
        elif topic == self.acc_topic:
            cols = []
            index = {n: i for i, n in enumerate(msg.joint_names)}
            for joint in self.mech.joint_names:
                i = index.get(joint)
                names = list(msg.interface_values[i].interface_names) if i is not None and \
                    i < len(msg.interface_values) else []
                if "acceleration" not in names or names.index("acceleration") >= len(msg.interface_values[i].values):
                    self.unmatched += N
                    return
                cols.append(rows.values(f"interface_values.{i}.values")[:, names.index("acceleration")])
            vals = np.stack(cols, axis=1) if cols else np.zeros((N, 0))
        elif topic in self.closure_topics:
            vals = np.hstack((rows.values("wrench.force"), rows.values("wrench.torque")))
        else:
            cell = self.mech.load_cells[self.cell_topics[topic]]
            w = rows.values("wrench.force" if cell.config.component == "force" else "wrench.torque")
            vals = axis_component(cell.axis, w[:, 0], w[:, 1], w[:, 2]).reshape(N, 1)
        ys.frombytes(np.ascontiguousarray(vals, float).tobytes())
        ts.frombytes(np.ascontiguousarray(rows.stamps_ns(), np.int64).tobytes())

    def state(self) -> tuple:
        """The collected messages (to hand over from another process)."""
        return self._data, self.unmatched

    def restore(self, state: tuple) -> None:
        self._data, self.unmatched = state

    def series(self, epoch_ns: int) -> TruthSeries | None:
        """The collected truth (times relative to ``epoch_ns``), or None if there is no
        joint_states truth."""
        out = TruthSeries(list(self.mech.joint_names))

        def ordered(topic: str):
            ts, ys = self._data[topic]
            if not ts:
                return None, None
            t = (np.frombuffer(ts, np.int64) - epoch_ns) * 1e-9
            y = np.frombuffer(ys, float).reshape(t.size, -1)
            order = np.argsort(t, kind="stable")
            t = t[order]
            keep = np.concatenate([[True], np.diff(t) > 0])
            if not keep.all():
                out.repeated[topic] = int((~keep).sum())
            return t[keep], y[order[keep]]

        n = self.mech.n
        t, ys = ordered(self.js_topic)
        if t is None:
            return None
        out.q = Series(t, ys[:, :n])
        out.v = Series(t, ys[:, n:2 * n])
        out.effort = Series(t, ys[:, 2 * n:])
        t, ys = ordered(self.acc_topic)
        if t is not None:
            out.a = Series(t, ys)
        for topic, name in self.closure_topics.items():
            t, ys = ordered(topic)
            if t is not None:
                out.closure_force[name] = Series(t, ys[:, :3])
                out.closure_torque[name] = Series(t, ys[:, 3:])
        for topic, k in self.cell_topics.items():
            t, ys = ordered(topic)
            if t is not None:
                out.load_cells[self.mech.load_cells[k].config.name] = Series(t, ys)
        return out
