"""Tests of pacpriv.pac.engine.simulate: contract, reproducibility, per-trial checks."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import pickle

import numpy as np
import pytest

from pacpriv.exceptions import MechanismError, UninterruptibleWarning
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.engine._simulate import SimulationResult, simulate
from pacpriv.pac.engine._storage import masks_path_for
from pacpriv.pac.samplers import CallableSampler, ComplementaryPairsSampler, FixedSizeSampler

from . import _engine_mechs as mechs

pytestmark = pytest.mark.usefixtures("one_native_thread")

QUIET = ExecutionOptions(progress=False)

POOL = np.arange(60.0).reshape(30, 2)
POOL1D = np.linspace(-1.0, 2.0, 25)


def _naive(mechanism, pool, n_trials, seed, *, rate=0.5, with_rng=False):
    """Independent oracle: explicit SeedSequence children, mask draw and loop."""
    outputs, masks = [], []
    for i in range(n_trials):
        sampler_ss = np.random.SeedSequence(seed, spawn_key=(i, 0))
        mask = np.random.default_rng(sampler_ss).random(len(pool)) < rate
        kwargs = {}
        if with_rng:
            kwargs["rng"] = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(i, 1)))
        outputs.append(np.atleast_1d(mechanism(pool[mask], **kwargs)))
        masks.append(mask)
    return np.array(outputs, dtype=float), np.array(masks)


def _flagged(seed, n_trials):
    """Indices of the trials that `_engine_mechs.flag` marks under root seed ``seed``."""
    res = simulate(mechs.flag_value, POOL1D, n_trials=n_trials, rng=seed,
                   execution=QUIET)
    return np.flatnonzero(res.outputs[:, 0] < mechs.FAIL_RATE)


def test_outputs_and_masks_match_naive_loop():
    """Outputs and masks equal an explicit loop over SeedSequence children (default Poisson-½)."""
    res = simulate(mechs.mean_mech, POOL, n_trials=40, rng=11,
                   execution=QUIET)
    outputs, masks = _naive(mechs.mean_mech, POOL, 40, 11)
    assert res.outputs.dtype == np.float64 and res.outputs.shape == (40, 2)
    assert np.array_equal(res.outputs, outputs) and np.array_equal(res.masks, masks)
    assert (res.n_trials, res.n_records, res.dim, res.membership_prior) == (40, 30, 2, 0.5)


def test_rng_keyword_gets_mechanism_stream():
    """A mechanism with an `rng` parameter receives the trial's mechanism-stream Generator."""
    res = simulate(mechs.noisy_sum, POOL1D, n_trials=25, rng=5,
                   execution=QUIET)
    outputs, _ = _naive(mechs.noisy_sum, POOL1D, 25, 5, with_rng=True)
    assert np.array_equal(res.outputs, outputs)


@pytest.mark.parametrize(
    ("n_jobs", "backend"), [(2, None), (-1, None), (2, "loky"), (2, "threading")]
)
def test_identical_across_n_jobs_and_backends(n_jobs, backend):
    """Same root seed gives bit-identical outputs and masks for any n_jobs and backend."""
    ref = simulate(mechs.noisy_sum, POOL1D, n_trials=30, rng=7,
                   execution=QUIET)
    res = simulate(
        mechs.noisy_sum, POOL1D, n_trials=30, rng=7,
            execution=ExecutionOptions(n_jobs=n_jobs, backend=backend, progress=False),
    )
    assert np.array_equal(res.outputs, ref.outputs) and np.array_equal(res.masks, ref.masks)
    assert res.n_jobs >= 2 and res.backend in ("loky", "threading")


@pytest.mark.parametrize("batch_size", [1, 7, 100])
def test_batch_size_does_not_change_results(batch_size):
    """Results do not depend on how trials are batched."""
    ref = simulate(mechs.noisy_sum, POOL1D, n_trials=20, rng=3,
                   execution=QUIET)
    res = simulate(
        mechs.noisy_sum, POOL1D, n_trials=20, rng=3,
            execution=ExecutionOptions(batch_size=batch_size, progress=False)
    )
    assert np.array_equal(res.outputs, ref.outputs)


