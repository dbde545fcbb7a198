"""One validation of a rig for every face: ``mbfg check``, ``mbfg replay``, ``mbfg simulate`` and
the nodes all load a rig through :func:`load_rig`, so what ``check`` refuses the node refuses at
start-up, with the same one line naming the file, the field and the value.

Reading checks every field as it goes: :mod:`mbfg_ros.model.config` (types, names, the range of
every number: rates, lag, keyframe rate, window, gravity, noises) and :mod:`mbfg_ros.model.urdf`
(a tree without cycles; every ``<inertial>`` a physical one: mass >= 0, inertia positive
definite and obeying the triangle inequality, no inertia without mass; every moving body with
mass). Compiling the :class:`~mbfg_ros.model.mechanism.Mechanism` checks every name. Then
:func:`check_rig` checks what only the assembled mechanism shows:

- the config lists at least one sensor (an estimator with none has nothing to estimate from);
- the initial pose assembles (``mechanism.initial``) and ``mechanism.dof`` names as many
  independent coordinates as the mechanism has degrees of freedom: n minus the rank of the
  closure Jacobian Phi_q at a generic pose (the largest rank over the assembled pose and a few
  random assembled poses near it, relative tolerance
  :data:`~mbfg_ros.model.assembly.RANK_TOLERANCE`), so that neither an initial pose where links
  are in line nor closure rows that are redundant everywhere (Bricard's mechanism) change the
  count, and the other coordinates can absorb every closure there;
- the pose is not singular or near-singular: the condition number of Phi_q and of its block on
  the dependent coordinates (which the DOF drive), over that generic rank (largest / r-th
  largest singular value; infinite where the pose has lost rank), must stay below
  :data:`SINGULAR_CONDITION` (a dead centre, a toggle pose: the motion there is not determined
  by the DOF);
- the mass matrix is positive definite at that pose.

Every failure is a :class:`~mbfg_ros.errors.ConfigError` with the config file and the field.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mbfg_ros.errors import AssemblyError, ConfigError
from mbfg_ros.model.assembly import GenericRank, check_dof_choice, condition_number, initial_state
from mbfg_ros.model.config import load_rig_config
from mbfg_ros.model.mechanism import Mechanism

SINGULAR_CONDITION = 1e6
"""Largest condition number (largest / r-th largest singular value, r the rank at a generic
pose) of the closure Jacobian, and of its block on the dependent coordinates, at the initial
pose. (During a run the simulator passes singular positions: mbfg_ros/sim/constrained_dynamics.py.)
The example rigs are below 10; a dead centre or a toggle pose is above 1e7."""


@dataclass(frozen=True)
class RigCheck:
    """A rig that passed every check: its Mechanism, the assembled initial state (q0, v0), the
    ranks of the closure Jacobian at a generic pose and its condition numbers (all rows; the
    dependent block) at q0 over that rank (1.0 for an open chain)."""
    mech: Mechanism
    q0: np.ndarray
    v0: np.ndarray
    ranks: GenericRank
    closure_condition: float
    dof_condition: float

    @property
    def dof(self) -> int:
        """The number of degrees of freedom: n minus the closures' generic rank."""
        return self.mech.n - self.ranks.closures


def _pose(mech: Mechanism, q: np.ndarray) -> str:
    return ", ".join(f"{n}={q[i]:.6g}" for i, n in enumerate(mech.joint_names))


def check_rig(mech: Mechanism) -> RigCheck:
    """Check what only the compiled and assembled rig shows (see the module docstring)."""
    cfg = mech.config
    file = str(cfg.source) if cfg.source else None
    if not cfg.sensors.all():
        raise ConfigError("the config lists no sensor (encoders, gyros or load_cells): the "
                          "estimator would have nothing to estimate from", file=file, field="sensors")
    data = mech.create_data()
    try:
        q0, v0 = initial_state(mech, data)
    except AssemblyError as exc:
        value = list(mech.dof_names) if exc.field == "mechanism.dof" else {**cfg.initial.positions}
        raise ConfigError(str(exc), file=file, field=exc.field, value=value) from None
    try:
        ranks = check_dof_choice(mech, data, q0)
    except AssemblyError as exc:
        raise ConfigError(str(exc), file=file, field="mechanism.dof", value=list(mech.dof_names)) from None
    _, J = mech.closure_position(data, q0)
    closure_cond = condition_number(J, ranks.closures)
    if closure_cond > SINGULAR_CONDITION:
        raise ConfigError(
            f"the initial pose ({_pose(mech, q0)}) is singular or nearly so: the closure Jacobian's "
            f"condition number is {closure_cond:.3g} (limit {SINGULAR_CONDITION:g}; over its rank "
            f"{ranks.closures} at a generic pose): links in line (a toggle or dead-centre pose) where "
            "the motion is not determined; start from another pose", file=file,
            field="mechanism.initial.positions", value={**cfg.initial.positions})
    dof_cond = condition_number(J[:, mech.dependent], ranks.closures)
    if dof_cond > SINGULAR_CONDITION:
        raise ConfigError(
            f"the DOF [{', '.join(mech.dof_names)}] cannot drive the mechanism at the initial pose "
            f"({_pose(mech, q0)}): the closure Jacobian on the other joints has condition number "
            f"{dof_cond:.3g} (limit {SINGULAR_CONDITION:g}), a dead centre for this choice of DOF; "
            "choose other joints in mechanism.dof or another initial pose", file=file,
            field="mechanism.dof", value=list(mech.dof_names))
    M = mech.mass_matrix(data, q0)
    eig, vec = np.linalg.eigh(M)
    if not eig[0] > 1e-12 * max(1.0, abs(eig[-1])):
        worst = mech.joint_names[int(np.argmax(np.abs(vec[:, 0])))]
        raise ConfigError(f"the mass matrix is singular at the initial pose (smallest eigenvalue "
                          f"{eig[0]:.3g}): the bodies moved by joint '{worst}' lack mass or inertia",
                          file=str(cfg.urdf), field=f"joint[{worst}]")
    return RigCheck(mech, q0, v0, ranks, closure_cond, dof_cond)


def load_rig(config: str | Path, *, urdf: str | Path | None = None,
             robot_description: str | None = None) -> RigCheck:
    """Read, compile and check the rig of ``config`` (a mechanism config file); ``urdf`` (a
    file) or ``robot_description`` (URDF text) replace the config's URDF. Raises ConfigError
    naming the file, the field and the value."""
    path = Path(config)
    try:
        if robot_description is not None:
            cfg = load_rig_config(path, urdf_override=Path("<robot_description>"))
            mech = Mechanism(cfg, urdf_xml=robot_description)
        else:
            cfg = load_rig_config(path, urdf_override=Path(urdf).expanduser().resolve() if urdf else None)
            mech = Mechanism(cfg)
    except ConfigError as exc:
        raise exc.with_file(str(path)) from None
    return check_rig(mech)
