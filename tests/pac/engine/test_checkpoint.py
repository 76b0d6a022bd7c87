"""pacpriv.pac.engine._checkpoint through simulate (execution=ExecutionOptions(checkpoint=)):
resume, kill -9, errors."""

from __future__ import annotations

import functools
import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from pacpriv.exceptions import CheckpointError, MechanismError
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.engine._checkpoint import pool_fingerprint
from pacpriv.pac.engine._simulate import simulate
from pacpriv.pac.samplers import FixedSizeSampler

from . import _engine_mechs as mechs

QUIET = ExecutionOptions(progress=False)

POOL = np.linspace(-1.0, 2.0, 25)


def _manifest(path):
    return json.loads((path / "manifest.json").read_text())


def _flag_mech(tmp_path, fn=mechs.fail_flagged):
    """A mechanism failing on flagged trials while tmp_path/flag exists (flag created)."""
    flag = tmp_path / "flag"
    flag.touch()
    return functools.partial(fn, flag_file=str(flag)), flag


def test_complete_run_resumes_without_running(tmp_path):
    """A finished checkpoint is reloaded in full: the mechanism is not called again."""
    ckpt = tmp_path / "ckpt"
    mech, flag = _flag_mech(tmp_path)
    flag.unlink()
    first = simulate(mech, POOL, n_trials=20, rng=21,
                     execution=ExecutionOptions(checkpoint=ckpt, progress=False))
    assert first.resumed_trials == 0 and first.checkpoint == str(ckpt)
    flag.touch()  # would make flagged trials raise if they ran again
    again = simulate(mech, POOL, n_trials=20, rng=21,
                     execution=ExecutionOptions(checkpoint=ckpt, progress=False))
    assert again.resumed_trials == 20
    assert np.array_equal(again.outputs, first.outputs) and np.array_equal(again.masks, first.masks)
    m = _manifest(ckpt)
    assert m["dim"] == 2 and sum(b - a for a, b, *_ in m["chunks"]) == 20


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_resume_after_mechanism_error(tmp_path, n_jobs):
    """After a MechanismError, finished trials are kept and the resumed run is bit-identical."""
    ckpt = tmp_path / "ckpt"
    mech, flag = _flag_mech(tmp_path)
    with pytest.raises(MechanismError) as info:
        simulate(mech, POOL, n_trials=40, rng=21,
                 execution=ExecutionOptions(checkpoint=ckpt, batch_size=1, n_jobs=n_jobs,
                                            progress=False))
    saved = sum(b - a for a, b, *_ in _manifest(ckpt)["chunks"])
    if n_jobs == 1:  # sequential, batch_size=1: everything before the failing trial is saved
        assert saved == info.value.trial_index > 0
    flag.unlink()
    resumed = simulate(mech, POOL, n_trials=40, rng=21,
                       execution=ExecutionOptions(checkpoint=ckpt, n_jobs=n_jobs, progress=False))
    clean = simulate(mech, POOL, n_trials=40, rng=21, execution=QUIET)
    assert resumed.resumed_trials == saved
    assert np.array_equal(resumed.outputs, clean.outputs)
    assert np.array_equal(resumed.masks, clean.masks)


def test_resume_after_keyboard_interrupt(tmp_path):
    """A KeyboardInterrupt propagates; the resumed run loses no finished trial."""
    ckpt = tmp_path / "ckpt"
    mech, flag = _flag_mech(tmp_path, mechs.interrupt_flagged)
    with pytest.raises(KeyboardInterrupt):
        simulate(mech, POOL, n_trials=40, rng=21,
                 execution=ExecutionOptions(checkpoint=ckpt, batch_size=3, progress=False))
    saved = sum(b - a for a, b, *_ in _manifest(ckpt)["chunks"])
    assert saved > 0
    flag.unlink()
    resumed = simulate(mech, POOL, n_trials=40, rng=21,
                       execution=ExecutionOptions(checkpoint=ckpt, progress=False))
    clean = simulate(mech, POOL, n_trials=40, rng=21, execution=QUIET)
    assert resumed.resumed_trials == saved
    assert np.array_equal(resumed.outputs, clean.outputs)


_KILL_MODULE = """
import os
import time

import numpy as np


def slow_mech(subset, *, rng):
    if os.environ.get("PACPRIV_TEST_SLOW"):
        time.sleep(0.02)
    return np.array([subset.sum(), rng.normal()])
"""

_KILL_SCRIPT = """
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
from pacpriv_killmech import slow_mech
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.engine._simulate import simulate
simulate(slow_mech, np.linspace(-1.0, 2.0, 25), n_trials=400, rng=5,
         execution=ExecutionOptions(checkpoint=sys.argv[2], batch_size=2, progress=False))
"""


