"""PAC-private prediction: answer adaptive queries from ``m`` world models [1]_.

References
----------
.. [1] Y. Zhu, M. Sridhar, S. Devadas. Private Prediction via PAC Privacy. arXiv:2601.14033,
   2026: posterior-tracked noise, ``I(J; Y_1..Y_T) <= Σ_t b_t`` under adaptive queries.
.. [2] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, arXiv:2210.03458, Thm 1 (posterior
   success rate from mutual information) and Thm 3 (Gaussian noise).
"""

from __future__ import annotations

import io
import math
import os
import secrets
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from pacpriv._files import atomic_write
from pacpriv._numbers import format_bound, format_percent
from pacpriv._random import (
    ANSWER_NOISE_STREAM,
    SECRET_STREAM,
    WORLDS_STREAM,
    RNGLike,
    as_seed_sequence,
    hashed_stream,
    seed_to_dict,
)
from pacpriv._validation import check_int, check_real
from pacpriv.exceptions import BudgetExceededError, CheckpointError
from pacpriv.pac.bounds._posterior import posterior_success_rate
from pacpriv.pac.engine._adapters import TorchMechanism
from pacpriv.pac.engine._checkpoint import pool_fingerprint
from pacpriv.pac.engine._options import (
    ExecutionOptions,
    accepts_legacy_execution,
    resolve_execution,
)
from pacpriv.pac.engine._simulate import _check_pool
from pacpriv.pac.samplers import (
    ComplementaryPairsSampler,
    as_sampler,
    callable_fingerprint,
)
from pacpriv.prediction._noise import NOISE_RULES, answer_query
from pacpriv.prediction._state import StateDir
from pacpriv.prediction._worlds import (
    OUTPUTS,
    Worlds,
    as_world_fitter,
    fit_fingerprint,
    fit_worlds,
)
from pacpriv.threat_models import THREAT_MODEL_PREDICTION as THREAT_MODEL

__all__ = ["BUDGET_TOLERANCE", "PrivatePredictor"]

#: Relative slack when comparing the spend with ``total_budget`` (absorbs ``n·b`` round-off; the
#: reported bound always uses the actual spend ``n_answered · per_query_budget``).
BUDGET_TOLERANCE = 1e-12

#: How ``J`` and the noise entropy were drawn (public label in config.json and the report).
SECRET_FROM_OS = "OS entropy (not recorded)"
SECRET_SEEDED = "caller-seeded secret (not for production)"
_SECRET_UNKNOWN = "not recorded by the pacpriv version that wrote this state"


def _output_fingerprint(output) -> Any:
    return output if isinstance(output, str) else callable_fingerprint(output)


