"""Turn ``f(subset) -> array`` into a PAC-private function with a composition ledger.

>>> import numpy as np
>>> from pacpriv.pac.wrapper import pac_private
>>> @pac_private(mi_budget=0.05, total_budget=0.1)
... def mean(subset):
...     return np.clip(subset, 0, 1).mean(axis=0) if len(subset) else np.full(2, 0.5)
>>> pool = np.random.default_rng(0).random((40, 2))
>>> _ = mean.calibrate(pool, n_trials=200, rng=0)
>>> mean(pool[:20]).shape, mean.ledger.spent
((2,), 0.05)

:meth:`PacPrivateFunction.calibrate` runs the PAC engine once (simulate → spectrum →
calibrate, [1]_ Thm 3); every call then releases ``f(subset) + B`` with fresh noise and charges
the plan's MI to a :class:`~pacpriv.pac.bounds.PrivacyLedger` (budgets add; a release over the cap
raises :class:`~pacpriv.exceptions.BudgetExceededError` and records nothing).

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, arXiv:2210.03458, Thm 1, Thm 3.
"""

from __future__ import annotations

import functools
import hashlib
import secrets
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pacpriv._random import RNGLike, as_seed_sequence, seed_to_dict
from pacpriv._validation import check_int
from pacpriv.exceptions import MechanismError, PacprivWarning
from pacpriv.pac._pipeline import measure
from pacpriv.pac._sampling import grid_overhead
from pacpriv.pac.bounds._ledger import PrivacyLedger
from pacpriv.pac.bounds._posterior import posterior_success_rate
from pacpriv.pac.bounds._prior import resolve_membership_prior
from pacpriv.pac.engine._adapters import EstimatorMechanism, TorchMechanism, sort_rows
from pacpriv.pac.engine._mechanism import MechanismExit, call_mechanism, check_output
from pacpriv.pac.engine._options import (
    ExecutionOptions,
    execution_hints,
    refuses_removed,
)
from pacpriv.pac.engine._simulate import SimulationResult, _check_pool
from pacpriv.pac.noise._calibration import NoisePlan, _check_budget
from pacpriv.pac.noise._registry import DEFAULT_RULE, as_rule
from pacpriv.pac.noise._rule import NoiseRule
from pacpriv.pac.release import privatize
from pacpriv.pac.samplers import as_sampler
from pacpriv.pac.spectrum._covariance import OutputSpectrum

__all__ = ["PacPrivateFunction", "from_estimator", "from_torch", "pac_private", "sort_rows"]


def _canonical_rows(a: np.ndarray) -> np.ndarray | list:
    """Rows of ``a`` in a form whose bytes do not depend on the numeric dtype or on -0.0."""
    if a.dtype.kind in "biuf":
        return np.ascontiguousarray(a, dtype=np.float64) + 0.0  # + 0.0: -0.0 -> 0.0
    if a.dtype.kind == "c":
        return np.ascontiguousarray(a, dtype=np.complex128) + 0.0
    return [repr(row.tolist() if isinstance(row, np.ndarray) else row) for row in a]


def _row_digests(data: Any, key: bytes, row_shapes: tuple | None = None
                 ) -> tuple[np.ndarray, tuple] | None:
    """Keyed BLAKE2b digest of each record of ``data`` (an array or a tuple of arrays).

    Returns ``(digests, row_shapes)`` (``digests``: array of dtype ``S16``), or None if
    ``data`` does not have the record shape ``row_shapes`` (the shapes of one record in each
    array) or is not array-like. Only the 16-byte digests are kept, never the records; the
    per-function random ``key`` makes them useless for matching guessed records outside this
    process.
    """
    try:
        arrays = tuple(np.asarray(a) for a in data) if isinstance(data, tuple) else \
            (np.asarray(data),)
    except (TypeError, ValueError):
        return None
    if any(a.ndim == 0 for a in arrays) or len({a.shape[0] for a in arrays}) != 1:
        return None
    shapes = tuple(a.shape[1:] for a in arrays)
    if row_shapes is not None and shapes != row_shapes:
        return None
    rows = [_canonical_rows(a) for a in arrays]
    digests = []
    for i in range(arrays[0].shape[0]):
        h = hashlib.blake2b(key=key, digest_size=16)
        for r in rows:
            item = r[i]
            h.update(item.encode() if isinstance(item, str) else memoryview(item).cast("B"))
            h.update(b"\x00")
        digests.append(h.digest())
    return np.array(digests, dtype="S16"), shapes


