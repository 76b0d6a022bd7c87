"""PrivatePredictor: fitting, answering, budget, refusal, secrecy, resume."""

from __future__ import annotations

import json
import os
import pickle
import stat

import numpy as np
import pytest

from pacpriv.exceptions import BudgetExceededError, CheckpointError
from pacpriv.pac.bounds._posterior import posterior_success_rate
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.prediction import PrivatePredictor

from ._helpers import cancer, logreg, ridge_fit, ridge_value

QUIET = ExecutionOptions(progress=False)

B = 2.0**-8


def _make(state=None, *, rng=0, total=20 * B, pool=None, secret_rng=100, **kw):
    """A small predictor; ``rng`` seeds the public worlds, ``secret_rng`` J and the noise."""
    X, y = cancer()
    return PrivatePredictor(logreg(), pool or (X, y), n_worlds=4, per_query_budget=B,
                            total_budget=total, state=state, rng=rng, secret_rng=secret_rng,
                            **kw)


@pytest.fixture(scope="module")
def fitted():
    return _make().fit(execution=QUIET)


def test_answers_spend_and_bound(fitted):
    X, _ = cancer()
    pp = _make().fit(execution=QUIET)
    out = pp.answer(X[:5])
    assert out.shape == (5, 2)
    assert pp.n_answered == 5
    assert pp.spent == 5 * B
    assert pp.remaining == pytest.approx(15 * B)
    assert pp.membership_prior == 0.5  # complementary pairs: exactly half the worlds
    assert pp.membership_bound == posterior_success_rate(5 * B, prior=0.5)
    # probabilities plus small noise: close to the worlds' mean prediction
    assert np.all(np.abs(out.sum(axis=1) - 1.0) < 1e-6)  # noise lies along (1, −1) only
    assert np.exp(pp.log_posterior).sum() == pytest.approx(1.0)


def test_seeded_predictors_answer_identically_and_split_batches_agree():
    X, _ = cancer()
    a = _make().fit(execution=QUIET)
    b = _make().fit(execution=QUIET)
    one = a.answer(X[:6])
    two = np.vstack([b.answer(X[:2]), b.answer(X[2:6])])
    np.testing.assert_allclose(one, two, rtol=0, atol=1e-8)  # BLAS round-off across batch sizes
    np.testing.assert_allclose(a.log_posterior, b.log_posterior, rtol=0, atol=1e-6)


def test_refusal_spends_nothing(tmp_path):
    X, _ = cancer()
    pp = _make(tmp_path / "s", total=3 * B).fit(execution=QUIET)
    pp.answer(X[:2])
    before = [(e.kind, e.mi, e.rows) for e in pp.ledger.releases]
    lp = pp.log_posterior
    with pytest.raises(BudgetExceededError, match="Nothing was spent"):
        pp.answer(X[:2])
    assert pp.n_answered == 2 and pp.spent == 2 * B
    np.testing.assert_array_equal(pp.log_posterior, lp)
    assert [(e.kind, e.mi, e.rows) for e in PrivatePredictor.load(tmp_path / "s").ledger.releases
            ] == before == [("charge", 2 * B, 2)]
    pp.answer(X[:1])  # exactly the remaining row is still allowed
    assert pp.remaining == 0.0
    with pytest.raises(BudgetExceededError):
        pp.answer(X[:1])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_worlds": 3}, "n_worlds"),
        ({"n_worlds": 1}, "n_worlds"),
        ({"per_query_budget": 0.0}, "per_query_budget"),
        ({"total_budget": B / 2}, "total_budget"),
        ({"output": "probs"}, "output"),
        ({"rule": "variance-only"}, "rule"),
        ({"rule": "certified"}, "rule"),
    ],
)
def test_bad_arguments_are_named(kwargs, match):
    X, y = cancer()
    args = {"n_worlds": 4, "per_query_budget": B, "total_budget": 1.0, **kwargs}
    with pytest.raises(ValueError, match=match):
        PrivatePredictor(logreg(), (X, y), **args)


def test_bad_queries_rejected_before_spending(fitted):
    n = fitted.n_answered
    with pytest.raises(ValueError, match=r"X_queries.*\('n', 4\)"):
        fitted.answer(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="finite"):
        fitted.answer(np.full((1, 4), np.nan))
    with pytest.raises(ValueError, match="n >= 1"):
        fitted.answer(np.zeros((0, 4)))
    assert fitted.n_answered == n


