"""A query row is answered in the feature space the worlds were fitted on (issue 35, twelfth
pass): ``predict fit`` stores its fitted preprocessing in the state, and ``predict query``
(``--dataset`` rows and ``--queries`` files) and ``serve`` map raw rows with it, never with
statistics of the query file.

Each check fits two identical states (same public and caller-seeded secret seeds): one is
queried through the CLI or HTTP, the other through the Python API with rows mapped here
independently (numpy, the pool's mean and population standard deviation, sorted categories);
answered in lockstep, both give the same noise, so the answers must be equal.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from starlette.exceptions import StarletteDeprecationWarning

from pacpriv.cli import main
from pacpriv.datasets import load_dataset
from pacpriv.datasets.preprocessing import Preprocessing
from pacpriv.prediction import PrivatePredictor, create_app

with warnings.catch_warnings():
    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from fastapi.testclient import TestClient

N = 60


def _pool():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, 3)) * [1.0, 100.0, 0.01] + [5.0, 1000.0, 0.0]
    y = ((X[:, 0] - 5) + (X[:, 1] - 1000) / 100 > 0).astype(int)
    return X, y


def _csv(path, X, y=None, header=("a", "b", "c")):
    lines = [",".join([*header, *(["label"] if y is not None else [])])]
    for i, row in enumerate(X):
        cells = [str(v) if isinstance(v, str) else repr(float(v)) for v in row]
        lines.append(",".join(cells + ([str(int(y[i]))] if y is not None else [])))
    path.write_text("\n".join(lines) + "\n")
    return path


def _fit(folder, name, data, *flags, output="logits"):
    state = folder / name
    assert main(["predict", "fit", "--estimator", "logistic", "--dataset", str(data),
                 "--label-column", "label", "--state", str(state), "--n-worlds", "4",
                 "--per-query-budget", "2^-12", "--total-budget", "0.05", "--output", output,
                 "--no-progress", "--seed", "0", "--secret-seed", "1", *flags]) == 0
    return state


def _query(capsys, state, *argv):
    code = main(["predict", "query", "--state", str(state), "--json", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else None), err


@pytest.fixture(scope="module")
def standardized(tmp_path_factory):
    folder = tmp_path_factory.mktemp("std")
    X, y = _pool()
    data = _csv(folder / "good.csv", X, y)
    return (folder, data, _fit(folder, "cli", data, "--standardize"),
            _fit(folder, "api", data, "--standardize"), X)


def _std(rows, X):
    return (np.asarray(rows, dtype=float) - X.mean(axis=0)) / X.std(axis=0)


def test_cli_rows_use_the_fit_statistics_never_the_query_file(standardized, capsys):
    """The reviewer's repros: rows of the pool file (no flag) and a 2-row file are answered on
    the fit-time standardised rows; --standardize on a query is refused, nothing spent."""
    folder, data, cli, api, X = standardized
    twin = PrivatePredictor.load(api)
    code, got, err = _query(capsys, cli, "--dataset", data, "--label-column", "label",
                            "--rows", "0:1")
    assert code == 0, err
    np.testing.assert_allclose(got["outputs"], twin.answer(_std(X[:1], X)), rtol=1e-9)
    assert not np.allclose(twin.world_outputs(X[:1]), twin.world_outputs(_std(X[:1], X)))
    q2 = np.array([[1.5, 0.2, -0.3], [-2.0, 1.0, 0.5]])
    q2l = _csv(folder / "q2l.csv", q2, [1, 0])
    code, _, err = _query(capsys, cli, "--dataset", q2l, "--label-column", "label",
                          "--standardize", "--rows", "0:1")
    assert code == 2 and "applied to the query rows automatically" in err
    assert "pool's mean" not in err and "Traceback" not in err
    for argv in (("--dataset", q2l, "--rows", "0:2"), ("--queries", q2l)):
        code, got, err = _query(capsys, cli, *argv, "--label-column", "label")
        assert code == 0, err
        np.testing.assert_allclose(got["outputs"], twin.answer(_std(q2, X)), rtol=1e-9)
        assert got["n_answered"] == twin.n_answered
    np.save(folder / "q.npy", q2)  # numeric files too
    code, got, err = _query(capsys, cli, "--queries", folder / "q.npy")
    assert code == 0, err
    np.testing.assert_allclose(got["outputs"], twin.answer(_std(q2, X)), rtol=1e-9)
    assert main(["predict", "status", "--state", str(cli)]) == 0
    out = capsys.readouterr().out
    line = next(t for t in out.splitlines() if t.startswith("preprocessing"))
    assert "standardized with the pool's mean" in line  # public words: no statistic
    assert not any(f"{v:.3g}" in line for v in (*X.mean(axis=0), *X.std(axis=0)))


def test_http_rows_are_raw_and_standardized_with_the_pool_statistics(standardized):
    _, _, cli, api, X = standardized
    served, twin = PrivatePredictor.load(cli), PrivatePredictor.load(api)
    assert twin.n_answered == served.n_answered  # in lockstep since the test above
    client = TestClient(create_app(served))
    r = client.post("/predict", json={"rows": X[3:5].tolist()})
    assert r.status_code == 200, r.text
    np.testing.assert_allclose(r.json()["outputs"], twin.answer(_std(X[3:5], X)), rtol=1e-9)
    r = client.post("/predict", json={"rows": [[1.0, 2.0]]})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"][:2] == ["body", "rows"]


def test_one_hot_state_uses_the_pool_categories(tmp_path, capsys):
    """A query file holding a subset of the categories is encoded with the pool's category
    list (sorted: blue, green, red); an unseen category is refused without being echoed, and
    HTTP gives a located 422 saying what rows must be; nothing is spent by a refusal."""
    rng = np.random.default_rng(1)
    colors = np.array(["red", "green", "blue"])[rng.integers(0, 3, size=N)]
    a = rng.normal(size=N)
    y = (a + (colors == "red") > 0.3).astype(int)
    rows = [[c, float(v)] for c, v in zip(colors, a, strict=True)]
    data = _csv(tmp_path / "cat.csv", rows, y, header=("color", "a"))
    flags = ("--categorical", "one-hot")
    cli, api = _fit(tmp_path, "cli", data, *flags), _fit(tmp_path, "api", data, *flags)
    twin, _ = PrivatePredictor.load(api), capsys.readouterr()
    queries = _csv(tmp_path / "q.csv", [["green", 0.5], ["red", -1.0]], header=("color", "a"))
    code, got, err = _query(capsys, cli, "--queries", queries)
    assert code == 0, err
    expected = np.array([[0.0, 1.0, 0.0, 0.5], [0.0, 0.0, 1.0, -1.0]])
    np.testing.assert_allclose(got["outputs"], twin.answer(expected), rtol=1e-9)
    unseen = _csv(tmp_path / "u.csv", [["purple", 0.5]], header=("color", "a"))
    code, _, err = _query(capsys, cli, "--queries", unseen)
    assert code == 2 and "category the pool did not hold" in err and "purple" not in err
    served = PrivatePredictor.load(cli)
    assert served.n_answered == 2
    r = TestClient(create_app(served)).post("/predict", json={"rows": [[0.0, 1.0, 0.0, 0.5]]})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"][:2] == ["body", "rows"]
    assert "predict query --queries" in r.text and PrivatePredictor.load(cli).n_answered == 2


def test_a_state_without_preprocessing_is_unchanged(tmp_path, capsys):
    X, y = _pool()
    data = _csv(tmp_path / "good.csv", X, y)
    cli, api = _fit(tmp_path, "cli", data), _fit(tmp_path, "api", data)
    twin, _ = PrivatePredictor.load(api), capsys.readouterr()
    code, got, err = _query(capsys, cli, "--dataset", data, "--label-column", "label",
                            "--rows", "0:2")
    assert code == 0, err
    np.testing.assert_allclose(got["outputs"], twin.answer(X[:2]), rtol=1e-9)
    # a CSV fit keeps its feature columns' names only (no value changes; query files with a
    # header give them by name)
    assert PrivatePredictor.load(cli).preprocessing.is_identity
    assert "values unchanged" in PrivatePredictor.load(cli).to_dict()["preprocessing"]
    code, _, err = _query(capsys, cli, "--dataset", data, "--label-column", "label",
                          "--standardize")
    assert code == 2 and "pool's mean" not in err


def test_imputation_uses_the_pool_median(tmp_path):
    """A missing query cell gets the pool's median, then the pool's standardisation."""
    X, _ = _pool()
    cells = [list(map(repr, row)) for row in X.tolist()]
    cells[0][1] = ""
    path = tmp_path / "m.csv"
    path.write_text("a,b,c\n" + "\n".join(",".join(r) for r in cells) + "\n")
    ds = load_dataset(path, preprocessing=Preprocessing(missing="impute-median",
                                                        standardize=True))
    col = X.copy()
    col[0, 1] = np.median(X[1:, 1])
    got = ds.transform.transform_cells([["1.0", "", "0.5"]], where="q", row_ids=[2])
    expected = (np.array([1.0, col[0, 1], 0.5]) - col.mean(axis=0)) / col.std(axis=0)
    np.testing.assert_allclose(got[0], expected, rtol=1e-12)
    with pytest.raises(ValueError, match="line 2, column 2: non-numeric"):
        ds.transform.transform_cells([["1.0", "x", "0.5"]], where="q", row_ids=[2])
