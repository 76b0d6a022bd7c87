"""HTTP serving of a :class:`~pacpriv.prediction.PrivatePredictor` (FastAPI; extra ``serve``).

Endpoints
---------
``POST /predict``
    Body ``{"rows": [[x_11, ..., x_1k], ...]}`` (one query per row, answered in order). Returns
    ``{"outputs": [[...], ...], "labels": [...], "release": str, "spent": nats,
    "remaining": nats, "n_answered": int, "membership_bound": float, "bound_kind": str,
    "key": {...} | null, "noise": str}``: ``outputs`` are
    :meth:`~pacpriv.prediction.PrivatePredictor.answer`'s (projected onto the probability
    simplex for ``output="proba"``), ``labels`` the predicted classes (classifier outputs only;
    post-processing), ``release`` says what the outputs are, ``noise`` where the noise came
    from ("seeded, not for release" for a caller-seeded predictor). Every row spends the
    per-query budget, charged in the ledger before the answer is released (one transaction).
``GET /budget``
    The public budget state, the calling key's spent, remaining and quota, and the threat
    models in words (global cap vs per-analyst quota).

Analysts. When the ledger holds API keys (``pacpriv serve keys add``), every request needs
``Authorization: Bearer <token>``: 401 without a valid token, 403 for a revoked key, 429 over
the key's quota or the global budget, 429 with ``Retry-After`` over the key's request rate.
The key is checked first, before the body is read, sized or validated, on every path
(``/openapi.json`` and ``/docs`` included, which describe the row shape): an unauthenticated
client learns nothing about the model, and nothing is charged.
``Idempotency-Key: <1–200 printable characters>`` makes a retry return the stored answer and
spend nothing more. Limits (:class:`~pacpriv.prediction._limits.ServeLimits`): a body over
``max_body_bytes`` or with more than ``max_rows`` rows gets 413 before it is parsed; a request
past ``timeout`` gets 503 and its charge is refunded. Malformed rows, and a body nested deeper
than the expected shape (``{"rows": [[...], ...]}``, 3 levels), get 422, nothing spent.

Feature space. Rows are in the space the state's fit read: a state fitted on a preprocessed
pool (``predict fit --standardize`` or ``--missing impute-*``) takes *raw* rows, one value per
column of the pool file in its own units, and maps them with the fit's transformers (the
pool's statistics, stored in the state); a state whose fit encoded text columns
(``--categorical``) answers 422 at ``body.rows`` (use ``pacpriv predict query``); any other
state takes rows of the pool's features, as given to ``fit``.

Nothing secret (the world index, the noise seed, a token) is ever logged or returned; the audit
table holds key ids, times, rows, nats and outcomes, never queries or answers.
"""

# no `from __future__ import annotations`: FastAPI must see the local request model itself

import math
from typing import Any

from pacpriv._optional import import_optional
from pacpriv.exceptions import BudgetExceededError
from pacpriv.prediction._limits import BodyLimit, RateLimiter, ServeLimits, retry_after
from pacpriv.threat_models import THREAT_MODEL_SERVING

__all__ = ["check_exposure", "check_port", "create_app", "serve"]


def _import_fastapi():
    fastapi, _, _, pydantic = (
        import_optional(name, "serving", extra="serve")
        for name in ("fastapi", "fastapi.exceptions", "fastapi.responses", "pydantic"))
    return fastapi, pydantic


def _answer(outputs: list, labels: list | None, release: Any, state: dict, *, key: Any,
            noise: Any) -> dict:
    """The body of a ``POST /predict`` answer: the noisy outputs and the ledger's public
    state after them (spend, remaining budget, the membership bound and its kind)."""
    return {"outputs": outputs, "labels": labels, "release": release,
            **{k: state[k] for k in ("spent", "remaining", "n_answered", "membership_bound",
                                     "bound_kind")},
            "key": key, "noise": noise}


