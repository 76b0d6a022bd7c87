"""The shared Clopper–Pearson interval (pacpriv._stats): both alternatives, against scipy."""

from __future__ import annotations

import pytest
from scipy import stats

from pacpriv._stats import clopper_pearson


@pytest.mark.parametrize(("k", "n"), [(0, 1), (0, 20), (3, 20), (19, 20), (137, 400)])
def test_one_sided_upper_limit_is_the_beta_quantile(k, n):
    """``alternative="less"``: (0, Beta(confidence; k+1, n−k)), bit for bit."""
    low, high = clopper_pearson(k, n, 0.99, alternative="less")
    assert low == 0.0
    assert high == float(stats.beta.ppf(0.99, k + 1, n - k))
    # it is the upper end of the two-sided interval at level 1 − 2·(1 − 0.99)
    assert high == pytest.approx(clopper_pearson(k, n, 0.98)[1], rel=1e-9)
    # coverage: at p = high, seeing k or fewer successes has probability exactly 1 − 0.99
    assert stats.binom.cdf(k, n, high) == pytest.approx(0.01, rel=1e-6)


def test_one_sided_upper_limit_is_one_when_every_trial_succeeded():
    assert clopper_pearson(20, 20, 0.999, alternative="less") == (0.0, 1.0)


def test_two_sided_interval_is_scipys_exact_interval():
    ci = stats.binomtest(7, 30).proportion_ci(confidence_level=0.9, method="exact")
    assert clopper_pearson(7, 30, 0.9) == (float(ci.low), float(ci.high))


def test_unknown_alternative_is_refused():
    with pytest.raises(ValueError, match="must be 'two-sided' or 'less'; got 'greater'"):
        clopper_pearson(1, 2, 0.9, alternative="greater")
