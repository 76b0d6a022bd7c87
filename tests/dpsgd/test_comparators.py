"""Tests for pacpriv.dpsgd.comparators (other accountants on the accuracy axis)."""

from __future__ import annotations

import json
import math

import pytest

from pacpriv.dpsgd import compare_accountants, exact_membership_inference_accuracy
from pacpriv.dpsgd.comparators import ckp_accuracy, gdp_clt_accuracy


def test_closed_forms_values():
    """CKP and GDP CLT match their formulas (MATH.md sources)."""
    assert ckp_accuracy(1.0, steps_per_epoch=100, epochs=100) == pytest.approx(
        0.5 + 0.5 * math.erf(1 / (2 * math.sqrt(2)))
    )
    mu = math.sqrt(math.expm1(1.0))
    assert gdp_clt_accuracy(1.0, steps_per_epoch=4, epochs=4) == pytest.approx(
        0.5 * (1 + math.erf(mu / 2 / math.sqrt(2)))
    )


def test_ckp_understates_exact():
    """CKP leading term is below the certified exact lower bound: labelled approximation."""
    exact = exact_membership_inference_accuracy(1.0, steps_per_epoch=100, epochs=10)
    assert ckp_accuracy(1.0, steps_per_epoch=100, epochs=10) < exact.lower


def test_table_closed_forms_and_exact():
    """Table with chi-square, exact, CKP and GDP rows; σ inverses reproduce the target."""
    t = compare_accountants(
        steps_per_epoch=100, epochs=10, noise_multiplier=1.0, target_accuracy=0.6,
        methods=("chi-square", "exact", "ckp", "gdp-clt"), timeout=600,
    )
    rows = {r.method.split()[0]: r for r in t.rows}
    assert set(rows) == {"chi-square", "exact,", "CKP", "GDP"}
    assert rows["exact,"].accuracy <= rows["chi-square"].accuracy
    chi2_sigma = rows["chi-square"].noise_multiplier_for_target
    assert rows["exact,"].noise_multiplier_for_target < chi2_sigma
    assert ckp_accuracy(rows["CKP"].noise_multiplier_for_target, steps_per_epoch=100,
                        epochs=10) == pytest.approx(0.6)
    assert gdp_clt_accuracy(rows["GDP"].noise_multiplier_for_target, steps_per_epoch=100,
                            epochs=10) == pytest.approx(0.6)
    assert rows["CKP"].kind.startswith("approximation") and rows["chi-square"].kind == "bound"
    json.dumps(t.to_dict())
    assert "| method |" in t.to_markdown()


def test_poisson_pld_row():
    """Poisson-subsampled PLD (dp-accounting) row: accuracy in (½, 1]."""
    pytest.importorskip("dp_accounting")
    t = compare_accountants(steps_per_epoch=10, epochs=2, noise_multiplier=2.0,
                            methods=("poisson-pld",))
    assert 0.5 < t.rows[0].accuracy <= 1.0


def test_error_missing_inputs():
    """Neither σ nor target is an error."""
    with pytest.raises(ValueError, match="noise_multiplier"):
        compare_accountants(steps_per_epoch=10, epochs=1)


def test_error_unknown_method():
    """Unknown method names are rejected."""
    with pytest.raises(ValueError, match="unknown methods"):
        compare_accountants(steps_per_epoch=10, epochs=1, noise_multiplier=1.0, methods=("x",))


@pytest.mark.slow  # ~10 s: the Poisson σ search runs dp-accounting a dozen times
def test_k_of_t_rows_beside_poisson_at_rate_k_over_t():
    """k = 4 of t = 20: the chi-square and certified rows are k-of-t, Poisson runs at rate
    k/t = 0.2 over t·E steps (its accuracy equals a direct dp-accounting call), and each row
    gives its σ for the target."""
    from pacpriv.dpsgd.comparators import _poisson_accuracy

    t = compare_accountants(steps_per_epoch=20, epochs=2, target_accuracy=0.6, k=4,
                            methods=("chi-square", "exact", "poisson-pld"), timeout=None,
                            progress=False)
    rows = {r.method: r for r in t.rows}
    assert t.k == 4 and "k=4" in t.to_markdown()
    chi = rows["chi-square, hypergeometric (k of t)"]
    cert = rows["k of t, certified (pacpriv)"]
    pois = rows["Poisson subsampling, dp-accounting PLD"]
    assert "interval [" in cert.note and "4 of 20" in cert.note
    if "Monte Carlo" in cert.note:  # else the pruned lower chain: a deterministic interval
        assert "confidence 0.999" in cert.note and "one-of-5 over 8 epochs" in cert.note
    assert cert.noise_multiplier_for_target < chi.noise_multiplier_for_target
    assert pois.accuracy == pytest.approx(_poisson_accuracy(t.noise_multiplier, 20, 2, 1e-3, 4))
    # Feldman & Shenfeld 2025: k of t is about as private as Poisson at rate k/t
    assert 0.9 < cert.noise_multiplier_for_target / pois.noise_multiplier_for_target < 1.15
