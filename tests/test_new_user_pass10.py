"""Regressions from the tenth fresh new-user pass (issue 35)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from pacpriv.exceptions import MechanismError
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.job import run_pac

QUIET = ExecutionOptions(progress=False)


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_a_failure_on_an_empty_subset_names_the_sampler(n_jobs):
    """A sampler that includes no record made the mechanism's NaN mean the mechanism's fault
    alone; the failure now says the subset was empty (public: a count, no record)."""
    pool = np.random.default_rng(0).random((40, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(MechanismError, match=r"in trial \d+ on an empty subset \(the sampler "
                                                 r"included no record in this trial\)"):
            run_pac(lambda X: X.mean(0), pool, mi_budget=0.1, n_trials=50, rng=0,
                    sampler=lambda n, rng: np.zeros(n, bool),
                    execution=QUIET.replace(n_jobs=n_jobs))
        with pytest.raises(MechanismError) as info:  # a non-empty subset: no such words
            run_pac(lambda X: X.mean(0) * np.nan, pool, mi_budget=0.1, n_trials=50, rng=0,
                    execution=QUIET)
    assert "empty subset" not in str(info.value)


def _env_slow(X, rng=None):
    """Sleeps PACPRIV_TEST_SLEEP seconds (read at call time: not part of its fingerprint)."""
    import os
    import time

    time.sleep(float(os.environ.get("PACPRIV_TEST_SLEEP", "0")))
    return np.array([float(len(X))])


def test_the_time_limit_covers_a_resumes_verification(tmp_path, monkeypatch):
    """Re-running recorded trials to verify a checkpoint ran outside `time_limit` (a run
    finished far past it, exit 0) and, cut by the per-trial timeout the limit set, said the
    mechanism failed and to delete the checkpoint. Now the limit covers it: a TimeLimitError
    that names the verification and keeps every finished trial."""
    from pacpriv.exceptions import TimeLimitError
    from pacpriv.pac.engine._simulate import simulate

    pool = np.arange(40.0).reshape(20, 2)
    ck = tmp_path / "ck"
    monkeypatch.setenv("PACPRIV_TEST_SLEEP", "0")
    first = simulate(_env_slow, pool, n_trials=10, rng=3,
                     execution=QUIET.replace(checkpoint=str(ck)))
    monkeypatch.setenv("PACPRIV_TEST_SLEEP", "2")
    with pytest.raises(TimeLimitError, match=r"10 of 10 trials finished; they are kept in the "
                                             r"checkpoint .*reached while verifying the "
                                             r"checkpoint") as info:
        simulate(_env_slow, pool, n_trials=10, rng=3,
                 execution=QUIET.replace(checkpoint=str(ck), time_limit=0.5))
    assert info.value.n_done == 10 and "delete" not in str(info.value)
    monkeypatch.setenv("PACPRIV_TEST_SLEEP", "0")  # the checkpoint is intact: it resumes
    again = simulate(_env_slow, pool, n_trials=10, rng=3,
                     execution=QUIET.replace(checkpoint=str(ck)))
    assert np.array_equal(again.outputs, first.outputs)


def test_compare_refuses_a_pool_whose_features_are_all_constant(tmp_path, capsys):
    """`compare` on a CSV whose every feature is constant ended in a traceback (the black
    box's Newton fit never converged); it is refused in one line before any trial. One
    constant column beside a varying one is fine (checked up to the same point)."""
    from pacpriv.cli import main
    from pacpriv.compare import compare_pac_dpsgd
    from pacpriv.datasets import load_dataset

    path = tmp_path / "const.csv"
    path.write_text("a,b,label\n" + "".join(f"1,1,{i % 2}\n" for i in range(40)))
    with pytest.raises(ValueError, match="every feature column is constant"):
        compare_pac_dpsgd(load_dataset(path, label_column="label"), target_accuracy=0.6)
    out = tmp_path / "c"
    assert main(["compare", "--dataset", str(path), "--label-column", "label",
                 "--target-accuracy", "0.6", "--trials", "20", "--out", str(out)]) == 2
    assert "every feature column is constant" in capsys.readouterr().err
    assert not out.exists()


def test_large_mi_budget_arrays_are_the_same_numbers_in_bounded_time(monkeypatch):
    """`mi_budget_for_accuracy` on 10⁶ values ran minutes without a word: repeated pairs are
    computed once and large arrays in chunks with a progress bar. Every value equals the
    one-at-a-time call, bit for bit (chunks made small here)."""
    from pacpriv.pac.bounds import _posterior

    monkeypatch.setattr(_posterior, "_CHUNK", 25)
    rng = np.random.default_rng(5)
    targets = np.concatenate([rng.uniform(0.7, 1.0, 70), np.full(30, 0.75), [0.7, 1.0]])
    priors = np.where(np.arange(targets.size) % 2, 0.5, 0.7)
    got = _posterior.mi_budget_for_accuracy(targets, prior=priors)
    want = [_posterior.mi_budget_for_accuracy(float(a), prior=float(p))
            for a, p in zip(targets, priors, strict=True)]
    assert got.tolist() == want
    grid = targets[:70].reshape(7, 10)  # no repeats: chunked
    assert np.array_equal(_posterior.mi_budget_for_accuracy(grid, prior=0.5),
                          np.reshape([_posterior.mi_budget_for_accuracy(float(a), prior=0.5)
                                      for a in grid.ravel()], grid.shape))


def test_a_records_run_refused_by_its_time_limit_leaves_no_checkpoint(tmp_path, monkeypatch,
                                                                       capsys):
    """`pac records --time-limit` refused by a later phase's estimate ("nothing was run or
    charged") left the manifest-only --checkpoint folder it had created; it is removed. A
    folder that existed before is never touched."""
    from pacpriv.cli import main

    (tmp_path / "speedy_then_slow_p10.py").write_text(
        "import time\nimport numpy as np\n_n = [0]\n"
        "def f(X):\n    _n[0] += 1\n    X = X[0] if isinstance(X, tuple) else X\n"
        "    if _n[0] > 6:\n        time.sleep(0.6)\n    return np.array([float(len(X))])\n")
    monkeypatch.chdir(tmp_path)
    argv = ["pac", "records", "--mechanism", "speedy_then_slow_p10.py:f", "--dataset", "iris",
            "--target-accuracy", "0.7", "--trials", "60", "--records", "sample:2",
            "--time-limit", "3", "--checkpoint", "ck", "--out", "rep", "--no-progress"]
    assert main(argv) == 2
    err = capsys.readouterr().err  # a later part: "this part was not started" (twelfth pass)
    assert "nothing was run or charged" in err or "this part was not started" in err
    assert not (tmp_path / "ck").exists() and not (tmp_path / "rep").exists()