#: The located 422 of a state whose fit encoded text columns: JSON rows of numbers cannot carry
#: their categories, and the encoded features would need the pool's category lists.
_TEXT_STATE = ("this state's fit encoded {n} text column(s) ({how}): /predict takes rows of "
               "numbers in the pool file's raw columns and cannot carry categories; answer "
               "such rows with `pacpriv predict query --queries FILE.csv`")


def _json_numbers_only(rows: Any) -> Any:
    """Refuse JSON true/false, strings and nulls in the rows: pydantic's lax float would read
    them as numbers (true as 1.0) and the answer would be charged."""
    if isinstance(rows, list):
        for i, row in enumerate(rows):
            if isinstance(row, list) and any(
                    isinstance(x, (bool, str)) or x is None for x in row):
                raise ValueError(f"row {i} holds a value that is not a JSON number")
    return rows


def _check_rows(rows: list[list[float]], n_features: int) -> list[list[float]]:
    """Each row has ``n_features`` finite values (else ValueError naming the row)."""
    for i, row in enumerate(rows):
        if len(row) != n_features:
            raise ValueError(f"row {i} has {len(row)} values; expected {n_features}")
        if not all(math.isfinite(x) for x in row):
            raise ValueError(f"row {i} holds a non-finite value (NaN or inf)")
    return rows


async def _invalid_body(request, exc):
    """422 without echoing the input (it may hold NaN, which JSON cannot carry)."""
    from fastapi.responses import JSONResponse

    errors = [{"loc": [str(x) for x in e.get("loc", ())], "msg": str(e.get("msg", "")),
               "type": str(e.get("type", ""))} for e in exc.errors()]
    return JSONResponse(status_code=422, content={"detail": errors})


def _features(fastapi, prep, rows: list) -> Any:
    """The rows as float64, mapped by the fit's preprocessing ``prep`` (the pool's statistics)
    when the state stores one; a row it cannot map gets a located 422."""
    import numpy as np

    X = np.asarray(rows, dtype=np.float64)
    if prep is None:
        return X
    try:
        return prep.transform_numeric(X, where="body.rows")
    except ValueError as err:
        raise fastapi.HTTPException(status_code=422, detail=[{
            "loc": ["body", "rows"], "msg": str(err), "type": "value_error"}]) from None


