"""Regressions from the fourteenth fresh new-user pass (issue 35), each a kind with siblings."""

from __future__ import annotations

import json

import pytest

from pacpriv.cli import main

MEAN = "def mean(subset):\n    X, y = subset\n    return X.mean(axis=0)\n"


@pytest.mark.filterwarnings("ignore::pacpriv.exceptions.UndersampledWarning")
@pytest.mark.parametrize("flags, noted", [
    (["--backend", "threading"], True),  # the default --n-jobs 1
    (["--backend", "loky", "--n-jobs", "1"], True),
    (["--backend", "threading", "--n-jobs", "2"], False),
    (["--backend", "sequential"], False),
    ([], False),
])
def test_a_named_backend_with_one_job_says_it_runs_in_this_process(tmp_path, monkeypatch,
                                                                     capsys, flags, noted):
    """`--backend ray` (or any parallel backend) with the default one job ran sequentially and
    the report said 'sequential' with no word about the flag: a one-line note says so."""
    (tmp_path / "mech.py").write_text(MEAN)
    monkeypatch.chdir(tmp_path)
    assert main(["pac", "run", "--mechanism", "mech.py:mean", "--dataset", "iris",
                 "--mi-budget", "0.5", "--trials", "20", "--seed", "0", "--no-progress",
                 "--out", "r", "--format", "json", *flags]) == 0
    err = capsys.readouterr().err
    assert ("runs every trial in this process" in err) is noted
    if noted:
        assert f"to use {flags[1]}" in err and "--n-jobs 2 or more" in err
    backend = json.loads((tmp_path / "r" / "report.json").read_text())["simulation"]["backend"]
    assert backend == ("threading" if "2" in flags else "sequential")