def test_unfitted_predict_raises():
    with pytest.raises(RuntimeError, match="fit"):
        _make().answer(np.zeros((1, 4)))


def test_secret_stays_secret(tmp_path, fitted):
    pp = _make(tmp_path / "s").fit(execution=QUIET)
    j = pp._secret_index
    assert "secret" not in repr(pp).lower() and "_secret_index" not in repr(pp)
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(pp)
    secret = tmp_path / "s" / "secret.json"
    assert stat.S_IMODE(os.stat(secret).st_mode) == 0o600
    public = json.dumps(pp.to_dict()) + (tmp_path / "s" / "config.json").read_text()
    assert "secret_index" not in public and "noise_entropy" not in public
    body = json.loads(secret.read_text())
    assert body["secret_index"] == j
    assert str(body["noise_entropy"]) not in public
    os.chmod(secret, 0o644)
    with pytest.raises(CheckpointError, match="0600"):
        PrivatePredictor.load(tmp_path / "s")


def test_unseeded_secret_from_os_entropy(monkeypatch):
    """Without ``secret_rng``, J and the noise entropy are exactly what :mod:`secrets` (the
    OS CSPRNG) returned for this predictor, one fresh draw per fit: J uniform on the n_worlds
    worlds, 128 bits of noise entropy. Asserted through a spy on the calls, not by hoping that
    12 fits do not all land on one of 4 worlds (that failed once in ~4e6 runs)."""
    import secrets

    from pacpriv.prediction import _seeds

    calls = []

    class Spy:
        @staticmethod
        def randbelow(n):
            calls.append(("randbelow", n, secrets.randbelow(n)))
            return calls[-1][2]

        @staticmethod
        def randbits(k):
            calls.append(("randbits", k, secrets.randbits(k)))
            return calls[-1][2]

    monkeypatch.setattr(_seeds, "secrets", Spy)
    X, y = cancer()
    for k in range(2):
        pp = PrivatePredictor(logreg(), (X, y), n_worlds=4, per_query_budget=B,
                              total_budget=1.0).fit(execution=QUIET)
        assert pp.secret_randomness == "OS entropy (not recorded)"
        assert [c[:2] for c in calls[2 * k:]] == [("randbelow", 4), ("randbits", 128)]
        assert (pp._secret_index, pp._noise_entropy) == (calls[2 * k][2], calls[2 * k + 1][2])
    assert len(calls) == 4  # a draw per fit, never reused nor derived from a seed


def test_resume_refused_for_other_pool_or_seed(tmp_path):
    X, y = cancer()
    _make(tmp_path / "s").fit(execution=QUIET)
    with pytest.raises(CheckpointError, match="pool"):
        _make(tmp_path / "s", pool=(X[:-1], y[:-1]))
    with pytest.raises(CheckpointError, match="seed"):
        _make(tmp_path / "s", rng=1)
    with pytest.raises(CheckpointError, match="per_query_budget"):
        PrivatePredictor(logreg(), (X, y), n_worlds=4, per_query_budget=2 * B,
                         total_budget=20 * B, state=tmp_path / "s", rng=0)
    with pytest.raises(CheckpointError, match="n_worlds"):
        PrivatePredictor(logreg(), (X, y), n_worlds=6, per_query_budget=B,
                         total_budget=20 * B, state=tmp_path / "s", rng=0)


def test_resume_continues_posterior_and_spend(tmp_path):
    X, _ = cancer()
    ref = _make().fit(execution=QUIET)
    want = ref.answer(X[:5])
    pp = _make(tmp_path / "s").fit(execution=QUIET)
    got = [pp.answer(X[:2])]
    again = _make(tmp_path / "s", rng=None, secret_rng=None)  # resumed: stored seed, secret
    assert again.is_fitted and again.n_answered == 2
    # J was drawn from secret_rng=100 when the state was fitted: the label stays with it
    assert again.secret_randomness == "caller-seeded secret (not for production)"
    got.append(again.answer(X[2:4]))
    loaded = PrivatePredictor.load(tmp_path / "s")
    assert loaded.n_answered == 4 and loaded.spent == 4 * B
    got.append(loaded.answer(X[4:5]))
    # equal up to BLAS round-off of different batch sizes (same J, same noise per query index)
    np.testing.assert_allclose(np.vstack(got), want, rtol=0, atol=1e-8)
    np.testing.assert_allclose(loaded.log_posterior, ref.log_posterior, rtol=0, atol=1e-6)


