"""Issue 35 (q1, k12): bounds at the ends of the budget range say what is true.

q1: at ``mi_budget = 5e-324`` the Pinsker bound was computed and printed equal to the prior
(``v / 2`` underflowed to 0); a bound strictly above the prior in truth must never be shown at or
below it, in the API, the CLI's text and JSON, and the rounding helpers.
k12: the vacuous-bound warning said "at least ln(1/prior)" for 0.6931471805596259 < ln 2.
"""

from __future__ import annotations

import json
import math
import warnings
from decimal import Decimal

import numpy as np
import pytest

from pacpriv._numbers import format_bound, format_percent
from pacpriv.cli import main
from pacpriv.exceptions import VacuousBoundWarning
from pacpriv.pac.bounds._posterior import (
    mi_budget_for_accuracy,
    pinsker_bound,
    posterior_success_rate,
)
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.job import _vacuous_note, run_pac

TINY = [5e-324, 1e-323, 2.5e-308, 1e-300, 1e-200, 1e-33]
PRIORS = [0.5, 0.6, 0.7, 0.9, 0.999, 0.9999999999999999]


@pytest.mark.parametrize("v", TINY)
@pytest.mark.parametrize("prior", PRIORS)
def test_positive_budget_bounds_are_strictly_above_the_prior(v, prior):
    post, pins = float(posterior_success_rate(v, prior=prior)), float(pinsker_bound(v, prior=prior))
    assert prior < post <= pins <= 1.0
    for text in (format_bound(post), format_bound(pins), format_bound(pins, 3)):
        assert Decimal(text) > Decimal(repr(prior))
    assert Decimal(format_percent(pins)[:-1]) > Decimal(repr(prior)) * 100


def test_pinsker_at_zero_is_the_prior_and_arrays_agree_with_scalars():
    assert pinsker_bound(0.0, prior=0.7) == 0.7
    got = pinsker_bound(np.array(TINY), prior=0.5)
    assert np.array_equal(got, [pinsker_bound(v, prior=0.5) for v in TINY])
    # the exact value at v = 1e-33 (sqrt(v/2) = 2.2e-17) lies below the float returned
    assert Decimal(float(pinsker_bound(1e-33, prior=0.5))) >= (
        Decimal("0.5") + (Decimal("1e-33") / 2).sqrt())


def test_cli_posterior_json_and_text_never_print_the_prior(capsys):
    assert main(["pac", "posterior", "--mi-budget", "5e-324", "1e-300", "--prior", "0.7",
                 "--json"]) == 0
    for row in json.loads(capsys.readouterr().out):
        assert row["pinsker_bound"] > 0.7 and row["posterior_success_bound"] > 0.7
    assert main(["pac", "posterior", "--mi-budget", "5e-324", "--prior", "0.7"]) == 0
    cells = capsys.readouterr().out.splitlines()[-1].split()
    assert cells[1] == "0.7" and all(Decimal(c) > Decimal("0.7") for c in cells[2:])


# --- k12: the vacuous-bound warning's words match its numbers ----------------------------

def test_vacuous_words_match_the_comparison():
    just_below = float(mi_budget_for_accuracy(0.9999999999999999, prior=0.5))
    assert just_below < math.log(2)
    note = _vacuous_note(just_below, 0.5)
    assert "at least" not in note and "just below ln(1/prior)" in note
    assert repr(just_below) in note
    assert "is at least ln(1/prior) = 0.693147:" in _vacuous_note(math.log(2), 0.5)
    assert "is at least ln(1/prior) = 0.105360:" not in _vacuous_note(0.2, 0.9)
    assert "is at least ln(1/prior) = 0.10536:" in _vacuous_note(0.2, 0.9)
    assert _vacuous_note(0.5, 0.5) == "" and _vacuous_note(0.69, 0.5) == ""
    below = math.nextafter(-math.log(0.9), 0.0)
    assert "just below" in _vacuous_note(below, 0.9)


def test_run_pac_warning_for_a_budget_just_below_ln2():
    pool = np.random.default_rng(0).random((40, 2))
    v = float(mi_budget_for_accuracy(0.9999999999999999, prior=0.5))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = run_pac(lambda s: s.mean(0) if len(s) else np.zeros(2), pool, mi_budget=v,
                      n_trials=64, rng=0, execution=ExecutionOptions(progress=False))
    texts = [str(w.message) for w in caught if issubclass(w.category, VacuousBoundWarning)]
    assert len(texts) == 1 and "at least" not in texts[0] and "just below" in texts[0]
    assert res.posterior_success_bound > 0.9999999999999


@pytest.mark.parametrize("prior", [0.5, 0.3, 0.9, 0.999])
def test_per_record_accuracy_strictly_above_the_prior_at_any_positive_distance(prior):
    from pacpriv.pac.per_record._math import bayes_accuracy

    base = max(prior, 1 - prior)
    d = np.array([5e-324, 1e-300, 1e-20, 1e-8, 1e-3])
    acc = bayes_accuracy(d, prior)
    assert np.all(acc > base) and np.all(np.diff(acc) >= 0)
    assert bayes_accuracy(0.0, prior) == base and bayes_accuracy(np.inf, prior) == 1.0
    assert all(Decimal(format_bound(float(a))) > Decimal(repr(base)) for a in acc)