def create_app(predictor, limits: ServeLimits | None = None) -> Any:
    """A FastAPI application answering queries through ``predictor``.

    Parameters
    ----------
    predictor : PrivatePredictor
        A fitted predictor (e.g. ``PrivatePredictor.load(state_dir)``).
    limits : ServeLimits, optional
        Body size, rows, rate and timeout (the defaults of
        :class:`~pacpriv.prediction._limits.ServeLimits`).

    Returns
    -------
    fastapi.FastAPI

    Raises
    ------
    ImportError
        If FastAPI is not installed (``pip install 'pacpriv[serve]'``).
    RuntimeError
        If the predictor is not fitted.
    """
    fastapi, pydantic = _import_fastapi()
    from pacpriv.prediction._predictor import THREAT_MODEL
    from pacpriv.prediction._reporting import release_of
    from pacpriv.prediction._sklearn import labels_of

    if not predictor.is_fitted:
        raise RuntimeError("the predictor is not fitted: call fit() or use "
                           "PrivatePredictor.load(state_dir).")
    limits = ServeLimits() if limits is None else limits
    n_features = math.prod(predictor.feature_shape)
    prep = getattr(predictor, "preprocessing", None)  # the fit's raw -> feature map, if any
    n_values = n_features if prep is None else prep.n_inputs
    # None for value and callable outputs; by the pool's label names where the state has them
    classes = getattr(predictor, "display_classes", getattr(predictor, "classes_", None))
    release = release_of(predictor.to_dict()["output"])
    auth = _Auth(predictor.ledger.store, RateLimiter(limits.rate, limits.burst))

    class PredictRequest(pydantic.BaseModel):  # type: ignore[name-defined]
        model_config = pydantic.ConfigDict(extra="forbid")
        rows: list[list[float]] = pydantic.Field(
            min_length=1, description=f"query rows, each of {n_values} finite numbers"
            + ("" if prep is None else " (raw values in the pool file's columns and units)"))

        @pydantic.field_validator("rows", mode="before")
        @classmethod
        def _numbers_only(cls, rows: Any) -> Any:
            return _json_numbers_only(rows)

        @pydantic.field_validator("rows")
        @classmethod
        def _shape(cls, rows: list[list[float]]) -> list[list[float]]:
            if prep is not None and prep.has_text:
                raise ValueError(_TEXT_STATE.format(n=sum(prep.text), how=prep.spec.categorical))
            return _check_rows(rows, n_values)

    app = fastapi.FastAPI(
        title="pacpriv private prediction",
        description="PAC-private predictions with posterior-tracked noise. " + THREAT_MODEL,
    )

    app.add_exception_handler(fastapi.exceptions.RequestValidationError, _invalid_body)

    @app.post("/predict")
    def predict(request: PredictRequest, authorization: str | None = fastapi.Header(None),
                idempotency_key: str | None = fastapi.Header(None)) -> dict:
        import time

        from pacpriv.prediction._ledger import Caller

        key_id = auth.check(fastapi, authorization, rate=True)
        if idempotency_key is not None and not (
                0 < len(idempotency_key) <= 200 and idempotency_key.isprintable()):
            raise fastapi.HTTPException(status_code=422, detail="the Idempotency-Key header "
                                        "must be 1 to 200 printable characters")
        X = _features(fastapi, prep, request.rows).reshape(  # the fit's preprocessing, if any
            (len(request.rows), *predictor.feature_shape))
        caller = Caller(key_id=key_id, idempotency_key=idempotency_key,
                        deadline=time.monotonic() + limits.timeout,
                        idempotency_ttl=limits.idempotency_ttl,
                        idempotency_max_rows=limits.idempotency_max_rows)
        try:
            outputs, state = predictor.answer_for(X, caller)
        except Exception as err:
            raise _http_error(fastapi, err) from None
        labels = None if classes is None else labels_of(outputs, classes).tolist()
        return _answer(outputs.tolist(), labels, release, state,
                       key=auth.key_state(key_id, predictor.per_query_budget),
                       noise=predictor.noise_source)

    @app.get("/budget")
    def budget(authorization: str | None = fastapi.Header(None)) -> dict:
        key_id = auth.check(fastapi, authorization, rate=False)
        return {**predictor.budget(), "key": auth.key_state(key_id, predictor.per_query_budget),
                "noise": predictor.noise_source, "threat_model": THREAT_MODEL,
                "threat_model_analysts": THREAT_MODEL_SERVING}

    return _AuthFirst(BodyLimit(app, max_bytes=limits.max_body_bytes, max_rows=limits.max_rows,
                                paths=("/predict",)), auth, fastapi)