def test_parallel_config_is_honoured():
    """joblib.parallel_config(backend="threading", n_jobs=2) is used when nothing is passed."""
    from joblib import parallel_config

    with parallel_config(backend="threading", n_jobs=2):
        res = simulate(mechs.noisy_sum, POOL1D, n_trials=10, rng=3,
                       execution=QUIET)
    assert (res.backend, res.n_jobs) == ("threading", 2)


def test_seed_types_and_fresh_entropy():
    """int, SeedSequence agree; None draws fresh entropy (two runs differ)."""
    a = simulate(mechs.noisy_sum, POOL1D, n_trials=5, rng=9,
                 execution=QUIET)
    b = simulate(mechs.noisy_sum, POOL1D, n_trials=5, rng=np.random.SeedSequence(9),
                 execution=QUIET)
    assert np.array_equal(a.outputs, b.outputs) and a.root_seed == {"entropy": 9, "spawn_key": []}
    c = simulate(mechs.noisy_sum, POOL1D, n_trials=5, execution=QUIET)
    d = simulate(mechs.noisy_sum, POOL1D, n_trials=5, execution=QUIET)
    assert not np.array_equal(c.outputs, d.outputs) and c.root_seed != d.root_seed


def test_different_seeds_differ():
    """Different root seeds give different outputs."""
    a = simulate(mechs.noisy_sum, POOL1D, n_trials=5, rng=1,
                 execution=QUIET)
    b = simulate(mechs.noisy_sum, POOL1D, n_trials=5, rng=2,
                 execution=QUIET)
    assert not np.array_equal(a.outputs, b.outputs)


def test_tuple_pool():
    """A tuple (X, y) pool is subset row-wise, consistently across arrays."""
    x, y = np.arange(20.0).reshape(10, 2), np.arange(10) % 2
    res = simulate(mechs.xy_mech, (x, y), n_trials=8, rng=4,
                   execution=QUIET)
    for out, mask in zip(res.outputs, res.masks, strict=True):
        assert out[0] == mask.sum() and out[1] == y[mask].sum()
        assert out[2] == (x[mask, 0].mean() if mask.any() else 0.0)


def test_list_pool_is_converted():
    """Array-likes (nested lists) are accepted via numpy.asarray."""
    res = simulate(mechs.count_mech, [[1, 2], [3, 4], [5, 6]], n_trials=4, rng=0,
                   execution=QUIET)
    assert np.array_equal(res.outputs[:, 0], res.masks.sum(axis=1))


def test_scalar_output_and_empty_subsets():
    """A scalar output counts as d = 1, and empty subsets reach the mechanism."""
    res = simulate(
        mechs.count_mech, POOL, n_trials=3, rng=0, sampler=lambda n, rng: np.zeros(n, bool),
        execution=QUIET,
    )
    assert res.dim == 1 and np.array_equal(res.outputs, np.zeros((3, 1)))
    assert res.membership_prior is None  # the callable declares no inclusion probability


def test_pairs_sampler_through_engine():
    """Complementary pairs reach the engine: odd trials see the complement subset."""
    res = simulate(mechs.count_mech, POOL, n_trials=6, rng=2, sampler="pairs",
                   execution=QUIET)
    assert np.array_equal(res.outputs[0::2, 0] + res.outputs[1::2, 0], np.full(3, 30.0))
    assert res.sampler == ComplementaryPairsSampler().to_dict()