def test_resume_after_sigkill(tmp_path, monkeypatch):
    """A run killed with SIGKILL mid-way resumes with every saved trial and identical outputs."""
    (tmp_path / "pacpriv_killmech.py").write_text(_KILL_MODULE)
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(_KILL_SCRIPT))
    ckpt = tmp_path / "ckpt"
    env = {**os.environ, "PACPRIV_TEST_SLOW": "1"}
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path), str(ckpt)], env=env)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if (ckpt / "manifest.json").exists() and len(_manifest(ckpt)["chunks"]) >= 5:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the run finished or failed before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    saved = sum(b - a for a, b, *_ in _manifest(ckpt)["chunks"])
    assert 10 <= saved < 400
    monkeypatch.syspath_prepend(str(tmp_path))
    from pacpriv_killmech import slow_mech

    resumed = simulate(slow_mech, POOL, n_trials=400, rng=5,
                       execution=ExecutionOptions(checkpoint=ckpt, progress=False))
    clean = simulate(slow_mech, POOL, n_trials=400, rng=5,
                     execution=QUIET)
    assert resumed.resumed_trials >= saved
    assert np.array_equal(resumed.outputs, clean.outputs)
    assert np.array_equal(resumed.masks, clean.masks)


def test_rng_none_reuses_checkpoint_seed(tmp_path):
    """With rng=None a resumed run reuses the checkpoint's root seed (fresh entropy at first)."""
    ckpt = tmp_path / "ckpt"
    mech, flag = _flag_mech(tmp_path)
    with pytest.raises(MechanismError):
        simulate(mech, POOL, n_trials=200,
                 execution=ExecutionOptions(checkpoint=ckpt, batch_size=1, progress=False))
    stored = _manifest(ckpt)["root_seed"]
    saved = sum(b - a for a, b, *_ in _manifest(ckpt)["chunks"])
    flag.unlink()
    resumed = simulate(mech, POOL, n_trials=200,
                       execution=ExecutionOptions(checkpoint=ckpt, progress=False))
    clean = simulate(mech, POOL, n_trials=200, rng=np.random.SeedSequence(**stored),
                     execution=QUIET)
    assert resumed.root_seed == stored and resumed.resumed_trials == saved
    assert np.array_equal(resumed.outputs, clean.outputs)


def test_extend_and_shrink_n_trials(tmp_path):
    """n_trials may change on resume: trial i depends only on (root seed, i)."""
    ckpt = tmp_path / "ckpt"
    simulate(mechs.noisy_sum, POOL, n_trials=20, rng=3,
             execution=ExecutionOptions(checkpoint=ckpt, progress=False))
    longer = simulate(mechs.noisy_sum, POOL, n_trials=30, rng=3,
                      execution=ExecutionOptions(checkpoint=ckpt, progress=False))
    shorter = simulate(mechs.noisy_sum, POOL, n_trials=10, rng=3,
                       execution=ExecutionOptions(checkpoint=ckpt, progress=False))
    clean = simulate(mechs.noisy_sum, POOL, n_trials=30, rng=3,
                     execution=QUIET)
    assert longer.resumed_trials == 20 and shorter.resumed_trials == 10
    assert np.array_equal(longer.outputs, clean.outputs)
    assert np.array_equal(shorter.outputs, clean.outputs[:10])


def test_unlisted_chunk_is_ignored(tmp_path):
    """A chunk file missing from the manifest (killed between writes) is recomputed."""
    ckpt = tmp_path / "ckpt"
    simulate(mechs.noisy_sum, POOL, n_trials=4, rng=3,
             execution=ExecutionOptions(checkpoint=ckpt, progress=False))
    np.savez(ckpt / "trials_000000000004_000000000006.npz", outputs=np.zeros((2, 2)),
             masks=np.zeros((2, 25), dtype=bool))
    res = simulate(mechs.noisy_sum, POOL, n_trials=6, rng=3,
                   execution=ExecutionOptions(checkpoint=ckpt, progress=False))
    clean = simulate(mechs.noisy_sum, POOL, n_trials=6, rng=3,
                     execution=QUIET)
    assert res.resumed_trials == 4 and np.array_equal(res.outputs, clean.outputs)


def test_output_path_with_checkpoint(tmp_path):
    """Disk-backed outputs are filled from the checkpoint on resume."""
    ckpt, out = tmp_path / "ckpt", tmp_path / "out.npy"
    simulate(mechs.noisy_sum, POOL, n_trials=8, rng=3,
             execution=ExecutionOptions(checkpoint=ckpt, progress=False))
    res = simulate(mechs.noisy_sum, POOL, n_trials=12, rng=3,
                   execution=ExecutionOptions(checkpoint=ckpt, output_path=out, progress=False))
    clean = simulate(mechs.noisy_sum, POOL, n_trials=12, rng=3,
                     execution=QUIET)
    assert np.array_equal(np.load(out), clean.outputs) and res.resumed_trials == 8


