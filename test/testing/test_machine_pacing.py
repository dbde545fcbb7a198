"""The machine's cost of pacing: a fixed native piece back to back and with sleeps between."""
import math

from mbfg_ros.testing.machine_pacing import PacedFactor, paced_factor


def test_paced_factor_times_the_same_piece_both_ways():
    f = paced_factor(0.001, pieces=30)
    assert f.back_to_back_us > 0 and f.paced_us > 0 and f.period_ms == 1.0
    assert math.isfinite(f.factor) and f.factor == f.paced_us / f.back_to_back_us
    # (no bound on the factor: it is what the machine charges, 1 on bare metal, 2-4 here)


def test_factor_of_nothing_timed_is_nan():
    assert math.isnan(PacedFactor(0.0, 5.0, 4.0).factor)