def test_result_to_dict_and_trial_seed():
    """to_dict is JSON-serialisable without arrays; trial_seed(i) is the i-th child."""
    res = simulate(mechs.count_mech, POOL, n_trials=3, rng=6,
                   execution=QUIET)
    d = json.loads(json.dumps(res.to_dict()))
    assert d["mechanism"].endswith("_engine_mechs.count_mech") and "outputs" not in d
    assert d["backend"] == "sequential" and d["output_dtype"] == "float64"
    assert res.trial_seed(2).spawn_key == (2,) and res.trial_seed(2).entropy == 6
    assert isinstance(res, SimulationResult)


def test_result_trial_seed_range():
    """trial_seed rejects an index outside range(n_trials)."""
    res = simulate(mechs.count_mech, POOL, n_trials=3, rng=6,
                   execution=QUIET)
    with pytest.raises(ValueError, match=r"`index` must be an integer in \[0, 2\]; got 3"):
        res.trial_seed(3)


def test_progress_bar_on_stderr(capsys):
    """progress=True draws a tqdm bar reaching n_trials; progress=False prints nothing."""
    simulate(mechs.count_mech, POOL, n_trials=12, rng=0, execution=ExecutionOptions(progress=True))
    assert "12/12" in capsys.readouterr().err
    simulate(mechs.count_mech, POOL, n_trials=12, rng=0, execution=QUIET)
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_mechanism_exception_names_trial_and_seed(n_jobs):
    """An exception in f becomes MechanismError(trial_index, seed) chained from it."""
    flagged = _flagged(21, 40)
    with pytest.raises(MechanismError, match=r"raised ValueError in trial \d+") as info:
        simulate(mechs.fail_flagged, POOL1D, n_trials=40, rng=21,
                 execution=ExecutionOptions(n_jobs=n_jobs, progress=False))
    err = info.value
    assert err.trial_index in flagged
    if n_jobs == 1:
        assert err.trial_index == flagged[0]
    assert err.seed == {"entropy": 21, "spawn_key": [int(err.trial_index)]}
    assert isinstance(err.__cause__, ValueError) and str(err.__cause__) == "boom"
    assert "boom" not in str(err) and "message is withheld" in str(err)  # may quote records
    assert pickle.loads(pickle.dumps(err)).trial_index == err.trial_index


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("nan", r"invalid output: output is not finite \(NaN or inf at positions \[1\]\)"),
        ("inf", r"output is not finite \(NaN or inf at positions \[0\]\)"),
        ("2d", r"non-empty 1-D vector \(d,\); got shape \(2, 2\)"),
        ("complex", r"output must be real; got complex dtype complex128"),
        ("empty", r"non-empty 1-D vector \(d,\); got shape \(0,\)"),
        ("string", r"output of dtype <U1 is not castable to float64"),
        ("length", r"shape \(3,\)"),
    ],
)
def test_invalid_outputs(kind, message):
    """Each kind of invalid output raises MechanismError with its own message and trial."""
    flagged = _flagged(22, 30)
    mech = functools.partial(mechs.bad_output, kind=kind)
    with pytest.raises(MechanismError, match=message) as info:
        simulate(mech, POOL1D, n_trials=30, rng=22,
                 execution=ExecutionOptions(progress=False, batch_size=30))
    assert info.value.trial_index == flagged[0]


def test_length_change_across_batches():
    """A length change between batches run concurrently is caught by the parent."""
    assert list(_flagged(13, 4)) == [1]  # trial 1 returns length 3, trials 0, 2, 3 length 2
    mech = functools.partial(mechs.bad_output, kind="length")
    # the first 2 * n_jobs batches are dispatched before any output length is known, and
    # threads finish in any order: the trial named is one whose length differs from the
    # length seen first (trial 1, or a length-2 trial when trial 1 came first)
    pattern = r"in trial [0-3], but earlier trials returned"
    with pytest.raises(MechanismError, match=pattern) as info:
        simulate(mech, POOL1D, n_trials=4, rng=13,
                 execution=ExecutionOptions(progress=False, batch_size=1, n_jobs=2,
                                            backend="threading"))
    assert info.value.trial_index in (0, 1, 2, 3)
    assert "(3,)" in str(info.value) and "(2,)" in str(info.value)


