"""Issue 35, new-user pass 4 (r2, r3, m10/n4, d46, e31/e33/k8, c20/e8): label columns that are
not class labels, user objects named as the user wrote them, and one form per flag.

Each test failed on main before the fix: ``audit`` ran on a continuous label column (AUC 1 for
every attack), ``predict fit`` said "Mechanism pacpriv.prediction._worlds.SklearnFit raised",
a plain function as ``--estimator`` said "Mechanism _pacpriv_user_mechanism_<hash>.mean", the
not-reproducible warning named the private module, ``--trials`` had three minimum forms and
``--mi-budget 2^-4`` was "not a number".
"""

from __future__ import annotations

import argparse
import re
import textwrap
import warnings

import numpy as np
import pytest

from pacpriv._validation import check_class_labels, class_labels_message
from pacpriv.cli.main import build_parser, main

#: The shared tail of the label refusal (every command and API entry says it).
TAIL = ("trains a classifier and needs class labels (integers or text) with at least 2 records "
        "per class on average")


def _csv(tmp_path, name: str, labels) -> str:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(len(labels), 3))
    lines = ["a,b,c,y"] + [f"{r[0]},{r[1]},{r[2]},{v}" for r, v in zip(X, labels, strict=True)]
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.fixture
def salary(tmp_path):
    """Continuous labels (a salary column): every record would be its own class."""
    return _csv(tmp_path, "salary.csv", 30000 + 1000 * np.arange(40) + 0.25)


@pytest.fixture
def ids(tmp_path):
    """Integer labels, one record each (an identifier column)."""
    return _csv(tmp_path, "ids.csv", np.arange(40))


def _one_error(capsys) -> str:
    err = [line for line in capsys.readouterr().err.strip().splitlines()
           if line.startswith("pacpriv: error:")]
    assert len(err) == 1, err
    return err[0]


# ---------------------------------------------------------------------- item 1 and 2: labels


def test_check_class_labels_values():
    check_class_labels(np.array([0, 1] * 5), "`y`", "f")
    check_class_labels(np.array(["a", "b", "a"]), "`y`", "f")  # 2 classes: binary, kept
    check_class_labels(np.array([0.0, 1.0, 2.0, 0.0, 1.0, 2.0]), "`y`", "f")  # integral floats
    with pytest.raises(ValueError, match=r"^`y` holds continuous values: f " + re.escape(TAIL)):
        check_class_labels(np.arange(10) + 0.5, "`y`", "f")
    with pytest.raises(ValueError, match=r"^`y` holds 6 distinct values in 10 records"):
        check_class_labels(np.array([0, 1, 2, 3, 4, 5, 0, 1, 2, 3]), "`y`", "f")
    assert "30 distinct values in 30 records" in class_labels_message("w", "p", 30, 30)


def _commands(path: str, out) -> dict[str, list[str]]:
    common = ["--dataset", path, "--label-column", "y"]
    return {
        "pacpriv audit": ["audit", *common, "--model", "logistic", "--non-private",
                          "--reference-models", "4", "--seed", "0", "--out", str(out / "a")],
        "pacpriv predict fit": ["predict", "fit", "--estimator", "logistic", *common,
                                "--state", str(out / "s"), "--n-worlds", "4",
                                "--per-query-budget", "0.001", "--total-budget", "0.01"],
        "pacpriv compare": ["compare", *common, "--trials", "64", "--out", str(out / "c")],
        "mechanism 'logistic'": ["pac", "run", "--mechanism", "logistic", *common,
                                 "--mi-budget", "0.1", "--trials", "64", "--out",
                                 str(out / "p")],
    }


@pytest.mark.parametrize("labels", ["salary", "ids"])
@pytest.mark.parametrize("command", ["pacpriv audit", "pacpriv predict fit", "pacpriv compare",
                                     "mechanism 'logistic'"])
