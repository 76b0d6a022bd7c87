"""Outputs an estimator cannot give, and per-query budgets no query can meet, are refused
before any work, in the CLI and the Python API (a leftover of issues 34/35).

0.4 accepted ``predict fit --estimator naive_bayes --output logits`` and failed at the first
query; ``PrivatePredictor`` checked the grid release's per-query floor only when a query came.
The supported outputs are asked of each estimator (``supported_outputs``), for every entry of
the CLI's estimator registry, so an accepted combination must answer a query.
"""

from __future__ import annotations

import numpy as np
import pytest

from pacpriv.cli.main import main
from pacpriv.cli.predict import ESTIMATORS
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.prediction import PrivatePredictor
from pacpriv.prediction._evaluate import OUTPUTS, supported_outputs
from pacpriv.prediction._noise import smallest_grid_budget

QUIET = ExecutionOptions(progress=False)
RNG = np.random.default_rng(0)
X = RNG.normal(size=(80, 3))
Y = (X[:, 0] + 0.3 * RNG.normal(size=80) > 0).astype(int)
T = X @ np.array([1.0, -2.0, 0.5])
PAIRS = [(e, o) for e in ESTIMATORS.names() for o in OUTPUTS]
REFUSED = [p for p in PAIRS if p[1] not in supported_outputs(ESTIMATORS.get(p[0])())]


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # small worlds
@pytest.mark.parametrize(("name", "output"), PAIRS)
def test_every_accepted_combination_answers_and_the_others_are_refused(name, output, tmp_path):
    estimator = ESTIMATORS.get(name)()
    regressor = "proba" not in supported_outputs(estimator)
    pool = (X, T) if regressor else (X, Y)
    kwargs = dict(n_worlds=2, per_query_budget=0.5, total_budget=5.0, output=output,
                  state=tmp_path / "st", rng=1, secret_rng=2)
    if output not in supported_outputs(estimator):
        with pytest.raises(ValueError, match=rf"`output`='{output}' is not available for "
                                             rf"{type(estimator).__name__} .*it supports"):
            PrivatePredictor(estimator, pool, **kwargs)
        assert not (tmp_path / "st").exists()
        return
    pp = PrivatePredictor(estimator, pool, **kwargs).fit(execution=QUIET)
    answers = pp.answer(X[:2])
    assert answers.shape[0] == 2 and np.all(np.isfinite(answers))


def test_the_supported_sets_come_from_the_estimators():
    assert supported_outputs(ESTIMATORS.get("naive_bayes")()) == ("proba", "value", "label")
    assert supported_outputs(ESTIMATORS.get("logistic")()) == OUTPUTS  # a Pipeline: last step
    assert supported_outputs(ESTIMATORS.get("ridge")()) == ("value",)


@pytest.mark.parametrize(("name", "output"), REFUSED)
def test_cli_refuses_before_the_state_folder(name, output, tmp_path, capsys):
    state = tmp_path / "st"
    code = main(["predict", "fit", "--estimator", name, "--output", output, "--dataset",
                 "breast_cancer", "--state", str(state), "--per-query-budget", "0.5",
                 "--total-budget", "2", "--n-worlds", "4"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and not state.exists()
    assert err[0].startswith(f"pacpriv: error: --output {output} is not available for "
                             f"--estimator {name}")


def test_ridge_defaults_to_value_without_a_hand_list(tmp_path, capsys):
    assert main(["predict", "fit", "--estimator", "ridge", "--dataset", "diabetes",
                 "--state", str(tmp_path / "st"), "--per-query-budget", "0.5",
                 "--total-budget", "2", "--n-worlds", "2", "--no-progress"]) == 0


class _Counted:
    """A fit function that counts its calls (the worlds fitted)."""

    def __init__(self):
        self.calls = 0

    def __call__(self, subset):
        from sklearn.naive_bayes import GaussianNB

        self.calls += 1
        return GaussianNB().fit(*subset)


def test_the_floor_is_checked_at_construction():
    with pytest.raises(ValueError, match="too small for the grid release of 1 output"):
        PrivatePredictor(_Counted(), (X, Y), n_worlds=2, per_query_budget=1e-13,
                         total_budget=1.0)


def test_the_floor_for_the_classes_is_checked_at_fit_before_any_world():
    y10 = np.arange(80) % 10  # ten classes: ten released coordinates for "proba"
    b = 0.5 * (smallest_grid_budget(1) + smallest_grid_budget(10))
    fit = _Counted()
    pp = PrivatePredictor(fit, (X, y10), n_worlds=2, per_query_budget=b, total_budget=1.0)
    with pytest.raises(ValueError, match="too small for the grid release of 10 output"):
        pp.fit(execution=QUIET)
    assert fit.calls == 0 and not pp.is_fitted


def test_a_callable_output_is_checked_once_the_worlds_say_d():
    def ten(model, rows):
        return np.repeat(model.predict_proba(rows)[:, :1], 10, axis=1)

    b = 0.5 * (smallest_grid_budget(1) + smallest_grid_budget(10))
    pp = PrivatePredictor(_Counted(), (X, Y), n_worlds=2, per_query_budget=b, total_budget=1.0,
                          output=ten)
    with pytest.raises(ValueError, match="too small for the grid release of 10 output"):
        pp.fit(execution=QUIET)
    assert not pp.is_fitted  # nothing answered, no secret drawn
