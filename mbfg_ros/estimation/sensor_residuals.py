"""The sensors of the factor graph: each compiled sensor (:mod:`mbfg_ros.sensors`) with where its
bias sits in the state, giving the whitened symbolic residual of one reading at the state
interpolated to the reading's stamp.

A :class:`SensorResidual` says how many values a reading carries (``dim``), how many residual
rows it gives (``rows``), whether it needs the known input efforts at its stamp (``needs_tau``),
and builds ``error(sym, z, y, tau)``: (measured - predicted) / sigma as CasADi SX, where ``z``
is the interpolated state (:class:`~mbfg_ros.sensors.base.StateParts`) and ``sym`` the
mechanism's :class:`~mbfg_ros.model.symbolic.SymbolicMechanism`. The step function
(:mod:`mbfg_ros.estimation.step_function`) stacks them, with robust weights, into its rows. The
model itself is the sensor kind's (:meth:`~mbfg_ros.sensors.base.SensorModel.residual`): adding
a kind adds nothing here.
"""
from __future__ import annotations

from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.sensors.base import SensorModel, StateParts
from mbfg_ros.sensors.encoder import wrap_angle

__all__ = ["SensorResidual", "StateParts", "sensor_residuals", "wrap_angle"]


class SensorResidual:
    """One sensor of the estimator: its model (``model``), its place among the sensors of its
    kind (``index``) and the columns of its bias within the state's bias block (``bias``, or
    None)."""

    def __init__(self, model: SensorModel, index: int, bias: slice | None) -> None:
        self.model = model
        self.name = model.name
        self.kind = model.kind
        self.index = index
        self.dim = model.dim
        self.rows = model.residual_rows
        self.needs_tau = model.needs_tau
        self.sigma = model.noise
        self.rate = model.rate
        self.bias = bias

    def error(self, sym, z: StateParts, y, tau):
        bias = z.b[self.bias.start:self.bias.stop] if self.bias is not None else None
        return self.model.residual(sym, z, y, tau, bias)


def sensor_residuals(mech: Mechanism, bias_slices) -> list[SensorResidual]:
    """The residual of every measuring sensor, in the estimator's order (the mechanism's:
    encoders, gyros, load cells, accelerometers; ``bias_slices``: StateLayout.bias_slices, one
    per sensor)."""
    out: list[SensorResidual] = []
    counts: dict[str, int] = {}
    for model, bias in zip(mech.sensors, bias_slices):
        k = counts.get(model.kind, 0)
        counts[model.kind] = k + 1
        out.append(SensorResidual(model, k, bias))
    return out