def test_every_classifier_command_refuses_non_labels(labels, command, request, tmp_path,
                                                     capsys):
    """The same one line, naming the flag, before any work (no report, no state folder)."""
    path = request.getfixturevalue(labels)
    argv = _commands(path, tmp_path)[command]
    assert main(argv) == 2
    err = _one_error(capsys)
    what = ("continuous values" if labels == "salary"
            else "40 distinct values in 40 records, about one record per class")
    assert err == (f"pacpriv: error: --label-column y of {path!r} holds {what}: {command} "
                   f"{TAIL}; a measurement or an identifier column is not a label")
    assert not any(p.exists() for p in (tmp_path / "a", tmp_path / "s", tmp_path / "c",
                                        tmp_path / "p"))


def test_regression_estimator_keeps_continuous_labels(salary, tmp_path, capsys):
    """ridge is a regressor: a continuous target is what it needs."""
    assert main(["predict", "fit", "--estimator", "ridge", "--dataset", salary,
                 "--label-column", "y", "--state", str(tmp_path / "s"), "--n-worlds", "4",
                 "--per-query-budget", "0.001", "--total-budget", "0.01",
                 "--no-progress"]) == 0


def _api_calls():
    from sklearn.linear_model import LogisticRegression

    from pacpriv.audit import DPSGDModel, run_audit
    from pacpriv.estimators import PACPrivateClassifier
    from pacpriv.prediction import PrivatePredictor

    def audit(X, y):
        run_audit(X, y, model=DPSGDModel.__new__(DPSGDModel), reference_models=4)

    def predictor(X, y):
        PrivatePredictor(LogisticRegression(), (X, y), n_worlds=4, per_query_budget=1e-3,
                         total_budget=1e-2)

    def classifier(X, y):
        PACPrivateClassifier(mi_budget=0.1, n_trials=8).fit(X, y)

    def ensemble(X, y):
        import torch

        from pacpriv.ensemble import SGD, Shuffled, TrainingSpec, train_ensemble

        train_ensemble(torch.nn.Linear(3, 2), X, y, np.ones((2, len(y)), bool),
                       seeds=0, training=TrainingSpec(SGD(0.1), epochs=1,
                                                      batching=Shuffled(4)))

    def dpsgd(X, y):
        import torch

        from pacpriv.dpsgd.trainer import train_dpsgd

        train_dpsgd(torch.nn.Linear(3, 2), torch.nn.CrossEntropyLoss(),
                    torch.as_tensor(X, dtype=torch.float32), torch.as_tensor(y),
                    noise_multiplier=1.0, steps_per_epoch=4, epochs=1, max_grad_norm=1.0)

    def private(X, y):
        import torch

        from pacpriv.dpsgd import make_private

        m = torch.nn.Linear(3, 2)
        data = torch.utils.data.TensorDataset(torch.as_tensor(X, dtype=torch.float32),
                                              torch.as_tensor(y))
        make_private(m, torch.optim.SGD(m.parameters(), lr=0.1),
                     torch.utils.data.DataLoader(data, batch_size=10),
                     loss_fn=torch.nn.CrossEntropyLoss(), max_grad_norm=1.0, epochs=1,
                     noise_multiplier=1.0)

    return {"run_audit": audit, "PrivatePredictor": predictor,
            "PACPrivateClassifier": classifier, "train_ensemble (cross-entropy loss)": ensemble,
            "train_dpsgd (classification loss)": dpsgd,
            "make_private (classification loss)": private}


@pytest.mark.filterwarnings("ignore:The number of unique classes:UserWarning")  # sklearn's
@pytest.mark.parametrize("name", list(_api_calls()))
def test_api_entries_refuse_one_record_per_class(name):
    X = np.random.default_rng(0).normal(size=(40, 3))
    call = _api_calls()[name]
    with pytest.raises(ValueError, match=r"holds 40 distinct values in 40 records, about one "
                       r"record per class: " + re.escape(name)):
        call(X, np.arange(40))


@pytest.mark.parametrize("name", ["run_audit", "PrivatePredictor", "PACPrivateClassifier",
                                  "train_dpsgd (classification loss)"])
def test_api_entries_refuse_continuous_labels(name):
    X = np.random.default_rng(0).normal(size=(40, 3))
    with pytest.raises(ValueError, match=r"holds continuous values: " + re.escape(name)):
        _api_calls()[name](X, np.arange(40) + 0.5)


