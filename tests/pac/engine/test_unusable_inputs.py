"""Inputs the engine cannot use are named in one line (eighth new-user pass): a scipy sparse
pool ('got a scalar' before) and a mechanism that cannot reach worker processes (joblib's raw
PicklingError before)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from pacpriv.pac import ExecutionOptions, run_pac


def test_a_sparse_pool_is_named():
    sparse = pytest.importorskip("scipy.sparse")
    X = sparse.random(50, 5, density=0.3, random_state=0, format="csr")
    with pytest.raises(TypeError, match=r"`pool` is a scipy sparse matrix \(csr_matrix\); "
                                        r"pass a dense array"):
        run_pac(lambda S: np.asarray(S.mean(axis=0)).ravel(), X, mi_budget=0.1, n_trials=40,
                rng=0, execution=ExecutionOptions(progress=False))
    with pytest.raises(TypeError, match=r"`pool\[0\]` is a scipy sparse matrix"):
        run_pac(lambda S: S[1].mean(keepdims=True), (X, np.arange(50.0)), mi_budget=0.1,
                n_trials=40, rng=0, execution=ExecutionOptions(progress=False))


def test_a_mechanism_that_cannot_be_pickled_is_named():
    lock = threading.Lock()

    def f(X):
        with lock:
            return X.mean(0)

    pool = np.random.default_rng(0).normal(size=(40, 2))
    with pytest.raises(TypeError, match=r"cannot be sent to worker processes \(cannot pickle "
                                        r"'_thread.lock' object\): run in this process with "
                                        r"n_jobs=1"):
        run_pac(f, pool, mi_budget=0.1, n_trials=20, rng=0,
                execution=ExecutionOptions(progress=False, n_jobs=2))


def test_a_dataset_object_as_the_pool_says_to_pass_its_pool():
    import pacpriv

    d = pacpriv.load_dataset("iris")
    with pytest.raises(TypeError, match=r"`pool` is a Dataset; pass its `.pool` \(and "
                                        r"`dataset=<it>.to_dict\(\)`"):
        run_pac(lambda S: S[0].mean(0), d, mi_budget=0.1, n_trials=40, rng=0,
                execution=ExecutionOptions(progress=False))
