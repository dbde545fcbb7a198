"""The budget of background work (mbfg_ros/estimation/background_work.py): a share of one core,
and costly pieces that start only if they fit before the caller's deadline."""
from __future__ import annotations

import math

import pytest

from mbfg_ros.estimation.background_work import PieceCost, WorkShare


def test_the_share_takes_its_fraction_of_the_wall_time_and_pays_an_overrun_back():
    """Ticks every 4 ms for 10 s, each offering 3 ms spare; the work uses what the share allows,
    now and then overrunning by a 2 ms piece: over the run it takes its share within a window's
    credit, and after an overrun none until paid back."""
    share, used, now = WorkShare(0.1), 0.0, 0.0
    for tick in range(2500):
        now = tick * 0.004
        allowed = max(0.0, min(share.until(now) - now, 0.003))
        took = allowed + (0.002 if tick % 100 == 50 and allowed > 0 else 0.0)
        share.spent(took)
        used += took
    assert used == pytest.approx(0.1 * 10.0, abs=0.1 * WorkShare.WINDOW)
    share.until(now + 0.004)
    share.spent(0.05)                                     # a 50 ms overrun
    assert share.until(now + 0.008) < now + 0.008         # nothing now ...
    assert share.until(now + 0.6) > now + 0.6             # ... until 0.5 s at 0.1 repaid it


def test_the_saved_credit_is_bounded_and_a_full_share_is_no_limit():
    share = WorkShare(0.2)
    share.until(0.0)
    assert share.until(100.0) - 100.0 == pytest.approx(0.2 * WorkShare.WINDOW)
    assert WorkShare(1.0).until(5.0) == math.inf


def test_a_costly_piece_starts_only_if_its_recent_cost_fits_or_after_patience():
    cost = PieceCost(0.001)
    assert cost.fits(0.0015) and not cost.fits(0.0005) and not cost.fits(0.0)
    for _ in range(PieceCost.HISTORY):
        cost.took(0.004)
    assert cost.estimate == pytest.approx(0.004)
    refused = 0
    while not cost.fits(0.001):
        refused += 1
    assert refused == PieceCost.PATIENCE        # then it starts anyway (the work must end)
    cost.took(0.004)
    assert not cost.fits(0.001)                 # and waits again
