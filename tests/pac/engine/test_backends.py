"""Engine on distributed joblib backends (Dask, Ray) and resuming across backends."""

from __future__ import annotations

import functools
import os

import numpy as np
import pytest

from pacpriv.exceptions import MechanismError
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.engine._simulate import simulate

from . import _engine_mechs as mechs

QUIET = ExecutionOptions(progress=False)

POOL = np.linspace(-1.0, 2.0, 25)

# a Dask worker that cannot unpickle a task hangs the run instead of failing: bound it
pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def dask_client():
    """A small local Dask cluster: 2 worker processes, 1 thread each."""
    distributed = pytest.importorskip("distributed")
    # dashboard on a free port: None means the default 8787, which another run on a shared
    # machine may hold (then a "port in use" warning, an error under the suite's filters)
    cluster = distributed.LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0"
    )
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


def test_dask_identical_to_local_backends(dask_client):
    """backend="dask" and parallel_config(backend="dask") match sequential, loky, threading."""
    from joblib import parallel_config

    kwargs = {"n_trials": 40, "rng": 17}
    ref = simulate(mechs.noisy_sum, POOL, execution=QUIET, **kwargs)
    runs = {
        name: simulate(mechs.noisy_sum, POOL, execution=QUIET.replace(**opts), **kwargs)
        for name, opts in [("loky", {"n_jobs": 2, "backend": "loky"}),
                           ("threading", {"n_jobs": 2, "backend": "threading"}),
                           ("dask", {"backend": "dask"})]
    }
    with parallel_config(backend="dask"):
        runs["dask-config"] = simulate(mechs.noisy_sum, POOL, execution=QUIET, **kwargs)
    for name, res in runs.items():
        assert np.array_equal(res.outputs, ref.outputs), name
        assert np.array_equal(res.masks, ref.masks), name
    assert (runs["dask"].backend, runs["dask"].n_jobs) == ("dask", 2)
    assert runs["dask-config"].backend == "dask"


def test_dask_mechanism_error_keeps_cause(dask_client):
    """A failing trial on a Dask worker raises MechanismError chained from the original."""
    with pytest.raises(MechanismError, match=r"raised ValueError in trial") as info:
        simulate(mechs.fail_flagged, POOL, n_trials=40, rng=21,
                 execution=ExecutionOptions(backend="dask", progress=False))
    assert isinstance(info.value.__cause__, ValueError)
    assert info.value.seed["spawn_key"] == [info.value.trial_index]


def test_dask_timeout_checked_after_trial(dask_client):
    """On Dask worker threads a slow trial cannot be interrupted but still fails its timeout;
    a warning says so before the trials."""
    from pacpriv.exceptions import UninterruptibleWarning

    with pytest.raises(MechanismError, match=r"trial took .* s > timeout=1.0 s"), \
            pytest.warns(UninterruptibleWarning, match="cannot interrupt a trial on dask"):
        simulate(mechs.sleepy, POOL, n_trials=40, rng=23,
                 execution=ExecutionOptions(timeout=mechs.SLEEPY_TIMEOUT_S, backend="dask",
                                            progress=False))


def test_resume_across_backends(tmp_path, dask_client):
    """A run checkpointed with n_jobs=1, continued on loky and finished on Dask is identical."""
    ckpt, flag = tmp_path / "ckpt", tmp_path / "flag"
    mech = functools.partial(mechs.fail_flagged, flag_file=str(flag))
    clean = simulate(mech, POOL, n_trials=30, rng=21, execution=QUIET)
    flagged = np.flatnonzero(
        simulate(mechs.flag_value, POOL, n_trials=30, rng=21,
                 execution=QUIET).outputs[:, 0]
        < mechs.FAIL_RATE
    )
    assert flagged.size and flagged.max() >= 10  # the loky stage below must fail
    first = simulate(mech, POOL, n_trials=10, rng=21,
                     execution=ExecutionOptions(checkpoint=ckpt, progress=False))
    flag.touch()
    with pytest.raises(MechanismError):
        simulate(mech, POOL, n_trials=30, rng=21,
                 execution=ExecutionOptions(checkpoint=ckpt, n_jobs=2, backend="loky",
                                            batch_size=2, progress=False))
    flag.unlink()
    final = simulate(mech, POOL, n_trials=30, rng=21,
                     execution=ExecutionOptions(checkpoint=ckpt, backend="dask", progress=False))
    assert first.backend == "sequential" and final.backend == "dask"
    assert final.resumed_trials >= 10
    assert np.array_equal(final.outputs, clean.outputs)
    assert np.array_equal(final.masks, clean.masks)


@pytest.fixture(scope="module")
def ray_runtime():
    """A local Ray runtime with 2 CPUs (the `ray` extra is installed in CI)."""
    ray = pytest.importorskip("ray")
    # a nearly full disk (>95 %) makes the raylet print a warning, from a driver thread, into
    # whichever test's captured stderr is active: only a full disk matters for these tests
    old = os.environ.get("RAY_local_fs_capacity_threshold")
    os.environ["RAY_local_fs_capacity_threshold"] = "0.9999"
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    yield ray
    ray.shutdown()
    if old is None:
        os.environ.pop("RAY_local_fs_capacity_threshold", None)
    else:
        os.environ["RAY_local_fs_capacity_threshold"] = old


@pytest.mark.slow
def test_ray_identical_to_loky(ray_runtime):
    """backend="ray" gives outputs and masks bit-identical to loky for the same root seed."""
    kwargs = {"n_trials": 24, "rng": 17}
    loky = simulate(mechs.noisy_sum, POOL, execution=QUIET.replace(n_jobs=2, backend="loky"),
                    **kwargs)
    ray_run = simulate(mechs.noisy_sum, POOL, execution=QUIET.replace(backend="ray"), **kwargs)
    assert np.array_equal(ray_run.outputs, loky.outputs)
    assert np.array_equal(ray_run.masks, loky.masks)
    assert ray_run.backend == "ray" and ray_run.n_jobs == 2


@pytest.mark.slow
def test_resume_loky_checkpoint_under_ray(tmp_path, ray_runtime):
    """A run checkpointed under loky finishes under Ray with identical outputs."""
    ckpt = tmp_path / "ckpt"
    clean = simulate(mechs.noisy_sum, POOL, n_trials=24, rng=5,
                     execution=QUIET)
    first = simulate(mechs.noisy_sum, POOL, n_trials=10, rng=5,
                     execution=ExecutionOptions(n_jobs=2, backend="loky", checkpoint=ckpt,
                                                progress=False))
    final = simulate(mechs.noisy_sum, POOL, n_trials=24, rng=5,
                     execution=ExecutionOptions(backend="ray", checkpoint=ckpt, progress=False))
    assert first.backend == "loky" and final.backend == "ray"
    assert final.resumed_trials == 10
    assert np.array_equal(final.outputs, clean.outputs)
    assert np.array_equal(final.masks, clean.masks)


def test_dask_record_blocks_identical_to_sequential(dask_client):
    """A per-record run's record blocks on Dask workers give the sequential differences."""
    from pacpriv.pac.per_record import simulate_differences

    kwargs = dict(n_trials=3, records=np.arange(0, 25, 2), rng=3)
    local = simulate_differences(mechs.noisy_sum, POOL, execution=QUIET, **kwargs)
    dask = simulate_differences(
        mechs.noisy_sum, POOL, **kwargs,
        execution=ExecutionOptions(backend="dask", record_block=4, progress=False))
    np.testing.assert_array_equal(local.differences, dask.differences)
    np.testing.assert_array_equal(local.outputs, dask.outputs)
    assert dask.simulation.backend == "dask"