def test_callable_fit_and_value_output():
    X, _ = cancer()
    t = X @ np.array([1.0, -2.0, 0.5, 0.0]) + 0.1 * np.sin(np.arange(len(X)))
    pp = PrivatePredictor(ridge_fit, (X, t), n_worlds=8, per_query_budget=0.05,
                          total_budget=1.0, output=ridge_value, rng=2,
                          secret_rng=14).fit(execution=QUIET)  # J = 1, as before the split
    out = pp.answer(X[:4])
    assert out.shape == (4, 1)
    # the noise is tiny relative to the signal: answers track the non-private fit
    np.testing.assert_allclose(out[:, 0], ridge_value(ridge_fit((X, t)), X[:4])[:, 0],
                               atol=0.05)


@pytest.mark.slow
def test_torch_training_function_through_the_adapter(tmp_path):
    from pacpriv.pac.engine._adapters import TorchMechanism

    from ._helpers import torch_linear, torch_train

    X, y = cancer()
    fit = TorchMechanism(torch_linear, torch_train)
    pp = PrivatePredictor(fit, (X, y), n_worlds=4, per_query_budget=B, total_budget=1.0,
                          state=tmp_path / "s", rng=4).fit(execution=QUIET)
    worlds = pp._worlds.evaluate(X)
    assert np.mean(worlds.argmax(axis=2) == y) > 0.8  # every world learned the task
    out = pp.answer(X[:5])
    assert out.shape == (5, 2) and np.all(np.isfinite(out))
    loaded = PrivatePredictor.load(tmp_path / "s")  # modules rebuilt from stored parameters
    np.testing.assert_array_equal(loaded._worlds.evaluate(X), worlds)
    assert loaded.n_answered == 5


def test_label_votes_are_exact_where_all_worlds_agree():
    X, y = cancer()
    pp = PrivatePredictor(logreg(), (X, y), n_worlds=8, per_query_budget=2.0**-32,
                          total_budget=1.0, output="label", rng=5).fit(execution=QUIET)
    worlds = pp.world_outputs(X[:60])  # (m, n, 2) one-hot votes
    assert set(np.unique(worlds)) == {0.0, 1.0}
    agree = np.all(worlds == worlds[:1], axis=(0, 2))
    assert 0 < agree.sum() < 60  # both kinds of query occur
    lp = pp.log_posterior
    out = pp.answer(X[:60])
    np.testing.assert_array_equal(out[agree], worlds[0, agree])  # released without noise
    assert np.all(out[~agree] != worlds[0, ~agree])  # the others carry (huge) noise
    assert not np.array_equal(pp.log_posterior, lp)
    assert pp.spent == 60 * 2.0**-32  # every row is charged, agreeing or not


def test_answer_with_budget_snapshot(fitted):
    X, _ = cancer()
    n = fitted.n_answered
    out, budget = fitted.answer_with_budget(X[:2])
    assert out.shape == (2, 2)
    assert budget["n_answered"] == n + 2 and budget["spent"] == (n + 2) * B


def test_world_fit_functions_follow_the_one_accepts_rng_rule(tmp_path):
    """`**kw` gets the world's rng; a positional-only `rng` is not passed by keyword (issue 9)."""
    from pacpriv.pac.engine._mechanism import accepts_rng
    from pacpriv.prediction._worlds import _FitAndStore

    seen = {}

    def with_kwargs(subset, **kw):
        seen["kwargs"] = kw.get("rng")
        return 1.0

    def positional_only(subset, rng=None, /):
        seen["positional"] = rng
        return 2.0

    gen = np.random.default_rng(0)
    for fn in (with_kwargs, positional_only):
        _FitAndStore(fn, str(tmp_path))(np.zeros((2, 1)), rng=gen)
    assert accepts_rng(with_kwargs) and seen["kwargs"] is gen
    assert not accepts_rng(positional_only) and seen["positional"] is None


