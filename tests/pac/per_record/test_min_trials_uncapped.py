"""Issue 35 (c3010 sibling): the per-record planner's fewest-trials count had a cap (1e6)
and, past it, named a count that leaves fewer than 2 certification trials."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pacpriv.pac.per_record._calibration import _feasible, _min_trials, _split


@settings(max_examples=100, deadline=None)
@given(st.floats(1e-6, 1.0 - 1e-12, exclude_max=True),
       st.sampled_from([("anisotropic", "betting"), ("isotropic", "betting"),
                        ("anisotropic", "bernstein"), ("isotropic", "bernstein")]))
def test_min_trials_is_the_fewest_that_certify(frac, case):
    shape, bound = case
    n = _min_trials(shape, frac, bound)
    assert _split(n, shape, frac, bound)[1] >= 2
    assert n == 2 or _split(n - 1, shape, frac, bound)[1] < 2


def test_the_refusal_names_a_count_that_certifies():
    frac = 0.999999  # the capped search said 1000000 (which leaves 1 certification trial)
    with pytest.raises(ValueError, match=r"at least 1500000 trials") as info:
        _feasible(0.6, 1, 5, 0.5, 0.95, "betting", False, (100, "anisotropic", frac))
    assert "[1500000, " in str(info.value)
    assert _split(1_500_000, "anisotropic", frac, "betting")[1] == 2