@pytest.fixture
def loose_umask():
    """Run with umask 0 (new files 0666, directories 0777 unless the code narrows them)."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path):
    return os.stat(path).st_mode & 0o777


def test_checkpoint_and_output_files_are_owner_only(tmp_path, loose_umask):
    """Checkpoints and output_path files hold the pool in effect: 0700 dir, 0600 files (F5).

    Whatever the umask; and a resumed, extended run (new chunk, rewritten manifest) keeps the
    modes and restores the finished trials bit-identically.
    """
    ckpt, out = tmp_path / "sub" / "ckpt", tmp_path / "out.npy"
    first = simulate(mechs.noisy_sum, POOL, n_trials=8, rng=3,
                     execution=ExecutionOptions(checkpoint=ckpt, progress=False),
                     output_dtype=np.float32)
    assert _mode(ckpt) == 0o700
    files = sorted(p.name for p in ckpt.iterdir())
    assert "manifest.json" in files and "reference.npy" in files
    assert any(name.startswith("trials_") for name in files)
    assert {name: _mode(ckpt / name) for name in files} == dict.fromkeys(files, 0o600)
    res = simulate(mechs.noisy_sum, POOL, n_trials=12, rng=3,
                   execution=ExecutionOptions(checkpoint=ckpt, output_path=out,
                                              progress=False), output_dtype=np.float32)
    clean = simulate(mechs.noisy_sum, POOL, n_trials=12, rng=3,
                     execution=QUIET,
                     output_dtype=np.float32)
    assert res.resumed_trials == 8
    assert np.array_equal(np.asarray(res.outputs), clean.outputs)
    assert np.array_equal(np.asarray(res.outputs)[:8], first.outputs)
    assert _mode(ckpt) == 0o700
    assert len(_manifest(ckpt)["chunks"]) >= 2
    assert {p.name: _mode(p) for p in ckpt.iterdir()} == {
        p.name: 0o600 for p in ckpt.iterdir()}
    assert _mode(out) == 0o600 and _mode(tmp_path / "out.masks.npy") == 0o600


def test_output_path_file_is_narrowed_when_it_exists(tmp_path):
    """An existing world-readable output_path file is truncated and made 0600."""
    out = tmp_path / "out.npy"
    out.write_bytes(b"old")
    os.chmod(out, 0o644)
    res = simulate(mechs.noisy_sum, POOL, n_trials=5, rng=3,
                   execution=ExecutionOptions(output_path=out, overwrite_output=True,
                                              progress=False))
    assert _mode(out) == 0o600 and np.load(out).shape == np.asarray(res.outputs).shape


def test_existing_checkpoint_directory_keeps_its_mode(tmp_path):
    """A directory the caller made keeps its mode (it is theirs); the files are still 0600."""
    ckpt = tmp_path / "mine"
    ckpt.mkdir()
    os.chmod(ckpt, 0o750)
    simulate(mechs.noisy_sum, POOL, n_trials=4, rng=3,
             execution=ExecutionOptions(checkpoint=ckpt, progress=False))
    assert _mode(ckpt) == 0o750
    assert {_mode(p) for p in ckpt.iterdir()} == {0o600}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"mechanism": mechs.noisy_sum},
         r"the mechanism: checkpoint '.*count_mech', now '.*noisy_sum'"),
        ({"sampler": FixedSizeSampler(3)},
         r"the sampler: checkpoint poisson \(sampling_rate 0.5.*\), now fixed \("),
        ({"pool": POOL + 1}, r"the pool's content \(the dataset; same shape 25 float64\)"),
        ({"pool": POOL[:20]}, r"the pool \(the dataset\): checkpoint 25 float64, now 20 "),
        ({"rng": 4}, r"the root seed \(`rng`\): checkpoint entropy 3, now entropy 4; pass "
                     r"rng=None to reuse the checkpoint's seed"),
        ({"output_dtype": np.float32}, r"`output_dtype`: checkpoint float64, now float32"),
    ],
)
def test_mismatched_run_is_refused(tmp_path, change, message):
    """A checkpoint of a different run raises CheckpointError naming what differs."""
    ckpt = tmp_path / "ckpt"
    simulate(mechs.count_mech, POOL, n_trials=4, rng=3,
             execution=ExecutionOptions(checkpoint=ckpt, progress=False))
    args = {"mechanism": mechs.count_mech, "pool": POOL, "rng": 3, **change}
    mechanism, pool = args.pop("mechanism"), args.pop("pool")
    with pytest.raises(CheckpointError, match=message):
        simulate(mechanism, pool, n_trials=4, execution=ExecutionOptions(checkpoint=ckpt,
                                                                         progress=False), **args)


def _corrupt_manifest(ckpt):
    (ckpt / "manifest.json").write_text("{not json")


def _manifest_without_fields(ckpt):
    (ckpt / "manifest.json").write_text("{}")


def _other_version(ckpt):
    m = _manifest(ckpt)
    m["version"] = 99
    (ckpt / "manifest.json").write_text(json.dumps(m))


def _first_chunk(ckpt):
    return ckpt / _manifest(ckpt)["chunks"][0][2]


def _flip_chunk_byte(ckpt):
    data = bytearray(_first_chunk(ckpt).read_bytes())
    data[-10] ^= 0xFF
    _first_chunk(ckpt).write_bytes(bytes(data))


def _delete_chunk(ckpt):
    _first_chunk(ckpt).unlink()


def _wrong_shape_chunk(ckpt):
    buffer = io.BytesIO()
    np.savez(buffer, outputs=np.zeros((1, 5)), masks=np.zeros((1, 25), dtype=bool))
    _first_chunk(ckpt).write_bytes(buffer.getvalue())
    m = _manifest(ckpt)
    m["chunks"][0][3] = hashlib.sha256(buffer.getvalue()).hexdigest()
    (ckpt / "manifest.json").write_text(json.dumps(m))


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (_corrupt_manifest, "manifest .* is corrupt or unreadable"),
        (_manifest_without_fields, r"is corrupt: missing fields \['chunks'"),
        (_other_version, "has format 'pacpriv.checkpoint' version 99"),
        (_flip_chunk_byte, r"is corrupt \(SHA-256 mismatch\)"),
        (_delete_chunk, "is missing"),
        (_wrong_shape_chunk, r"has outputs \(1, 5\) and masks \(1, 25\); expected"),
    ],
)
def test_damaged_checkpoint_is_refused(tmp_path, damage, message):
    """A corrupt manifest or chunk raises CheckpointError instead of mixing data."""
    ckpt = tmp_path / "ckpt"
    simulate(mechs.noisy_sum, POOL, n_trials=4, rng=3,
             execution=ExecutionOptions(checkpoint=ckpt, progress=False))
    damage(ckpt)
    with pytest.raises(CheckpointError, match=message):
        simulate(mechs.noisy_sum, POOL, n_trials=4, rng=3,
                 execution=ExecutionOptions(checkpoint=ckpt, progress=False))


def test_checkpoint_path_is_a_file(tmp_path):
    """A file where the checkpoint directory should be is refused."""
    path = tmp_path / "file"
    path.write_text("x")
    with pytest.raises(CheckpointError, match=r"`checkpoint` must be a directory; .* is a file"):
        simulate(mechs.noisy_sum, POOL, n_trials=2, rng=3,
                 execution=ExecutionOptions(checkpoint=path, progress=False))


def test_checkpoint_path_type():
    """A non-path checkpoint is a TypeError."""
    with pytest.raises(TypeError, match="`checkpoint` must be a directory path; got int"):
        simulate(mechs.noisy_sum, POOL, n_trials=2, rng=3,
                 execution=ExecutionOptions(checkpoint=3, progress=False))


def test_pool_fingerprint_sensitivity():
    """The pool fingerprint changes with content, dtype and tuple structure."""
    x = np.arange(6.0)
    base = pool_fingerprint(x)
    assert pool_fingerprint(x.copy()) == base
    assert pool_fingerprint(x + 1e-12)["sha256"] != base["sha256"]
    assert pool_fingerprint(x.astype(np.float32))["dtypes"] == ["<f4"]
    assert pool_fingerprint((x, x))["shapes"] == [[6], [6]]


def test_partial_arguments_are_fingerprinted(tmp_path):
    """Arguments bound with functools.partial are part of the fingerprint."""
    ckpt = tmp_path / "ckpt"
    first = functools.partial(mechs.fail_flagged, flag_file=str(tmp_path / "a"))
    simulate(first, POOL, n_trials=4, rng=3,
             execution=ExecutionOptions(checkpoint=ckpt, progress=False))
    other = functools.partial(mechs.fail_flagged, flag_file=str(tmp_path / "b"))
    with pytest.raises(CheckpointError, match=r"the arguments bound to the mechanism "
                       r"\(functools.partial\): checkpoint \[.*/a"):
        simulate(other, POOL, n_trials=4, rng=3,
                 execution=ExecutionOptions(checkpoint=ckpt, progress=False))
