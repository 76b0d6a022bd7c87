"""One noise setting from one of three targets: σ, a membership-inference accuracy, or (ε, δ).

The trainer (:func:`pacpriv.dpsgd.trainer.train_dpsgd`) and
:func:`pacpriv.dpsgd.make_private` take exactly one of ``noise_multiplier``,
``target_accuracy`` and ``target_epsilon`` (with ``delta``); this module turns the target into
σ before any training step, with the certified calibrations of pacpriv:

* ``target_accuracy``: :func:`pacpriv.dpsgd.calibrate_noise_multiplier` (the smallest σ whose
  certified *exact* membership-inference accuracy is at most the target);
* ``target_epsilon``: :func:`pacpriv.dpsgd.calibrate_epsilon` (the smallest σ whose ε at
  ``delta`` from the certified random-allocation PLD is at most the target).

No torch here (:func:`settings_target` validates a torch model and is called by the trainer
only).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from pacpriv._validation import check_int, check_real

__all__ = ["TARGET_KEYWORDS", "noise_for_target", "settings_target"]

#: The keywords that name a privacy target instead of σ.
TARGET_KEYWORDS = ("target_accuracy", "target_epsilon", "delta")


def noise_for_target(
    *,
    noise_multiplier: float | None = None,
    target_accuracy: float | None = None,
    target_epsilon: float | None = None,
    delta: float | None = None,
    steps_per_epoch: int,
    epochs: int,
    k: int = 1,
) -> tuple[float, dict]:
    """σ from exactly one of ``noise_multiplier``, ``target_accuracy``, ``target_epsilon``.

    Parameters
    ----------
    noise_multiplier : float, optional
        σ ≥ 0, used as given.
    target_accuracy : float, optional
        Membership-inference accuracy in (½, 1) (equal priors, worst case over datasets).
    target_epsilon : float, optional
        ε in (0, 50] at ``delta`` (add or remove one record); needs ``delta``.
    delta : float, optional
        δ in (0, 1), only with ``target_epsilon``.
    steps_per_epoch, epochs, k : int
        ``t ≥ 1``, ``E ≥ 1``, ``1 ≤ k ≤ t`` (random allocation, k of t).

    Returns
    -------
    noise_multiplier : float
    targets : dict
        ``{"target_accuracy": a | None, "target_epsilon": e | None, "delta": d | None}``.

    Raises
    ------
    ValueError
        Before any calibration: none or several targets, ``delta`` without
        ``target_epsilon`` (or the reverse), or a value out of range.
    """
    given = [name for name, v in (("noise_multiplier", noise_multiplier),
                                  ("target_accuracy", target_accuracy),
                                  ("target_epsilon", target_epsilon)) if v is not None]
    if len(given) != 1:
        raise ValueError("give exactly one of `noise_multiplier`, `target_accuracy` and "
                         f"`target_epsilon` (with `delta`); got {given or 'none'}.")
    if (target_epsilon is None) != (delta is None):
        raise ValueError("`delta` goes with `target_epsilon` and only with it; got "
                         f"target_epsilon={target_epsilon!r}, delta={delta!r}.")
    t = check_int(steps_per_epoch, "steps_per_epoch", low=1)
    e = check_int(epochs, "epochs", low=1)
    k = check_int(k, "k", low=1, high=t)
    none = {"target_accuracy": None, "target_epsilon": None, "delta": None}
    if noise_multiplier is not None:
        return check_real(noise_multiplier, "noise_multiplier", low=0.0), none
    if target_accuracy is not None:
        a = check_real(target_accuracy, "target_accuracy", low=0.5, high=1.0,
                       low_inclusive=False, high_inclusive=False)
        from pacpriv.dpsgd.calibration import calibrate_noise_multiplier

        with warnings.catch_warnings():  # k > 1: the Monte-Carlo lower end is not used here
            warnings.simplefilter("ignore")
            cal = calibrate_noise_multiplier(a, steps_per_epoch=t, epochs=e, k=k)
        return float(cal.noise_multiplier), {**none, "target_accuracy": a}
    from pacpriv.dpsgd.epsilon_calibration import _EPS_MAX, calibrate_epsilon

    eps = check_real(target_epsilon, "target_epsilon", low=0.0, high=_EPS_MAX,
                     low_inclusive=False)
    d = check_real(delta, "delta", low=0.0, high=1.0, low_inclusive=False,
                   high_inclusive=False)
    r = calibrate_epsilon(eps, d, steps_per_epoch=t, epochs=e, k=k)
    return r.noise_multiplier, {**none, "target_epsilon": eps, "delta": d}


def settings_target(model: Any, spec: Any, settings: dict,
                    allocation_k: Callable[[Any, Any, int], int]) -> dict | None:
    """For :func:`~pacpriv.dpsgd.trainer.train_dpsgd`: replace a ``target_accuracy`` /
    ``target_epsilon`` + ``delta`` in its keyword ``settings`` by ``noise_multiplier``.

    The model is validated first (a calibration can take seconds); ``allocation_k`` is the
    trainer's ``k`` of its ``allocation`` keyword. Returns the targets, or None without one.
    """
    targets = {name: settings.pop(name) for name in TARGET_KEYWORDS if name in settings}
    if not targets:
        return None
    if spec is not None:
        raise TypeError("a spec fixes noise_multiplier: pass `target_accuracy` or "
                        "`target_epsilon` without `spec`, or the spec's σ without a target.")
    from pacpriv.dpsgd.validate import torch, validate_model  # (torch: the caller's)

    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"`model` must be a torch.nn.Module; got {type(model).__name__}.")
    validate_model(model)
    steps = check_int(settings.get("steps_per_epoch"), "steps_per_epoch", low=1)
    sigma, found = noise_for_target(
        noise_multiplier=settings.pop("noise_multiplier", None), **targets,
        steps_per_epoch=steps, epochs=check_int(settings.get("epochs"), "epochs", low=1),
        k=allocation_k(settings.get("allocation"), None, steps))
    settings["noise_multiplier"] = sigma
    return found
