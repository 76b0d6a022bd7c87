"""PAC-private prediction: answer adaptive queries from ``m`` world models [1]_.

References
----------
.. [1] Y. Zhu, M. Sridhar, S. Devadas. Private Prediction via PAC Privacy. arXiv:2601.14033,
   2026: posterior-tracked noise, ``I(J; Y_1..Y_T) <= Σ_t b_t`` under adaptive queries.
.. [2] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, arXiv:2210.03458, Thm 1 (posterior
   success rate from mutual information) and Thm 3 (Gaussian noise).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from pacpriv import _json
from pacpriv._random import RNGLike, seed_to_dict
from pacpriv._validation import check_class_labels
from pacpriv.exceptions import CheckpointError
from pacpriv.pac.bounds._ledger import PrivacyLedger
from pacpriv.pac.engine._checkpoint import pool_fingerprint
from pacpriv.pac.engine._options import (
    ExecutionOptions,
    execution_hints,
    refuses_removed,
    resolve_execution,
)
from pacpriv.pac.engine._simulate import _check_pool
from pacpriv.pac.noise._rule import NoiseRule
from pacpriv.pac.samplers import ComplementaryPairsSampler, as_sampler
from pacpriv.prediction._answers import (
    answer_rows,
    check_query_rows,
    project_to_simplex,
)
from pacpriv.prediction._evaluate import Worlds
from pacpriv.prediction._ledger import (
    Caller,
    answer_in_ledger,
    check_recorded_budget,
    read_posterior,
)
from pacpriv.prediction._reporting import BoundCache, BudgetReporting, budget_state
from pacpriv.prediction._seeds import Seeds, draw_secret
from pacpriv.prediction._settings import (
    BUDGET_TOLERANCE,
    Settings,
    check_query_floor,
    output_dim,
)
from pacpriv.prediction._sklearn import EstimatorProtocol
from pacpriv.prediction._state import StateDir
from pacpriv.prediction._worlds import (
    as_world_fitter,
    check_fitter_output,
    check_world_classes,
    fit_fingerprint,
    fit_worlds,
    model_factory_of,
    trains_classifier,
)
from pacpriv.storage import check_location
from pacpriv.threat_models import THREAT_MODEL_PREDICTION as THREAT_MODEL

__all__ = ["BUDGET_TOLERANCE", "THREAT_MODEL", "PrivatePredictor"]


class PrivatePredictor(BudgetReporting, EstimatorProtocol):
    """Answer a stream of (adaptive) queries with ``I(J; answers) <= Σ_t b_t`` [1]_.

    ``m`` worlds ``S_1..S_m`` are drawn from the pool by ``sampler`` and one model is fitted per
    world (by the PAC engine, or all at once by the torch ensemble). A secret index ``J`` is
    drawn uniformly (OS entropy unless ``secret_rng`` is given; never from ``rng``). Each query
    row ``q_t`` is answered with ``y_t = f_J(q_t) + B_t``, ``B_t ~ N(0, Σ_B)`` calibrated to the
    covariance of the world outputs under the current posterior ``p_t`` over worlds, so that
    ``½ ln det(I + C_t Σ_B⁻¹) <= per_query_budget``; then ``p_t`` is updated with the Gaussian
    likelihood. By the chain rule ``I(J; Y_1..Y_T) <= T · per_query_budget`` however the
    queries are chosen [1]_, and any inference about ``J`` with a blind guess <= ``q``, e.g.
    whether a record was in the training world, succeeds with probability at most
    ``posterior_success_rate(T · per_query_budget, prior=q)`` [2]_ where ``q`` is the record's
    blind-guess rate (exactly ½ for complementary pairs). Everything released is a function of
    the ``y_t`` (post-processing), so the bound covers it.

    A scikit-learn estimator where that is sound: :meth:`predict` gives labels (classifier
    outputs) or values, :meth:`predict_proba` probabilities (``output="proba"``), plus
    :attr:`classes_`, :meth:`score`, :meth:`get_params` and :meth:`set_params`. **Every call
    that answers rows spends budget**, ``per_query_budget`` per row: ``predict``,
    ``predict_proba``, ``score`` and :meth:`answer` alike, including the ``score`` calls
    ``cross_val_score`` makes on its test folds (each fold's clone is a separate predictor with
    its own budget and secret world).

    Parameters
    ----------
    fit : callable, sklearn estimator, EstimatorMechanism, TorchMechanism or TorchFit
        ``fit(subset) -> model`` (or ``fit(subset, rng=generator)``); a scikit-learn estimator
        (cloned and fitted on ``(X, y)``); :class:`~pacpriv.prediction.TorchFit` (a model
        factory, a :class:`pacpriv.ensemble.TrainingSpec` and a loss: all worlds trained in one
        vectorised program); or :class:`~pacpriv.pac.engine.TorchMechanism` (a free-form
        training function, one world per engine task). Must be picklable for process backends.
    pool : ndarray of shape (n_records, ...) or tuple of such arrays, optional
        The private data, e.g. ``(X, y)``; or give it to :meth:`fit` (``fit(X, y)``, as
        scikit-learn does). Queries have the shape of ``pool[0]``'s rows.
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
        What a world returns for a query (see :class:`~pacpriv.prediction._evaluate.Worlds`).
        ``"proba"`` releases the noisy probabilities projected onto the probability simplex
        (Euclidean projection: non-negative, summing to 1); ``"logits"`` noisy scores;
        ``"label"`` noisy one-hot votes, answered exactly whenever all worlds agree (the usual
        case at small budgets); ``"value"`` noisy values. A callable ``(model, X) -> (n, d)``
        must be importable by name (a module-level function) when ``state`` is set.
    rule : {"anisotropic", "exact-mi", "isotropic"} or NoiseRule, default "anisotropic"
        Per-query noise rule (square-root rule, exact-MI water-filling, isotropic), by name or
        as the rule object (:class:`~pacpriv.pac.noise.Anisotropic`,
        :class:`~pacpriv.pac.noise.ExactMI`, :class:`~pacpriv.pac.noise.Isotropic`). The
        per-query covariance is exact, so the estimation rules (``Certified``,
        ``Algorithm1``) do not apply.
    state : path or None, default None
        State directory (crash-safe ledger, secret file mode 0600). An existing directory is
        resumed and must belong to the same pool, sampler, fit, worlds, seed and budgets (a
        clone with the same ``state`` resumes it too). None keeps the state in memory only.
    rng : None, int or SeedSequence, default None
        Seed of the *public* worlds only (None: OS entropy). The world seed derived from it is
        recorded in ``config.json`` and the world masks in ``worlds.npz`` (owner-only, like the
        whole state: ``config.json`` also holds a SHA-256 of the pool, which would confirm
        guesses of a record's value), so ``rng`` is treated as public: ``J`` and the noise
        never derive from it.
    secret_rng : None, int, SeedSequence or Generator, default None
        Seed of ``J`` and of the noise entropy, for tests and demos only; None (the default,
        and what a deployment must use) draws both from :mod:`secrets`. The seed itself is
        never written; the state and the report are marked ``"caller-seeded secret (not for
        production)"`` (:attr:`secret_randomness`). It must differ from ``rng``.
    ledger : str, LedgerStore or None, default None
        Where the budget's ledger lives (needs ``state``): None, the state's ``ledger.db``
        (SQLite); ``"postgresql://..."`` (extra ``postgres``) for replicas sharing one budget;
        or an open :class:`pacpriv.storage.LedgerStore`.

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
    ``J`` and everything released; it is certified and exact (no estimation: the world
    posterior is computed exactly). The posterior is updated with the noisy answers before any
    projection.

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
    >>> pp = PrivatePredictor(GaussianNB(), n_worlds=4, per_query_budget=2**-10,
    ...                       total_budget=1.0, rng=0)
    >>> _ = pp.fit(X[:, :3], y, execution=ExecutionOptions(progress=False))
    >>> pp.predict(X[:2, :3]).shape, float(pp.predict_proba(X[:1, :3]).sum().round(12))
    ((2,), 1.0)
    >>> pp.n_answered
    3
    """

    def __init__(self, fit, pool=None, *, n_worlds: int, per_query_budget: float,
                 total_budget: float, sampler=None, output: str | Callable = "proba",
                 rule: str | NoiseRule = "anisotropic", state: str | os.PathLike | None = None,
                 rng: RNGLike = None, secret_rng: RNGLike = None,
                 ledger=None) -> None:
        params = {"fit": fit, "pool": pool, "n_worlds": n_worlds,
                  "per_query_budget": per_query_budget, "total_budget": total_budget,
                  "sampler": sampler, "output": output, "rule": rule, "state": state,
                  "rng": rng, "secret_rng": secret_rng, "ledger": ledger}
        if ledger is not None and state is None:
            raise ValueError("`ledger` needs `state` (the worlds and the secret live in the "
                             "state folder; the ledger holds the spend and the posterior).")
        if isinstance(ledger, (str, os.PathLike)):  # a bad location before any world is fit
            check_location(ledger)
        fitter = as_world_fitter(fit)
        sampler_ = ComplementaryPairsSampler() if sampler is None else as_sampler(sampler)
        settings = Settings.checked(n_worlds=n_worlds, per_query_budget=per_query_budget,
                                    total_budget=total_budget, output=output, rule=rule,
                                    sampler=sampler_)
        check_fitter_output(fitter, output)  # e.g. logits of GaussianNB: before any work
        self._initialise(params, settings, Seeds.from_arguments(rng, secret_rng),
                         fitter=fitter, sampler=sampler_,
                         state=None if state is None else StateDir(state))
        if pool is not None:
            self._bind_pool(pool)

    def _initialise(self, params: dict, settings: Settings, seeds: Seeds, *, fitter, sampler,
                    state: StateDir | None) -> None:
        """The one construction path (``__init__`` and :meth:`load`): sets every attribute."""
        self._params = params
        self._settings, self._seeds = settings, seeds
        self._fitter, self._sampler, self._state = fitter, sampler, state
        self._pool: np.ndarray | tuple[np.ndarray, ...] | None = None
        self._pool_print: dict | None = None
        self.n_records: int | None = None
        self.feature_shape: tuple[int, ...] | None = None
        self._lock = threading.Lock()
        self._ledger = PrivacyLedger(None, scope="predictor")  # rows cap: max_queries
        self._worlds: Worlds | None = None
        self._masks: np.ndarray | None = None
        self._secret_index: int | None = None
        self._noise_entropy: int | None = None
        self._n_answered = 0
        self._log_posterior = np.zeros(settings.n_worlds)
        self._prior, self._bounds = None, None  # float, BoundCache: set by _set_fitted
        self._class_labels: np.ndarray | None = None
        self.preprocessing: Any = None  # fit-time raw -> feature map (a state's; or fit's)
        self.label_names: tuple[str, ...] | None = None  # the pool file's label values

    def _bind_pool(self, pool) -> None:
        """Take the private pool; resume or create the state directory for it."""
        checked, n_records = _check_pool(pool)
        first = checked[0] if isinstance(checked, tuple) else checked
        if isinstance(checked, tuple) and len(checked) == 2 and trains_classifier(
                self._fitter, self._settings.output):  # before any work
            check_class_labels(checked[1], "the label array y of `pool`", "PrivatePredictor")
        self._pool, self.n_records = checked, n_records
        self.feature_shape = tuple(int(s) for s in first.shape[1:])
        self._pool_print = json.loads(_json.dumps(pool_fingerprint(checked)))
        if self._state is None or not self._state.exists():
            self._check_worlds()  # before the state folder is created
        if self._state is not None:
            fingerprint = self._fingerprint()
            self._seeds = self._state.resume(fingerprint, self._config(fingerprint, self._seeds),
                                             self._seeds)
            if self._state.is_fitted():
                self._load_fitted(self._state)
            else:  # a resumed state: its stored world seed
                self._check_worlds()

    def _check_worlds(self) -> None:
        """Every world of a classifier holds every class (public masks, before any fit)."""
        check_world_classes(self._fitter, self._settings.output, self._pool,
                            n_worlds=self.n_worlds, sampler=self._sampler,
                            world_seed=self._seeds.world_seed)

    def _fingerprint(self) -> dict:
        return {"pool": self._pool_print, "sampler": self._sampler.to_dict(),
                "fit": fit_fingerprint(self._fitter), **self._settings.fingerprint()}

    def _config(self, fingerprint: dict, seeds: Seeds) -> dict:
        return {"fingerprint": fingerprint, "world_seed": seed_to_dict(seeds.world_seed),
                **self._settings.to_config(), "feature_shape": list(self.feature_shape or ()),
                "n_records": self.n_records, "secret_randomness": seeds.secret_randomness}

    def _load_fitted(self, st: StateDir, evaluator: dict | None = None) -> None:
        """Read the fitted worlds, the secret and the ledger from the state directory ``st``."""
        self._open_ledger()  # first: it holds the blobs' SHA-256, checked before unpickling
        fitted = st.read_fitted(self.n_worlds, evaluator)
        worlds = Worlds.load(st.path, fitted.arrays, fitted.evaluator["output"],
                             fitted.evaluator.get("model_factory"))
        self._set_fitted(worlds, fitted.arrays["masks"], fitted.secret_index,
                         fitted.noise_entropy)
        self.preprocessing, self.label_names = (fitted.evaluator.get(k) for k in (
            "preprocessing", "label_names"))

    def _set_fitted(self, worlds: Worlds, masks: np.ndarray, secret_index: int,
                    noise_entropy: int) -> None:
        q = np.asarray(masks, dtype=bool).mean(axis=0)
        self._prior = float(np.max(np.maximum(q, 1.0 - q))) if q.size else 0.5
        self._bounds = BoundCache(self.per_query_budget, self._prior, self.max_queries)
        self._worlds, self._masks = worlds, masks
        self._secret_index, self._noise_entropy = secret_index, noise_entropy

    def _open_ledger(self) -> None:
        """Put the budget on the state's ledger store (ledger.db, or ``ledger=``) and read
        the answered count and posterior from it."""
        assert self._state is not None
        store, scope = self._state.open_ledger(self._params.get("ledger"),
                                               self.per_query_budget)
        self._ledger = PrivacyLedger(None, store=store, scope=scope)
        check_recorded_budget(self._ledger, self.per_query_budget, self.total_budget)
        self._sync()

    def _sync(self) -> None:
        """Read the answered count and the posterior from the ledger (other processes')."""
        with self._ledger.transaction() as tx:
            self._n_answered, self._log_posterior = read_posterior(tx, self.n_worlds)

    @property
    def ledger(self) -> PrivacyLedger:
        """The budget's :class:`~pacpriv.pac.bounds.PrivacyLedger` (charge and refund rows; on
        the state's store when ``state`` is set). Its ``spent`` equals :attr:`spent` up to the
        rounding of ``n · b``; the cap is enforced in rows (:attr:`max_queries`)."""
        return self._ledger

    @classmethod
    def load(cls, state: str | os.PathLike, *, ledger=None,
             moved: bool = False) -> PrivatePredictor:
        """Open a fitted state directory without the pool or the fit function (for serving).

        Reads ``config.json`` and builds the predictor through the same initialiser as the
        constructor; the result answers and reports, but cannot refit. ``ledger`` is the
        ledger store when it is not the state's ``ledger.db``: a location
        (``postgresql://...``: replicas share it) or a :class:`pacpriv.storage.LedgerStore`;
        a 0.3 state is migrated (see :mod:`pacpriv.prediction._state`). ``moved=True``
        confirms that the folder is the original state moved to a new place (across file
        systems, or restored): a ``ledger.db`` that is not the file recorded at the old place
        is refused without it, since a copy whose original was deleted would miss the
        original's later answers. A state fitted on a preprocessed pool (``predict fit
        --standardize``) holds its fit's map as :attr:`preprocessing`: :meth:`answer` takes
        rows in the pool's features, so map raw rows with it first.

        Raises
        ------
        CheckpointError
            If the directory is not a fitted predictor state, its secret file is readable
            by others, or it is an unconfirmed move (see ``moved``).

        Notes
        -----
        The world models are joblib pickles: only load state directories you created. Each
        is checked (owner-only, and the SHA-256 the ledger store recorded at fit) before it
        is unpickled.
        """
        st = StateDir(state, moved=moved)
        config = st.read_config()
        if not st.is_fitted():
            raise CheckpointError(f"state directory {str(st.path)!r} has no fitted worlds yet; "
                                  "run PrivatePredictor(...).fit() (or `pacpriv predict fit`).")
        st.open_ledger(ledger, float(config["per_query_budget"]))  # the blobs' SHA-256
        evaluator = st.load_pickle("evaluator.joblib")
        settings = Settings.from_config(config, evaluator["output"])
        params = {"fit": None, "pool": None, "n_worlds": settings.n_worlds,
                  "per_query_budget": settings.per_query_budget,
                  "total_budget": settings.total_budget, "sampler": None,
                  "output": settings.output, "rule": settings.rule, "state": state,
                  "rng": None, "secret_rng": None, "ledger": ledger}
        self = cls.__new__(cls)
        self._initialise(params, settings, Seeds.stored(config), fitter=None, sampler=None,
                         state=st)
        self.feature_shape = tuple(int(s) for s in config["feature_shape"])
        self.n_records = int(config["n_records"])
        self._pool_print = config["fingerprint"]["pool"]
        self._load_fitted(st, evaluator)
        return self

    def __repr__(self) -> str:
        return (f"PrivatePredictor(n_worlds={self.n_worlds}, per_query_budget="
                f"{self.per_query_budget!r}, total_budget={self.total_budget!r}, rule="
                f"{self.rule!r}, fitted={self.is_fitted}, n_answered={self._n_answered})")

    def __reduce__(self):
        if self.is_fitted or self._fitter is None:
            raise TypeError("a fitted PrivatePredictor holds the secret world index and cannot "
                            "be pickled; use state=DIR and PrivatePredictor.load(DIR).")
        return (_rebuild, (type(self), self._params))

    # -- settings --------------------------------------------------------------------------
    n_worlds = property(lambda self: self._settings.n_worlds, doc="Number of worlds ``m``.")
    per_query_budget = property(lambda self: self._settings.per_query_budget,
                                doc="MI spent by each answered row (nats).")
    total_budget = property(lambda self: self._settings.total_budget,
                            doc="Cap on the cumulative spend (nats).")
    output = property(lambda self: self._settings.output, doc="What a world returns.")
    rule = property(lambda self: self._settings.rule, doc="The per-query noise rule.")

    @property
    def secret_randomness(self) -> str:
        """How ``J`` and the noise entropy were drawn: ``"OS entropy (not recorded)"``, or
        ``"caller-seeded secret (not for production)"`` when ``secret_rng`` was given."""
        return self._seeds.secret_randomness

    @property
    def _seeded_noise(self) -> bool:
        from pacpriv.prediction._seeds import SECRET_SEEDED

        return self.secret_randomness == SECRET_SEEDED

    @property
    def noise_source(self) -> str:
        """Where the answers' noise comes from: ``"seeded, not for release"`` when
        ``secret_rng`` was given, else the OS entropy source (see :mod:`pacpriv.prediction`)."""
        from pacpriv.pac._sampling import FROM_OS, SEEDED

        return SEEDED if self._seeded_noise else FROM_OS

    @property
    def is_fitted(self) -> bool:
        """Whether the worlds are fitted and ``J`` is drawn."""
        return self._worlds is not None

    # -- fitting -------------------------------------------------------------------------------
    @refuses_removed(execution_hints())
    def fit(self, X=None, y=None, *, execution: ExecutionOptions | None = None,
            preprocessing=None, label_names=None) -> PrivatePredictor:
        """Fit the ``n_worlds`` world models and draw ``J``.

        Parameters
        ----------
        X, y : array_like, optional
            The private pool, ``(X, y)`` (or ``X`` alone), when it was not given to the
            constructor; given to both, it must be the same pool.
        execution : ExecutionOptions, optional
            How the worlds are fitted (:class:`~pacpriv.pac.engine.ExecutionOptions`). A
            :class:`~pacpriv.prediction.TorchFit` trains all worlds in one vectorised program
            on ``device`` unless ``ensemble=False`` forces one world per engine task (the same
            masks and seeds; parameters equal to float round-off); every other ``fit`` runs
            one world per engine task (workers, backend, progress bar, checkpoint; the
            checkpoint defaults to ``<state>/checkpoint`` when ``state`` is set). Never changes
            which worlds are drawn. The 0.2 keywords ``n_jobs=``, ``backend=``, ``checkpoint=``,
            ``progress=`` were removed in 0.4 (a ``TypeError`` naming the replacement).
        preprocessing : FittedPreprocessing, optional
            The fitted map from raw rows to the pool's features
            (:attr:`pacpriv.datasets.Dataset.transform`), stored with the state (owner-only,
            SHA-256 checked) as :attr:`preprocessing`; ``pacpriv predict query`` and ``serve``
            apply it to raw rows. :meth:`answer` always takes rows in the pool's features.
        label_names : sequence of str, optional
            What the pool's labels ``0 .. k−1`` stand for (``Dataset.target_names``), kept as
            :attr:`label_names`; answers are shown by them (:attr:`display_classes`).

        Returns
        -------
        self
            A no-op when the worlds were already fitted (e.g. a resumed state).

        Raises
        ------
        MechanismError
            If fitting a world fails (names the world index and its seed).
        ValueError
            If the worlds disagree on the classes they saw, or ``X, y`` is another pool than
            the one the predictor holds.
        RuntimeError
            If no pool was given.
        """
        if X is not None:
            self._take_pool(X if y is None else (X, y))
        if self.is_fitted:
            return self
        label_names = None if label_names is None else tuple(map(str, label_names))
        if self._pool is None or self._fitter is None:
            raise RuntimeError("no private pool: pass it to PrivatePredictor(fit, pool, ...) "
                               "or to fit(X, y).")
        execution = resolve_execution(execution)
        labels = self._pool[1] if isinstance(self._pool, tuple) and len(self._pool) > 1 else None
        d = output_dim(self.output, labels)
        if d is not None:  # the per-query floor of the grid release, before any world is fit
            check_query_floor(self.per_query_budget, d, output=str(self.output))
        st = self._state
        with tempfile.TemporaryDirectory(prefix="pacpriv-worlds-") as tmp:
            directory = Path(tmp) if st is None else st.path
            if execution.checkpoint is None and st is not None:
                execution = execution.replace(checkpoint=st.path / "checkpoint")
            arrays = fit_worlds(self._fitter, self._pool, n_worlds=self.n_worlds,
                                sampler=self._sampler, world_seed=self._seeds.world_seed,
                                directory=directory, execution=execution)
            factory = model_factory_of(self._fitter)
            worlds = Worlds.load(directory, arrays, self.output, factory)
        worlds.check_consistent()
        if d is None:  # a callable output or no labels: world 0 says d (on one pool row)
            first = self._pool[0] if isinstance(self._pool, tuple) else self._pool
            d = worlds.dim(np.asarray(first[:1]))
            if d is not None:
                check_query_floor(self.per_query_budget, d,
                                  output=str(getattr(self.output, "__name__", self.output)))
        secret_index, noise_entropy = draw_secret(self._seeds, self.n_worlds)
        if st is not None:  # a secret written before a crash is kept
            secret_index, noise_entropy = st.store_fit(
                arrays, {"output": self.output, "model_factory": factory,
                         **{k: v for k, v in (("preprocessing", preprocessing),
                                              ("label_names", label_names)) if v is not None}},
                (secret_index, noise_entropy))
            self._open_ledger()
        self._set_fitted(worlds, arrays["masks"], secret_index, noise_entropy)
        self.preprocessing, self.label_names = preprocessing, label_names
        return self

    def _take_pool(self, pool) -> None:
        """``fit(X, y)``: bind the pool, or check that it is the one held."""
        if self._pool is None and not self.is_fitted:
            self._bind_pool(pool)
            return
        checked, _ = _check_pool(pool)
        if json.loads(_json.dumps(pool_fingerprint(checked))) != self._pool_print:
            raise ValueError("fit(X, y) got another pool than the one this predictor's worlds "
                             "are drawn from (shapes, dtypes or contents differ); a predictor "
                             "has one pool: build a new one (sklearn.base.clone(pp)).")

    def _fitted(self) -> tuple[Worlds, np.ndarray, int]:
        """The fitted worlds, their membership masks and the secret index (set together)."""
        if self._worlds is None or self._masks is None or self._secret_index is None:
            raise RuntimeError("the worlds are not fitted yet: call fit() first.")
        return self._worlds, self._masks, self._secret_index

    def _classes(self) -> np.ndarray:
        if self._class_labels is None:
            worlds = self._fitted()[0]
            classes = worlds.classes
            if classes is None:  # torch or generic worlds: one class per output coordinate
                probe = np.zeros((1, *(self.feature_shape or ())))
                d = worlds.evaluate(probe).shape[2]
                classes = np.arange(max(d, 2))
            self._class_labels = np.asarray(classes)
        return self._class_labels

    # -- answering -----------------------------------------------------------------------------
    def check_queries(self, X_queries) -> np.ndarray:
        """Validate a batch of query rows: finite, shape ``(n >= 1, *feature_shape)``.

        Raises
        ------
        TypeError, ValueError
            Naming ``X_queries``, the expected shape and what was received (never a value).
        """
        return check_query_rows(X_queries, self.feature_shape or ())

    def answer(self, X_queries, *, progress: bool = False) -> np.ndarray:
        """The released answers, one per row, in order; spend ``per_query_budget`` per row.

        All worlds are evaluated on the whole batch in one call where the models allow it
        (torch worlds, linear scikit-learn models; :class:`~pacpriv.prediction._evaluate.Worlds`);
        only the noise calibration and posterior update run row by row. With a state
        directory, the new spend and posterior are written durably before the answers are
        returned.

        Parameters
        ----------
        X_queries : array_like of shape (n, *feature_shape)
            Query rows (finite).
        progress : bool, default False
            tqdm progress bar over the rows (noise-and-update loop).

        Returns
        -------
        ndarray of shape (n, d), float64
            ``f_J(q_t) + B_t``; with ``output="proba"`` projected onto the probability
            simplex (non-negative rows summing to 1).

        Raises
        ------
        BudgetExceededError
            If the batch would take the spend over ``total_budget``; nothing is spent.
        RuntimeError
            If :meth:`fit` was not called.
        TypeError, ValueError
            For malformed queries, or outputs the worlds cannot give (before anything is
            spent).
        """
        return self._answer(X_queries, progress=progress, with_budget=False)[0]

    def answer_with_budget(self, X_queries, *, progress: bool = False
                           ) -> tuple[np.ndarray, dict]:
        """:meth:`answer`, plus :meth:`budget` taken under the same lock (for servers).

        Parameters
        ----------
        X_queries : array_like of shape (n, *feature_shape)
        progress : bool, default False

        Returns
        -------
        answers : ndarray of shape (n, d)
        budget : dict
            The budget state right after these answers (no other request in between).
        """
        answers, budget = self._answer(X_queries, progress=progress, with_budget=True)
        assert budget is not None
        return answers, budget

    def predict_with_budget(self, X_queries, *, progress: bool = False
                            ) -> tuple[np.ndarray, dict]:
        """Deprecated name of :meth:`answer_with_budget` (removed in 0.4)."""
        warnings.warn("PrivatePredictor.predict_with_budget is deprecated; use "
                      "answer_with_budget (predict now gives labels; removed in 0.4).",
                      DeprecationWarning, stacklevel=2)
        return self.answer_with_budget(X_queries, progress=progress)

    def _answer(self, X_queries, *, progress: bool, with_budget: bool,
                caller: Caller | None = None) -> tuple[np.ndarray, dict | None]:
        worlds, _, secret_index = self._fitted()
        X = self.check_queries(X_queries)
        outputs = worlds.evaluate(X)  # (m, n, d), outside the lock
        assert self._noise_entropy is not None
        noise_entropy = self._noise_entropy

        def compute(first: int, log_posterior: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            return answer_rows(outputs, log_posterior, secret_index=secret_index,
                               noise_entropy=noise_entropy, first_index=first,
                               mi_budget=self.per_query_budget, rule=self.rule,
                               progress=progress, seeded=self._seeded_noise)

        budget = None
        with self._lock:  # one transaction per answer; across processes: the store's lock
            answers, self._n_answered, self._log_posterior = answer_in_ledger(
                self._ledger, X, per_query_budget=self.per_query_budget,
                total_budget=self.total_budget, max_queries=self.max_queries,
                n_worlds=self.n_worlds, d=outputs.shape[2], caller=caller or Caller(),
                compute=compute)
            if with_budget:
                budget = budget_state(self)
        if self.output == "proba":  # post-processing: the posterior used the raw answers
            answers = project_to_simplex(answers)
        return answers, budget

    def answer_for(self, X_queries, caller: Caller) -> tuple[np.ndarray, dict]:
        """:meth:`answer_with_budget` for a served request: the analyst's key id (quota,
        revocation), an ``Idempotency-Key`` (a retry returns the stored answer and spends
        nothing) and a deadline (past it, the charge is refunded and
        :class:`~pacpriv.prediction._ledger.AnswerTimeoutError` raised)."""
        answers, budget = self._answer(X_queries, progress=False, with_budget=True,
                                       caller=caller)
        assert budget is not None
        return answers, budget

    def world_outputs(self, X_queries) -> np.ndarray:
        """Non-private outputs of every world, shape ``(m, n, d)``: for evaluation only.

        The worlds are public in the threat model (only ``J`` is secret), but these outputs are
        not noised and must not be served: use them to score the private answers against the
        non-private ensemble (their mean over worlds). Spends nothing.
        """
        return self._fitted()[0].evaluate(self.check_queries(X_queries))

    def _state_lock(self):
        return contextlib.nullcontext()


def _rebuild(cls: type, params: dict) -> PrivatePredictor:
    """Unpickle an unfitted predictor: its constructor, with the same arguments."""
    return cls(**params)