def test_secret_rng_must_differ_from_rng_and_marks_the_predictor():
    """``rng`` seeds only the public worlds; a secret seed equal to it is refused (V1 F7)."""
    X, y = cancer()
    with pytest.raises(ValueError, match="`secret_rng` must differ from `rng`"):
        PrivatePredictor(logreg(), (X, y), n_worlds=4, per_query_budget=B, total_budget=1.0,
                         rng=5, secret_rng=5)
    assert _make(secret_rng=None).secret_randomness == "OS entropy (not recorded)"
    assert _make().secret_randomness == "caller-seeded secret (not for production)"


def test_tiny_outputs_are_refused_not_answered_without_noise():
    # a regressor's output scaled by 1e-170 had variance 0 across worlds: every answer was
    # the exact output of the secret world, under a "certified" bound
    X, _ = cancer()
    t = X @ np.array([1.0, -2.0, 0.5, 0.0])
    pp = PrivatePredictor(ridge_fit, (X, t), n_worlds=8, per_query_budget=0.05,
                          total_budget=1.0, output=lambda m, Q: ridge_value(m, Q) * 1e-170,
                          rng=2, secret_rng=14).fit(execution=QUIET)
    with pytest.raises(ValueError, match="under- or overflow"):
        pp.answer(X[:2])
    assert pp.spent == 0.0 and pp.n_answered == 0  # refused before spending


def test_tiny_probabilities_are_zero_not_refused():
    """GaussianNB gives probabilities like 1e-200 routinely: the range check refused every
    such query ("Rescale the model's output"). Probabilities below 2^-400 are now 0 in every
    world alike, and the answer is noised from the variance of what is released."""
    from sklearn.naive_bayes import GaussianNB

    from pacpriv.prediction._evaluate import Worlds

    X, y = cancer()
    pp = PrivatePredictor(GaussianNB(), (X, y), n_worlds=8, per_query_budget=0.05,
                          total_budget=1.0, output="proba", rng=2, secret_rng=14)
    pp.fit(execution=QUIET)
    full = GaussianNB().fit(X, y)
    # a query far enough from the data that one class has a probability below 2^-400
    far = next(X[:1] + t * X.std(axis=0) for t in np.arange(0.5, 50.0, 0.5)
               if 0.0 < float(full.predict_proba(X[:1] + t * X.std(axis=0)).min()) < 2.0**-400)
    worlds = Worlds([full], "proba")
    assert float(worlds.evaluate(far).min()) == 0.0
    answers = pp.answer(np.vstack([X[:2], far]))
    assert answers.shape == (3, 2) and np.all(np.isfinite(answers))
    assert pp.n_answered == 3
    # other outputs are still refused (test_tiny_outputs_are_refused_not_answered_without_noise)


def test_rule_objects_are_their_names():
    from pacpriv.pac.noise import Certified, ExactMI, Isotropic

    X, y = cancer()
    args = {"n_worlds": 4, "per_query_budget": B, "total_budget": 1.0}
    for rule in (ExactMI(), Isotropic()):
        pp = PrivatePredictor(logreg(), (X, y), rule=rule, **args)
        assert pp.rule == rule.name and pp.get_params()["rule"] is rule
    with pytest.raises(ValueError, match="exact per-query covariance"):
        PrivatePredictor(logreg(), (X, y), rule=Certified(), **args)


def test_a_total_below_one_answer_names_the_per_query_budget(tmp_path):
    """`total_budget` must be in [0.1, inf) did not say where 0.1 came from (eighth pass)."""
    from sklearn.linear_model import LogisticRegression

    from pacpriv.prediction import PrivatePredictor

    X = np.random.default_rng(0).normal(size=(60, 3))
    y = (X[:, 0] > 0).astype(int)
    for total, got in ((0.01, "0.01"), (0.0, "0.0"), (-1.0, "-1.0"), (float("nan"), "nan"),
                       (float("inf"), "inf")):  # every sibling names the floor's source
        with pytest.raises(ValueError, match=(
                r"^`total_budget` must be a finite number of nats in \[0.1, inf\): at least "
                r"`per_query_budget` \(0.1 nats: one answer spends that much\); got "
                + got + r"\.$")):
            PrivatePredictor(LogisticRegression(), (X, y), n_worlds=4, per_query_budget=0.1,
                             total_budget=total, state=tmp_path / "s")
    assert not (tmp_path / "s").exists()
