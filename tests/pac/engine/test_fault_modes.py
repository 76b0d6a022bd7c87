"""Failure modes reported against neighbouring tools (issue 14, items 1, 2 and 4).

1. A checkpoint of a different mechanism must never be resumed: the fingerprint covers
   closure values, callable-object fields, helper functions and module constants, and a
   resume re-runs recorded trials and requires bit-identical outputs.
2. float32 storage must not round away the variation of an output on a large offset.
4. A mechanism that ignores its seed is detected (warning, result and report say so); under
   the fork backend its global draws no longer repeat across workers.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

from pacpriv.exceptions import CheckpointError, NotReproducibleWarning
from pacpriv.mechanisms.mean import ClippedMean
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.engine._checkpoint import mechanism_digest
from pacpriv.pac.engine._simulate import simulate
from pacpriv.pac.noise import Certified
from pacpriv.pac.noise._calibration import calibrate_noise
from pacpriv.pac.spectrum._covariance import estimate_output_spectrum

from . import _engine_mechs as mechs

QUIET = ExecutionOptions(progress=False)
NO_CHECK = Certified(target_inflation=None)  # no trial-count check

POOL = np.linspace(-1.0, 2.0, 25)
POOL2D = np.random.default_rng(0).uniform(-3, 3, size=(30, 2))


def _run(mech, ckpt, n_trials=6, pool=POOL, **kw):
    return simulate(mech, pool, n_trials=n_trials, rng=3,
                    execution=ExecutionOptions(checkpoint=ckpt, progress=False), **kw)


# --- item 1: checkpoint of a different mechanism ----------------------------------------------


def _scaled(scale):
    def mech(subset):
        return np.array([subset.sum() * scale])

    return mech


def test_changed_closure_value_is_refused(tmp_path):
    """Same code, different closure value: CheckpointError (was resumed silently)."""
    _run(_scaled(1.0), tmp_path / "c")
    with pytest.raises(CheckpointError,
                       match=r"its state changed \(mechanism.state_sha256: its closure values"):
        _run(_scaled(2.0), tmp_path / "c", n_trials=12)
    _run(_scaled(1.0), tmp_path / "c", n_trials=12)  # the same closure value resumes


def test_changed_object_field_is_refused(tmp_path):
    """A clipped-mean object with other bounds is another mechanism."""
    _run(ClippedMean(low=-1.0, high=1.0), tmp_path / "c", pool=POOL2D)
    with pytest.raises(CheckpointError, match="state_sha256"):
        _run(ClippedMean(low=-1.0, high=100.0), tmp_path / "c", pool=POOL2D, n_trials=12)
    res = _run(ClippedMean(low=-1.0, high=1.0), tmp_path / "c", pool=POOL2D, n_trials=12)
    assert res.resumed_trials == 6 and res.reproducible is True


def _user_module(tmp_path, name, helper_body):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(f"""
        import numpy as np

        SCALE = 1.0


        def helper(x):
            {helper_body}


        def mech(subset):
            return np.array([helper(subset.sum())])
    """))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_changed_helper_function_is_refused(tmp_path):
    """The mechanism's source is unchanged, the helper it calls changed."""
    first = _user_module(tmp_path, "pacpriv_user_mod_a", "return x * SCALE")
    _run(first.mech, tmp_path / "c")
    second = _user_module(tmp_path, "pacpriv_user_mod_a", "return x * SCALE + 1.0")
    with pytest.raises(CheckpointError, match="state_sha256"):
        _run(second.mech, tmp_path / "c", n_trials=12)


def test_changed_module_constant_is_refused(tmp_path, monkeypatch):
    """A module constant read by a helper changed."""
    module = _user_module(tmp_path, "pacpriv_user_mod_b", "return x * SCALE")
    _run(module.mech, tmp_path / "c")
    monkeypatch.setattr(module, "SCALE", 3.0)
    with pytest.raises(CheckpointError, match="state_sha256"):
        _run(module.mech, tmp_path / "c", n_trials=12)


