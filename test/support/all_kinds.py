"""A rig with every closure kind, every sensor kind, friction, known and unknown inputs, a mass
scale and two springs (one between moving bodies, one to the ground), on the spatial RSUR's URDF:
the derivative tests' worst case."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import yaml

from mbfg_ros.model.config import parse_rig_config
from mbfg_ros.model.mechanism import Mechanism

ROOT = Path(__file__).resolve().parent.parent.parent

ALL_KINDS_YAML = f"""
mechanism:
  urdf: {ROOT / 'urdf' / 'spatial_rsur.urdf'}
  gravity: [0.3, -0.2, -9.81]
  dof: [crank_joint]
  initial: {{positions: {{crank_joint: 0.3}}}}
frames:
  - {{name: coupler_tip, parent: coupler, xyz: [0.0, 0.5, 0.0], rpy: [0.1, -0.2, 0.3]}}
  - {{name: rocker_tip, parent: rocker, xyz: [0.0, 0.0, -0.3], rpy: [-0.3, 0.2, 0.1]}}
  - {{name: crank_tip, parent: crank, xyz: [0.2, 0.01, 0.0]}}
  - {{name: ground_anchor, parent: world, xyz: [0.4, -0.3, 0.5]}}
springs:
  - {{name: s_moving, frame_a: crank_tip, frame_b: coupler_tip, stiffness: 50.0, rest_length: 0.2, damping: 3.0}}
  - {{name: s_ground, frame_a: ground_anchor, frame_b: rocker_tip, stiffness: 120.0, rest_length: 0.05, damping: 0.5}}
closures:
  - {{name: c_point, type: point, frame_a: coupler_tip, frame_b: rocker_tip}}
  - {{name: c_planar, type: planar_revolute, frame_a: crank_tip, frame_b: rocker_tip, plane_normal: [0.2, 0.1, 1.0]}}
  - {{name: c_revolute, type: revolute, frame_a: coupler_tip, frame_b: rocker_tip, axis: [0.3, 0.4, 0.87]}}
  - {{name: c_prismatic, type: prismatic, frame_a: crank_tip, frame_b: rocker_tip, axis: [0.0, 0.6, 0.8]}}
  - {{name: c_planar_prismatic, type: planar_prismatic, frame_a: crank_tip, frame_b: coupler_tip, axis: [1.0, 0.0, 0.0]}}
  - {{name: c_weld, type: weld, frame_a: coupler_tip, frame_b: rocker_tip}}
  - {{name: c_distance, type: distance, frame_a: crank_tip, frame_b: rocker_tip, length: 0.5}}
joints:
  crank_joint: {{actuation: unknown, viscous: 0.3, coulomb: 0.2, armature: 0.05, offset: 0.1}}
  rocker_joint: {{actuation: known, viscous: 0.1, armature: 0.02, offset: -0.3}}
sensors:
  gyros:
    - {{name: g, frame: coupler, rotation_rpy: [0.2, 0.3, -0.4], noise: 0.01, topic: /g}}
  load_cells:
    - {{name: lc_force, measures: closure, closure: c_revolute, component: force, axis: [0.6, 0.0, 0.8], frame: crank, noise: 1.0, topic: /l1}}
    - {{name: lc_torque, measures: closure, closure: c_weld, component: torque, axis: [0.0, 0.6, 0.8], noise: 1.0, topic: /l2}}
    - {{name: lc_distance, measures: closure, closure: c_distance, axis: [1.0, 0.0, 0.0], noise: 1.0, topic: /l3}}
    - {{name: lc_joint, measures: joint, joint: u2_joint, component: torque, axis: [0.0, 0.0, 1.0], noise: 1.0, topic: /l4}}
    - {{name: lc_joint_f, measures: joint, joint: rocker_joint, component: force, axis: [0.0, 1.0, 0.0], frame: rocker_tip, noise: 1.0, topic: /l5}}
    - {{name: lc_act, measures: actuator, joint: crank_joint, noise: 1.0, topic: /l6}}
estimator:
  estimate_mass_link: coupler
"""


@lru_cache(maxsize=1)
def all_kinds_mechanism() -> Mechanism:
    return Mechanism(parse_rig_config(yaml.safe_load(ALL_KINDS_YAML)))
