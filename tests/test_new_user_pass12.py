"""Regressions from the twelfth fresh new-user pass (issue 35), each a kind with siblings."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression, Ridge

from pacpriv.audit import EstimatorModel, run_audit
from pacpriv.exceptions import TimeLimitError
from pacpriv.pac.engine import ExecutionOptions

QUIET = ExecutionOptions(progress=False)
X = np.random.default_rng(0).normal(size=(40, 3))
Y = (X[:, 0] > 0).astype(int)


@pytest.mark.parametrize("inner, words", [
    (LogisticRegression, "got the class LogisticRegression: pass LogisticRegression(...)"),
    (lambda: LogisticRegression(), "got a function (a factory: call it"),
    (Ridge(), "got Ridge (a scikit-learn regressor)"),
])
def test_estimator_model_of_a_class_a_factory_or_a_regressor_is_refused_up_front(inner, words):
    """N35/N36: EstimatorModel(Ridge()), EstimatorModel(lambda: ...) and EstimatorModel(Class)
    failed in trial 0 with a withheld AttributeError/TypeError; refused before any training."""
    with pytest.raises(TypeError) as info:
        run_audit(X, Y, model=EstimatorModel(inner), reference_models=4, rng=0,
                  execution=QUIET)
    assert words in str(info.value) and "\n" not in str(info.value)


SLOW_RERUN = {"on": False}


def _mean_slow_when_rerun(subset):
    """Quick in the trials; 20 s (interruptible) once the reproducibility check starts."""
    if SLOW_RERUN["on"]:
        end = time.monotonic() + 20.0
        while time.monotonic() < end:
            time.sleep(0.01)
    return subset.mean(axis=0) if len(subset) else np.zeros(X.shape[1])


@pytest.mark.parametrize("entry", ["simulate", "record_exposure", "calibrate_per_record"])
def test_a_per_record_run_cut_in_its_reproducibility_check_stops(monkeypatch, entry):
    """R1/R2/Q10: a per-record run whose reproducibility re-run was cut by ``time_limit``
    returned normally, marked "not reproducible" (a re-run that did not finish is no evidence
    of that). Now it stops with TimeLimitError, like run_pac, and says where."""
    from pacpriv.pac.engine import _simulate
    from pacpriv.pac.per_record import calibrate_per_record, record_exposure

    check = _simulate.reproducibility

    def slow_check(*args, **kwargs):
        SLOW_RERUN["on"] = True
        try:
            return check(*args, **kwargs)
        finally:
            SLOW_RERUN["on"] = False

    monkeypatch.setattr(_simulate, "reproducibility", slow_check)
    options = ExecutionOptions(progress=False, time_limit=3.0)
    with pytest.raises(TimeLimitError) as info:
        if entry == "simulate":  # R5: returned at the limit with reproducible=None
            _simulate.simulate(_mean_slow_when_rerun, X, n_trials=40, rng=0, execution=options)
        elif entry == "record_exposure":
            record_exposure(_mean_slow_when_rerun, X, noise_cov=1.0, n_trials=40,
                            records=[0, 1], rng=0, execution=options)
        else:
            calibrate_per_record(_mean_slow_when_rerun, X, target_accuracy=0.9, n_trials=200,
                                 records=[0, 1], rng=0, execution=options)
    text = str(info.value)
    # calibrate_per_record's shape trials are checked first: the limit then ends the run
    # before its certification trials
    assert ("reached during the reproducibility check" in text
            or (entry == "calibrate_per_record" and "before the certification trials" in text))
    assert text.count("for the whole run") <= 1 and "Nothing was released" in text


def test_nested_whole_run_words_name_the_limit_once():
    """Q9: a limit carried into an inner run that carries it on again said "(--time-limit 7 s
    for the whole run (6.99 s were left for this part) for the whole run (6.86 s ...))"."""
    from pacpriv.pac.engine._limit import whole_run_words

    with pytest.raises(TimeLimitError) as info:
        with whole_run_words(7.0), whole_run_words(6.99):
            raise TimeLimitError("stopped (`time_limit` 6.86 s) here")
    assert str(info.value) == ("stopped (`time_limit` 7 s for the whole run (6.86 s were left "
                               "for this part)) here")


