"""Recordings from an independent physics engine: MuJoCo simulates an open-chain rig of a config
(its URDF, its joints' armature, viscous and Coulomb friction), driven by a computed-torque
controller, and the recording goes through the project's own bag writer with the engine's truth.

Why: the project's simulator (:mod:`mbfg_ros.sim.forward`) shares its modelling choices with the
estimator (pinocchio's model, a tanh Coulomb friction). MuJoCo does not: its own URDF import and
integrator (implicit-fast, 0.5 ms), joint armature, damping, and dry friction as a constraint
(``frictionloss``), so an estimate that only fits the project's own simulator shows here.

- :func:`engine_model`: the MjModel of a config: the URDF (visual and collision elements dropped),
  ``dof_armature`` / ``dof_damping`` / ``dof_frictionloss`` from the config's ``armature``,
  ``viscous`` and ``coulomb``, the config's gravity.
- :func:`simulate_tracking`: each joint tracks ``q0 + A (sin(w t + phi) - sin(phi))`` with the
  engine's own mass matrix, bias and damping (``tau = M (a_ref + kp e + kd e') + c + d v``); the
  truth at every engine step: q, v, the engine's qacc and the applied torque (the actuator effort,
  without friction, as :class:`~mbfg_ros.sim.ground_truth.GroundTruth` has it); encoder samples at
  each encoder's rate with its Gaussian noise.
- :func:`engine_inverse_dynamics`: the engine's own inverse dynamics (``mj_inverse``) of the
  recorded motion: the check of the truth's torques.

Units: s, rad, rad/s, rad/s^2, N m. Open chains of revolute or prismatic joints (no closures).
"""
from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

import numpy as np

from mbfg_ros.errors import MbfgError
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.sim.ground_truth import GroundTruth
from mbfg_ros.sim.sensors import Sample

TIMESTEP = 0.0005
"""s: the engine's step (the truth's rate: 2 kHz)."""


@dataclass(frozen=True)
class TrackingScenario:
    """The motion the controller tracks, per joint (config joint order): amplitudes (rad or m),
    frequencies (Hz) and phases (rad); gains kp (1/s^2) and kd (1/s); ``seed`` of the encoders'
    noise. Defaults: the 0.1-0.5 Hz sines of the force tests (amplitudes 0.3-0.8 rad)."""
    duration: float = 18.0
    amplitudes: tuple[float, ...] = (0.5, 0.3, 0.5, 0.4, 0.6, 0.5, 0.8)
    frequencies: tuple[float, ...] = (0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5)
    phases: tuple[float, ...] = field(default_factory=lambda: tuple(0.7 * i for i in range(7)))
    kp: float = 400.0
    kd: float = 40.0
    seed: int = 1


def _import_mujoco():
    try:
        import mujoco
    except ImportError as exc:                       # an optional engine: say how to get it
        raise MbfgError("the independent-engine recordings need MuJoCo: pip install mujoco") from exc
    return mujoco


def engine_model(mech: Mechanism):
    """The MjModel of ``mech``'s URDF with the config's drive parameters (module docstring)."""
    mujoco = _import_mujoco()
    if mech.m:
        raise MbfgError(f"{mech.config.name}: the MuJoCo recordings are for open chains (this rig has closures)")
    root = ET.fromstring(mech.config.urdf.read_text(encoding="utf-8"))
    for link in root.iter("link"):
        for tag in ("visual", "collision"):
            for el in link.findall(tag):
                link.remove(el)
    extra = ET.SubElement(root, "mujoco")
    ET.SubElement(extra, "compiler", {"discardvisual": "true", "fusestatic": "false"})
    model = mujoco.MjModel.from_xml_string(ET.tostring(root, encoding="unicode"))
    if model.nv != mech.n:
        raise MbfgError(f"{mech.config.name}: MuJoCo reads {model.nv} joints from the URDF, the config has {mech.n}")
    dofs = engine_dofs(model, mech)
    for i, name in enumerate(mech.joint_names):
        drive = mech.config.joint(name)
        model.dof_armature[dofs[i]] = drive.armature
        model.dof_damping[dofs[i]] = drive.viscous
        model.dof_frictionloss[dofs[i]] = drive.coulomb
    model.opt.timestep = TIMESTEP
    model.opt.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    model.opt.gravity[:] = mech.config.gravity
    return model


def engine_dofs(model, mech: Mechanism) -> np.ndarray:
    """The engine's DOF index of each of ``mech``'s joints (config order)."""
    return np.array([model.jnt_dofadr[model.joint(name).id] for name in mech.joint_names])


