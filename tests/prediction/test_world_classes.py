"""Worlds (and audit reference models) too small for a classifier are refused before any fit
(issue 35, fix10a item 1): a world that lacks a class of the pool."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.linear_model import LogisticRegression, Ridge

from pacpriv._validation import first_subset_missing_a_class
from pacpriv.cli import main
from pacpriv.pac.samplers import ComplementaryPairsSampler
from pacpriv.prediction import PrivatePredictor
from pacpriv.prediction._seeds import Seeds

X7 = np.array([[0.35, 0.82], [-1.3, 0.91], [-0.54, 0.58], [0.29, 0.03], [-0.74, -0.16],
               [0.6, 0.04], [-0.78, -0.26]])
Y7 = np.array([0, 1, 0, 1, 0, 1, 0])


def _first_bad(y, seed, m):
    """Independent: the masks of the engine's sampler, world by world."""
    root = Seeds.from_arguments(seed, None).world_seed
    for j in range(m):
        mask = ComplementaryPairsSampler().trial_mask(len(y), root=root, index=j)
        if len(np.unique(y[mask])) < len(np.unique(y)):
            return j
    return None


@given(st.lists(st.integers(0, 2), min_size=1, max_size=12), st.integers(0, 50),
       st.integers(0, 30))
@settings(max_examples=60, deadline=None)
def test_first_subset_missing_a_class_matches_a_brute_force(labels, seed, m):
    y = np.array(labels)
    root = np.random.SeedSequence(seed)
    masks = ComplementaryPairsSampler().masks(len(y), n_trials=m, rng=root)
    found = first_subset_missing_a_class(y, lambda j: masks[j], m)
    want = next((j for j in range(m) if len(np.unique(y[masks[j]])) < len(np.unique(y))), None)
    assert (None if found is None else found[0]) == want
    if found is not None:
        assert found[1] == len(np.unique(y[masks[found[0]]])) and found[2] == len(np.unique(y))


def test_union_bound_skips_only_negligible_cases():
    y = np.repeat([0, 1], 60)  # a class missing from one of 64 halves: <= 64 * 2 * 2^-60
    assert first_subset_missing_a_class(y, lambda j: 1 / 0, 64, inclusion=0.5) is None
    y = np.repeat([0, 1], [60, 3])  # 2^-3 per world: the masks are read
    with pytest.raises(ZeroDivisionError):
        first_subset_missing_a_class(y, lambda j: 1 / 0, 64, inclusion=0.5)


@pytest.mark.parametrize("seed", [0, 3, 11])
def test_api_refuses_before_any_fit_and_names_the_largest_count(tmp_path, seed):
    bad = _first_bad(Y7, seed, 64)
    assert bad is not None
    state = tmp_path / "s"
    with pytest.raises(ValueError, match=rf"`n_worlds`=64 is too many worlds for 7 records: "
                                         rf"world {bad} would be trained on 1 of the 2 classes"):
        PrivatePredictor(LogisticRegression(), (X7, Y7), n_worlds=64, per_query_budget=2**-12,
                         total_budget=0.01, rng=seed, state=state)
    assert not state.exists()  # nothing written
    works = bad - bad % 2
    if works >= 2:  # the count it names does fit
        pp = PrivatePredictor(LogisticRegression(), (X7, Y7), n_worlds=works,
                              per_query_budget=2**-12, total_budget=0.01, rng=seed)
        assert pp.fit().is_fitted


def test_an_empty_world_is_refused_for_any_estimator():
    """A regressor needs records too: a world that holds none (2^-7 each, for 7 records)."""
    root = Seeds.from_arguments(1, None).world_seed
    empty = next(j for j in range(4096)
                 if not ComplementaryPairsSampler().trial_mask(7, root=root, index=j).any())
    with pytest.raises(ValueError, match=rf"`n_worlds`=4096 is too many worlds for 7 records: "
                                         rf"world {empty} would hold no record"):
        PrivatePredictor(Ridge(), (X7, Y7.astype(float)), n_worlds=4096,
                         per_query_budget=2**-12, total_budget=0.01, rng=1, output="value")


def test_a_regressor_and_many_records_are_not_refused():
    Xb = np.tile(X7, (6, 1))
    yb = np.tile(Y7, 6)  # 18 and 24 records per class: a world misses one w.p. <= 2^-18
    PrivatePredictor(LogisticRegression(), (Xb, yb), n_worlds=64, per_query_budget=2**-12,
                     total_budget=0.01, rng=0)
    PrivatePredictor(Ridge(), (X7, Y7.astype(float)), n_worlds=64, per_query_budget=2**-12,
                     total_budget=0.01, rng=0, output="value")


def test_cli_refuses_before_the_probe(tmp_path, capsys):
    data = tmp_path / "tiny7.csv"
    rows = "".join(f"{a},{b},{c}\n" for (a, b), c in zip(X7, Y7, strict=True))
    data.write_text("a,b,label\n" + rows)
    state = tmp_path / "st"
    args = ["predict", "fit", "--estimator", "logistic", "--dataset", str(data),
            "--label-column", "label", "--state", str(state), "--n-worlds", "64",
            "--per-query-budget", "2^-12", "--total-budget", "0.01", "--no-progress"]
    assert main([*args, "--seed", "3"]) == 2
    err = capsys.readouterr().err
    bad = _first_bad(Y7, 3, 64)
    assert f"--n-worlds 64 is too many worlds for 7 records: world {bad} " in err
    assert f"--n-worlds {bad - bad % 2} would work" in err
    assert "estimate" not in err and len(err.strip().splitlines()) == 1
    assert not state.exists()
    assert main(args) == 2  # no --seed: a fresh draw, refused the same way
    assert "pass --seed to keep a draw" in capsys.readouterr().err


def test_audit_refuses_a_sklearn_reference_model_without_a_class():
    from pacpriv.audit import EstimatorModel, run_audit

    X = np.tile(X7, (2, 1))[:12]
    y = np.tile(Y7, 2)[:12]
    with pytest.raises(ValueError, match=r"`reference_models`=16 is too many reference models"):
        run_audit(X, y, model=EstimatorModel(LogisticRegression()), reference_models=16,
                  rng=0)