@pytest.mark.parametrize("params, words", [
    ({"n_trials": 10**400}, "`n_trials` must be an integer in [2, "),
    ({"n_trials": 1}, "`n_trials` must be an integer in [2, "),
    ({"mi_budget": 10**400}, "`mi_budget` must be at most 1.798e+308"),
    ({"mi_budget": float("nan")}, "`mi_budget` must be a finite number"),
    ({"mi_budget": 0.0}, "`mi_budget` must be in (0.0, inf)"),
    ({"target_accuracy": 10**400}, "`target_accuracy` must be at most 1.798e+308"),
    ({"target_accuracy": 0.5}, "`target_accuracy` must be in (0.5, 1.0)"),
])
@pytest.mark.parametrize("kind", ["regressor", "classifier"])
def test_meta_estimator_hyperparameters_are_named_at_their_extremes(params, words, kind):
    """PACPrivateRegressor(n_trials=10**400) / (mi_budget=10**400) ended in a bare
    OverflowError: every numeric hyperparameter is checked, and named, before any fit."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression, Ridge

    from pacpriv.estimators import PACPrivateClassifier, PACPrivateRegressor

    X = np.random.default_rng(0).normal(size=(40, 3))
    if kind == "regressor":
        est, y = PACPrivateRegressor(Ridge(), **params), X[:, 0]
    else:
        est, y = PACPrivateClassifier(LogisticRegression(), **params), (X[:, 0] > 0).astype(int)
    with pytest.raises((ValueError, TypeError)) as err:
        est.fit(X, y)
    assert words in str(err.value)


def test_meta_estimator_takes_a_numpy_scalar_target():
    """A NumPy float target (e.g. from a grid) is a number like any other."""
    import numpy as np
    from sklearn.linear_model import Ridge

    from pacpriv.estimators import PACPrivateRegressor

    X = np.random.default_rng(0).normal(size=(200, 3))
    with pytest.warns(Warning):  # n_trials below the planning model's (UndersampledWarning)
        est = PACPrivateRegressor(Ridge(), target_accuracy=np.float32(0.6), n_trials=50,
                                  random_state=0).fit(X, X[:, 0])
    assert est.posterior_success_bound_ <= float(np.float32(0.6)) + 1e-12


def _fit_csv(tmp_path, capsys, header, rows, extra=()):
    path = tmp_path / "pool.csv"
    path.write_text("\n".join([header, *rows]) + "\n")
    assert main(["predict", "fit", "--estimator", "logistic", "--dataset", str(path),
                 "--label-column", "label", "--state", str(tmp_path / "st"), "--n-worlds", "4",
                 "--per-query-budget", "0.001", "--total-budget", "0.1", "--no-progress",
                 "--seed", "0", *extra]) == 0
    capsys.readouterr()


def _answer(tmp_path, capsys, text, *flags):
    q = tmp_path / "q.csv"
    q.write_text(text)
    code = main(["predict", "query", "--state", str(tmp_path / "st"), "--queries", str(q),
                 "--json", *flags])
    got = capsys.readouterr()
    return code, (json.loads(got.out)["outputs"] if code == 0 else None), got.err


@pytest.mark.parametrize("extra", [[], ["--categorical", "one-hot", "--standardize"]])
def test_a_query_file_gives_the_fit_s_columns_by_name(tmp_path, capsys, monkeypatch, extra):
    """A query file with the pool file's own header (label and dropped columns included) was
    refused with no hint, and one with the fit's columns in another order was answered column
    for column (a silent wrong answer): the fit's feature columns are taken by name."""
    import numpy as np

    rng = np.random.default_rng(0)
    cities = ["paris", "lyon"] if extra else ["1", "2"]
    rows = [f"{a},{b},{cities[int(a > 40)]},n{i},{int(a > 40)}" for i, (a, b) in
            enumerate(zip(rng.integers(20, 70, 80), rng.integers(20, 90, 80), strict=True))]
    _fit_csv(tmp_path, capsys, "age,income,city,notes,label", rows,
             ["--drop-columns", "notes", *extra])
    from pacpriv.prediction import PrivatePredictor

    seen = []
    answer = PrivatePredictor.answer

    def spy(self, X, *args, **kwargs):
        seen.append(np.array(X, dtype=np.float64))
        return answer(self, X, *args, **kwargs)

    monkeypatch.setattr(PrivatePredictor, "answer", spy)
    code, _, err = _answer(tmp_path, capsys, f"age,income,city\n30,80,{cities[0]}\n")
    assert code == 0, err
    code, _, err = _answer(tmp_path, capsys,
                           f"label,city,notes,income,age\n0,{cities[0]},x,80,30\n")
    assert code == 0 and "taken by name; 2 other column(s) ignored" in err
    assert len(seen) == 2 and np.array_equal(seen[0], seen[1])  # the same features
    code, _, err = _answer(tmp_path, capsys, f"age,salary,city\n30,80,{cities[0]}\n")
    assert code == 2 and "feature column 2 is 'salary'" in err


def _fails_on_big(subset):
    if len(subset) > 5:
        raise ValueError("boom")
    return subset.mean(axis=0) if len(subset) else subset.sum(axis=0)


def _fails_on_empty(subset):
    if len(subset) == 0:
        raise ValueError("boom")
    return subset.mean(axis=0)


@pytest.mark.filterwarnings("ignore::pacpriv.exceptions.UndersampledWarning")
@pytest.mark.parametrize("func, rate, empty", [(_fails_on_big, 0.5, False),
                                               (_fails_on_empty, 0.02, True)])
def test_a_per_record_failure_says_empty_only_when_the_subset_was(func, rate, empty):
    """record_exposure / calibrate_per_record / `pac records` said a failing trial ran "on an
    empty subset" when f had seen 19-20 of 40 records (the engine's stand-in masks): the words
    follow the real sampler's mask of that trial."""
    import numpy as np

    from pacpriv.exceptions import MechanismError
    from pacpriv.pac import record_exposure
    from pacpriv.pac.engine import ExecutionOptions
    from pacpriv.pac.samplers import PoissonSampler

    X = np.random.default_rng(0).normal(size=(40, 3))
    with pytest.raises(MechanismError) as err:
        record_exposure(func, X, noise_cov=np.eye(3), n_trials=20, rng=0,
                        sampler=PoissonSampler(rate),
                        execution=ExecutionOptions(progress=False))
    text = str(err.value)
    assert ("on an empty subset" in text) is empty
    assert "record block" in text and "boom" not in text