def engine_positions(model, mech: Mechanism) -> np.ndarray:
    """The engine's qpos index of each of ``mech``'s joints (config order)."""
    return np.array([model.jnt_qposadr[model.joint(name).id] for name in mech.joint_names])


def simulate_tracking(mech: Mechanism, scenario: TrackingScenario = TrackingScenario()
                      ) -> tuple[GroundTruth, list[Sample]]:
    """Simulate ``mech`` in MuJoCo tracking ``scenario``'s sines; the truth at every engine step
    and the encoders' samples (module docstring)."""
    mujoco = _import_mujoco()
    model = engine_model(mech)
    data = mujoco.MjData(model)
    n = mech.n
    dofs = engine_dofs(model, mech)
    qadr = engine_positions(model, mech)
    amp, freq, ph = (np.resize(np.asarray(x, float), n) for x in (scenario.amplitudes, scenario.frequencies,
                                                                   scenario.phases))
    w = 2.0 * math.pi * freq
    q0 = np.array([mech.config.initial.positions.get(name, 0.0) for name in mech.joint_names], float)
    damping = model.dof_damping[dofs].copy()
    data.qpos[qadr] = q0
    data.qvel[dofs] = amp * w * np.cos(ph)
    mujoco.mj_forward(model, data)
    steps = int(round(scenario.duration / TIMESTEP))
    T = np.zeros(steps)
    Q, V, A, TAU = (np.zeros((steps, n)) for _ in range(4))
    M = np.zeros((model.nv, model.nv))
    for k in range(steps):
        t = data.time
        q, v = data.qpos[qadr].copy(), data.qvel[dofs].copy()
        arg = w * t + ph
        q_ref, v_ref, a_ref = q0 + amp * (np.sin(arg) - np.sin(ph)), amp * w * np.cos(arg), -amp * w * w * np.sin(arg)
        mujoco.mj_fullM(model, data, M)
        a_cmd = a_ref + scenario.kp * (q_ref - q) + scenario.kd * (v_ref - v)
        tau = M[np.ix_(dofs, dofs)] @ a_cmd + data.qfrc_bias[dofs] + damping * v
        data.qfrc_applied[dofs] = tau
        mujoco.mj_step(model, data)
        T[k], Q[k], V[k], A[k], TAU[k] = t, q, v, data.qacc[dofs], tau
    truth = GroundTruth(T, list(mech.joint_names), Q, V, A, TAU, [], [], np.zeros((steps, 0, 3)),
                        np.zeros((steps, 0, 3)), [], [], np.zeros((0, 3)), [], np.zeros((steps, 0)))
    return truth, encoder_samples(mech, truth, scenario.seed)


def encoder_samples(mech: Mechanism, truth: GroundTruth, seed: int) -> list[Sample]:
    """Every encoder of ``mech`` sampled at its rate from the truth's positions (linear
    interpolation between engine steps) plus its Gaussian noise, in stamp order."""
    rng = np.random.default_rng(seed)
    out: list[Sample] = []
    index = {name: i for i, name in enumerate(truth.joint_names)}
    for enc in mech.config.sensors.encoders:
        stamps = np.arange(0.0, truth.t[-1] + 1e-12, 1.0 / enc.rate)
        q = np.interp(stamps, truth.t, truth.q[:, index[enc.joint]]) + enc.noise * rng.standard_normal(stamps.size)
        out += [Sample(enc.name, "encoder", float(s), float(s), np.array([x])) for s, x in zip(stamps, q)]
    out.sort(key=lambda s: (s.stamp, s.sensor))
    return out


def engine_inverse_dynamics(mech: Mechanism, truth: GroundTruth) -> np.ndarray:
    """(N, n) the applied torque MuJoCo's own inverse dynamics (``mj_inverse``: ``qfrc_inverse``,
    the force beyond the engine's damping and dry-friction constraint forces) needs for the
    truth's (q, v, a): the check that the truth's efforts are what moved the engine."""
    mujoco = _import_mujoco()
    model = engine_model(mech)
    data = mujoco.MjData(model)
    dofs = engine_dofs(model, mech)
    qadr = engine_positions(model, mech)
    out = np.zeros_like(truth.q)
    for k in range(truth.t.size):
        data.qpos[qadr], data.qvel[dofs], data.qacc[dofs] = truth.q[k], truth.v[k], truth.a[k]
        mujoco.mj_inverse(model, data)
        out[k] = data.qfrc_inverse[dofs]
    return out
