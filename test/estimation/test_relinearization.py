"""The relinearization threshold near singular poses (mbfg_ros.estimation.relinearization
.SingularityThreshold), on the five-bar whose couplers come in line (config/five_bar_branch.yaml):
unchanged while the closures' dependent block is as well conditioned as the run has seen it,
divided by the square of its worsening beyond NEAR_SINGULAR_MARGIN, never below
NEAR_SINGULAR_FLOOR (a configured threshold below it is kept)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from mbfg_ros.estimation.relinearization import NEAR_SINGULAR_FLOOR, NEAR_SINGULAR_MARGIN, SingularityThreshold
from mbfg_ros.model.assembly import assemble, condition_number
from support.simulations import config_mechanism


def _phi_q(mech, data, crank1: float, crank2: float, hint: np.ndarray) -> np.ndarray:
    q = assemble(mech, data, np.array([crank1, crank2]), hint).q
    return mech.closure_position(data, q)[1]


def test_the_threshold_falls_near_a_branch_change():
    mech = config_mechanism("five_bar_branch")
    data = mech.create_data()
    hint = np.array([0.0, 1.09, np.pi, -0.84])
    generic = _phi_q(mech, data, 0.0, np.pi, hint)            # crank tips 2 m apart
    # cranks at pi - al and al: the tips 3 + cos(al) m apart; 3.5 m - 2 mm: the couplers (1.6 m +
    # 1.9 m) nearly in line
    al = math.acos(0.5 - 0.002)
    near = _phi_q(mech, data, np.pi - al, al, np.array([np.pi - al, -0.3, al, -2.5]))
    # the tips 3.4 m apart: worse conditioned, not yet at the floor
    be = math.acos(0.4)
    mid = _phi_q(mech, data, np.pi - be, be, np.array([np.pi - be, -0.6, be, -2.3]))
    th = SingularityThreshold(3e-3, mech.dependent)
    th.observe(generic)
    assert th.rank == 2 and th.value == 3e-3
    best = th.best
    th.observe(mid)
    c_mid = condition_number(mid[:, mech.dependent], 2)
    assert th.best == best and th.condition == pytest.approx(c_mid)
    expected = 3e-3 / max(1.0, c_mid / (NEAR_SINGULAR_MARGIN * best)) ** 2
    assert NEAR_SINGULAR_FLOOR < th.value < 3e-3 and th.value == pytest.approx(expected)
    th.observe(near)
    assert th.condition > 10 * best and th.value == NEAR_SINGULAR_FLOOR
    th.observe(generic)                                        # back: unchanged again
    assert th.value == 3e-3
    fine = SingularityThreshold(5e-5, mech.dependent)         # configured below the floor: kept
    fine.observe(generic)
    fine.observe(near)
    assert fine.value == 5e-5
