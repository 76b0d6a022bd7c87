"""The eleventh new-user pass's unclear errors (issue 35), each tested as a kind."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pacpriv.pac.bounds import _posterior
from pacpriv.pac.bounds._ledger import PrivacyLedger

_PRIOR_RULE = "must be in [0.5, 1)"


@pytest.mark.parametrize("prior", [0, 0.0, -1.0, 1, 1.0, 1.5, math.nan, math.inf, 0.3, 10**400])
@pytest.mark.parametrize("call", [
    lambda p: _posterior.posterior_success_rate(0.1, prior=p),
    lambda p: _posterior.pinsker_bound(0.1, prior=p),
    lambda p: _posterior.mi_budget_for_accuracy(0.9, prior=p),
    lambda p: PrivacyLedger(1.0, prior=p),
])
def test_every_invalid_prior_names_the_true_range(call, prior):
    with pytest.raises(ValueError) as err:
        call(prior)
    text = str(err.value)
    assert _PRIOR_RULE in text and "(0.0, 1.0)" not in text
    assert "max(q, 1 - q)" in text


def test_an_array_prior_names_positions_not_values():
    with pytest.raises(ValueError, match=r"\[0\.5, 1\).*index 0.*values not shown"):
        _posterior.posterior_success_rate(0.1, prior=np.array([0.0, 0.7]))


def test_checkpoint_words_name_q_as_the_inclusion_probability_beside_the_prior():
    from pacpriv.pac.engine._checkpoint_words import differences_in_words
    from pacpriv.pac.samplers import ComplementaryPairsSampler, PoissonSampler

    (text,) = differences_in_words({"sampler": ComplementaryPairsSampler().to_dict()},
                                   {"sampler": PoissonSampler(0.3).to_dict()})
    assert "prior 0.3" not in text and "prior max(q, 1 - q) 0.7" in text
    assert "inclusion probability q 0.3" in text and "inclusion probability q 0.5" in text


def test_same_named_mechanisms_from_two_files_name_the_file(tmp_path):
    from pacpriv.pac.engine._checkpoint_words import differences_in_words
    from pacpriv.pac.samplers import callable_fingerprint
    from pacpriv.registry import load_object

    names = []
    for folder, file in (("a", "mech_b.py"), ("b", "mech.py")):
        (tmp_path / folder).mkdir()
        path = tmp_path / folder / file
        path.write_text("def count(X):\n    return [float(len(X))]\n")
        names.append(callable_fingerprint(load_object(f"{path}:count"))["name"])
    (text,) = differences_in_words({"mechanism": {"name": names[0]}},
                                   {"mechanism": {"name": names[1]}})
    assert "checkpoint 'count', now 'count'" not in text
    assert "file mech_b.py" in text and "file mech.py" in text and "'count'" in text
    (text,) = differences_in_words({"mechanism": {"name": "_pacpriv_user_mechanism_" + "0" * 16
                                                  + ".count"}},
                                   {"mechanism": {"name": "mymod.count"}})
    assert "'count' (from a file loaded from another path" in text and "'mymod.count'" in text


def test_compare_refuses_per_record_trials_before_any_training_or_whole_subset_trial(
        monkeypatch):
    """A declared range's floor needs the per-record shape trials; they now run first, so
    the refusal comes before any model is trained or any whole-subset trial runs."""
    pytest.importorskip("torch")
    import pacpriv.compare.experiment as experiment
    from pacpriv.compare import compare_pac_dpsgd
    from pacpriv.pac.engine import ExecutionOptions

    def boom(*a, **k):
        raise AssertionError("trained or ran a whole-subset trial")
    for name in ("_reference", "_whole_subset_row", "dpsgd_row"):
        monkeypatch.setattr(experiment, name, boom)
    with pytest.raises(ValueError, match=r"`per_record_trials`: `target_accuracy` = 0.6 cannot "
                                         r"be certified .* needs at least \d+ certification"):
        compare_pac_dpsgd("iris", target_accuracy=0.6, n_trials=20, per_record_trials=20,
                          n_repeats=1, epochs=1, exact=False,
                          execution=ExecutionOptions(n_jobs=1, progress=False))


@pytest.mark.parametrize("model, got", [
    ("ridge_factory", "Ridge (a scikit-learn regressor)"),
    ("ridge", "Ridge (a scikit-learn regressor)"),
    ("kmeans", "KMeans (a scikit-learn clusterer)"),
    ("svc", "SVC (no predict_proba)"),
])
def test_audit_refuses_a_model_without_class_probabilities_up_front(model, got):
    from sklearn.cluster import KMeans
    from sklearn.linear_model import Ridge
    from sklearn.svm import SVC

    from pacpriv.audit import user_model_family

    made = {"ridge_factory": lambda: Ridge(), "ridge": Ridge, "kmeans": KMeans(n_clusters=2),
            "svc": SVC()}[model]
    with pytest.raises(TypeError, match=r"must be a classifier with predict_proba") as err:
        user_model_family(made, n_features=3, n_classes=2)
    assert str(err.value).endswith(f"got {got}.")


def test_audit_cli_refuses_a_regressor_factory_before_any_training(tmp_path, capsys,
                                                                   monkeypatch):
    from pacpriv.cli.main import main

    (tmp_path / "mymodels.py").write_text("from sklearn.linear_model import Ridge\n"
                                          "reg = lambda: Ridge()\n")
    rng = np.random.default_rng(0)
    rows = ["a,b,label"] + [f"{x:.3f},{y:.3f},{int(x > 0)}"
                            for x, y in rng.normal(size=(40, 2))]
    (tmp_path / "d.csv").write_text("\n".join(rows) + "\n")
    monkeypatch.chdir(tmp_path)
    code = main(["audit", "--dataset", "d.csv", "--label-column", "label", "--model",
                 "mymodels.py:reg", "--non-private", "--reference-models", "4", "--epochs", "1",
                 "--out", "out", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "--model 'mymodels.py:reg': it must be a classifier" in err
    assert "got Ridge (a scikit-learn regressor)" in err and "withheld" not in err
    assert not (tmp_path / "out").exists()


def _audit_data():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(40, 3))
    return X, (X[:, 0] + 0.3 * rng.normal(size=40) > 0).astype(int)


def test_an_audit_without_a_seed_resumes_its_checkpoint(tmp_path):
    """rng=None with a checkpoint: the identical call reuses the recorded seed (same split,
    same pool, same reference models) instead of a fresh seed refused as another run."""
    from sklearn.linear_model import LogisticRegression

    from pacpriv.audit import run_audit, user_model_family
    from pacpriv.pac.engine import ExecutionOptions

    X, y = _audit_data()
    model = user_model_family(LogisticRegression, n_features=3, n_classes=2)
    ex = ExecutionOptions(checkpoint=tmp_path / "ck", progress=False)
    first = run_audit(X, y, model=model, reference_models=4, execution=ex)
    again = run_audit(X, y, model=model, reference_models=4, execution=ex)
    assert again.seed == first.seed and first.seed["spawn_key"] == []
    assert [a.to_dict() for a in again.attacks] == [a.to_dict() for a in first.attacks]
    fresh = run_audit(X, y, model=model, reference_models=4,
                      execution=ExecutionOptions(progress=False))
    assert fresh.seed != first.seed  # without a checkpoint: fresh entropy, as documented


def test_the_cli_never_advises_omitting_a_seed_it_was_not_given(tmp_path, capsys, monkeypatch):
    from pacpriv.cli.main import main

    rng = np.random.default_rng(0)
    rows = ["a,b,label"] + [f"{a:.3f},{b:.3f},{int(a > 0)}" for a, b in rng.normal(size=(40, 2))]
    (tmp_path / "d.csv").write_text("\n".join(rows) + "\n")
    monkeypatch.chdir(tmp_path)
    base = ["audit", "--dataset", "d.csv", "--label-column", "label", "--model",
            "sklearn.linear_model:LogisticRegression", "--non-private", "--reference-models",
            "4", "--checkpoint", "ck", "--no-progress", "--attacks", "loss"]
    assert main([*base, "--out", "o1"]) == 0
    assert main([*base, "--out", "o2"]) == 0  # the identical call (no --seed) resumes
    capsys.readouterr()
    assert main([*base, "--out", "o3", "--seed", "5"]) == 2
    err = capsys.readouterr().err
    assert "the root seed (--seed)" in err and "omit --seed" in err
    # a derived seed that differs (here forced) is never answered with "omit --seed"
    import pacpriv.audit._run as run

    monkeypatch.setattr(run, "_audit_root", lambda rng, ex: np.random.SeedSequence(7))
    assert main([*base, "--out", "o4"]) == 2
    err = capsys.readouterr().err
    assert "omit --seed" not in err and "--seed was not given" in err


def test_run_audit_refuses_a_wrapped_regressor_before_any_training():
    from sklearn.linear_model import Ridge

    from pacpriv.audit import EstimatorModel, run_audit

    X, y = _audit_data()
    with pytest.raises(TypeError, match=r"must be a classifier with predict_proba .* got Ridge "
                                        r"\(a scikit-learn regressor\)"):
        run_audit(X, y, model=EstimatorModel(Ridge()), reference_models=4)
