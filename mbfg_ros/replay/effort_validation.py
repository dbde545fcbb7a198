"""Held-out recordings for `mbfg identify --validate`: does the identified model explain the
efforts of runs it was not identified on better than the config's model?

Identification fits whatever one recording holds, the run's own model error included (a torque
sensor's offset, a drive's current-based torque, an encoder's zero); only recordings it never
saw tell the rig's constants from that run's. Each held-out recording is read as the identified
ones (:func:`~mbfg_ros.replay.identification.recording_readings`: the known efforts from the
config's input topics) and each model is scored by the offline inverse dynamics of its encoder
positions (:func:`~mbfg_ros.benchmark.effort_scoring.baseline_effort`, zero-phase Savitzky-Golay
derivatives over :data:`WINDOW_SPAN`: the model alone, no estimator), against the recorded efforts, as the normalised
RMSE per joint with a known effort (RMSE / RMS of the recorded effort; 1.0 is what zero
scores). Open chains with an encoder on every joint only.

Units: s, rad (or m), N m (or N).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mbfg_ros.benchmark.effort_scoring import ZERO_PHASE_WINDOW, baseline_effort, normalised_rmse
from mbfg_ros.errors import MbfgError
from mbfg_ros.estimation.smoothing_io import Readings
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.replay.identification import recording_readings


WINDOW_SPAN = ZERO_PHASE_WINDOW / 500.0
"""s spanned by the zero-phase Savitzky-Golay window (0.142 s: the double pendulum's
:data:`~mbfg_ros.benchmark.effort_scoring.ZERO_PHASE_WINDOW` samples at its 500 Hz), in samples
at the recording's median sample period (odd, at least 5)."""


def window_samples(t: np.ndarray) -> int:
    """The zero-phase window in samples of stamps ``t`` (s): :data:`WINDOW_SPAN`, odd, at least 5."""
    dt = float(np.median(np.diff(t))) if t.size > 1 else 0.0
    k = int(round(WINDOW_SPAN / dt)) if dt > 0 else 5
    return max(5, k + (k % 2 == 0))


@dataclass(frozen=True)
class HeldOutFit:
    """One held-out recording (``name``; ``era`` its stretch between time jumps): per joint of
    ``joints`` (those with a recorded effort), the normalised effort RMSE of the config's model
    (``config``) and of the identified one (``identified``) over ``span`` s, and the recorded
    effort's RMS (N m or N)."""
    name: str
    era: int
    joints: list[str]
    config: np.ndarray
    identified: np.ndarray
    effort_rms: np.ndarray
    span: float


def encoder_positions(mech: Mechanism, readings: Readings, source: str) -> tuple[np.ndarray, np.ndarray]:
    """The stamps (N,) s of the first joint's encoder and every joint's position (N, n) there
    (each encoder's reading less its config offset, interpolated linearly onto those stamps).
    Raises MbfgError naming ``source`` when the rig has closures or a joint has no encoder."""
    if mech.m:
        raise MbfgError(f"--validate {source}: the held-out effort fit is for open chains (this rig has closures)")
    by_joint = {e.config.joint: e for e in mech.encoders}
    missing = [j for j in mech.joint_names if j not in by_joint or by_joint[j].config.name not in readings.sensors]
    if missing:
        raise MbfgError(f"--validate {source}: no encoder readings of {', '.join(missing)} (the held-out effort "
                        "fit needs every joint's position)")
    series = []
    for j in mech.joint_names:
        enc = by_joint[j]
        t, y = readings.sensors[enc.config.name]
        t, y = np.asarray(t, float), np.asarray(y, float).reshape(-1)
        keep = np.isfinite(t) & np.isfinite(y)
        order = np.argsort(t[keep], kind="stable")
        series.append((t[keep][order], y[keep][order] - enc.config.offset))
    t0 = series[0][0]
    q = np.column_stack([np.interp(t0, t, y, left=np.nan, right=np.nan) for t, y in series])
    return t0, q


def held_out_fit(readings: Readings, config_mech: Mechanism, identified_mech: Mechanism, name: str,
                 era: int = 0) -> HeldOutFit:
    """Score ``config_mech`` and ``identified_mech`` (the same rig, each with its own encoder
    offsets) on one held-out recording's readings (see the module docstring). Raises MbfgError
    naming ``name`` when there is nothing to compare."""
    t, q = encoder_positions(config_mech, readings, name)
    q_identified = encoder_positions(identified_mech, readings, name)[1]     # (its own encoder offsets)
    joints = [j for j in config_mech.joint_names if j in readings.commands]
    if not joints:
        raise MbfgError(f"--validate {name}: no recorded effort of any joint to compare with")
    idx = [config_mech.index[j] for j in joints]
    recorded = np.column_stack([np.interp(t, *_sorted(readings.commands[j]), left=np.nan, right=np.nan)
                                for j in joints])
    window = window_samples(t)
    efforts = [baseline_effort(mech, t, x, causal=False, window=window)[:, idx]
               for mech, x in ((config_mech, q), (identified_mech, q_identified))]
    ok = np.all(np.isfinite(recorded), axis=1) & np.all(np.isfinite(efforts[0]), axis=1)
    if not ok.any():
        raise MbfgError(f"--validate {name}: too short for the zero-phase derivatives")
    scores = [normalised_rmse(e[ok], recorded[ok]) for e in efforts]
    return HeldOutFit(name, era, joints, scores[0], scores[1], np.sqrt(np.mean(recorded[ok] ** 2, axis=0)),
                      float(np.ptp(t[ok])))


def held_out_fits(recordings: list[str | Path], config_mech: Mechanism, identified_mech: Mechanism,
                  remap: dict[str, str] | None = None, names: list[str] | None = None) -> list[HeldOutFit]:
    """:func:`held_out_fit` of each era of each held-out bag of ``recordings``, read with
    ``config_mech`` (its known inputs' topics hold the recorded efforts); ``names``: what to
    call each recording (default: the bag's file name)."""
    return [held_out_fit(readings, config_mech, identified_mech, names[i] if names else Path(bag).name, k)
            for i, bag in enumerate(recordings)
            for k, readings in enumerate(recording_readings(bag, config_mech, remap))]


def _sorted(series: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    t, y = np.asarray(series[0], float), np.asarray(series[1], float).reshape(-1)
    order = np.argsort(t, kind="stable")
    return t[order], y[order]
