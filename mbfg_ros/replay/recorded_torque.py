"""A recorded run's estimated joint torques scored against the torque the rig recorded.

:func:`score_recorded_run` imports a log (``mbfg import``) into a temporary bag, replays it
filtered and lagged, and scores both estimates and the inverse-dynamics baselines of
:mod:`mbfg_ros.benchmark.effort_scoring` against the log's recorded torque columns (normalised
RMSE). Units: s, rad (or m), N m (or N).
"""
from __future__ import annotations

import argparse
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mbfg_ros.benchmark.effort_scoring import baseline_effort, normalised_rmse
from mbfg_ros.io.log_map import load_log_map
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.model.validation import load_rig
from mbfg_ros.replay.residuals import sensor_residuals
from mbfg_ros.replay.session import ReplayOptions, replay_bag


@dataclass
class RecordedRunScore:
    """Normalised RMSE per method (:data:`~mbfg_ros.benchmark.effort_scoring.METHODS`) and driven joint (``joints``) over ``span``
    (s of log time scored: from ``skip`` after the first reading to the last), the recorded
    torque's RMS (N m or N), the seconds each sensor was flagged by the divergence test in the
    filtered replay (``diverged``: either verdict; ``lost``: judged lost, the replay's
    ``DIVERGED``), and the encoder residuals' RMS at the filtered estimate (sigmas)."""
    joints: list[str]
    scores: dict[str, np.ndarray]
    recorded_rms: np.ndarray
    span: float
    diverged: dict[str, float] = field(default_factory=dict)
    lost: dict[str, float] = field(default_factory=dict)
    residual_sigmas: dict[str, float] = field(default_factory=dict)


@dataclass
class RecordedRows:
    """A log's rows: stamps ``t`` (N,) s from ``samples.epoch_ns``, every DOF's encoder position
    ``q`` (N, n) (the reading less its encoder's config offset; NaN for a DOF without an encoder
    in the map) and the recorded torque columns ``recorded`` (N, len(torque_columns)); ``samples``
    the imported readings (:func:`~mbfg_ros.io.log_import.log_samples`)."""
    t: np.ndarray
    q: np.ndarray
    recorded: np.ndarray
    samples: object


def recorded_rows(log: str | Path, log_map, mech: Mechanism, torque_columns: dict[str, str]) -> RecordedRows:
    """Read ``log`` through ``log_map``: its stamps, encoder positions and recorded torques
    ({joint: column})."""
    from mbfg_ros.io.log_import import channel_values, check_log_map, log_samples, row_stamps
    from mbfg_ros.io.log_map import ChannelColumns
    from mbfg_ros.io.log_tables import read_log_table

    table = read_log_table(log, log_map.delimiter)
    result = log_samples(table, log_map, mech)
    ns, valid = row_stamps(table, log_map)
    t_rows = (ns[valid] - result.epoch_ns) / 1e9
    q_rows = np.full((t_rows.size, mech.n), np.nan)
    for kind, ch in check_log_map(log_map, mech):
        if kind == "encoder":
            enc = next(e.config for e in mech.encoders if e.config.name == ch.channel)
            q_rows[:, mech.index[enc.joint]] = channel_values(table, ch, ns.size)[valid, 0] - enc.offset
    recorded = np.column_stack([channel_values(table, ChannelColumns(j, (c,), (0,), 1.0, 0.0, j), ns.size)[valid, 0]
                                for j, c in torque_columns.items()])
    return RecordedRows(t_rows, q_rows, recorded, result)


