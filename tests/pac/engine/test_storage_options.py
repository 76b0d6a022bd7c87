"""Outputs kept as float32 or memory-mapped in the checkpoint folder (``ExecutionOptions``).

The certificate reads them as they are (relative to trial 0 for float32) and adds the
reference back where a translation matters: the clip centre and the output-bound check.
"""

from __future__ import annotations

import numpy as np
import pytest

from pacpriv.cli import main
from pacpriv.exceptions import CalibrationError
from pacpriv.pac import run_pac
from pacpriv.pac.engine import ExecutionOptions

OFFSET = 1.0e6  # far from the origin: a float32 copy stored absolutely would round it away


def shifted_mean(subset):
    return OFFSET + np.array([subset.mean(), subset.std(), subset.max()]) if len(subset) else \
        np.full(3, OFFSET)


def _run(**options):
    pool = np.random.default_rng(0).normal(size=60)
    return run_pac(shifted_mean, pool, mi_budget=0.5, n_trials=48, rng=7, release_rng=1,
                   execution=ExecutionOptions(progress=False, **options))


@pytest.mark.parametrize(("kw", "match"), [
    ({"memory_map": True}, "checkpoint"),
    ({"output_dtype": "float16"}, "output_dtype"),
    ({"memory_map": 1, "checkpoint": "x"}, "memory_map"),
    ({"memory_map": True, "checkpoint": "x", "output_path": "y.npy"}, "output_path"),
])
def test_bad_storage_options_are_refused_on_construction(kw, match):
    with pytest.raises((TypeError, ValueError), match=match):
        ExecutionOptions(**kw)


def test_float32_storage_gives_the_float64_plan_and_an_absolute_clip_centre(recwarn):
    ref = _run()
    low = _run(output_dtype="float32")
    assert low.simulation.outputs.dtype == np.float32
    assert low.simulation.reference is not None
    assert low.plan.certified and ref.plan.certified
    # only the spread is rounded (relative 2^-24): the same plan to float32 accuracy
    assert low.plan.mi_bound == pytest.approx(ref.plan.mi_bound, rel=1e-5)
    assert low.plan.certificate.kappa == pytest.approx(ref.plan.certificate.kappa, rel=1e-4)
    np.testing.assert_allclose(low.plan.clip_center, ref.plan.clip_center, rtol=1e-9)
    assert np.all(np.abs(low.release - OFFSET) < 1e3)  # released around the absolute output


def test_memory_mapped_outputs_live_in_the_checkpoint_and_give_the_same_plan(tmp_path, recwarn):
    ref = _run()
    mapped = _run(memory_map=True, checkpoint=tmp_path / "ck")
    assert isinstance(mapped.simulation.outputs, np.memmap)
    assert (tmp_path / "ck" / "outputs.npy").is_file()
    np.testing.assert_array_equal(np.asarray(mapped.simulation.outputs),
                                  ref.simulation.outputs)
    assert mapped.plan.mi_bound == ref.plan.mi_bound
    assert mapped.plan.certificate.upper_bound == ref.plan.certificate.upper_bound
    resumed = _run(memory_map=True, checkpoint=tmp_path / "ck")
    assert resumed.simulation.resumed_trials == 48
    assert resumed.plan.certificate.upper_bound == ref.plan.certificate.upper_bound


def test_float32_storage_checks_the_output_bound_on_absolute_outputs():
    """Stored relative to trial 0 the rows are small: the bound must see the absolute ones."""
    from pacpriv.pac.noise import Certified

    pool = np.random.default_rng(0).normal(size=60)
    with pytest.raises(CalibrationError, match="output_bound"):
        run_pac(shifted_mean, pool, mi_budget=0.5, n_trials=16, rng=7,
                rule=Certified(output_bound=10.0),
                execution=ExecutionOptions(progress=False, output_dtype="float32"))


def test_cli_memory_map_needs_a_checkpoint(tmp_path, capsys):
    rc = main(["pac", "run", "--mechanism", "mean", "--dataset", "breast_cancer",
               "--mi-budget", "0.5", "--memory-map", "--out", str(tmp_path / "r")])
    assert rc == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--memory-map" in err and "--checkpoint" in err


def test_the_sizes_page_snippet_runs(capsys):
    """docs/guide/sizes.md's Python block runs and prints what it says."""
    import re
    from pathlib import Path

    page = Path(__file__).resolve().parents[3] / "docs" / "guide" / "sizes.md"
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)
    assert len(blocks) == 1
    from pacpriv.exceptions import UndersampledWarning

    with pytest.warns(UndersampledWarning):  # 64 trials for d = 500: the certificate warns
        exec(compile(blocks[0], "sizes.md", "exec"), {"__name__": "__sizes__"})
    assert capsys.readouterr().out.split() == ["float32", "True"]


# --- an existing output_path is never replaced silently (issue 35: data loss) -----------------

def _noisy_sum(x, rng):
    import numpy as np
    return np.asarray([float(np.sum(x)) + rng.normal()])


@pytest.mark.parametrize("existing", ["out.npy", "out.masks.npy"])
def test_existing_output_path_is_refused_before_any_trial(tmp_path, existing):
    import numpy as np

    from pacpriv.pac.engine import ExecutionOptions, simulate
    keep = np.arange(5.0)
    np.save(tmp_path / existing, keep)
    calls = []

    def mech(x, rng):
        calls.append(1)
        return _noisy_sum(x, rng)

    with pytest.raises(FileExistsError, match="overwrite_output=True"):
        simulate(mech, np.ones((6, 2)), n_trials=4, rng=0,
                 execution=ExecutionOptions(output_path=tmp_path / "out.npy", progress=False,
                                            n_jobs=1))
    assert not calls  # refused before any work
    assert np.array_equal(np.load(tmp_path / existing), keep)  # the user's data is intact


def test_overwrite_output_replaces_existing_file(tmp_path):
    import numpy as np

    from pacpriv.pac.engine import ExecutionOptions, simulate
    out = tmp_path / "out.npy"
    np.save(out, np.arange(5.0))
    res = simulate(_noisy_sum, np.ones((6, 2)), n_trials=4, rng=0,
                   execution=ExecutionOptions(output_path=out, overwrite_output=True,
                                              progress=False))
    assert np.array_equal(np.load(out), np.asarray(res.outputs))


def test_overwrite_output_must_be_bool():
    from pacpriv.pac.engine import ExecutionOptions
    with pytest.raises(TypeError, match="overwrite_output"):
        ExecutionOptions(overwrite_output="yes")
