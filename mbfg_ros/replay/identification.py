"""`mbfg identify` on recordings: the bags read as the smoothing replay reads them, identified.

Each bag is read and checked as `mbfg replay --smooth` reads it (:func:`~mbfg_ros.replay.smoothing.read_eras`:
the config's sensor topics decoded as the node decodes them, put in stamp order, split at time
jumps); every era (of every bag) is one recording of
:func:`~mbfg_ros.estimation.identification.identify`, whose parameters they share. The known
input efforts come from the config's ``known`` joints' topics; :func:`with_known_inputs` makes
the ``unknown`` ones known, so that a recording where the drive's effort was measured (a motor
current, a torque sensor) identifies the model of a rig whose estimator estimates it.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from mbfg_ros.errors import MbfgError
from mbfg_ros.estimation.identification import IdentificationOptions, IdentificationResult, Identifier
from mbfg_ros.estimation.smoothing_io import Readings
from mbfg_ros.estimation.outputs import Health
from mbfg_ros.intake.time_jumps import TimeJumps, lagging_limit
from mbfg_ros.model.channels import command_joint
from mbfg_ros.model.config import RigConfig
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.replay.bag_input import BagInput
from mbfg_ros.replay.smoothing import read_eras

MIN_KEYFRAMES = 10
"""A recording (era) shorter than this many keyframes is left out (too short to smooth)."""


def with_known_inputs(cfg: RigConfig) -> RigConfig:
    """``cfg`` with every ``unknown`` input made ``known`` (read from its joint's topic)."""
    joints = {k: dataclasses.replace(j, actuation="known") if j.actuation == "unknown" else j
              for k, j in cfg.joints.items()}
    return dataclasses.replace(cfg, joints=joints)


def recording_readings(bag: str | Path, mech: Mechanism, remap: dict[str, str] | None = None,
                       max_time_gap: float = 2.0) -> list[Readings]:
    """The readings of each era of ``bag`` (s from the first stamp's whole second). Raises
    MbfgError when a known input's topic is missing (the efforts are needed) or of a type the
    config cannot read."""
    inp = BagInput(bag, mech, remap or {}, truth=False)
    held = ", ".join(f"{t} ({v['type']}, {v['count']})" for t, v in sorted(inp.bag.items())) or "no topics"
    for s in inp.missing:
        inputs = [n for n in s.sensors if command_joint(n) is not None]
        if inputs:
            raise MbfgError(f"the bag {str(bag)!r} has no topic {s.topic} (the efforts of "
                            f"{', '.join(command_joint(n) for n in inputs)}, actuation: known): the identification "
                            f"needs the efforts that drive the rig; the bag holds {held}. Map a config topic to a "
                            "bag topic with --remap CONFIG_TOPIC:=BAG_TOPIC")
    for s in inp.wrong_type:
        raise MbfgError(f"the bag {str(bag)!r} has topic {s.topic} as {s.msgtype}, but the config's sensors "
                        f"{', '.join(s.sensors)} read {' or '.join(s.expected)}")
    jumps = TimeJumps(max_time_gap=max_time_gap, max_lag=lagging_limit(mech.config.estimator.lag))
    eras = read_eras(inp, jumps, Health(), None)
    stamps = [int(v[0].min()) for era in eras for v in era.values() if len(v[0])]
    if not stamps:
        raise MbfgError(f"nothing to identify from {str(bag)!r}: no usable sensor reading")
    epoch = (min(stamps) // 1_000_000_000) * 1_000_000_000
    out = []
    h = 1.0 / mech.config.estimator.keyframe_rate
    for era in eras:
        readings = Readings()
        for sensor, (ts, ys) in era.items():
            t = (ts - epoch) * 1e-9
            y = ys.reshape(t.size, -1)
            joint = command_joint(sensor)
            (readings.commands if joint is not None else readings.sensors)[joint or sensor] = (t, y)
        spans = [float(np.ptp(t)) for t, _ in readings.sensors.values() if t.size]
        if spans and max(spans) >= MIN_KEYFRAMES * h:
            out.append(readings)
    if not out:
        raise MbfgError(f"nothing to identify from {str(bag)!r}: no stretch of readings longer than "
                        f"{MIN_KEYFRAMES} keyframes")
    return out


def identify_bags(bags: list[str | Path], mech: Mechanism, options: IdentificationOptions | None = None,
                  remap: dict[str, str] | None = None) -> IdentificationResult:
    """Identify ``mech``'s parameters from every era of ``bags`` together."""
    identifier = Identifier(mech, options)
    recordings = [r for bag in bags for r in recording_readings(bag, mech, remap)]
    return identifier.identify(recordings)
