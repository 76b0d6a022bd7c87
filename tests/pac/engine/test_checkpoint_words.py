"""A refused checkpoint says in words what differs, before any probe or estimate (ninth
new-user pass, #64/#67): ``pac records`` resumed with other ``--records`` dumped internal
reprs (``((PerRecordBlocks(PerRecordPairs(sha256=...``), and a ``pac run`` checkpoint given to
``pac records`` dumped a fingerprint dict after printing a time estimate."""

from __future__ import annotations

import re

import numpy as np
import pytest

from pacpriv.cli.main import main
from pacpriv.exceptions import CheckpointError
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.engine._checkpoint import Checkpoint
from pacpriv.pac.engine._checkpoint_words import differences_in_words, records_text
from pacpriv.pac.engine._simulate import simulate
from pacpriv.pac.per_record import calibrate_per_record, record_exposure
from pacpriv.pac.per_record._calibration import calibration_fingerprint
from pacpriv.pac.samplers import PoissonSampler

POOL = np.random.default_rng(0).normal(size=(30, 2))
CALLS: list[int] = []
#: a SHA-256 in hex, or a repr of the engine's internals: never in a refusal
_INTERNALS = re.compile(r"[0-9a-f]{40}|PerRecord|sha256|\{'")


def mean(subset):
    CALLS.append(1)
    return subset.mean(axis=0) if len(subset) else np.zeros(2)


def test_records_text():
    assert records_text([0, 1, 2, 3, 4]) == "0-4"
    assert records_text(np.array([9, 0, 1, 4, 5, 6])) == "0-1,4-6,9"
    assert records_text(range(0, 60, 2), limit=3) == "0,2,4,… (30 records)"


def test_each_difference_in_words():
    old = {"run": "pacpriv.per_record", "records": "0-4"}
    assert differences_in_words(old, {**old, "records": "0-9"}) == [
        "the audited records (`records`): checkpoint 0-4, now 0-9"]
    assert differences_in_words(old, old) == []
    (kind,) = differences_in_words({"mechanism": {}}, old)
    assert kind.startswith("it was written by a simulation of the whole subset (`run_pac` / "
                           "`simulate`; `pac run`), not by the per-record calibration")
    (kind,) = differences_in_words({"run": "pacpriv.compare"}, {"mechanism": {}})
    assert "written by a comparison" in kind and "not by a simulation" in kind
    per_record = {"mechanism": {"bound": ["((PerRecordBlocks(PerRecordPairs(sha256=ab, "
                                          "records=0-4), block=5, parts=1),), [])"]}}
    (kind,) = differences_in_words(per_record, {"mechanism": {"bound": []}})
    assert kind.startswith("it was written by a per-record simulation (`record_exposure`")


def _made(path, **execution):
    simulate(mean, POOL, n_trials=6, rng=1,
             execution=ExecutionOptions(progress=False, checkpoint=str(path), **execution))


def test_a_simulation_checkpoint_given_to_the_calibration(tmp_path):
    _made(tmp_path / "ck")
    CALLS.clear()
    with pytest.raises(CheckpointError) as info:
        calibrate_per_record(mean, POOL, target_accuracy=0.9, n_trials=40, records=[0, 1],
                             rng=1, execution=ExecutionOptions(progress=False,
                                                               checkpoint=str(tmp_path / "ck")))
    text = str(info.value)
    assert "it was written by a simulation" in text and not _INTERNALS.search(text)
    assert CALLS == []  # refused before any evaluation


def test_a_calibration_checkpoint_given_to_a_simulation_before_its_probe(tmp_path):
    Checkpoint.open(tmp_path / "ck", fingerprint=calibration_fingerprint(
        mean, POOL, np.arange(5), PoissonSampler(0.5), shape="isotropic",
        shape_fraction=0.25), n_records=0,
        root=np.random.SeedSequence(0))
    CALLS.clear()
    with pytest.raises(CheckpointError, match="written by the per-record calibration") as info:
        simulate(mean, POOL, n_trials=100, rng=0, execution=ExecutionOptions(
            progress=False, checkpoint=str(tmp_path / "ck"), time_limit=60.0))
    assert CALLS == [] and not _INTERNALS.search(str(info.value))  # not even the probe ran