class PacPrivateFunction:
    """A mechanism plus its calibrated noise and a ledger of releases.

    Parameters
    ----------
    func : callable
        ``f(subset) -> array-like of shape (d,)``; gets a ``numpy.random.Generator`` as ``rng=``
        if its signature has one. Must be picklable for process-based ``n_jobs``.
    mi_budget : float
        Budget ``v`` of *one* release, nats, ``> 0``.
    total_budget : float or None
        Cap on the summed budget of all releases (nats); ``None``: no cap.
    rule : NoiseRule or str, default "certified"
        Noise rule: an object of :mod:`pacpriv.pac.noise` (``Certified(confidence=0.99)``,
        ``Algorithm1(c=..., beta=..., output_bound=...)``, ``Isotropic()``, ...) or the name of
        one with its default parameters. ``"certified"`` holds with confidence 0.95 over the
        simulation and clips the release; the plug-in rules are estimates (see :attr:`label`).
    ledger : PrivacyLedger or None
        Share a ledger between several functions releasing about the same secret; default a new
        ``PrivacyLedger(total_budget)``.

    Attributes
    ----------
    plan : NoisePlan or None
        Calibrated noise (None before :meth:`calibrate`).
    spectrum : OutputSpectrum or None
        Estimated output covariance.
    simulation : SimulationResult or None
        Engine output of the calibration (masks, outputs, seeds).
    posterior_success_bound : float or None
        Posterior-success bound of one release, ``posterior_success_rate(plan.mi_claim,
        prior=blind_guess_prior)`` ([1]_ Thm 1).
    membership_prior : float or None
        Inclusion probability ``q`` of the calibration's sampler (declared, or the masks'
        overall rate when estimated).
    blind_guess_prior : float or None
        Prior of the posterior bounds: the best blind guess ``max(q, 1 − q)``, or an upper
        confidence bound on it when the sampler declares no inclusion probability (see
        :func:`pacpriv.pac.bounds.resolve_membership_prior`). Also handed to the ledger.
    prior_explanation : str or None
        One line saying which prior was used and why.
    ledger : PrivacyLedger
    """

    def __init__(
        self,
        func: Callable[..., Any],
        *,
        mi_budget: float,
        total_budget: float | None = None,
        rule: str | NoiseRule = DEFAULT_RULE,
        ledger: PrivacyLedger | None = None,
    ) -> None:
        if not callable(func):
            raise TypeError(f"`func` must be callable; got {type(func).__name__}.")
        self.mi_budget = _check_budget(mi_budget)
        spec = as_rule(rule)
        if ledger is not None and not isinstance(ledger, PrivacyLedger):
            raise TypeError(f"`ledger` must be a PrivacyLedger; got {type(ledger).__name__}.")
        if ledger is not None and total_budget is not None:
            raise ValueError("give either `ledger` or `total_budget`, not both.")
        self.func = func
        self.rule = spec
        self.ledger = ledger if ledger is not None else PrivacyLedger(total_budget)
        cap = self.ledger.total_budget
        if cap is not None and self.mi_budget > cap:
            raise ValueError(
                f"`mi_budget` ({self.mi_budget}) exceeds the total budget ({cap}): every "
                "release would be refused."
            )
        self.plan: NoisePlan | None = None
        self.spectrum: OutputSpectrum | None = None
        self.simulation: SimulationResult | None = None
        self.posterior_success_bound: float | None = None
        self.membership_prior: float | None = None
        self.blind_guess_prior: float | None = None
        self.prior_explanation: str | None = None
        # keyed digests of the calibration pool's records (never the records themselves)
        self._row_key = secrets.token_bytes(16)
        self._pool_digests: np.ndarray | None = None
        self._pool_row_shapes: tuple | None = None
        functools.update_wrapper(self, func, updated=())

    @refuses_removed(execution_hints())
    def calibrate(
        self,
        pool: Any,
        *,
        n_trials: int = 1000,
        sampler: Any = None,
        rng: RNGLike = None,
        execution: ExecutionOptions | None = None,
    ) -> PacPrivateFunction:
        """Simulate ``func`` on random subsets of ``pool`` and calibrate the noise.

        Parameters
        ----------
        pool : ndarray of shape (n_records, ...) or tuple of such arrays
            Data pool the adversary is assumed to know.
        n_trials : int, default 1000
            Simulated subsets, ``>= 2``.
        sampler : Sampler, callable, str or None
            Distribution of the secret subset (None: Poisson-½). A callable should declare
            its ``inclusion_probability``; otherwise the prior is bounded from the masks.
        rng : None, int, SeedSequence or Generator
            Root seed of the simulation (None: fresh OS entropy).
        execution : ExecutionOptions, optional
            How the trials run (:class:`~pacpriv.pac.engine.ExecutionOptions`; default: one
            worker unless a ``joblib.parallel_config`` is active, with a progress bar). The 0.2
            keywords ``n_jobs=``, ``progress=`` and ``options=``
            were removed in 0.4 (a ``TypeError`` naming the replacement).

        Returns
        -------
        PacPrivateFunction
            ``self``, with ``plan``, ``spectrum``, ``simulation`` and
            ``posterior_success_bound`` set.

        Raises
        ------
        TypeError, ValueError
            Invalid arguments (see :func:`pacpriv.pac.engine.simulate`).
        pacpriv.exceptions.MechanismError
            If ``func`` fails or returns a bad output in a trial.
        """
        n_trials = check_int(n_trials, "n_trials", low=2)
        sampler = as_sampler(sampler)
        sim, spectrum, plan = measure(  # the releases are the grid's: its overhead held back
            self.func, pool, mi_budget=self.mi_budget, rule=self.rule,
            n_trials=n_trials, sampler=sampler, rng=rng, execution=execution,
            grid_reserve=True,
        )
        # best blind guess (Thm 1 is per-adversary): declared, or bounded from the masks
        prior = resolve_membership_prior(sampler, sim.masks, n_records=sim.n_records)
        self.simulation, self.spectrum, self.plan = sim, spectrum, plan
        self.membership_prior = prior.inclusion_probability
        self.blind_guess_prior = prior.blind_guess
        self.prior_explanation = prior.explanation
        self.ledger.use_prior(prior.blind_guess)
        self.posterior_success_bound = float(posterior_success_rate(self._charge(),
                                                                    prior=prior.blind_guess))
        digests = _row_digests(_check_pool(pool)[0], self._row_key)
        if digests is not None:
            self._pool_digests, self._pool_row_shapes = np.unique(digests[0]), digests[1]
        return self

    def _check_subset(self, subset: Any) -> None:
        """Warn when ``subset`` holds every pool record, or records that are not in the pool.

        Compares keyed digests of the records only (:func:`_row_digests`); the warnings give
        counts, never values.
        """
        if self._pool_digests is None:
            return
        found = _row_digests(subset, self._row_key, self._pool_row_shapes)
        if found is None:
            warnings.warn(
                "the input of this release does not have the calibration pool's record shape: "
                "the PAC guarantee covers secret subsets of the calibration pool only.",
                PacprivWarning, stacklevel=3)
            return
        digests = found[0]
        foreign = int(np.count_nonzero(~np.isin(digests, self._pool_digests)))
        if foreign:
            warnings.warn(
                f"{foreign} of the {len(digests)} input records are not records of the "
                "calibration pool: the PAC guarantee covers secret subsets of the calibration "
                "pool only.", PacprivWarning, stacklevel=3)
        if len(digests) and np.isin(self._pool_digests, digests).all():
            warnings.warn(
                "this release is on the whole calibration pool: every record's membership is "
                "certain, so the posterior-success bound does not apply to it. Release on a "
                "secret subset drawn like the calibration's sampler.",
                PacprivWarning, stacklevel=3)

    @property
    def noise_std_per_coordinate(self) -> np.ndarray | None:
        """Error bar of every release: the noise std of each output coordinate,
        ``sqrt(diag(Σ_B))`` of shape ``(d,)`` in the output's units (None before calibrate); a
        statistic of the calibration pool, not of the secret subset."""
        return None if self.plan is None else self.plan.noise_std_per_coordinate

    @property
    def label(self) -> str | None:
        """``"certified (1−γ = 0.95)"`` or ``"estimated (plug-in)"`` (None before calibrate)."""
        return None if self.plan is None else self.plan.label

    def __call__(self, subset: Any, *, rng: RNGLike = None, label: str | None = None) -> np.ndarray:
        """Release ``func(subset) + B`` and charge ``plan.mi_claim`` nats (plus the grid's
        overhead, :func:`pacpriv.pac._sampling.grid_overhead`) to the ledger.

        Parameters
        ----------
        subset : array or tuple of arrays
            The secret input: a subset of the calibration pool drawn by the calibration's
            sampler (kept secret). A :class:`~pacpriv.exceptions.PacprivWarning` is issued
            when it holds every record of the pool (membership is then certain and the bound
            does not apply) or records that are not in the pool (the guarantee covers subsets
            of the pool only). Only keyed hashes of the pool's records are kept for this check.
        rng : None, int, SeedSequence or Generator
            Randomness of the noise (and of ``func`` if it takes ``rng``); ``None`` (default)
            draws fresh OS entropy, as a real release must. Seed only for tests and demos, and
            never with the calibration's seed (recorded in ``simulation``): ValueError.
        label : str or None
            Stored with the ledger entry.

        Returns
        -------
        ndarray of shape (d,), float64

        Raises
        ------
        RuntimeError
            If :meth:`calibrate` has not been called.
        pacpriv.exceptions.BudgetExceededError
            If the release would take the ledger over its total budget (``func`` is then not
            run and nothing is recorded).
        pacpriv.exceptions.MechanismError
            If ``func`` calls ``sys.exit`` or raises ``KeyboardInterrupt`` itself (not a
            Ctrl-C); nothing is charged. While ``func`` runs, what it prints goes to standard
            error.

        Warns
        -----
        pacpriv.exceptions.PacprivWarning
            The input holds every calibration record, or records not in the calibration pool.
        """
        if self.plan is None:
            raise RuntimeError(
                f"{type(self).__name__} is not calibrated: call .calibrate(pool, ...) before "
                "releasing."
            )
        if rng is not None and not isinstance(rng, np.random.Generator) and \
                self.simulation is not None and \
                seed_to_dict(as_seed_sequence(rng)) == self.simulation.root_seed:
            raise ValueError("`rng` of a release must differ from the calibration's `rng`: the "
                             "simulation seed is recorded (simulation.root_seed), so a release "
                             "drawn from it could be regenerated; pass None (OS entropy).")
        mi = self._charge()
        if not self.ledger.can_charge(mi):
            self.ledger.charge(mi, label=label)  # raises BudgetExceededError, records nothing
        self._check_subset(subset)
        func_seed, noise_seed = as_seed_sequence(rng).spawn(2)
        try:
            raw = call_mechanism(self.func, subset, rng=func_seed)
        except MechanismExit as err:  # sys.exit / its own KeyboardInterrupt: nothing charged
            raise MechanismError(
                f"{getattr(self.func, '__qualname__', type(self.func).__name__)} {err.what} "
                "during a release; nothing was released or charged.", trial_index=-1, seed={},
            ) from err.__cause__
        value = check_output(raw, None)
        noisy = privatize(value, self.plan, rng=noise_seed)
        self.ledger.charge(mi, label=label)
        return noisy

    def _charge(self) -> float:
        """Nats one release costs: the plan's claim plus the hardened release's grid overhead
        (charged for a seeded release too: at most ``(2d)^{3/2} / 2^40``, on the safe side)."""
        assert self.plan is not None
        return float(self.plan.mi_claim) + grid_overhead(2 * self.plan.dim)  # >= the grid's

    def __repr__(self) -> str:
        state = "calibrated" if self.plan is not None else "not calibrated"
        return (
            f"PacPrivateFunction({getattr(self.func, '__name__', type(self.func).__name__)}, "
            f"mi_budget={self.mi_budget!r}, rule={self.rule.name!r}, {state}, "
            f"ledger={self.ledger!r})"
        )


