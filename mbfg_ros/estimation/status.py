"""What an estimator reports at one moment: the snapshot /diagnostics is built from.

Both estimators produce it: the online :class:`~mbfg_ros.estimation.estimator.Estimator`
(:meth:`EstimatorStatus.of`, from its public counts, health and newest estimate) and the offline
smoothing replay (from the counts and health it keeps per era and the keyframe it writes), so
:func:`mbfg_ros.io.estimate_messages.diagnostics_message` needs neither.
"""
from __future__ import annotations

from dataclasses import dataclass

from mbfg_ros.estimation.outputs import Estimate, Health, SensorCounts


@dataclass(frozen=True)
class EstimatorStatus:
    """``counts`` per sensor (and ``command:<joint>``), the solver's ``health``, the newest
    ``estimate`` (None before the first keyframe) and the ``keyframe_rate`` (Hz; the update
    time is judged against its period). The counts and health are the estimator's own objects,
    read as they are when the snapshot is used (at once: /diagnostics)."""
    counts: dict[str, SensorCounts]
    health: Health
    estimate: Estimate | None
    keyframe_rate: float

    @classmethod
    def of(cls, estimator) -> "EstimatorStatus":
        """The status of an online estimator now (its public ``counts()``, ``health``,
        ``estimate()`` and ``cfg``)."""
        return cls(estimator.counts(), estimator.health, estimator.estimate(), estimator.cfg.keyframe_rate)