def _swallows_ctrl_c(subset):
    """Like scikit-learn's MLP: catches the KeyboardInterrupt of a Ctrl-C and returns."""
    try:
        os.kill(os.getpid(), signal.SIGINT)  # the user's Ctrl-C arrives during the call
        time.sleep(0.5)
    except KeyboardInterrupt:
        pass  # "Training interrupted by user." and a result cut short
    return subset.mean(axis=0) if len(subset) else np.zeros(X.shape[1])


def test_a_ctrl_c_the_mechanism_swallows_still_stops_the_run(tmp_path):
    """Z1/Z2/Y3: Ctrl-C during `pac run` / `predict fit` with a scikit-learn MLP was caught by
    the MLP; the run finished (exit 0) and kept the cut-short output. The call's output is now
    discarded and the run stops as on any Ctrl-C, with nothing stored for that trial."""
    from pacpriv.pac.engine._mechanism import call_mechanism
    from pacpriv.pac.engine._simulate import simulate

    with pytest.raises(KeyboardInterrupt):
        call_mechanism(_swallows_ctrl_c, X, rng=None)
    ckpt = tmp_path / "ck"
    with pytest.raises(KeyboardInterrupt):
        simulate(_swallows_ctrl_c, X, n_trials=6, rng=0,
                 execution=ExecutionOptions(progress=False, checkpoint=str(ckpt)))
    from pacpriv.pac.engine._limit import kept_trials

    assert kept_trials(ckpt, 6) == 0  # the cut-short trial 0 was not stored
    # a mechanism that raises KeyboardInterrupt without any signal is still its own error
    from pacpriv.pac.engine._mechanism import MechanismExit

    def raises_it(subset):
        raise KeyboardInterrupt

    with pytest.raises(MechanismExit):
        call_mechanism(raises_it, X, rng=None)


def test_a_later_parts_probe_refusal_names_the_whole_run_limit():
    """AI1 / bound checker: a later part's probe said "did not finish within 3.96922 s
    (--time-limit)" for a 6 s limit, and "nothing was run" after earlier parts had run."""
    from pacpriv.pac.engine._limit import whole_run_words

    with pytest.raises(TimeLimitError) as info:
        with whole_run_words(6.0):
            raise TimeLimitError("the timed probe (before the run) did not finish within "
                                 "3.96922 s (`time_limit`); nothing was run or charged")
    assert str(info.value) == (
        "the timed probe (before the run) did not finish within 3.96922 s (what was left of "
        "`time_limit` 6 s for the whole run); this part was not started; nothing was released "
        "or charged")
    with pytest.raises(TimeLimitError) as info:  # the whole limit itself: words unchanged
        with whole_run_words(6.0):
            raise TimeLimitError("over `time_limit` 6 s (nothing was run or charged)")
    assert str(info.value) == "over `time_limit` 6 s (nothing was run or charged)"


class _PicklingMean:
    """A callable object whose call pickles an instance of its class, as the worlds of
    ``predict fit`` do with joblib: ``copyreg`` then caches ``__slotnames__`` on the class."""

    def __init__(self, scale: float = 1.0) -> None:
        self.scale = scale

    def __call__(self, subset):
        import pickle

        pickle.dumps(_PicklingMean(self.scale))
        return self.scale * (subset.mean(axis=0) if len(subset) else np.zeros(X.shape[1]))


class _NotYetPickled(_PicklingMean):
    """Pickled only by the test below."""


def test_a_mechanism_resumes_after_pickling_caches_appear_on_its_class(tmp_path):
    """AJ1: `PrivatePredictor.fit` stopped by `time_limit` could not resume ("its state
    changed"): pickling a model added ``__slotnames__`` to its class, which the mechanism's
    digest read as state."""
    from pacpriv.pac.engine._checkpoint import mechanism_digest
    from pacpriv.pac.engine._simulate import simulate

    Fresh = _NotYetPickled
    before = mechanism_digest(Fresh())
    import pickle

    pickle.dumps(Fresh())
    assert "__slotnames__" in vars(Fresh)
    assert mechanism_digest(Fresh()) == before
    ckpt = str(tmp_path / "ck")
    first = simulate(_PicklingMean(), X, n_trials=8, rng=1,
                     execution=ExecutionOptions(progress=False, checkpoint=ckpt))
    again = simulate(_PicklingMean(), X, n_trials=8, rng=1,
                     execution=ExecutionOptions(progress=False, checkpoint=ckpt))
    assert again.resumed_trials == 8
    np.testing.assert_array_equal(first.outputs, again.outputs)


