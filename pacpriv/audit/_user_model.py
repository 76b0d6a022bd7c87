"""The user's own model as an audit family: ``pacpriv audit --model module:attr``.

:func:`user_model_family` turns a scikit-learn classifier (instance, class or factory) into an
:class:`~pacpriv.audit.EstimatorModel` and a torch model factory into a
:class:`~pacpriv.audit.DPSGDModel`, after checking what the factory builds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pacpriv._optional import import_torch
from pacpriv._validation import check_int
from pacpriv.audit._families import DPSGDModel, EstimatorModel, ModelFamily

__all__ = ["SizedFactory", "check_classifier", "user_model_family"]


@dataclass(frozen=True)
class SizedFactory:
    """A user's ``factory(n_features, n_classes)`` (or ``factory()``, ``sized=False``) of a
    torch module, bound to the data's sizes (picklable when the factory is: module-level
    functions, or ``file.py`` functions, which :func:`pacpriv.registry.load_object` ships by
    value)."""

    factory: Callable[..., Any]
    n_features: int
    n_classes: int
    sized: bool = True

    def __call__(self):
        """A new module: ``factory(n_features, n_classes)`` (or ``factory()``)."""
        return self.factory(self.n_features, self.n_classes) if self.sized else self.factory()

    def describe(self) -> str:
        """The factory's name (public: the user's code, not data)."""
        return f"{getattr(self.factory, '__name__', type(self.factory).__name__)} (user model)"


def _is_estimator(obj: Any) -> bool:
    return hasattr(obj, "fit") and hasattr(obj, "get_params") and not isinstance(obj, type)


def _required_positional(fn: Callable) -> int | None:
    import inspect

    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    return sum(p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
               for p in params)


def user_model_family(model: Any, *, n_features: int, n_classes: int,
                      noise_multiplier: float | None = None, **training: Any) -> ModelFamily:
    """The audit family that trains a user's model as the target and reference models.

    Parameters
    ----------
    model : scikit-learn estimator, its class, or a callable factory
        * a scikit-learn classifier (instance or class, or a factory returning one), trained
          non-privately (:class:`EstimatorModel`; each model a fresh ``clone``);
        * a torch model factory, ``factory() -> torch.nn.Module`` or
          ``factory(n_features, n_classes) -> torch.nn.Module`` returning logits of shape
          ``(n, n_classes)``, trained by DP-SGD with random allocation
          (:class:`DPSGDModel`; the trainer refuses layers it cannot clip per example).
    n_features, n_classes : int
        The data's sizes (``n_features >= 1``, ``n_classes >= 2``).
    noise_multiplier : float or None
        σ of DP-SGD for a torch model (``0``: the non-private twin, without clipping); ``None``
        or ``0`` for a scikit-learn estimator (trained non-privately).
    **training
        The other :class:`DPSGDModel` fields (``steps_per_epoch``, ``epochs``,
        ``max_grad_norm``, ``learning_rate``, ``target_accuracy``, ``ensemble``).

    Returns
    -------
    EstimatorModel or DPSGDModel

    Raises
    ------
    TypeError
        If ``model`` is neither, or a factory returns something else, takes other arguments
        than none or ``(n_features, n_classes)``, or builds a module that does not map
        ``n_features`` inputs to ``n_classes`` logits.
    pacpriv.exceptions.UserCodeError
        If the factory raises (its message withheld; chained as ``__cause__``).
    ValueError
        A σ given for a scikit-learn estimator, or none for a torch model.

    Examples
    --------
    >>> from sklearn.linear_model import LogisticRegression
    >>> from pacpriv.audit import user_model_family
    >>> user_model_family(LogisticRegression, n_features=4, n_classes=3).describe()
    {'training': 'non-private scikit-learn fit', 'architecture': 'LogisticRegression'}
    """
    check_int(n_features, "n_features", low=1)
    check_int(n_classes, "n_classes", low=2)
    if isinstance(model, type) and hasattr(model, "fit") and hasattr(model, "get_params"):
        model = model()  # an estimator class: its defaults
    factory: Callable[[], Any] | None = None
    if not _is_estimator(model):
        if not callable(model):
            raise TypeError(f"`model` must be a scikit-learn estimator or a callable factory "
                            f"of one or of a torch module; got {type(model).__name__}.")
        arity = _required_positional(model)
        if arity not in (0, 2):
            raise TypeError("a model factory takes no argument or (n_features, n_classes); "
                            f"{getattr(model, '__name__', 'it')} requires {arity}.")
        factory = SizedFactory(model, n_features, n_classes, sized=arity == 2)
        made = _probe(factory, n_features, n_classes)
        if _is_estimator(made):
            model, factory = made, None
    if factory is None:
        check_classifier(model)
        if noise_multiplier not in (None, 0):
            raise ValueError("a scikit-learn estimator is trained non-privately: "
                             f"`noise_multiplier` must be None or 0; got {noise_multiplier!r}.")
        return EstimatorModel(model)
    if noise_multiplier is None:
        raise ValueError("a torch model needs `noise_multiplier` (0 for the non-private twin).")
    if float(noise_multiplier) == 0:
        training = {**training, "max_grad_norm": None}
    return DPSGDModel(factory, noise_multiplier=float(noise_multiplier), **training)


def check_classifier(estimator: Any) -> None:
    """Refuse, before any training, an estimator the attacks cannot score: a declared
    regressor or clusterer, or one without ``predict_proba`` / ``predict_log_proba`` (its
    class name only: public)."""
    from pacpriv.estimators._meta import _estimator_type

    kind = _estimator_type(estimator)
    probabilities = hasattr(estimator, "predict_proba") or hasattr(estimator,
                                                                  "predict_log_proba")
    if kind in (None, "classifier") and probabilities:
        return
    got = type(estimator).__name__ + (" (no predict_proba)" if kind in (None, "classifier")
                                      else f" (a scikit-learn {kind})")
    raise TypeError("`model` must be a classifier with predict_proba (a scikit-learn "
                    "classifier such as LogisticRegression; the attacks score class "
                    "probabilities) or a factory of a torch module returning logits; got "
                    f"{got}.")


def _call_user(factory: Callable[[], Any]) -> Any:
    """``factory()``; an exception in the user's code becomes a :class:`UserCodeError` naming
    its type only (the message may quote data; it stays on ``__cause__``)."""
    from pacpriv.exceptions import UserCodeError

    try:
        return factory()
    except Exception as err:
        raise UserCodeError(f"the model factory raised {type(err).__name__} (its message is "
                            "withheld: it may quote data)") from err


def _probe(factory: Callable[[], Any], n_features: int, n_classes: int) -> Any:
    """Call the factory once (torch's global RNG untouched) and check what it makes: a
    scikit-learn estimator, or a torch module mapping ``n_features`` to ``n_classes``
    logits (checked on two rows of zeros, a public input)."""
    try:
        torch = import_torch("a torch model factory")
    except ImportError:
        torch = None
    if torch is None:
        made = _call_user(factory)
    else:
        with torch.random.fork_rng(devices=[]):
            made = _call_user(factory)
    if _is_estimator(made):
        return made
    if torch is None or not isinstance(made, torch.nn.Module):
        raise TypeError(f"the model factory must return a torch.nn.Module or a scikit-learn "
                        f"estimator; it returned {type(made).__name__}.")
    first = next(iter(made.parameters()), None)
    dtype = first.dtype if first is not None else torch.float32
    try:
        with torch.no_grad():
            out = made(torch.zeros(2, n_features, dtype=dtype))
    except Exception as err:
        raise TypeError(f"the model does not accept rows of {n_features} features "
                        f"({type(err).__name__} on a batch of zeros; it receives rows of "
                        "shape (n, n_features): reshape inside it, e.g. with "
                        "torch.nn.Unflatten).") from err
    if tuple(getattr(out, "shape", ())) != (2, n_classes):
        raise TypeError(f"the model must return logits of shape (n, {n_classes}) for the "
                        f"{n_classes} classes; a batch of 2 rows gave shape "
                        f"{tuple(getattr(out, 'shape', ()))}.")
    return made