class PrivatePredictor:
    """Answer a stream of (adaptive) queries with ``I(J; answers) <= Σ_t b_t`` [1]_.

    ``m`` worlds ``S_1..S_m`` are drawn from the pool by ``sampler`` and one model is fitted per
    world by :func:`pacpriv.pac.simulate` (parallel, checkpointed). A secret index ``J`` is drawn
    uniformly (OS entropy unless ``secret_rng`` is given; never from ``rng``). Each query row
    ``q_t`` is answered with ``y_t = f_J(q_t) + B_t``, ``B_t ~ N(0, Σ_B)`` calibrated to the
    covariance of the world outputs under the current posterior ``p_t`` over worlds, so that
    ``½ ln det(I + C_t Σ_B⁻¹) <= per_query_budget``; then ``p_t`` is updated with the Gaussian
    likelihood. By the chain rule ``I(J; Y_1..Y_T) <= T · per_query_budget`` however the queries
    are chosen [1]_, and any inference about ``J``, e.g. whether a record was in the training
    world, succeeds with probability at most
    ``posterior_success_rate(T · per_query_budget, prior=q)`` [2]_ where ``q`` is the record's
    blind-guess rate (exactly ½ for complementary pairs).

    Parameters
    ----------
    fit : callable, sklearn estimator, EstimatorMechanism or TorchMechanism
        ``fit(subset) -> model`` (or ``fit(subset, rng=generator)``); a scikit-learn estimator
        (cloned and fitted on ``(X, y)``); or the adapters of :mod:`pacpriv.pac.engine._adapters`
        (:class:`~pacpriv.pac.engine.TorchMechanism` trains a module per world; its parameter
        vector is the engine's output). Must be picklable for process backends.
    pool : ndarray of shape (n_records, ...) or tuple of such arrays
        The private data, e.g. ``(X, y)``. Queries have the shape of ``pool[0]``'s rows.
    n_worlds : int
        Number of worlds ``m >= 2`` (even for complementary pairs).
    per_query_budget : float
        MI budget ``b > 0`` in nats spent by every answered query row.
    total_budget : float
        Cap on the cumulative spend (nats), ``>= per_query_budget``.
    sampler : Sampler, str or None, default None
        How worlds are drawn; None = :class:`~pacpriv.pac.ComplementaryPairsSampler` (every record
        in exactly half of the worlds, prior ½).
    output : {"proba", "logits", "value", "label"} or callable, default "proba"
        What a world returns for a query (see :class:`~pacpriv.prediction._worlds.Worlds`).
        A callable must be importable by name (a module-level function) when ``state`` is
        set, since it is pickled into the state directory. ``"label"`` (one-hot votes)
        answers exactly whenever all worlds agree, the usual case
        at small budgets; the noisy answers are not clipped (a noisy probability may leave
        ``[0, 1]``; clipping or argmax afterwards is free post-processing).
    rule : {"anisotropic", "exact-mi", "isotropic"}, default "anisotropic"
        Per-query noise rule (square-root rule, exact-MI water-filling, isotropic).
    state : path or None, default None
        State directory (crash-safe ledger, secret file mode 0600). An existing directory is
        resumed and must belong to the same pool, sampler, fit, worlds, seed and budgets.
        None keeps the state in memory only.
    rng : None, int or SeedSequence, default None
        Seed of the *public* worlds only (None: OS entropy). The world seed derived from it is
        recorded in ``config.json`` and the world masks in ``worlds.npz`` (owner-only, like the
        whole state: ``config.json`` also holds a SHA-256 of the pool, which would confirm
        guesses of a record's value), so ``rng`` is treated as public: ``J`` and the noise
        never derive from it (a public derivative would let anyone search the seed and
        recompute them).
    secret_rng : None, int, SeedSequence or Generator, default None
        Seed of ``J`` and of the noise entropy, for tests and demos only; None (the default,
        and what a deployment must use) draws both from :mod:`secrets`. The seed itself is
        never written; ``J`` and the noise entropy go only to the mode-0600 secret file, and
        the state and the report are marked ``"caller-seeded secret (not for production)"``
        (:attr:`secret_randomness`). It must differ from ``rng``.

    Raises
    ------
    TypeError, ValueError
        For invalid arguments (the message names the argument, the allowed range, the value).
    CheckpointError
        If ``state`` belongs to a different predictor or is corrupt.

    Notes
    -----
    Threat model: the adversary knows the pool, the sampler, the fitting procedure, the world
    models, the budgets and every answer, and chooses each query after seeing the previous
    answers; only ``J`` and the noise are secret. The bound is on the mutual information between
    ``J`` and everything released, so it is certified (no estimation: the world posterior is
    computed exactly), with confidence 1.

    References
    ----------
    .. [1] Zhu, Sridhar & Devadas, Private Prediction via PAC Privacy, arXiv:2601.14033, 2026.
    .. [2] Xiao & Devadas, PAC Privacy, CRYPTO 2023, Thm 1.

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from pacpriv.pac.engine import ExecutionOptions
    >>> from sklearn.naive_bayes import GaussianNB
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> pp = PrivatePredictor(GaussianNB(), (X[:, :3], y), n_worlds=4,
    ...                       per_query_budget=2**-10, total_budget=1.0, rng=0)
    >>> _ = pp.fit(execution=ExecutionOptions(progress=False))
    >>> pp.predict(X[:2, :3]).shape
    (2, 2)
    >>> pp.n_answered
    2
    """

    def __init__(self, fit, pool, *, n_worlds: int, per_query_budget: float,
                 total_budget: float, sampler=None, output: str | Callable = "proba",
                 rule: str = "anisotropic", state: str | os.PathLike | None = None,
                 rng: RNGLike = None, secret_rng: RNGLike = None) -> None:
        # (both None in a predictor opened by load(): it serves, it cannot refit)
        self._fitter: Callable | TorchMechanism | None = as_world_fitter(fit)
        self._pool: np.ndarray | tuple[np.ndarray, ...] | None
        self._pool, n_records = _check_pool(pool)
        self._sampler = ComplementaryPairsSampler() if sampler is None else as_sampler(sampler)
        m = check_int(n_worlds, "n_worlds", low=2)
        if isinstance(self._sampler, ComplementaryPairsSampler) and m % 2:
            raise ValueError(f"`n_worlds` must be even for complementary pairs (every record in "
                             f"exactly half of the worlds); got {m}.")
        b = check_real(per_query_budget, "per_query_budget", low=0.0, low_inclusive=False)
        total = check_real(total_budget, "total_budget", low=b)
        if not (callable(output) or (isinstance(output, str) and output in OUTPUTS)):
            raise ValueError(f"`output` must be one of {OUTPUTS} or a callable (model, X) -> "
                             f"(n, d); got {output!r}.")
        if not isinstance(rule, str) or rule not in NOISE_RULES:
            raise ValueError(f"`rule` must be one of {NOISE_RULES}; got {rule!r}.")
        if isinstance(rng, np.random.Generator):
            raise TypeError("`rng` must be None, an int or a SeedSequence (a Generator cannot be "
                            "stored for a resume); got Generator.")
        self.n_worlds, self.per_query_budget, self.total_budget = m, b, total
        self.output, self.rule = output, rule
        first = self._pool[0] if isinstance(self._pool, tuple) else self._pool
        self.feature_shape = tuple(int(s) for s in first.shape[1:])
        self.n_records = n_records
        self._lock = threading.Lock()
        self._worlds: Worlds | None = None
        self._masks: np.ndarray | None = None
        self._secret_index: int | None = None
        self._noise_entropy: int | None = None
        self._n_answered = 0
        self._log_posterior = np.zeros(m)
        root = as_seed_sequence(rng) if rng is not None else None
        secret_root = None if secret_rng is None else as_seed_sequence(secret_rng,
                                                                       name="secret_rng")
        if root is not None and secret_root is not None and \
                seed_to_dict(root) == seed_to_dict(secret_root):
            raise ValueError("`secret_rng` must differ from `rng`: `rng` seeds the public "
                             "worlds, so a secret drawn from the same seed could be searched "
                             f"for; got the same seed {seed_to_dict(root)} for both.")
        world_seed = (hashed_stream(root, WORLDS_STREAM) if root is not None
                      else np.random.SeedSequence())
        self._secret_root = secret_root
        self._secret_randomness = SECRET_FROM_OS if secret_root is None else SECRET_SEEDED
        fingerprint = self._fingerprint()
        self._state = None if state is None else StateDir(state)
        if self._state is not None and self._state.exists():
            self._state.check_fingerprint(fingerprint)
            stored = self._state.read_config()["world_seed"]
            if root is not None and seed_to_dict(world_seed) != stored:
                raise CheckpointError(
                    f"state directory {str(self._state.path)!r} was created with another seed "
                    "(`rng`); resume with the same seed or with rng=None.")
            world_seed = np.random.SeedSequence(**stored)
            if self._state.secret_path.exists():  # J was drawn: its label stands
                self._secret_randomness = self._state.read_config().get(
                    "secret_randomness", _SECRET_UNKNOWN)
            elif self._state.read_config().get("secret_randomness") != self._secret_randomness:
                self._state.write_config(self._config(fingerprint, world_seed))
            if self._state.is_fitted():
                self._load_fitted(self._state)
        elif self._state is not None:
            self._state.write_config(self._config(fingerprint, world_seed))
        self._world_seed = world_seed

    # -- construction helpers ----------------------------------------------------------------
    def _fingerprint(self) -> dict:
        return {"pool": pool_fingerprint(self._pool), "sampler": self._sampler.to_dict(),
                "fit": fit_fingerprint(self._fitter), "n_worlds": self.n_worlds,
                "per_query_budget": self.per_query_budget, "total_budget": self.total_budget,
                "rule": self.rule, "output": _output_fingerprint(self.output)}

    def _config(self, fingerprint: dict, world_seed) -> dict:
        return {"fingerprint": fingerprint, "world_seed": seed_to_dict(world_seed),
                "n_worlds": self.n_worlds, "per_query_budget": self.per_query_budget,
                "total_budget": self.total_budget, "rule": self.rule,
                "output": self.output if isinstance(self.output, str) else "callable",
                "feature_shape": list(self.feature_shape), "n_records": self.n_records,
                "secret_randomness": self._secret_randomness}

    def _load_fitted(self, st: StateDir) -> Worlds:
        """Read the fitted worlds, the secret and the ledger from the state directory ``st``."""
        import joblib

        arrays = st.read_worlds()
        evaluator = joblib.load(st.evaluator_path)
        worlds = Worlds.load(st.path, arrays, evaluator["output"],
                             evaluator.get("model_factory"))
        self._worlds = worlds
        self._masks = arrays["masks"]
        secret_index, self._noise_entropy = st.read_secret()
        if not 0 <= secret_index < self.n_worlds:
            raise CheckpointError(f"state directory {str(st.path)!r}: corrupt secret file.")
        self._secret_index = secret_index
        self._n_answered, self._log_posterior = st.read_ledger()
        if self._log_posterior.shape != (self.n_worlds,):
            raise CheckpointError(f"state directory {str(st.path)!r}: the ledger's posterior "
                                  f"has {self._log_posterior.size} worlds, not {self.n_worlds}.")
        return worlds

    @classmethod
    def load(cls, state: str | os.PathLike) -> PrivatePredictor:
        """Open a fitted state directory without the pool or the fit function (for serving).

        Raises
        ------
        CheckpointError
            If the directory is not a fitted predictor state, or its secret file is readable
            by others.

        Notes
        -----
        The world models are joblib pickles: only load state directories you created.
        """
        st = StateDir(state)
        config = st.read_config()
        if not st.is_fitted():
            raise CheckpointError(f"state directory {str(st.path)!r} has no fitted worlds yet; "
                                  "run PrivatePredictor(...).fit() (or `pacpriv predict fit`).")
        self = cls.__new__(cls)
        self.n_worlds = int(config["n_worlds"])
        self.per_query_budget = float(config["per_query_budget"])
        self.total_budget = float(config["total_budget"])
        self.rule = config["rule"]
        self.feature_shape = tuple(config["feature_shape"])
        self.n_records = int(config["n_records"])
        self._state, self._lock, self._pool, self._fitter = st, threading.Lock(), None, None
        self._world_seed = np.random.SeedSequence(**config["world_seed"])
        self._secret_root = None  # fitted: the secret is read from the secret file
        self._secret_randomness = config.get("secret_randomness", _SECRET_UNKNOWN)
        self.output = self._load_fitted(st).output
        return self

    def __repr__(self) -> str:
        return (f"PrivatePredictor(n_worlds={self.n_worlds}, per_query_budget="
                f"{self.per_query_budget!r}, total_budget={self.total_budget!r}, rule="
                f"{self.rule!r}, fitted={self.is_fitted}, n_answered={self._n_answered})")

    def __getstate__(self):
        raise TypeError("PrivatePredictor holds the secret world index and cannot be pickled; "
                        "use state=DIR and PrivatePredictor.load(DIR).")

    # -- fitting -------------------------------------------------------------------------------
    @property
    def secret_randomness(self) -> str:
        """How ``J`` and the noise entropy were drawn: ``"OS entropy (not recorded)"``, or
        ``"caller-seeded secret (not for production)"`` when ``secret_rng`` was given."""
        return self._secret_randomness

    @property
    def is_fitted(self) -> bool:
        """Whether the worlds are fitted and ``J`` is drawn."""
        return self._worlds is not None

    @accepts_legacy_execution(names=("n_jobs", "backend", "checkpoint", "progress"))
    def fit(self, *, execution: ExecutionOptions | None = None) -> PrivatePredictor:
        """Fit the ``n_worlds`` world models (parallel, checkpointed) and draw ``J``.

        Parameters
        ----------
        execution : ExecutionOptions, optional
            How the worlds are fitted (:class:`~pacpriv.pac.engine.ExecutionOptions`:
            workers, backend, progress bar, checkpoint); the checkpoint defaults to
            ``<state>/checkpoint`` when ``state`` is set. Never changes the fitted worlds. The
            0.2 keywords ``n_jobs=``, ``backend=``, ``checkpoint=``, ``progress=`` still work
            for one release.

        Returns
        -------
        self
            A no-op when the worlds were already fitted (e.g. a resumed state).

        Raises
        ------
        MechanismError
            If fitting a world fails (names the world index and its seed).
        ValueError
            If the worlds disagree on the classes they saw.
        """
        if self.is_fitted:
            return self
        if self._pool is None or self._fitter is None:  # pragma: no cover - load(): fitted
            raise RuntimeError("this predictor was loaded without a pool and cannot be refitted.")
        execution = resolve_execution(execution)
        with tempfile.TemporaryDirectory(prefix="pacpriv-worlds-") as tmp:
            directory = Path(tmp) if self._state is None else self._state.path
            if execution.checkpoint is None and self._state is not None:
                execution = execution.replace(checkpoint=self._state.path / "checkpoint")
            arrays = fit_worlds(self._fitter, self._pool, n_worlds=self.n_worlds,
                                sampler=self._sampler, world_seed=self._world_seed,
                                directory=directory, execution=execution)
            factory = getattr(self._fitter, "model_factory", None)
            worlds = Worlds.load(directory, arrays, self.output, factory)
        worlds.check_consistent()
        if self._secret_root is not None:  # tests/demos: a seed nothing public derives from
            gen = np.random.default_rng(hashed_stream(self._secret_root, SECRET_STREAM))
            secret_index = int(gen.integers(self.n_worlds))
            noise_seed = hashed_stream(self._secret_root, ANSWER_NOISE_STREAM)
            noise_entropy = int(noise_seed.generate_state(4, np.uint64)[0])
        else:
            secret_index = secrets.randbelow(self.n_worlds)
            noise_entropy = secrets.randbits(128)
        st = self._state
        if st is not None:
            import joblib

            st.write_worlds(arrays)
            buf = io.BytesIO()
            joblib.dump({"output": self.output, "model_factory": factory}, buf)
            atomic_write(st.evaluator_path, buf.getvalue())  # 0600, like every state file
            if st.secret_path.exists():  # a crash after the secret was written: keep it
                secret_index, noise_entropy = st.read_secret()
            else:
                st.write_secret(secret_index, noise_entropy)
            if st.ledger_path.exists():
                self._n_answered, self._log_posterior = st.read_ledger()
            else:
                st.write_ledger(0, np.zeros(self.n_worlds), self.per_query_budget)
        self._worlds, self._masks = worlds, arrays["masks"]
        self._secret_index, self._noise_entropy = secret_index, noise_entropy
        return self

    # -- budget --------------------------------------------------------------------------------
    @property
    def n_answered(self) -> int:
        """Number of query rows answered so far."""
        return self._n_answered

    @property
    def spent(self) -> float:
        """MI spent so far, ``n_answered · per_query_budget`` (nats)."""
        return self._n_answered * self.per_query_budget

    @property
    def remaining(self) -> float:
        """``total_budget − spent`` (nats, >= 0)."""
        return max(0.0, self.total_budget - self.spent)

    @property
    def max_queries(self) -> int:
        """Number of query rows ``total_budget`` allows in all."""
        return math.floor(self.total_budget / self.per_query_budget * (1.0 + BUDGET_TOLERANCE))

    @property
    def log_posterior(self) -> np.ndarray:
        """Current log posterior over worlds (public: computable from the transcript); a copy."""
        return self._log_posterior.copy()

    @property
    def membership_prior(self) -> float:
        """Largest blind-guess rate ``max_i max(q_i, 1 − q_i)``, ``q_i`` = fraction of worlds
        holding record ``i`` (exactly ½ for complementary pairs)."""
        q = self._fitted()[1].mean(axis=0)
        return float(np.max(np.maximum(q, 1.0 - q))) if q.size else 0.5

    def bound_after(self, mi: float) -> float:
        """Membership (and any inference about ``J``) success bound after spending ``mi`` nats."""
        prior = self.membership_prior
        if prior >= 1.0:
            return 1.0
        return float(posterior_success_rate(mi, prior=prior))

    @property
    def membership_bound(self) -> float:
        """Certified bound on membership-inference success after the spend so far.

        ``posterior_success_rate(spent, prior=membership_prior)`` ([PAC] Thm 1), rounded up.
        """
        return self.bound_after(self.spent)

    def _fitted(self) -> tuple[Worlds, np.ndarray, int]:
        """The fitted worlds, their membership masks and the secret index (set together)."""
        if self._worlds is None or self._masks is None or self._secret_index is None:
            raise RuntimeError("the worlds are not fitted yet: call fit() first.")
        return self._worlds, self._masks, self._secret_index

    def _check_fitted(self) -> None:
        self._fitted()

    # -- answering -----------------------------------------------------------------------------
    def check_queries(self, X_queries) -> np.ndarray:
        """Validate a batch of query rows: finite, shape ``(n >= 1, *feature_shape)``.

        Raises
        ------
        TypeError, ValueError
            Naming ``X_queries``, the expected shape and what was received.
        """
        try:
            X = np.asarray(X_queries, dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise TypeError(f"`X_queries` must be a numeric array; got {err}.") from err
        want = ("n", *self.feature_shape)
        if X.ndim != 1 + len(self.feature_shape) or tuple(X.shape[1:]) != self.feature_shape \
                or X.shape[0] < 1:
            raise ValueError(f"`X_queries` must have shape {want} with n >= 1; got {X.shape}.")
        if not np.all(np.isfinite(X)):
            raise ValueError("`X_queries` must be finite; found NaN or inf.")
        return X

    def _refuse(self, n: int) -> None:
        if self._n_answered + n > self.max_queries:
            after = (self._n_answered + n) * self.per_query_budget
            raise BudgetExceededError(
                f"{n} query row(s) at per_query_budget={self.per_query_budget!r} nats would take "
                f"the spend from {self.spent!r} to {after!r}"
                f" > total_budget={self.total_budget!r} nats; {self.max_queries - self._n_answered}"
                " row(s) remain. Nothing was spent."
            )

    def predict(self, X_queries, *, progress: bool = False) -> np.ndarray:
        """Answer one query per row, in order; spend ``per_query_budget`` per row.

        See :meth:`predict_with_budget` for the answers together with the budget state.

        The world models are evaluated on the whole batch at once; only the noise calibration
        and posterior update run row by row. With a state directory, the new spend and
        posterior are written durably before the answers are returned.

        Parameters
        ----------
        X_queries : array_like of shape (n, *feature_shape)
            Query rows (finite).
        progress : bool, default False
            tqdm progress bar over the rows (noise-and-update loop).

        Returns
        -------
        ndarray of shape (n, d), float64
            Noisy outputs ``f_J(q_t) + B_t``.

        Raises
        ------
        BudgetExceededError
            If the batch would take the spend over ``total_budget``; nothing is spent.
        RuntimeError
            If :meth:`fit` was not called.
        TypeError, ValueError
            For malformed queries (before anything is spent).
        """
        return self.predict_with_budget(X_queries, progress=progress)[0]

    def predict_with_budget(self, X_queries, *, progress: bool = False
                            ) -> tuple[np.ndarray, dict]:
        """:meth:`predict`, plus :meth:`budget` taken under the same lock (for servers).

        Returns
        -------
        answers : ndarray of shape (n, d)
        budget : dict
            The budget state right after these answers (no other request in between).
        """
        worlds, _, secret_index = self._fitted()
        X = self.check_queries(X_queries)
        n = X.shape[0]
        with self._lock:
            self._refuse(n)
        outputs = worlds.evaluate(X)  # (m, n, d), outside the lock
        with self._lock, self._state_lock():
            if self._state is not None:  # another process may have answered meanwhile
                self._n_answered, self._log_posterior = self._state.read_ledger()
            self._refuse(n)
            lp, t0 = self._log_posterior, self._n_answered
            answers = np.empty((n, outputs.shape[2]))
            from tqdm.auto import tqdm

            for i in tqdm(range(n), disable=not progress, unit="query", desc="answer"):
                rng = np.random.default_rng(
                    np.random.SeedSequence(self._noise_entropy, spawn_key=(t0 + i,)))
                answers[i], lp, _ = answer_query(
                    outputs[:, i, :], lp, secret_index, mi_budget=self.per_query_budget,
                    rule=self.rule, rng=rng)
            if self._state is not None:
                self._state.write_ledger(t0 + n, lp, self.per_query_budget)
            self._n_answered, self._log_posterior = t0 + n, lp
            budget = self._budget_state()
        return answers, budget

    def world_outputs(self, X_queries) -> np.ndarray:
        """Non-private outputs of every world, shape ``(m, n, d)``: for evaluation only.

        The worlds are public in the threat model (only ``J`` is secret), but these outputs are
        not noised and must not be served: use them to score the private answers against the
        non-private ensemble (their mean over worlds). Spends nothing.
        """
        return self._fitted()[0].evaluate(self.check_queries(X_queries))

    def _state_lock(self):
        import contextlib

        return contextlib.nullcontext() if self._state is None else self._state.locked()

    # -- reporting -----------------------------------------------------------------------------
    def budget(self) -> dict:
        """Public budget state (JSON-serialisable).

        With a state directory, the ledger is read again first (under the directory's lock),
        so the state includes answers given by other processes sharing the directory.
        """
        with self._lock, self._state_lock():
            if self._state is not None and self.is_fitted:
                self._n_answered, self._log_posterior = self._state.read_ledger()
            return self._budget_state()

    def _budget_state(self) -> dict:
        return {
            "n_worlds": self.n_worlds,
            "per_query_budget": self.per_query_budget,
            "total_budget": self.total_budget,
            "spent": self.spent,
            "remaining": self.remaining,
            "n_answered": self._n_answered,
            "max_queries": self.max_queries,
            "membership_prior": self.membership_prior if self.is_fitted else None,
            "membership_bound": self.membership_bound if self.is_fitted else None,
            "bound_kind": "certified (1−γ = 1; exact world posterior, no estimation)",
        }

    def report_section(self) -> dict:
        """Report section (for :func:`pacpriv.report.write_report`): public facts only.

        Worlds, budgets, queries answered, the certified membership bound (rounded up) and the
        threat model in words; never ``J``, the noise seed or any record.
        """
        self._check_fitted()
        d = self.to_dict()
        bound = d["membership_bound"]
        up = format_percent(bound, 4)  # rounded up (safe side)
        rows = [
            ("worlds m", self.n_worlds),
            ("membership prior (best blind guess)", format_bound(d["membership_prior"])),
            ("records in the private pool", self.n_records),
            ("per-query budget b", f"{self.per_query_budget:.6g} nats"),
            ("total budget", f"{self.total_budget:.6g} nats ({self.max_queries} queries)"),
            ("queries answered", self._n_answered),
            ("MI spent (I(J; answers) <= spent)", f"{format_bound(self.spent)} nats"),
            ("noise rule", self.rule),
            ("secret index J and noise", self._secret_randomness),
            ("membership-inference bound", f"{up} — certified (1−γ = 1): exact world "
                                           "posterior, no estimation"),
        ]
        table = "\n".join(["| quantity | value |", "| --- | --- |",
                           *(f"| {k} | {v} |" for k, v in rows)])
        markdown = "\n\n".join([
            f"No adversary can tell whether a record was in the answering model's training "
            f"set with probability above **{up}** after the {self._n_answered} queries "
            "answered so far.",
            table,
        ])
        return {"title": "PAC-private prediction (posterior-tracked worlds)",
                "mechanism": "private-prediction", "threat_model": self._threat_model(),
                "markdown": markdown, "prediction": d,
                "secret_randomness": self._secret_randomness}

    def _threat_model(self) -> str:
        """The threat model, with the secret's actual source (OS entropy or a caller seed)."""
        if self._secret_randomness == SECRET_FROM_OS:
            return THREAT_MODEL
        return THREAT_MODEL.replace(
            "(drawn uniformly from OS entropy)",
            f"(drawn uniformly; here from a {self._secret_randomness}: anyone with that seed "
            "knows J)")

    def to_dict(self) -> dict:
        """Public facts for a report: worlds, budgets, queries answered, bound, threat model,
        and where the secret index came from (``secret_randomness``)."""
        return {
            **self.budget(),
            "rule": self.rule,
            "output": self.output if isinstance(self.output, str) else "callable",
            "n_records": self.n_records,
            "secret_randomness": self._secret_randomness,
            "threat_model": self._threat_model(),
        }
