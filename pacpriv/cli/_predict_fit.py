"""``pacpriv predict fit``'s checks before any world is fitted: the classes every world must
see (the public masks of the worlds' seed) and the timed probe of one world's fit, with the
estimate for all worlds (refused above --max-minutes).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import cast

from pacpriv.cli._args import UsageError
from pacpriv.cli._resources import check_fit_time

__all__ = ["check_fit_estimate", "check_worlds_up_front"]

NOT_AN_ESTIMATOR = ("not a scikit-learn-style estimator (an object with fit() and "
                    "get_params(), or its class)")


#: Worlds whose masks are checked before the timed probe (well under a second); the rest are
#: checked after the estimate is printed, saying how far they got when it takes long.
QUICK_WORLDS = 4096


def check_worlds_up_front(args, estimator, output: str, pool, *, seed: int | None = None,
                          first: int | None = None) -> int | None:
    """Refuse, before any world, worlds that lack a class (a classifier must see every class
    in every world); returns the seed of the public worlds to use. With no --seed and no
    state yet, the seed is drawn here (OS entropy) unless ``seed`` (an earlier call's) is
    given, so the worlds checked are the worlds fitted; a resumed state keeps its stored seed
    (the predictor checks it). ``first``: check only the first worlds (before the probe)."""
    from pathlib import Path

    import numpy as np

    from pacpriv.pac.samplers import ComplementaryPairsSampler
    from pacpriv.prediction._seeds import Seeds
    from pacpriv.prediction._worlds import as_world_fitter, check_world_classes

    if Path(args.state).exists():
        return args.seed
    if seed is None:
        seed = args.seed if args.seed is not None else int(
            cast(int, np.random.SeedSequence().entropy))  # 128 bits of OS entropy
    try:
        check_world_classes(as_world_fitter(estimator), output, pool, n_worlds=args.n_worlds,
                            sampler=ComplementaryPairsSampler(), name="--n-worlds",
                            world_seed=Seeds.from_arguments(seed, None).world_seed,
                            first=first)
    except ValueError as err:
        fresh = "" if args.seed is not None else (
            "; no --seed was given, so each run draws other worlds: pass --seed to keep a draw")
        raise UsageError(str(err).rstrip(".") + fresh) from None
    return seed


def _probe_fit_function(args, fit, X, y, output: str) -> float:
    """Call a plain fit function once on ``(X, y)`` (half the pool, as a world sees it), before
    any world is fitted: it must return a model with the method ``--output`` needs. Returns the
    seconds it took. A function that raises is refused in one line (its message withheld: it
    may quote records; --show-errors prints it)."""
    import time

    from pacpriv.exceptions import WITHHELD_NOTE, UserCodeError
    from pacpriv.pac.engine._mechanism import call_mechanism
    from pacpriv.prediction._evaluate import OUTPUT_METHODS

    what = f"--estimator {args.estimator} is {NOT_AN_ESTIMATOR}, and as a fit function"
    tic = time.perf_counter()
    try:
        model = call_mechanism(fit, (X, y), rng=0)
    except Exception as err:
        raise UserCodeError(f"{what} fit((X, y)) -> model it raised {type(err).__qualname__} "
                            f"when called on (X, y), before any world was fitted. "
                            f"{WITHHELD_NOTE}") from err
    method = OUTPUT_METHODS.get(output)
    if method is not None and not callable(getattr(model, method, None)):
        raise UsageError(f"{what} it returned a {type(model).__name__}, which has no "
                         f"{method}() for --output {output}")
    return time.perf_counter() - tic


@contextlib.contextmanager
def _bounded_fit_probe(args) -> Iterator[None]:
    """The timing fit before the worlds, stopped at --max-minutes or --timeout (one world's
    fit) and announced when it runs long (issue 35, item 5)."""
    from pacpriv.pac.engine._probe import ProbeTimeoutError, bounded_probe, probe_limit
    limit = probe_limit((args.max_minutes * 60.0, f"--max-minutes {args.max_minutes:g}"),
                        (args.timeout, "--timeout"))
    try:
        with bounded_probe(limit, what="the timed probe (one world's fit, before the others)"):
            yield
    except ProbeTimeoutError as err:
        raise UsageError(str(err)) from None


def check_fit_estimate(args, pool, n_jobs, estimator, output: str) -> None:
    """Time one world's fit (half the pool, as a world sees it) and print the estimate for
    all worlds; refuse above --max-minutes, before any world is fitted (issue 35, item 5).
    A plain fit function is called once here and must return a model that gives --output."""
    import time

    if not (math.isfinite(args.max_minutes) and args.max_minutes > 0):
        raise UsageError(f"--max-minutes must be a positive number; got {args.max_minutes!r}")
    from pacpriv.prediction._worlds import SklearnFit, as_world_fitter

    X, y = pool
    half = slice(0, max(2, len(X) // 2))
    fitter = as_world_fitter(estimator)
    if not isinstance(fitter, SklearnFit):
        if type(fitter).__module__.startswith("pacpriv."):
            return  # torch worlds: trained by the engine or the ensemble, no probe here
        with _bounded_fit_probe(args):
            one = _probe_fit_function(args, fitter, X[half], y[half], output)
    else:
        try:
            from sklearn.base import clone

            one = math.inf
            with _bounded_fit_probe(args):
                for _ in range(2):  # the first fit also pays one-off imports and warm-up
                    tic = time.perf_counter()
                    clone(estimator).fit(X[half], y[half])
                    one = min(one, time.perf_counter() - tic)
        except UsageError:
            raise
        except Exception:  # it fails on the data: the fit reports it, with its world
            return
    check_fit_time(args, one, n_jobs)