# ------------------------------------------------------------- item 3: user objects' names


@pytest.fixture
def funcs(tmp_path, monkeypatch):
    (tmp_path / "funcs.py").write_text(textwrap.dedent("""
        import numpy as np
        def mean(X):
            return np.asarray(X).mean(axis=0)
        def count(D):
            return np.array([float(len(D[0]))])
        def globalrand(X):
            return np.asarray(X).mean(axis=0) + np.random.normal(size=np.asarray(X).shape[1])
        class FitOnly:
            def fit(self, X, y):
                return self
    """))
    rng = np.random.default_rng(1)
    X = rng.normal(size=(40, 3))
    (tmp_path / "good.csv").write_text(
        "a,b,c,label\n" + "".join(f"{r[0]},{r[1]},{r[2]},{i % 2}\n" for i, r in enumerate(X)))
    (tmp_path / "nolabel.csv").write_text(
        "a,b,c\n" + "".join(f"{r[0]},{r[1]},{r[2]}\n" for r in X))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(("attr", "words"), [
    ("mean", "and as a fit function fit((X, y)) -> model it raised ValueError when called on "
             "(X, y)"),
    ("count", "and as a fit function it returned a ndarray, which has no predict_proba() for "
              "--output proba"),
    ("FitOnly", "nor a fit function"),
])
def test_estimator_that_is_not_one_is_refused_before_any_work(attr, words, funcs, capsys):
    argv = ["predict", "fit", "--estimator", f"funcs.py:{attr}", "--dataset", "good.csv",
            "--label-column", "label", "--state", "st", "--n-worlds", "4",
            "--per-query-budget", "0.001", "--total-budget", "0.01", "--no-progress"]
    assert main(argv) in (1, 2)
    err = _one_error(capsys)
    assert err.startswith(f"pacpriv: error: --estimator funcs.py:{attr} ")
    assert "not a scikit-learn-style estimator" in err and words in err
    assert "_pacpriv_user_mechanism_" not in err and "Mechanism" not in err
    assert not (funcs / "st").exists()


@pytest.mark.filterwarnings("always::pacpriv.exceptions.NotReproducibleWarning")
def test_not_reproducible_warning_names_the_file(funcs, capsys):
    assert main(["pac", "run", "--mechanism", "funcs.py:globalrand", "--dataset",
                 "nolabel.csv", "--mi-budget", "0.1", "--trials", "16", "--seed", "0",
                 "--no-progress", "--rule", "variance-only", "--out", "r"]) == 0
    err = capsys.readouterr().err
    assert "Mechanism funcs.py:globalrand is not reproducible" in err
    assert "_pacpriv_user_mechanism_" not in err


def test_api_names_a_loaded_file_and_the_estimator(funcs):
    from pacpriv.exceptions import MechanismError, NotReproducibleWarning
    from pacpriv.pac import ExecutionOptions, simulate
    from pacpriv.prediction import PrivatePredictor
    from pacpriv.registry import load_object

    quiet = ExecutionOptions(progress=False)
    X = np.random.default_rng(0).normal(size=(20, 3))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        simulate(load_object("funcs.py:globalrand"), X, n_trials=4, rng=0, execution=quiet)
    texts = [str(w.message) for w in caught if w.category is NotReproducibleWarning]
    assert texts and texts[0].startswith("Mechanism funcs.py:globalrand is not reproducible")
    mean = load_object("funcs.py:mean", what="estimator")
    with pytest.raises(MechanismError, match=r"^Estimator funcs\.py:mean raised ValueError "
                       r"fitting world 0 "):
        PrivatePredictor(mean, (X, np.arange(20) % 2), n_worlds=4, per_query_budget=1e-3,
                         total_budget=1e-2,
                         output=lambda m, Q: np.zeros((len(Q), 1))).fit(execution=quiet)


# ---------------------------------------------------- item 4: one form per flag, everywhere


