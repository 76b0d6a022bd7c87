"""Issue 9 item 7: homonyms split; the deprecated aliases are gone in 0.4."""

from __future__ import annotations

import numpy as np
import pytest

import pacpriv.dpsgd as dpsgd
import pacpriv.pac as pac
from pacpriv.compare import ComparisonRow


def test_pac_accuracy_for_mi_budget_is_the_posterior_bound_at_prior_half():
    v = np.array([0.0, 1 / 64, 0.25, np.log(2.0)])
    np.testing.assert_array_equal(
        pac.accuracy_for_mi_budget(v), pac.posterior_success_rate(v, prior=0.5)
    )
    assert pac.accuracy_for_mi_budget(1 / 64) == pytest.approx(0.5881573838, abs=1e-9)
    assert pac.mi_budget_for_accuracy(pac.accuracy_for_mi_budget(0.1), prior=0.5) == pytest.approx(
        0.1)


def test_old_pac_names_are_gone():
    """0.4 removed the 0.3 aliases: pacpriv.pac.membership_inference_accuracy_bound (now
    accuracy_for_mi_budget) and the empirical attack's old home (now pacpriv.audit)."""
    for old in ("membership_inference_accuracy_bound", "EmpiricalAttackResult",
                "empirical_membership_attack"):
        assert not hasattr(pac, old) and old not in pac.__all__


def test_accountant_rows_no_longer_share_the_comparison_row_name():
    assert dpsgd.AccountantRow is not ComparisonRow
    table = dpsgd.compare_accountants(steps_per_epoch=10, epochs=2, noise_multiplier=2.0,
                                      methods=("chi-square",))
    assert all(isinstance(r, dpsgd.AccountantRow) for r in table.rows)
    assert not hasattr(dpsgd, "ComparisonRow") and "ComparisonRow" not in dpsgd.__all__


def test_unknown_attributes_still_raise():
    with pytest.raises(AttributeError):
        pac.no_such_name  # noqa: B018
    with pytest.raises(AttributeError):
        dpsgd.no_such_name  # noqa: B018