def test_float32_overflow_is_caught():
    """output_dtype=float32 stores float32 relative to trial 0 and rejects overflow."""
    ok = simulate(mechs.noisy_sum, POOL1D, n_trials=4, rng=1, output_dtype=np.float32,
                  execution=QUIET)
    ref = simulate(mechs.noisy_sum, POOL1D, n_trials=4, rng=1,
                   execution=QUIET)
    assert ok.outputs.dtype == np.float32 and ok.reference.dtype == np.float64
    assert np.array_equal(ok.reference, ref.outputs[0])
    assert np.array_equal(ok.outputs, (ref.outputs - ref.outputs[0]).astype(np.float32))
    mech = functools.partial(mechs.bad_output, kind="huge")
    with pytest.raises(MechanismError, match="not finite"):
        simulate(mech, POOL1D, n_trials=30, rng=22, output_dtype=np.float32,
                 execution=QUIET)


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_retries_use_same_seed(n_jobs):
    """retries=1 recovers a transient failure with the same seed (same outputs as clean)."""
    clean = simulate(mechs.noisy_sum, POOL1D, n_trials=12, rng=1234 + n_jobs,
                     execution=QUIET)
    res = simulate(mechs.flaky, POOL1D, n_trials=12, rng=1234 + n_jobs,
                   execution=ExecutionOptions(retries=1, n_jobs=n_jobs, progress=False))
    assert np.array_equal(res.outputs, clean.outputs)


def test_no_retries_fail_fast():
    """With retries=0 a transient failure is reported, not dropped."""
    with pytest.raises(MechanismError, match=r"raised ConnectionError in trial 0"):
        simulate(mechs.flaky, POOL1D, n_trials=3, rng=999,
                 execution=QUIET)


def test_retries_exhausted_says_attempts():
    """After retries the message counts the attempts made with the same seed."""
    with pytest.raises(MechanismError, match="after 3 attempts with the same seed"):
        simulate(mechs.fail_flagged, POOL1D, n_trials=40, rng=21,
                 execution=ExecutionOptions(retries=2, progress=False))


@pytest.mark.parametrize("backend", [None, "threading"])
def test_timeout(backend):
    """A trial over `timeout` fails (interrupted in the main thread, checked after on threads)."""
    flagged = _flagged(23, 40)
    kwargs = {"n_jobs": 2, "backend": "threading"} if backend else {}
    warned = (pytest.warns(UninterruptibleWarning, match="cannot interrupt") if backend
              else contextlib.nullcontext())
    with pytest.raises(MechanismError, match=r"timeout=1.0 s") as info, warned:
        simulate(mechs.sleepy, POOL1D, n_trials=40, rng=23,
                 execution=ExecutionOptions(timeout=mechs.SLEEPY_TIMEOUT_S, progress=False,
                                            **kwargs))
    assert info.value.trial_index in flagged


def test_output_path_memmap(tmp_path):
    """output_path streams outputs and masks to .npy files equal to the in-memory result."""
    path = tmp_path / "out.npy"
    res = simulate(mechs.noisy_sum, POOL1D, n_trials=15, rng=8,
                   execution=ExecutionOptions(output_path=path, progress=False))
    ref = simulate(mechs.noisy_sum, POOL1D, n_trials=15, rng=8,
                   execution=QUIET)
    assert isinstance(res.outputs, np.memmap)
    assert np.array_equal(np.load(path), ref.outputs)
    assert np.array_equal(np.load(masks_path_for(path)), ref.masks)
    assert res.output_path == str(path)