def pac_private(
    func: Callable[..., Any] | None = None,
    *,
    mi_budget: float,
    total_budget: float | None = None,
    rule: str | NoiseRule = DEFAULT_RULE,
    ledger: PrivacyLedger | None = None,
):
    """Make ``func`` PAC-private; usable as ``@pac_private(mi_budget=0.01)`` or a call.

    Parameters
    ----------
    func : callable, optional
        Mechanism ``f(subset) -> (d,)``; omitted when used as a decorator factory.
    mi_budget, total_budget, rule, ledger :
        See :class:`PacPrivateFunction`.

    Returns
    -------
    PacPrivateFunction, or a decorator returning one.

    References
    ----------
    .. [1] Xiao & Devadas, PAC Privacy, CRYPTO 2023, Thm 3 (noise), §4 (composition).
    """
    def wrap(f: Callable[..., Any]) -> PacPrivateFunction:
        return PacPrivateFunction(
            f, mi_budget=mi_budget, total_budget=total_budget, rule=rule, ledger=ledger
        )

    return wrap if func is None else wrap(func)


def from_estimator(
    estimator: Any,
    attributes: Sequence[str | Callable[[Any], Any]] = ("coef_", "intercept_"),
    *,
    supervised: bool = True,
    canonicalize: Callable[[list[np.ndarray]], Sequence[Any]] | None = None,
) -> EstimatorMechanism:
    """Mechanism that fits ``sklearn.base.clone(estimator)`` and outputs fitted attributes.

    Parameters
    ----------
    estimator : sklearn estimator
        Unfitted template (cloned on every call; the adapter is picklable).
    attributes : sequence of str or callable, default ``("coef_", "intercept_")``
        Fitted attributes, flattened and concatenated (e.g. ``("cluster_centers_",)``). For a
        scikit-learn ``Pipeline``, a plain name is read from the last step, or give a path
        (``"steps[-1].coef_"``, ``"named_steps.clf.coef_"``) or a callable
        ``extract(fitted_model) -> array`` (:func:`pacpriv.pac.engine.fitted_value`).
    supervised : bool, default True
        ``fit(X, y)`` on a subset ``(X, y)``; ``False``: ``fit(X)``.
    canonicalize : callable, optional
        Hook removing superficial randomness, e.g. :func:`sort_rows` for cluster centres.

    Returns
    -------
    EstimatorMechanism
        ``f(subset, *, rng=None) -> ndarray of shape (d,)``; wrap it with :func:`pac_private`.
    """
    if isinstance(attributes, str) or callable(attributes):
        attributes = (attributes,)
    attributes = tuple(attributes)
    if not attributes or not all(isinstance(a, str) or callable(a) for a in attributes):
        raise ValueError("`attributes` must be a non-empty sequence of str or callables; got "
                         f"{attributes!r}.")
    if not hasattr(estimator, "fit") or not hasattr(estimator, "get_params"):
        raise TypeError(
            f"`estimator` must be a scikit-learn estimator; got {type(estimator).__name__}."
        )
    return EstimatorMechanism(
        estimator=estimator, attributes=attributes, supervised=bool(supervised),
        canonicalize=canonicalize,
    )


def from_torch(model_factory: Callable[[], Any], train_fn: Callable[..., Any]) -> TorchMechanism:
    """Mechanism that trains ``model_factory()`` with ``train_fn`` and outputs its parameters.

    Parameters
    ----------
    model_factory : callable
        ``() -> torch.nn.Module`` (initialised under a seed drawn from the call's ``rng``).
    train_fn : callable
        ``(model, subset[, rng=Generator]) -> None or Module``.

    Returns
    -------
    TorchMechanism
        ``f(subset, *, rng=None) -> ndarray of shape (n_parameters,)``. torch is imported when it
        is called, never by ``import pacpriv``.
    """
    if not callable(model_factory) or not callable(train_fn):
        raise TypeError("`model_factory` and `train_fn` must be callable.")
    return TorchMechanism(model_factory=model_factory, train_fn=train_fn)
