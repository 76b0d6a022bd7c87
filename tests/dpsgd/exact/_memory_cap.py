"""Run exact-accuracy evaluations in a subprocess under a 2 GiB address-space cap."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

_SCRIPT = textwrap.dedent(
    """
    import resource, warnings
    cap = 2 * 1024**3
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    warnings.simplefilter("error")
    from pacpriv.dpsgd import exact_membership_inference_accuracy as ex
    for s, m, e in {cases}:
        r = ex(s, steps_per_epoch=m, epochs=e, progress=False)
        assert 0.5 <= r.lower <= r.upper <= 1.0, (s, m, e, r.lower, r.upper)
        assert r.upper - r.lower <= {max_width}, (s, m, e, r.lower, r.upper)
        ref = {inside}.get((s, m, e))
        if ref is not None:
            assert r.lower <= ref <= r.upper, (s, m, e, r.lower, r.upper, ref)
    print("ok")
    """
)


def assert_runs_under_memory_cap(cases, *, max_width: float = 1.0,
                                 inside: dict | None = None) -> None:
    """Each ``(σ, M, E)`` in ``cases`` gives ``½ <= lower <= upper <= 1`` (width at most
    ``max_width``) with no warning, in a child process limited to 2 GiB of address space;
    ``inside`` maps cases to independent values the interval must contain."""
    env = {"PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-c",
         _SCRIPT.format(cases=list(cases), max_width=max_width, inside=dict(inside or {}))],
        capture_output=True, text=True, timeout=300, env=env, cwd=REPO,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "ok"