@pytest.mark.parametrize("field", ["checkpoint", "output_path"])
def test_an_empty_path_is_refused_not_the_working_folder(tmp_path, monkeypatch, field):
    """ExecutionOptions(checkpoint='') was accepted and simulate wrote the un-noised outputs
    and masks into the working folder; '' (and a URL, or a non-path) is refused by name, as
    `state=''` of a PrivatePredictor is."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    from pacpriv.pac.engine import ExecutionOptions
    from pacpriv.prediction import PrivatePredictor

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=f"`{field}` must be a non-empty path"):
        ExecutionOptions(**{field: ""})
    with pytest.raises(ValueError, match="`state` must be a non-empty path"):
        PrivatePredictor(LogisticRegression(), (np.zeros((10, 2)), np.arange(10) % 2),
                         n_worlds=4, per_query_budget=0.01, total_budget=0.1, state="")
    assert list(tmp_path.iterdir()) == []  # nothing written


def _hangs_on_everything(subset):
    import time

    import numpy as np

    if len(subset) == 30:  # the release's secret subset below (every record)
        time.sleep(60)
    return np.asarray(subset, dtype=float).mean(axis=0)


@pytest.mark.filterwarnings("ignore::pacpriv.exceptions.PacprivWarning")
@pytest.mark.parametrize("time_limit, error", [(None, "MechanismError"),
                                               (30.0, "MechanismError"),
                                               (0.5, "TimeLimitError")])
def test_the_release_call_is_bounded_by_the_trial_timeout(time_limit, error):
    """A mechanism that hung on the release's call ran forever with --timeout 2 (only the
    trials and the reproducibility re-runs were bounded): the release's call is bounded by the
    same `timeout`, and the run's `time_limit` still comes first when sooner."""
    import time

    import numpy as np

    from pacpriv.pac import run_pac
    from pacpriv.pac.engine import ExecutionOptions

    pool = np.random.default_rng(0).normal(size=(30, 2))
    tic = time.monotonic()
    with pytest.raises(Exception) as err:
        run_pac(_hangs_on_everything, pool, mi_budget=0.5, n_trials=20, rng=0,
                secret_mask=np.ones(30, dtype=bool),
                execution=ExecutionOptions(progress=False, timeout=1.0 if time_limit != 0.5
                                           else 10.0, time_limit=time_limit))
    assert type(err.value).__name__ == error
    assert time.monotonic() - tic < 15
    if error == "MechanismError":
        assert "exceeded timeout=1.0 s on the release's secret subset" in str(err.value)
        assert "nothing was released or charged" in str(err.value)
    else:
        assert "during the release's call of the mechanism" in str(err.value)


def _clipped_mean(X):
    import numpy as np

    return np.clip(X, -3, 3).mean(axis=0) if len(X) else np.zeros(X.shape[1])


@pytest.mark.filterwarnings("ignore::pacpriv.exceptions.PacprivWarning")
def test_a_calibration_resumed_with_another_shape_or_bound_names_it(tmp_path):
    """`pac records --target-accuracy` resumed with a changed --shape said the user's function
    had changed ("its state changed"), and with --bound bernstein named two kinds of run only:
    the shape is named, and the bound's note says which kind each bound writes."""
    import numpy as np

    from pacpriv.exceptions import CheckpointError
    from pacpriv.pac import calibrate_per_record
    from pacpriv.pac.engine import ExecutionOptions

    pool = np.random.default_rng(0).normal(size=(40, 2))
    run = ExecutionOptions(progress=False, checkpoint=str(tmp_path / "ck"))
    calibrate_per_record(_clipped_mean, pool, target_accuracy=0.7, n_trials=400,
                         records=[0, 1], rng=0, execution=run)
    with pytest.raises(CheckpointError) as err:
        calibrate_per_record(_clipped_mean, pool, target_accuracy=0.7, n_trials=400,
                             records=[0, 1], rng=0, shape="sqrt", execution=run)
    text = str(err.value)
    assert "the certificate's shape (`shape`): checkpoint 'isotropic', now 'sqrt'" in text
    assert "state changed" not in text and "mechanism" not in text
    with pytest.raises(CheckpointError) as err:
        calibrate_per_record(_clipped_mean, pool, target_accuracy=0.7, n_trials=400,
                             records=[0, 1], rng=0, bound="bernstein", execution=run)
    assert "`bound` decides it: betting, the default, writes a calibration folder" in str(
        err.value)