def test_a_per_record_simulation_resumed_with_other_records(tmp_path):
    """The noise-std audit's checkpoint is a simulation: its records come from the bound
    arguments, in words."""
    ck = str(tmp_path / "ck")
    record_exposure(mean, POOL, noise_cov=1.0, n_trials=4, records=[0, 1, 2, 3, 4], rng=2,
                    execution=ExecutionOptions(progress=False, checkpoint=ck))
    with pytest.raises(CheckpointError) as info:
        record_exposure(mean, POOL, noise_cov=1.0, n_trials=4, records=list(range(10)), rng=2,
                        execution=ExecutionOptions(progress=False, checkpoint=ck))
    text = str(info.value)
    assert "the audited records (`records`): checkpoint 0-4, now 0-9" in text
    assert not _INTERNALS.search(text)


_FUNCS = '''
import numpy as np


def mean(subset):
    X = subset[0] if isinstance(subset, tuple) else subset
    return np.asarray(X, float).mean(axis=0)
'''


@pytest.fixture
def funcs(tmp_path):
    path = tmp_path / "ck_funcs.py"
    path.write_text(_FUNCS)
    return f"{path}:mean"


def _records(funcs, tmp_path, ck, *extra):
    return main(["pac", "records", "--mechanism", funcs, "--dataset", "iris",
                 "--target-accuracy", "0.6", "--trials", "60", "--seed", "0", "--checkpoint",
                 str(ck), "--time-limit", "600", "--out", str(tmp_path / "rep"),
                 "--no-progress", *extra])


@pytest.mark.filterwarnings("ignore::pacpriv.exceptions.UndersampledWarning")
def test_cli_pac_run_checkpoint_refused_by_pac_records_before_the_estimate(funcs, tmp_path,
                                                                          capsys):
    ck = tmp_path / "ck"
    assert main(["pac", "run", "--mechanism", funcs, "--dataset", "iris", "--mi-budget", "0.1",
                 "--trials", "20", "--seed", "3", "--checkpoint", str(ck), "--no-progress",
                 "--out", str(tmp_path / "first")]) == 0
    capsys.readouterr()
    assert _records(funcs, tmp_path, ck) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "estimate" not in err  # one line, before the probe
    assert err.startswith(f"pacpriv: error: Checkpoint {str(ck)!r} belongs to a different run: "
                          "it was written by a simulation")
    assert "`pac run`" in err and "`pac records --target-accuracy`" in err
    assert not _INTERNALS.search(err)
    assert not (tmp_path / "rep").exists()


@pytest.mark.filterwarnings("ignore::pacpriv.exceptions.UndersampledWarning")
@pytest.mark.parametrize("extra", [["--noise-std", "1"],
                                   ["--target-accuracy", "0.6", "--bound", "bernstein"]])
def test_cli_per_record_simulation_refuses_a_pac_run_checkpoint(funcs, tmp_path, capsys, extra):
    ck = tmp_path / "ck"
    assert main(["pac", "run", "--mechanism", funcs, "--dataset", "iris", "--mi-budget", "0.1",
                 "--trials", "20", "--seed", "3", "--checkpoint", str(ck), "--no-progress",
                 "--out", str(tmp_path / "first")]) == 0
    capsys.readouterr()
    rc = main(["pac", "records", "--mechanism", funcs, "--dataset", "iris", *extra,
               "--trials", "60", "--seed", "0", "--checkpoint", str(ck), "--time-limit", "600",
               "--out", str(tmp_path / "rep"), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and "estimate" not in err
    assert "it was written by a simulation of the whole subset" in err
    assert "not by a per-record simulation" in err and not _INTERNALS.search(err)


def test_cli_pac_records_other_records_refused_before_the_estimate(funcs, tmp_path, capsys):
    ck = tmp_path / "ck"
    assert _records(funcs, tmp_path, ck, "--records", "0-4") == 0
    capsys.readouterr()
    assert _records(funcs, tmp_path, ck, "--records", "0-9", "--out", str(tmp_path / "b")) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"pacpriv: error: Checkpoint {str(ck)!r} belongs to a different run: the "
                   "audited records (--records): checkpoint 0-4, now 0-9. Use another "
                   "checkpoint directory or delete this one.")
    # another --dataset, --sampling-rate or --seed: named too, before the estimate
    for extra, words in ((["--sampling-rate", "0.45"], "the sampler: checkpoint poisson "
                          "(sampling_rate 0.5"), (["--seed", "1"], "the root seed (--seed): "
                          "checkpoint entropy 0, now entropy 1; omit --seed")):
        rc = _records(funcs, tmp_path, ck, "--records", "0-4", "--out", str(tmp_path / "c"),
                      *extra)
        err = capsys.readouterr().err.strip()
        assert rc == 2 and "\n" not in err and words in err and not _INTERNALS.search(err)