def test_worker_crash_is_reported_and_resumable(tmp_path):
    """A mechanism that kills its loky worker raises MechanismError; the run then resumes."""
    flag_file, ckpt = tmp_path / "crash", tmp_path / "ckpt"
    flag_file.touch()
    mech = functools.partial(mechs.crash_flagged, flag_file=str(flag_file))
    with pytest.raises(MechanismError, match=r"A worker died \(TerminatedWorkerError") as info:
        simulate(mech, POOL1D, n_trials=40, rng=21,
                 execution=ExecutionOptions(n_jobs=2, checkpoint=ckpt, retries=1, progress=False))
    assert "rerun with the same arguments to resume" in str(info.value)
    flag_file.unlink()
    resumed = simulate(mech, POOL1D, n_trials=40, rng=21,
                       execution=ExecutionOptions(checkpoint=ckpt, progress=False))
    clean = simulate(mech, POOL1D, n_trials=40, rng=21, execution=QUIET)
    assert np.array_equal(resumed.outputs, clean.outputs)


def test_sampler_error_in_worker_names_trial():
    """A user sampler that goes wrong in a later trial reports that trial."""
    def sampler(n, rng):
        return np.ones(n + int(rng.random() < 0.3), dtype=bool)

    with pytest.raises(ValueError, match=r"`sampler` must return a mask of shape \(25,\) in trial"):
        simulate(mechs.count_mech, POOL1D, n_trials=30, rng=0, sampler=CallableSampler(sampler),
                 execution=QUIET)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"pool": None}, TypeError, r"`pool` must be an array of shape \(n_records, ...\)"),
        ({"pool": 3.0}, ValueError, "`pool` must have a first axis of records"),
        ({"pool": ()}, ValueError, "`pool` must be an array or a non-empty tuple"),
        ({"pool": (np.ones(3), np.ones(4))}, ValueError, r"got lengths \[3, 4\]"),
        ({"pool": np.ones((0, 2))}, ValueError, "at least 2 records .*got n_records = 0"),
        ({"pool": np.ones((1, 2))}, ValueError, "at least 2 records .*got n_records = 1"),
        ({"pool": np.array([[1.0, 2.0], [3.0, np.nan]])}, ValueError,
         r"`pool` must hold finite numbers; record 1 has a NaN"),
        ({"pool": (np.ones((3, 2)), np.array([0.0, -np.inf, 1.0]))}, ValueError,
         r"`pool\[1\]` must hold finite numbers; record 1 has a NaN or infinite value"),
        ({"n_jobs": 0}, ValueError, r"`n_jobs` must be a positive number of workers or negative"),
        ({"n_jobs": 1.5}, TypeError, "`n_jobs` must be None or a nonzero integer"),
        ({"pool": [[1], [2, 3]]}, TypeError, "`pool` could not be converted to an array"),
        ({"mechanism": 3}, TypeError, "`mechanism` must be callable"),
        ({"n_trials": 0}, ValueError, r"`n_trials` must be an integer in \[1, "),
        ({"n_trials": 2.5}, TypeError, "`n_trials` must be an integer"),
        ({"retries": -1}, ValueError, r"`retries` must be an integer in \[0, 1000\]"),
        ({"timeout": 0}, ValueError, r"`timeout` must be in \(0.0, inf\)"),
        ({"batch_size": 0}, ValueError, r"`batch_size` must be an integer in \[1, inf\)"),
        ({"output_dtype": np.int64}, ValueError, "`output_dtype` must be a floating dtype"),
        ({"progress": 1}, TypeError, "`progress` must be a bool"),
        ({"sampler": 0.5}, TypeError, "`sampler` must be None, a Sampler"),
        ({"sampler": FixedSizeSampler(31)}, ValueError, r"`subset_size` must be in \[1, n_rec"),
        ({"rng": -1}, ValueError, "`rng` must be a non-negative integer seed"),
        ({"output_path": "out.txt"}, ValueError, "`output_path` must end with '.npy'"),
        ({"output_path": 3}, TypeError, "`output_path` must be None or a path"),
        ({"backend": "nope"}, ValueError, "`backend` must be one of .* got 'nope'"),
    ],
)
def test_input_validation(kwargs, error, message):
    """Each invalid argument raises its own error naming the argument."""
    args = {"mechanism": mechs.count_mech, "pool": POOL, "n_trials": 3}
    args.update(kwargs)
    mechanism, pool = args.pop("mechanism"), args.pop("pool")
    fields = {f.name for f in dataclasses.fields(ExecutionOptions)} - {"output_dtype"}
    options = {"progress": False, **{k: args.pop(k) for k in list(args) if k in fields}}
    with pytest.raises(error, match=message):
        simulate(mechanism, pool, execution=ExecutionOptions(**options), **args)