@pytest.mark.parametrize("second, words", [
    ("other-estimator", "fit.estimator (state: 'Pipeline(StandardScaler, LogisticRegression)', "
                        "now: 'Pipeline(StandardScaler, Ridge)')"),
    ("other-parameter", "fit.params.logisticregression__C (state: '1.0', now: '10.0')"),
])
def test_a_state_resumed_with_another_estimator_names_it(tmp_path, second, words):
    """A state resumed with another estimator (mlp -> logistic) was refused with truncated
    reprs of the two pipelines' parameter lists: the estimators (with a pipeline's steps) are
    named, or the one parameter that changed."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from pacpriv.exceptions import CheckpointError
    from pacpriv.prediction import PrivatePredictor
    from pacpriv.prediction._state import StateDir
    from pacpriv.prediction._worlds import SklearnFit, fit_fingerprint

    X = np.random.default_rng(0).normal(size=(40, 3))
    y = (X[:, 0] > 0).astype(int)
    first = make_pipeline(StandardScaler(), LogisticRegression())
    PrivatePredictor(first, (X, y), n_worlds=4, per_query_budget=0.01, total_budget=0.1,
                     state=tmp_path / "st", rng=0)
    other = (make_pipeline(StandardScaler(), Ridge()) if second == "other-estimator"
             else make_pipeline(StandardScaler(), LogisticRegression(C=10.0)))
    stored = StateDir(tmp_path / "st").read_config()["fingerprint"]
    changed = {**stored, "fit": fit_fingerprint(SklearnFit(other))}
    with pytest.raises(CheckpointError) as err:
        StateDir(tmp_path / "st").check_fingerprint(changed)
    assert words in str(err.value) and "…" not in str(err.value)


def test_a_cuda_device_that_does_not_exist_is_refused_up_front(tmp_path, monkeypatch, capsys):
    """--device cuda (and ExecutionOptions(device='cuda')) on a machine without CUDA ran on
    the CPU without a word; it is refused before any work, in the API and the CLI."""
    import torch

    from pacpriv.pac.engine import ExecutionOptions

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(ValueError, match="`device` is 'cuda' but CUDA is unavailable"):
        ExecutionOptions(device="cuda")
    monkeypatch.chdir(tmp_path)
    assert main(["predict", "fit", "--estimator", "logistic", "--dataset", "iris", "--state",
                 "st", "--per-query-budget", "2^-12", "--total-budget", "0.01", "--n-worlds",
                 "4", "--device", "cuda", "--no-progress"]) == 2
    assert "--device is 'cuda' but CUDA is unavailable" in capsys.readouterr().err
    assert not (tmp_path / "st").exists()


_FITS: list[int] = []


class _HangsOnTheRelease:
    """A scikit-learn regressor whose ``hang_at``-th fit (counted over its clones: the
    release's, below) hangs."""

    def __init__(self, hang_at=25):
        self.hang_at = hang_at

    def get_params(self, deep=True):
        return {"hang_at": self.hang_at}

    def set_params(self, **params):
        self.hang_at = params.get("hang_at", self.hang_at)
        return self

    def fit(self, X, y):
        import time

        import numpy as np

        _FITS.append(len(X))
        if len(_FITS) == self.hang_at:
            time.sleep(60)
        beta = np.linalg.lstsq(np.c_[X, np.ones(len(X))], y, rcond=None)[0]
        self.coef_, self.intercept_ = beta[:-1], float(beta[-1])
        return self

    def predict(self, X):
        return X @ self.coef_ + self.intercept_


@pytest.mark.filterwarnings("ignore::pacpriv.exceptions.PacprivWarning")
def test_a_meta_estimator_s_release_fit_is_bounded_by_the_timeout():
    """PACPrivateClassifier/Regressor(execution=ExecutionOptions(timeout=2)) hung in the
    release's fit: it is bounded like every trial's."""
    import time

    import numpy as np
    from sklearn.base import RegressorMixin

    from pacpriv.estimators import PACPrivateRegressor
    from pacpriv.exceptions import MechanismError
    from pacpriv.pac.engine import ExecutionOptions

    class Hangs(RegressorMixin, _HangsOnTheRelease):
        pass

    # fits, one after the other: the carrier (public rows), 20 trials, 3 reproducibility
    # re-runs, then the release's (the 25th)
    X = np.random.default_rng(0).normal(size=(120, 2))
    _FITS.clear()
    est = PACPrivateRegressor(Hangs(hang_at=25), mi_budget=0.5, n_trials=20, random_state=0,
                              execution=ExecutionOptions(progress=False, timeout=1.0))
    tic = time.monotonic()
    with pytest.raises(MechanismError, match=r"exceeded timeout=1\.0 s on the release"):
        est.fit(X, X[:, 0])
    assert time.monotonic() - tic < 15 and len(_FITS) == 25


@pytest.mark.parametrize("formats, error, words", [
    ((), ValueError, "must list at least one of json, md, html"),
    ("", ValueError, "must list at least one of json, md, html"),
    (["json", "pdf"], ValueError, "got ['pdf']"),
    ([["json"]], ValueError, "must be a subset of json, md, html"),
    (3, TypeError, "must be an iterable of 'json', 'md', 'html'; got int"),
])
def test_write_report_refuses_an_empty_or_odd_format_list(tmp_path, formats, error, words):
    """write_report(result, out, formats=()) returned {} and wrote nothing, without a word
    (the CLI refuses an empty --format); a str is read as the CLI reads --format."""
    import numpy as np

    from pacpriv.pac import run_pac
    from pacpriv.pac.engine import ExecutionOptions
    from pacpriv.report import write_report

    pool = np.random.default_rng(0).normal(size=(30, 2))
    with pytest.warns(Warning):
        result = run_pac(lambda s: np.clip(s, -2, 2).mean(axis=0), pool, mi_budget=0.5,
                         n_trials=20, rng=0, execution=ExecutionOptions(progress=False))
    with pytest.raises(error) as err:
        write_report(result, tmp_path / "r", formats=formats)
    assert words in str(err.value) and not (tmp_path / "r").exists()
    paths = write_report(result, tmp_path / "ok", formats="json, md")
    assert sorted(paths) == ["json", "md"]


@pytest.mark.parametrize("flags, words", [
    (["--backend", "dask", "--scheduler", "", "--n-jobs", "2"],
     "--scheduler must not be empty: give the address of a running Dask scheduler"),
    (["--backend", "ray", "--ray-address", " "],
     "--ray-address must not be empty: give the address of a running Ray head"),
    (["--backend", "ray", "--ray-address", ""],
     "--ray-address must not be empty"),  # '' had started a local Ray without a word
])
def test_an_empty_cluster_address_is_refused_by_its_flag(tmp_path, monkeypatch, capsys, flags,
                                                         words):
    (tmp_path / "mech.py").write_text(MEAN)
    monkeypatch.chdir(tmp_path)
    assert main(["pac", "run", "--mechanism", "mech.py:mean", "--dataset", "iris",
                 "--mi-budget", "0.5", "--trials", "20", "--seed", "0", "--no-progress",
                 "--out", "r", *flags]) == 2
    assert words in capsys.readouterr().err and not (tmp_path / "r").exists()


def test_an_empty_ledger_location_is_refused():
    """`serve --ledger ''` and open_store('') read '' as the working folder."""
    from pacpriv.storage import open_store

    with pytest.raises(ValueError, match="`ledger` location: an empty location"):
        open_store("")
    with pytest.raises(SystemExit):
        main(["serve", "--state", "st", "--ledger", "", "--port", "18399"])
