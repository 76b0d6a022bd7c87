"""HTTP serving of a :class:`~pacpriv.prediction.PrivatePredictor` (FastAPI; extra ``serve``).

Endpoints
---------
``POST /predict``
    Body ``{"rows": [[x_11, ..., x_1k], ...]}`` (one query per row, answered in order). Returns
    ``{"outputs": [[...], ...], "labels": [...], "release": str, "spent": nats,
    "remaining": nats, "n_answered": int, "membership_bound": float, "bound_kind": str}``:
    ``outputs`` are :meth:`~pacpriv.prediction.PrivatePredictor.answer`'s (projected onto the
    probability simplex for ``output="proba"``), ``labels`` the predicted classes (classifier
    outputs only; ``classes_[argmax]``, post-processing), ``release`` says what the outputs
    are. Every row spends the per-query budget. Malformed rows (wrong length, non-numeric,
    non-finite, empty batch): 422. Over budget: 429 with a message, nothing spent.
``GET /budget``
    The public budget state (:meth:`PrivatePredictor.budget`) and the threat model in words.

Requests are serialised by the predictor's lock (the posterior update is ordered); the handlers
are plain functions that FastAPI runs in its thread pool. Nothing secret (the world index, the
noise seed) is ever logged or returned.
"""

# no `from __future__ import annotations`: FastAPI must see the local request model itself

import math
from typing import Any

from pacpriv._optional import import_optional
from pacpriv.exceptions import BudgetExceededError

__all__ = ["check_port", "create_app"]


def _import_fastapi():
    fastapi, _, _, pydantic = (
        import_optional(name, "serving", extra="serve")
        for name in ("fastapi", "fastapi.exceptions", "fastapi.responses", "pydantic"))
    return fastapi, pydantic


def create_app(predictor) -> Any:
    """A FastAPI application answering queries through ``predictor``.

    Parameters
    ----------
    predictor : PrivatePredictor
        A fitted predictor (e.g. ``PrivatePredictor.load(state_dir)``).

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
    n_features = math.prod(predictor.feature_shape)
    classes = getattr(predictor, "classes_", None)  # None for value and callable outputs
    release = release_of(predictor.to_dict()["output"])

    class PredictRequest(pydantic.BaseModel):  # type: ignore[name-defined]
        model_config = pydantic.ConfigDict(extra="forbid")
        rows: list[list[float]] = pydantic.Field(
            min_length=1, description=f"query rows, each of {n_features} finite numbers")

        @pydantic.field_validator("rows")
        @classmethod
        def _shape(cls, rows: list[list[float]]) -> list[list[float]]:
            for i, row in enumerate(rows):
                if len(row) != n_features:
                    raise ValueError(f"row {i} has {len(row)} values; expected {n_features}")
                if not all(math.isfinite(x) for x in row):
                    raise ValueError(f"row {i} holds a non-finite value (NaN or inf)")
            return rows

    app = fastapi.FastAPI(
        title="pacpriv private prediction",
        description="PAC-private predictions with posterior-tracked noise. " + THREAT_MODEL,
    )

    @app.exception_handler(fastapi.exceptions.RequestValidationError)
    async def _invalid(request, exc):
        # 422 without echoing the input (it may hold NaN, which JSON cannot carry)
        errors = [{"loc": [str(x) for x in e.get("loc", ())], "msg": str(e.get("msg", "")),
                   "type": str(e.get("type", ""))} for e in exc.errors()]
        return fastapi.responses.JSONResponse(status_code=422, content={"detail": errors})

    @app.post("/predict")
    def predict(request: PredictRequest) -> dict:
        import numpy as np

        X = np.asarray(request.rows, dtype=np.float64).reshape(
            (len(request.rows), *predictor.feature_shape))
        try:
            outputs, state = predictor.answer_with_budget(X)
        except BudgetExceededError as err:
            raise fastapi.HTTPException(status_code=429, detail=str(err)) from None
        except ValueError as err:  # the world models rejected the rows (e.g. overflow to inf);
            # raised before anything is spent
            raise fastapi.HTTPException(
                status_code=422, detail=f"the models could not evaluate these rows: {err}"
            ) from None
        labels = None if classes is None else labels_of(outputs, classes).tolist()
        return {
            "outputs": outputs.tolist(),
            "labels": labels,
            "release": release,
            "spent": state["spent"],
            "remaining": state["remaining"],
            "n_answered": state["n_answered"],
            "membership_bound": state["membership_bound"],
            "bound_kind": state["bound_kind"],
        }

    @app.get("/budget")
    def budget() -> dict:
        return {**predictor.budget(), "threat_model": THREAT_MODEL}

    return app


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


def serve(state, *, host: str = "127.0.0.1", port: int = 8000) -> None:  # pragma: no cover
    """Load ``state`` and run the app with uvicorn (blocks until interrupted).

    The port is checked first (:func:`check_port`), then the state; both fail in one line.
    """
    uvicorn = import_optional("uvicorn", "serving", extra="serve")
    from pacpriv.prediction._predictor import PrivatePredictor

    check_port(host, port)

    uvicorn.run(create_app(PrivatePredictor.load(state)), host=host, port=port,
                log_level="info", access_log=False)