class _AuthFirst:
    """ASGI wrapper: with keys, a request without a valid, active key gets 401/403 before
    anything reads, sizes or validates its body (whose errors name the model's row shape)."""

    def __init__(self, app, auth: "_Auth", fastapi) -> None:
        self.app, self.auth, self.fastapi = app, auth, fastapi

    async def __call__(self, scope, receive, send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        import anyio

        found = [v for k, v in scope.get("headers") or () if k.lower() == b"authorization"]
        header = found[-1].decode("latin-1") if len(found) == 1 else None
        try:  # scrypt on a first sight of a token: off the event loop
            await anyio.to_thread.run_sync(
                lambda: self.auth.check(self.fastapi, header, rate=False))
        except self.fastapi.HTTPException as err:
            response = self.fastapi.responses.JSONResponse(
                {"detail": err.detail}, status_code=err.status_code, headers=err.headers)
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _http_error(fastapi, err: Exception):
    """The HTTP error of an exception raised while answering (nothing secret in the detail)."""
    from pacpriv.prediction._ledger import (
        AnswerTimeoutError,
        IdempotencyConflictError,
        IdempotencyExpiredError,
        KeyRevokedError,
    )

    if isinstance(err, BudgetExceededError):
        return fastapi.HTTPException(status_code=429, detail=str(err))
    if isinstance(err, KeyRevokedError):
        return fastapi.HTTPException(status_code=403, detail=str(err))
    if isinstance(err, AnswerTimeoutError):
        return fastapi.HTTPException(status_code=503, detail=str(err),
                                     headers={"Retry-After": "1"})
    if isinstance(err, IdempotencyConflictError):
        return fastapi.HTTPException(status_code=422, detail=str(err))
    if isinstance(err, IdempotencyExpiredError):  # answered and charged once: never twice
        return fastapi.HTTPException(status_code=410, detail=str(err))
    if isinstance(err, ValueError):  # the world models rejected the rows (e.g. overflow to
        # inf); refunded, or raised before anything was charged
        return fastapi.HTTPException(
            status_code=422, detail=f"the models could not evaluate these rows: {err}")
    raise err


class _Auth:
    """Bearer tokens against the ledger's keys (none stored: anonymous, loopback only)."""

    def __init__(self, store, limiter: RateLimiter) -> None:
        from pacpriv.storage import KeyVerifier

        self.store, self.limiter, self.verifier = store, limiter, KeyVerifier()
        self._keyed = False

    def check(self, fastapi, authorization: str | None, *, rate: bool) -> str | None:
        """The caller's key id (None: anonymous, when the ledger holds no key)."""
        from pacpriv.storage import parse_token

        key_id = None
        if self.store is not None and (self._keyed or self.store.has_keys()):
            self._keyed = True  # keys are never deleted (only revoked): stays keyed
            scheme, _, token = (authorization or "").partition(" ")
            parsed = parse_token(token.strip()) if scheme.lower() == "bearer" else None
            record = None if parsed is None else self.store.key(parsed[0])
            if record is None or not self.verifier.verify(record, token.strip()):
                raise fastapi.HTTPException(status_code=401, detail="a valid API key is "
                                            "required: Authorization: Bearer <token>",
                                            headers={"WWW-Authenticate": "Bearer"})
            if not record.active:
                raise fastapi.HTTPException(status_code=403, detail=f"key {record.key_id} "
                                            "is revoked")
            key_id = record.key_id
        if rate:
            wait = self.limiter.take(key_id)
            if wait > 0:
                raise fastapi.HTTPException(
                    status_code=429, detail="request rate over the key's limit; retry later",
                    headers={"Retry-After": retry_after(wait)})
        return key_id

    def key_state(self, key_id: str | None, per_query_budget: float) -> dict | None:
        """The key's spent, remaining and quota (nats), or None for anonymous calls."""
        if key_id is None or self.store is None:
            return None
        record = self.store.key(key_id)
        if record is None:
            return None
        spent = record.rows * per_query_budget
        remaining = None if record.quota is None else max(record.quota - spent, 0.0)
        return {"key_id": key_id, "name": record.name, "spent": spent, "remaining": remaining,
                "quota": record.quota, "n_answered": record.rows}


def check_port(host: str, port: int) -> None:
    """Refuse, before anything is loaded, a ``port`` that cannot be bound on ``host`` (in use,
    or privileged): one line instead of uvicorn's own error after start-up.

    Raises
    ------
    OSError
        Naming the port and why (binds and closes a socket, with ``SO_REUSEADDR`` as uvicorn).
    """
    import errno
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as err:
        raise OSError(f"`host` {host!r} cannot be resolved ({err.strerror}).") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as err:
            why = ("is already in use (another server?); stop it or choose another port"
                   if err.errno == errno.EADDRINUSE else f"cannot be bound ({err.strerror})")
            raise OSError(f"`port` {port} on {host} {why}.") from None


LOOPBACK = ("127.0.0.1", "localhost", "::1")


def check_exposure(host: str, has_keys: bool) -> None:
    """Refuse a non-loopback ``host`` when the ledger holds no API key.

    Raises
    ------
    PermissionError
        Naming the host and the fix (add keys, or serve on 127.0.0.1).
    """
    if has_keys or host in LOOPBACK or host.startswith("127."):
        return
    raise PermissionError(
        f"refusing to serve on {host} without API keys: anyone who can reach the port could "
        "spend the whole privacy budget. Add analysts' keys first (pacpriv serve keys add "
        "--state DIR --name NAME), or serve on --host 127.0.0.1.")


#: Seconds within which a second SIGINT/SIGTERM is the same interrupt delivered twice
SAME_SIGNAL_S = 0.5


def _quiet_server(uvicorn):
    """A ``uvicorn.Server`` that shuts down gracefully on SIGINT and SIGTERM and then returns
    (uvicorn re-raises the signal after its shutdown: a Ctrl-C then ends in a
    ``KeyboardInterrupt`` inside the event loop and a logged traceback)."""
    import contextlib
    import logging
    import signal
    import threading
    import time

    class QuietServer(uvicorn.Server):
        stopped_by: int | None = None
        _first_signal_at = -math.inf

        def __init__(self, config) -> None:
            super().__init__(config)
            logging.getLogger("uvicorn.error").addFilter(self._forced_exit_noise)

        def handle_exit(self, sig, frame) -> None:
            now = time.monotonic()
            if self.stopped_by is not None and now - self._first_signal_at < SAME_SIGNAL_S:
                # one Ctrl-C delivered twice (a terminal signals the process group, and
                # `timeout` forwards it to its child too): not a request to force the exit,
                # which would skip the app's shutdown (twelfth new-user pass, H45)
                return
            if self.stopped_by is None:
                self.stopped_by, self._first_signal_at = sig, now
            super().handle_exit(sig, frame)

        def _forced_exit_noise(self, record: logging.LogRecord) -> bool:
            """Drop the lifespan's CancelledError traceback of a forced exit (a second
            Ctrl-C): the exit is what the user asked for; the CLI says it in one line."""
            return not (self.should_exit and "CancelledError" in record.getMessage())

        @contextlib.contextmanager
        def capture_signals(self):
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            signals = (signal.SIGINT, signal.SIGTERM)
            original = {sig: signal.signal(sig, self.handle_exit) for sig in signals}
            try:
                yield
            finally:
                for sig, handler in original.items():
                    signal.signal(sig, handler)

    return QuietServer


def serve(state, *, host: str = "127.0.0.1", port: int = 8000, ledger: str | None = None,
          limits: ServeLimits | None = None) -> int | None:  # pragma: no cover
    """Load ``state`` and run the app with uvicorn (blocks until SIGINT or SIGTERM).

    The port is checked first (:func:`check_port`), then the state and, off loopback, that the
    ledger holds API keys (:func:`check_exposure`); each fails in one line. A signal shuts the
    server down gracefully (answers in flight finish, their transactions commit).

    Returns
    -------
    int or None
        The first signal that stopped the server (``signal.SIGINT``, ``signal.SIGTERM``), or
        None.
    """
    uvicorn = import_optional("uvicorn", "serving", extra="serve")
    from pacpriv.prediction._predictor import PrivatePredictor

    check_port(host, port)
    predictor = PrivatePredictor.load(state, ledger=ledger)
    check_exposure(host, predictor.ledger.store is not None and predictor.ledger.store.has_keys())
    config = uvicorn.Config(create_app(predictor, limits), host=host, port=port,
                            log_level="info", access_log=False)
    server = _quiet_server(uvicorn)(config)
    server.run()
    if not server.started:
        raise OSError(f"the server could not start on {host}:{port} (see the log above).")
    return None if server.stopped_by is None else int(server.stopped_by)