def test_predict_query_shows_a_csv_s_text_labels(tmp_path, monkeypatch, capsys):
    """AD5: `predict fit` on a CSV whose labels are 'no'/'yes' answered labels 0/1 with
    columns vote(0)/vote(1), the mapping stored and shown nowhere; the names are kept with the
    state and shown by `predict query` (text and --json) and `serve`."""
    import json

    from pacpriv.cli import main
    from pacpriv.prediction import PrivatePredictor

    rng = np.random.default_rng(0)
    rows = rng.normal(size=(60, 3))
    labels = np.where(rows[:, 0] > 0, "yes", "no")
    lines = ["a,b,c,label"] + [f"{r[0]:.4f},{r[1]:.4f},{r[2]:.4f},{t}"
                               for r, t in zip(rows, labels, strict=True)]
    (tmp_path / "t.csv").write_text("\n".join(lines) + "\n")
    monkeypatch.chdir(tmp_path)
    assert main(["predict", "fit", "--estimator", "logistic", "--dataset", "t.csv",
                 "--label-column", "label", "--state", "st", "--n-worlds", "4",
                 "--per-query-budget", "0.001", "--total-budget", "0.1", "--output", "label",
                 "--no-progress", "--seed", "0"]) == 0
    capsys.readouterr()
    assert main(["predict", "query", "--state", "st", "--dataset", "t.csv", "--label-column",
                 "label", "--rows", "0:3", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["columns"] == ["vote(no)", "vote(yes)"]
    assert set(answer["labels"]) <= {"no", "yes"} and len(answer["labels"]) == 3
    pp = PrivatePredictor.load("st")
    assert pp.label_names == ("no", "yes") and list(pp.classes_) == [0, 1]
    assert list(pp.display_classes) == ["no", "yes"]


def _projection(subset):
    """A 600-dimensional random projection of the mean (the grid's overhead grows as d^1.5)."""
    w = np.random.default_rng(7).normal(size=(X.shape[1], 600))
    return (subset.mean(axis=0) if len(subset) else np.zeros(X.shape[1])) @ w


@pytest.mark.filterwarnings("ignore::pacpriv.exceptions.UndersampledWarning")
def test_a_hardened_release_s_bound_includes_its_grid_overhead():
    """Independent bound check (session 38): `run_pac` released on the OS-entropy grid, whose
    MI bound is the plan's plus grid_overhead(k), but printed the plan's bound alone (65.68%
    for 65.69% at d = 10^5). The plan now holds the overhead back, and every printed number
    includes it; a seeded (not-for-release) draw has no grid and holds nothing back."""
    from pacpriv.pac import run_pac
    from pacpriv.pac._sampling import grid_overhead
    from pacpriv.pac.bounds import posterior_success_rate
    from pacpriv.pac.release import grid_coordinates

    res = run_pac(_projection, X, mi_budget=0.05, n_trials=40, rng=0, execution=QUIET)
    k = grid_coordinates(res.plan)
    assert 0 < k <= 2 * res.plan.dim
    assert res.plan.mi_claim + grid_overhead(k) <= res.mi_claim <= 0.05 * (1 + 1e-15)
    assert res.posterior_success_bound == posterior_success_rate(res.mi_claim, prior=0.5)
    assert res.to_dict()["mi_claim_nats"] == res.mi_claim
    seeded = run_pac(_projection, X, mi_budget=0.05, n_trials=40, rng=0, release_rng=1,
                     execution=QUIET)
    assert seeded.grid_overhead == 0.0 and seeded.plan.mi_claim > res.plan.mi_claim
    from pacpriv.pac.wrapper import pac_private

    f = pac_private(_projection, mi_budget=0.05, total_budget=1.0)
    f.calibrate(X, n_trials=40, rng=0)
    f(X[:20])
    assert f.ledger.spent >= f.plan.mi_claim + grid_overhead(grid_coordinates(f.plan))
    assert f.ledger.spent <= 0.05 * (1 + 1e-15)


def test_a_nested_probe_refusal_names_the_whole_limit_once():
    """AI1 after the first fix: two nested parts rewrote a probe's words twice ("within 3.96 s
    (what was left of --time-limit 6 s for the whole run (5.99 s were left for this part) for
    the whole run)")."""
    from pacpriv.pac.engine._limit import whole_run_words

    with pytest.raises(TimeLimitError) as info:
        with whole_run_words(6.0), whole_run_words(5.99651):
            raise TimeLimitError("the timed probe did not finish within 3.96185 s "
                                 "(`time_limit`); nothing was run or charged")
    assert str(info.value) == (
        "the timed probe did not finish within 3.96185 s (what was left of `time_limit` 6 s "
        "for the whole run); this part was not started; nothing was released or charged")


def test_train_dpsgd_refuses_huge_counts():
    """Thirteenth pass: `train_dpsgd(epochs=10**30)` trained "forever" (make_private refused
    it)."""
    torch = pytest.importorskip("torch")
    from pacpriv.dpsgd.trainer import train_dpsgd

    def run(**kw):
        torch.manual_seed(0)
        return train_dpsgd(torch.nn.Linear(5, 2), torch.nn.CrossEntropyLoss(),
                           torch.randn(64, 5), torch.randint(0, 2, (64,)),
                           noise_multiplier=1.0, max_grad_norm=1.0, **kw)

    for name in ("epochs", "steps_per_epoch"):
        counts = {"epochs": 2, "steps_per_epoch": 4, name: 10**30}
        with pytest.raises(ValueError, match=rf"`{name}` must be an integer in \[1, "
                                             r"9007199254740992\]; got an integer of 31"):
            run(**counts)


def test_two_predictor_objects_on_one_state_report_the_shared_spend(tmp_path):
    """Thirteenth pass: a second PrivatePredictor on the same state (same process) reported
    the spend, remaining budget and membership bound of its load time (0, 0.02, 0.5) after the
    first had answered 3 queries; the ledger itself was right. Every public number now reads
    the state's ledger."""
    from sklearn.linear_model import LogisticRegression

    from pacpriv.prediction import PrivatePredictor

    rng = np.random.default_rng(0)
    Xp = rng.normal(size=(80, 3))
    yp = (Xp[:, 0] > 0).astype(int)
    state = str(tmp_path / "st")
    kw = dict(n_worlds=4, per_query_budget=2**-8, total_budget=0.02, state=state)
    pa = PrivatePredictor(LogisticRegression(), (Xp, yp), **kw).fit(execution=QUIET)
    pb = PrivatePredictor.load(state)
    pa.predict(Xp[:3])
    assert pb.n_answered == pa.n_answered == 3
    assert pb.spent == pa.spent == 3 * 2**-8 and pb.remaining == pa.remaining
    assert pb.membership_bound == pa.membership_bound > 0.5
    assert pb.budget() == pa.budget()


@pytest.mark.parametrize("address", ["nowhere.invalid:1", "127.0.0.1:1", "ray://127.0.0.1:1"])
def test_an_unreachable_ray_address_is_refused_in_one_line(address):
    """Thirteenth pass: `--backend ray --ray-address nowhere:1` retried for minutes with Ray's
    own warnings only."""
    from pacpriv.cli._args import UsageError
    from pacpriv.cli._user import _check_reachable

    with pytest.raises(UsageError) as info:
        _check_reachable(address)
    assert f"--ray-address {address!r}: no Ray head answers at" in str(info.value)
    _check_reachable("auto")  # not a host:port: left to Ray


def _other_shape_on_the_whole_pool(subset):
    return np.zeros(5) + len(subset) if len(subset) == len(X) else subset.mean(axis=0)


def test_a_release_output_of_another_shape_is_a_mechanism_error():
    """Thirteenth pass: a release call whose output had another shape than the trials' raised
    privatize's "`value` must have shape (3,) to match the plan" (an argument the user never
    passed); now the MechanismError of any invalid output, naming the release."""
    from pacpriv.exceptions import MechanismError
    from pacpriv.pac import run_pac

    with pytest.raises(MechanismError, match=r"on the release's secret subset .*shape \(5,\) "
                                             r"but earlier trials returned \(3,\)"), \
            pytest.warns(UserWarning):
        run_pac(_other_shape_on_the_whole_pool, X, mi_budget=0.1, n_trials=20, rng=0,
                secret_mask=np.ones(len(X), dtype=bool), execution=QUIET)


def test_a_registered_factory_that_fails_is_named_with_its_calling_convention():
    """Thirteenth pass: `MECHANISMS.register('m', lambda **kw: f)` then
    `resolve_mechanism('m')` raised a bare TypeError from inside registry.py; a factory that
    raised propagated its raw exception without its registered name."""
    from pacpriv.exceptions import UserCodeError
    from pacpriv.registry import MECHANISMS, resolve_mechanism

    def needs_keywords(**kw):
        return lambda s: s.mean(0)

    def divides(info):
        return 1 / 0

    for name, factory, kind in (("p12-kw", needs_keywords, "TypeError"),
                                ("p12-zero", divides, "ZeroDivisionError")):
        MECHANISMS.register(name, factory, force=True)
        try:
            with pytest.raises(UserCodeError) as info:
                resolve_mechanism(name)
            assert str(info.value).startswith(
                f"the mechanism factory registered as {name!r} raised {kind} when called as "
                "factory(dataset_info)")
            assert isinstance(info.value.__cause__, (TypeError, ZeroDivisionError))
        finally:
            MECHANISMS.unregister(name)


def test_a_postgres_ledger_that_cannot_be_reached_says_why():
    """Thirteenth pass: `--ledger postgresql://u@127.0.0.1:1/db` said only "cannot be used:
    OperationalError"."""
    pytest.importorskip("psycopg")
    from pacpriv.exceptions import CheckpointError
    from pacpriv.storage import open_store
    from pacpriv.storage._postgres import _reason

    with pytest.raises(CheckpointError) as info:
        open_store("postgresql://u@127.0.0.1:1/db")
    assert "the server cannot be reached" in str(info.value)

    class Refused(Exception):
        sqlstate = "28P01"

    assert _reason(Refused()).startswith("authentication failed")
    Refused.sqlstate = "3D000"
    assert _reason(Refused()) == "the database does not exist"


def test_a_per_record_state_change_names_the_user_s_function_not_pacpriv_s_wrapper():
    """Thirteenth pass: a per-record resume refused as "the mechanism
    'pacpriv.pac.per_record._units.unit_trial': its state changed"."""
    import copy

    from pacpriv.pac.engine._checkpoint_words import differences_in_words

    old = {"mechanism": {"name": "pacpriv.pac.per_record._units.unit_trial",
                         "source_sha256": "a", "bound": "b", "accepts_rng": "True",
                         "state_sha256": "x"}}
    new = copy.deepcopy(old)
    new["mechanism"]["state_sha256"] = "y"
    words = differences_in_words(old, new)
    assert words[0].startswith("the per-record run's mechanism (your function): its state")
    assert not any("unit_trial" in w for w in words)


def test_train_dpsgd_warns_when_most_steps_are_empty():
    """Thirteenth pass: steps_per_epoch far above the record count trained silently on empty
    batches. The public entry warns, in words, before training (public counts only); the
    comparison's own training (settings it chooses) stays quiet; k-of-t counts k·n uses."""
    import torch

    from pacpriv.dpsgd import RandomAllocation
    from pacpriv.dpsgd.trainer import train_dpsgd
    from pacpriv.exceptions import SparseBatchWarning

    torch.manual_seed(0)
    X = np.random.default_rng(0).normal(size=(64, 3))
    y = (X[:, 0] > 0).astype(np.int64)
    model = torch.nn.Linear(3, 2).double()
    with pytest.warns(SparseBatchWarning) as got:
        res = train_dpsgd(model, torch.nn.CrossEntropyLoss(), X, y, noise_multiplier=1.0,
                          steps_per_epoch=1000, epochs=1, max_grad_norm=1.0, rng=0)
    text = str(got[0].message)
    # expected batch 64/1000; empty fraction (1 - 1/1000)**64 = 0.938
    assert "expected batch is 0.064 record(s) and about 94%" in text
    assert "steps_per_epoch <= 64" in text
    assert res.n_empty_steps > 900
    # k = 4 of t = 200: 256 uses, expected batch 1.28 >= 1: no warning
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", SparseBatchWarning)
        res = train_dpsgd(torch.nn.Linear(3, 2).double(), torch.nn.CrossEntropyLoss(), X, y,
                          noise_multiplier=1.0, steps_per_epoch=200, epochs=1,
                          max_grad_norm=1.0, allocation=RandomAllocation(4), rng=0)
    assert res.k == 4 and res.expected_batch_size == pytest.approx(1.28)
    # the same settings at k = 1 (64 uses of 200 steps) warn
    with pytest.warns(SparseBatchWarning, match=r"expected batch is 0\.32 record"):
        train_dpsgd(torch.nn.Linear(3, 2).double(), torch.nn.CrossEntropyLoss(), X, y,
                    noise_multiplier=1.0, steps_per_epoch=200, epochs=1, max_grad_norm=1.0,
                    rng=0)