def test_change_invisible_to_fingerprint_is_caught_by_rerun(tmp_path):
    """The mechanism reads a file: same fingerprint, but re-running a recorded trial differs."""
    scale = tmp_path / "scale.txt"
    scale.write_text("1.0")

    def mech(subset):
        return np.array([subset.sum() * float(scale.read_text())])

    first = _run(mech, tmp_path / "c")
    scale.write_text("2.0")
    with pytest.raises(CheckpointError, match=r"re-running recorded trial 0 from its seed gave"):
        _run(mech, tmp_path / "c", n_trials=12)
    scale.write_text("1.0")
    again = _run(mech, tmp_path / "c", n_trials=12)
    assert np.array_equal(again.outputs[:6], first.outputs)


def test_seed_ignoring_mechanism_cannot_resume(tmp_path):
    """A checkpoint of a mechanism that ignores its seed cannot be verified: refused."""
    with pytest.warns(NotReproducibleWarning):
        _run(mechs.global_normal, tmp_path / "c")
    with pytest.raises(CheckpointError, match="not reproducible from its seed"):
        _run(mechs.global_normal, tmp_path / "c", n_trials=12)


def test_digest_stable_across_processes():
    """The state digest is the same in a fresh interpreter (other hash seed)."""
    objs = {
        "clipped": ClippedMean(low=(0.0, -1.0), high=(1.0, 2.0)),
        "partial": functools.partial(mechs.noisy_sum),
    }
    code = textwrap.dedent("""
        import functools, json
        from pacpriv.mechanisms.mean import ClippedMean
        from pacpriv.pac.engine._checkpoint import mechanism_digest
        import numpy as np
        print(json.dumps({
            "clipped": mechanism_digest(ClippedMean(low=(0.0, -1.0), high=(1.0, 2.0))),
            "set": mechanism_digest(functools.partial(print, {"a", "b", "c"})),
        }))
    """)
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=120, check=True)
    remote = json.loads(out.stdout)
    assert remote["clipped"] == mechanism_digest(objs["clipped"])
    assert remote["set"] == mechanism_digest(functools.partial(print, {"c", "b", "a"}))
    assert mechanism_digest(ClippedMean(low=0.0, high=1.0)) != mechanism_digest(
        ClippedMean(low=0.0, high=1.5)
    )


# --- item 2: float32 storage on a large offset ------------------------------------------------


def _offset_mean(subset):
    """2e9 plus the mean of values in [0, 1]: float32 spacing at 2e9 is 256."""
    return np.array([2e9 + (subset.mean() if len(subset) else 0.5)])


def test_float32_keeps_variation_on_large_offset():
    """Calibrated noise from float32 storage matches the float64 run (was: no noise needed)."""
    pool = np.random.default_rng(1).uniform(0.0, 1.0, size=200)
    runs = {
        dt: simulate(_offset_mean, pool, n_trials=300, rng=5, output_dtype=dt,
                     execution=QUIET)
        for dt in (np.float64, np.float32)
    }
    r32, r64 = runs[np.float32], runs[np.float64]
    assert r32.outputs.dtype == np.float32 and r32.reference[0] == r64.outputs[0, 0]
    # stored rows + reference reproduce the float64 outputs to float32 precision of the spread
    spread = np.ptp(r64.outputs)
    assert np.max(np.abs(r32.outputs[:, 0] + r32.reference[0] - r64.outputs[:, 0])) < (
        1e-6 * spread + 1e-6  # 1e-6 absolute: the float64 outputs themselves are 2e9 + x
    )
    plans = {
        dt: calibrate_noise(estimate_output_spectrum(r.outputs), mi_budget=0.5)
        for dt, r in runs.items()
    }
    s32, s64 = plans[np.float32].noise_std, plans[np.float64].noise_std
    assert s64[0] > 1e-3
    np.testing.assert_allclose(s32, s64, rtol=1e-3)