def score_recorded_run(log: str | Path, log_map, mech: Mechanism, torque_columns: dict[str, str],
                       skip: float = 1.0) -> RecordedRunScore:
    """Import ``log`` with ``log_map`` (a :class:`~mbfg_ros.io.log_map.LogMap`) into a temporary
    bag, replay it filtered and lagged with ``mech``'s config, and score the estimated effort of
    each joint of ``torque_columns`` {joint: the log's recorded torque column} against it, beside
    the baselines on the imported encoder positions (each reading less its encoder's config
    offset; every DOF needs an encoder in the map).
    Each estimate is compared at its own keyframe stamps, the baselines at the filtered ones (the
    recorded torque and the baselines interpolated linearly from the log's rows)."""
    from mbfg_ros.io.log_import import write_log_bag

    rows = recorded_rows(log, log_map, mech, torque_columns)
    result, t_rows, q_rows, recorded = rows.samples, rows.t, rows.q, rows.recorded
    joints = list(torque_columns)
    idx = [mech.index[j] for j in joints]
    estimates = {}
    with tempfile.TemporaryDirectory(prefix="mbfg-score-") as tmp:
        bag = Path(tmp) / "bag"
        write_log_bag(result, mech, bag)
        for method in ("filtered", "lagged"):
            res = replay_bag(bag, mech, ReplayOptions(lagged=method == "lagged"))
            t = res.estimates.t + (res.epoch_ns - result.epoch_ns) / 1e9
            estimates[method] = (t, res.estimates.effort[:, idx])
            if method == "filtered":
                last = float(res.estimates.t[-1])
                periods = res.health.divergence.periods

                def flagged(sensor: str, lost_only: bool) -> float:
                    return sum((last if p.end is None else p.end) - p.start for p in periods
                               if p.sensor == sensor and (p.lost or not lost_only))
                diverged = {e.config.name: flagged(e.config.name, False) for e in mech.encoders}
                lost = {e.config.name: flagged(e.config.name, True) for e in mech.encoders}
                sigmas = {k: float(np.sqrt(np.mean(np.square(r.r / r.sigma)))) for k, r in
                          sensor_residuals(mech, res.layout, res.estimates, res.samples).items()}
    start, end = t_rows[0] + skip, t_rows[-1]

    def interpolated(t_at, t, y):
        return np.column_stack([np.interp(t_at, t, y[:, k], left=np.nan, right=np.nan) for k in range(y.shape[1])])

    scores = {}
    for method, (t, effort) in estimates.items():            # each estimate at its own keyframes
        keep = (t >= start) & (t <= end)
        scores[method] = normalised_rmse(effort[keep], interpolated(t[keep], t_rows, recorded))
    t_key = estimates["filtered"][0]
    t_key = t_key[(t_key >= start) & (t_key <= end)]
    reference = interpolated(t_key, t_rows, recorded)
    for name, causal in (("causal_baseline", True), ("zero_phase_baseline", False)):
        effort = baseline_effort(mech, t_rows, q_rows, causal)[:, idx]
        scores[name] = normalised_rmse(interpolated(t_key, t_rows, effort), reference)
    return RecordedRunScore(joints, scores, np.sqrt(np.nanmean(reference ** 2, axis=0)),
                            float(t_key[-1] - t_key[0]) if t_key.size else 0.0, diverged, lost, sigmas)


def add_recorded_run_arguments(p: argparse.ArgumentParser, logs_help: str = "the logs (CSV, .mat, .npz)",
                               config_help: str = "the rig config") -> None:
    """The arguments of a table over recorded runs (tools/recorded_torque_table.py,
    tools/regressor_transfer_table.py): the logs, ``--config``, ``--map``, ``--torque
    JOINT=COLUMN`` (repeatable) and ``--skip``."""
    p.add_argument("logs", nargs="+", help=logs_help)
    p.add_argument("--config", required=True, help=config_help)
    p.add_argument("--map", required=True, help="the mbfg import map of the logs")
    p.add_argument("--torque", action="append", required=True, metavar="JOINT=COLUMN",
                   help="a joint and the log's column of its recorded torque (repeatable)")
    p.add_argument("--skip", type=float, default=1.0, help="s after the first row left out (default 1)")


def recorded_run_inputs(args: argparse.Namespace):
    """(mechanism, log map, {joint: torque column}) of :func:`add_recorded_run_arguments`' arguments."""
    torque = dict(item.split("=", 1) for item in args.torque)
    return load_rig(args.config).mech, load_log_map(args.map), torque