def test_ray_backend_needs_ray(hide_modules):
    """backend='ray' without Ray installed says what to install (Ray hidden if installed)."""
    hide_modules("ray")
    with pytest.raises(ImportError, match=r"pip install 'pacpriv\[ray\]'"):
        simulate(mechs.count_mech, POOL, n_trials=3,
                 execution=ExecutionOptions(backend="ray", progress=False))


def test_engine_import_is_light():
    """Importing the engine loads neither joblib's workers, tqdm, dask nor torch."""
    import subprocess
    import sys

    code = (
        "import sys, pacpriv.pac.engine._simulate; "
        "print(sorted(m for m in ('dask', 'distributed', 'torch', 'tqdm', 'joblib') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_trials_that_cannot_fit_in_memory_are_refused_before_any_trial():
    """A huge n_trials fails at once with the memory it needs, never allocating it."""
    calls = []

    def f(subset):
        calls.append(1)
        return np.array([float(len(subset))])

    with pytest.raises(ValueError, match=r"n_trials.*GiB for the membership masks"):
        simulate(f, np.arange(150.0), n_trials=10_000_000_000, rng=0,
                 execution=QUIET)
    assert calls == []


@pytest.mark.parametrize("kind, side", [("tiny", "non-zero magnitude below"),
                                        ("enormous", "above")])
def test_outputs_whose_variance_would_under_or_overflow_are_refused(kind, side):
    """A varying output of magnitude 1e-170 had variance exactly 0: released with no noise."""
    mech = functools.partial(mechs.bad_output, kind=kind)
    with pytest.raises(MechanismError, match=side) as info:
        simulate(mech, POOL1D, n_trials=30, rng=22, execution=QUIET)
    assert "coordinate 1" in str(info.value) or "coordinate 0" in str(info.value)
    assert "e-170" not in str(info.value) and "e+300" not in str(info.value)  # no value


def test_float32_storage_refuses_differences_it_would_flush_to_zero():
    from pacpriv.pac.engine._mechanism import InvalidOutput, check_output

    with pytest.raises(InvalidOutput, match="float32"):
        check_output(np.array([1e-40, 0.0]), None, np.float32)
    assert check_output(np.array([1e-30, 0.0]), None, np.float32)[0] == np.float32(1e-30)
    # float64: the range [2^-400, 2^400] (every square of a non-zero difference is normal)
    assert check_output(np.array([2.0**-400, -(2.0**400), 0.0]), None)[0] == 2.0**-400


def test_outputs_that_cannot_fit_in_memory_are_refused_after_the_first_trial(monkeypatch):
    # d = 5e5 with 20,000 trials ended in a raw _ArrayMemoryError (74.5 GiB), and 5,000
    # trials silently grew towards the machine's memory
    from pacpriv.pac.engine import _storage as storage

    calls = []

    def wide(subset, *, rng):
        calls.append(1)
        return np.full(1000, float(np.sum(subset)))

    monkeypatch.setattr(storage, "physical_memory", lambda: 2 * 1000 * 8 * 50)  # 50 trials
    with pytest.raises(ValueError, match=r"`n_trials` = 200 outputs of dimension d = 1000"):
        simulate(wide, POOL1D, n_trials=200, rng=0, execution=QUIET)
    assert len(calls) <= 2  # refused as soon as d was known, not after the run
    assert simulate(wide, POOL1D, n_trials=40, rng=0,
                    execution=QUIET).outputs.shape == (40, 1000)
