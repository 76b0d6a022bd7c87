"""A huge ``predict fit`` says its estimate before anything long (twelfth new-user pass, AC3):
the estimate came after the class check of every world's public mask, which ran ~60 s silently
for 10⁶ worlds. Now the estimate (or its refusal) comes first, the check says how far it got
when it runs long, and the predictor's repeat of the CLI's check draws no mask again."""

from __future__ import annotations

import os
import time
import warnings

import numpy as np

from pacpriv.cli import main
from pacpriv.cli._predict_fit import QUICK_WORLDS
from pacpriv.exceptions import StallWarning
from pacpriv.pac.engine._stall import CountNotice
from pacpriv.pac.samplers import ComplementaryPairsSampler
from pacpriv.prediction import _worlds
from pacpriv.prediction._worlds import as_world_fitter, check_world_classes


def _count_masks(monkeypatch) -> list[int]:
    calls: list[int] = []
    real = ComplementaryPairsSampler.trial_mask

    def counted(self, n_records, *, root, index):
        calls.append(index)
        return real(self, n_records, root=root, index=index)

    monkeypatch.setattr(ComplementaryPairsSampler, "trial_mask", counted)
    return calls


def test_a_huge_fit_is_estimated_and_refused_before_the_long_class_check(
        tmp_path, monkeypatch, capsys):
    calls = _count_masks(monkeypatch)
    state = tmp_path / "s"
    assert main(["predict", "fit", "--estimator", "logistic", "--dataset", "iris",
                 "--n-worlds", "1000000", "--per-query-budget", "2^-10", "--total-budget",
                 "0.01", "--no-progress", "--max-minutes", "1", "--seed", "0",
                 "--state", str(state)]) == 2
    err = capsys.readouterr().err
    assert "pacpriv: note: estimate: 1000000 worlds x " in err  # shown with --no-progress
    assert "error: --n-worlds 1000000: the fit is estimated at about " in err
    assert "above --max-minutes 1;" in err
    # only the quick look at the first worlds ran (before the probe), not the 10⁶ masks
    assert sorted(calls) == list(range(QUICK_WORLDS)) and not state.exists()


def test_the_class_check_runs_once_for_the_cli_and_the_predictor(monkeypatch):
    from sklearn.linear_model import LogisticRegression

    calls = _count_masks(monkeypatch)
    monkeypatch.setattr(_worlds, "_CHECKED", {})
    y = np.tile([0, 1, 2], 20)
    pool = (np.arange(120.0).reshape(60, 2), y)
    kw = {"n_worlds": 40, "sampler": ComplementaryPairsSampler(),
          "world_seed": np.random.SeedSequence(7)}
    fitter = as_world_fitter(LogisticRegression())
    check_world_classes(fitter, "proba", pool, **kw)
    # 3 classes of 20 among 60 records: the union bound does not rule a miss out, masks drawn
    assert sorted(calls) == list(range(40))
    check_world_classes(fitter, "proba", pool, **{**kw, "world_seed": np.random.SeedSequence(7)})
    assert len(calls) == 40  # the same worlds: not drawn again
    check_world_classes(fitter, "proba", pool, **{**kw, "world_seed": np.random.SeedSequence(8)})
    assert len(calls) == 80  # other worlds: checked


def test_a_long_count_says_how_far_it_got():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with CountNotice(1000, "checking the masks", first_s=0.05) as note:
            note.done = 250
            deadline = time.monotonic() + 5.0
            while not caught and time.monotonic() < deadline:
                time.sleep(0.02)
    assert caught and issubclass(caught[0].category, StallWarning)
    text = str(caught[0].message)
    assert text.startswith("checking the masks: 250 of 1000 in ")
    assert "s left; nothing has been run or charged yet), or press Ctrl-C to stop." in text


class _Store:
    def __init__(self, n: int) -> None:
        self.done = np.zeros(n, dtype=bool)

    @property
    def n_done(self) -> int:
        return int(self.done.sum())


def test_a_run_without_a_bar_says_how_far_it_got():
    """--no-progress hid every word of a 45-min `pac run`/`compare`: with the bar hidden the
    engine now says N of M trials, and about how long is left, after a few seconds."""
    from pacpriv.pac.engine._parallel import QUIET_NOTE_S, _quiet_progress, _QuietProgress

    store = _Store(1000)
    store.done[:100] = True  # resumed from a checkpoint: those do not count in the rate
    note = _quiet_progress(object(), store)  # a bar that shows nothing
    assert isinstance(note, _QuietProgress) and note.first_s == QUIET_NOTE_S <= 5.0
    store.done[100:300] = True
    assert note.text(10.0) == ("300 of 1000 trials finished after 10 s (about 0.58 min left; "
                               "no progress bar was asked for), or press Ctrl-C to stop.")
    from tqdm import tqdm

    with tqdm(total=10, disable=True) as hidden:
        assert isinstance(_quiet_progress(hidden, store), _QuietProgress)
    with open(os.devnull, "w") as sink, tqdm(total=10, file=sink) as shown:
        assert not isinstance(_quiet_progress(shown, store), _QuietProgress)