def test_float32_resume_checks_reference(tmp_path):
    """A float32 checkpoint stores trial 0's float64 output and re-checks it on resume."""
    scale = tmp_path / "offset.txt"
    scale.write_text("2e9")

    def mech(subset):
        return np.array([float(scale.read_text()) + subset.sum()])

    first = _run(mech, tmp_path / "c", output_dtype=np.float32)
    assert (tmp_path / "c" / "reference.npy").exists()
    again = _run(mech, tmp_path / "c", n_trials=12, output_dtype=np.float32)
    assert np.array_equal(again.outputs[:6], first.outputs)
    assert np.array_equal(again.reference, first.reference)
    scale.write_text("3e9")  # changes every output by the same offset
    with pytest.raises(CheckpointError, match="reference"):
        _run(mech, tmp_path / "c", n_trials=12, output_dtype=np.float32)


# --- item 4: mechanisms that ignore their seed ------------------------------------------------


def test_seed_ignoring_mechanism_is_flagged():
    """Global np.random draws: NotReproducibleWarning, result.reproducible False, in to_dict."""
    with pytest.warns(NotReproducibleWarning, match="randomness outside its `rng`"):
        res = simulate(mechs.global_normal, POOL, n_trials=8, rng=2,
                       execution=QUIET)
    assert res.reproducible is False and "not reproducible" in res.reproducibility_note
    assert res.to_dict()["reproducible"] is False


def test_rng_mechanism_is_reproducible():
    """A mechanism using its rng argument: no warning, reproducible True."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = simulate(mechs.noisy_sum, POOL, n_trials=8, rng=2,
                       execution=QUIET)
    assert res.reproducible is True and "bit-identical" in res.reproducibility_note


def test_fork_backend_reseeds_global_state():
    """Under the fork backend, global draws no longer repeat across workers (were 22-27 of 40)."""
    runs = [
        simulate(mechs.global_normal, np.zeros(10), n_trials=40, rng=7,
                 execution=ExecutionOptions(n_jobs=2, backend="multiprocessing", batch_size=1,
                                            progress=False))
        for _ in range(2)
    ]
    values = runs[0].outputs[:, 0]
    assert len(np.unique(values)) == 40
    assert np.array_equal(runs[0].outputs, runs[1].outputs)  # reseeded from the trial seeds
    assert runs[0].backend == "multiprocessing" and runs[0].reproducible is True


def test_report_says_not_reproducible(tmp_path):
    """The report reads the result's flag: 'Not reproducible' instead of 'bit for bit'."""
    from pacpriv.pac.job import run_pac
    from pacpriv.report import write_report

    pool = np.random.default_rng(3).uniform(0, 1, size=40)
    with pytest.warns(NotReproducibleWarning):
        res = run_pac(mechs.global_normal, pool, mi_budget=0.5, n_trials=30, rng=1,
                      release=False,
                          execution=QUIET, rule=NO_CHECK)
    paths = write_report(res, tmp_path, formats=("json", "md", "html"))
    md = paths["md"].read_text()
    assert "**Not reproducible.**" in md and "bit for bit" not in md
    assert "Not reproducible." in paths["html"].read_text()
    rep = json.loads(paths["json"].read_text())
    assert rep["reproducibility"]["reproducible"] is False


def _global_sampler(n, rng):
    return np.random.random(n) < 0.5  # ignores its rng


_global_sampler.inclusion_probability = 0.5


def test_a_sampler_drawing_outside_its_rng_is_blamed_not_the_mechanism():
    """A deterministic mechanism was named "not reproducible" when the callable sampler drew
    from the global numpy state (seventh new-user pass, #452)."""
    import warnings

    from pacpriv.exceptions import NotReproducibleWarning
    from pacpriv.pac.engine import ExecutionOptions
    from pacpriv.pac.engine._simulate import simulate

    pool = np.random.default_rng(0).normal(size=(30, 2))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = simulate(lambda s: s.sum(axis=0), pool, n_trials=8, rng=0,
                       sampler=_global_sampler, execution=ExecutionOptions(progress=False))
    said = [str(w.message) for w in caught if w.category is NotReproducibleWarning]
    assert len(said) == 1 and res.reproducible is False
    assert said[0].startswith("The sampler _global_sampler is not reproducible: re-drawing "
                              "trial 0's subset from its seed gave a different subset")
    assert "Mechanism" not in said[0] and "The sampler draws randomness" in said[0]