def _flags(parser: argparse.ArgumentParser, path=()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _flags(sub, (*path, name))
        else:
            for flag in action.option_strings:
                yield path, flag, action


def test_every_budget_flag_parses_powers_of_two():
    from pacpriv.cli._args import budget_number

    budgets = [(p, f, a) for p, f, a in _flags(build_parser())
               if f.endswith("budget") or f == "--quota"]
    assert {f for _, f, _ in budgets} >= {"--mi-budget", "--per-query-budget",
                                          "--total-budget", "--quota"}
    for path, flag, action in budgets:
        assert action.type is budget_number, (path, flag)
    assert budget_number("2^-16") == 2.0**-16 and budget_number("2**3") == 8.0


@pytest.mark.parametrize("command", [["pac", "posterior"], ["pac", "run", "--mechanism", "mean",
                                                            "--dataset", "iris"]])
@pytest.mark.filterwarnings("ignore::pacpriv.exceptions.UndersampledWarning")
def test_mi_budget_takes_a_power_of_two(command, tmp_path, capsys):
    argv = [*command, "--mi-budget", "2^-4", "--json"]
    if command[1] == "run":
        argv += ["--trials", "64", "--seed", "0", "--no-progress", "--out", str(tmp_path / "o")]
    assert main(argv) == 0
    assert "not a number" not in capsys.readouterr().err


@pytest.mark.parametrize(("extra", "trials", "expected"), [
    ([], "0", "--trials must be an integer in [6, 9223372036854775807] with --rule certified, "
              "which needs at least 6 trials; got 0"),
    ([], "3", "--trials must be an integer in [6, 9223372036854775807] with --rule certified, "
              "which needs at least 6 trials; got 3"),
    ([], "1" + "0" * 48, "--trials must be an integer in [6, 9223372036854775807] with --rule "
                         "certified, which needs at least 6 trials; got an integer of 49 digits"),
    (["--rule", "variance-only"], "1", "--trials must be an integer in [2, "
                                       "9223372036854775807]; got 1"),
])
def test_trials_range_is_stated_one_way(extra, trials, expected, tmp_path, capsys):
    assert main(["pac", "run", "--mechanism", "mean", "--dataset", "iris", "--mi-budget", "0.1",
                 "--trials", trials, *extra, "--out", str(tmp_path / "o")]) == 2
    assert _one_error(capsys) == f"pacpriv: error: {expected}"


@pytest.mark.parametrize("argv", [
    ["pac", "records", "--mechanism", "mean", "--dataset", "iris", "--target-accuracy", "0.6"],
    ["compare", "--dataset", "iris"],
])
def test_trials_minimum_same_form_in_other_commands(argv, tmp_path, capsys):
    assert main([*argv, "--trials", "1", "--out", str(tmp_path / "o")]) == 2
    assert _one_error(capsys).startswith("pacpriv: error: --trials must be an integer in [2, ")


@pytest.mark.parametrize("argv", [
    ["audit", "--non-private", "--reference-models", "4"],
    ["compare"],
    ["predict", "fit", "--estimator", "logistic", "--n-worlds", "4", "--per-query-budget",
     "0.001", "--total-budget", "0.01"],
])
def test_bundled_regression_target_is_not_labels(argv, tmp_path, capsys):
    """diabetes' target is integer-valued but a regression target: the same refusal."""
    state = ["--state", str(tmp_path / "s")] if argv[0] == "predict" else \
        ["--out", str(tmp_path / "o")]
    assert main([*argv, "--dataset", "diabetes", *state]) == 2
    assert _one_error(capsys).startswith(
        "pacpriv: error: the label column of --dataset 'diabetes' holds continuous values: ")


def test_records_shape_split_minimum_same_form(tmp_path, capsys):
    """pac records said "--trials leaves 1 certification trials ... (raise n_trials or lower
    shape_fraction)": now the same range form, with the split's own minimum."""
    assert main(["pac", "records", "--mechanism", "mean", "--dataset", "iris",
                 "--target-accuracy", "0.6", "--trials", "3", "--records", "0-2",
                 "--out", str(tmp_path / "o")]) == 2
    err = _one_error(capsys)
    assert err.startswith("pacpriv: error: --trials must be an integer in [4, "
                          "9223372036854775807] with --shape isotropic")  # the flag (fix9a)
    assert err.endswith("which need at least 4 trials (2 of them certify); got 3.")
