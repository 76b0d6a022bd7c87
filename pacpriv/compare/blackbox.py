"""The black box the PAC rows of a comparison simulate (a spec object; no torch here).

PAC Privacy prices the actual black box, so a *stable* one needs less noise for the same bound.
:class:`StableBlackBox` (the default) is
:class:`pacpriv.mechanisms.stable_logistic.StableLogistic`: the exact minimiser of an
L2-regularised logistic loss with per-example gradient clipping, on the pool's whitened leading
principal directions. Its stabilisers, each a setting here:

* **clipped, noise-free training** (``clip``): per-example gradients bounded by ``c``, so no
  record's influence is an outlier, and the training is run to its exact optimum (no
  trajectory noise, no step-size choice);
* **regularisation** (``l2``): strong convexity bounds every record's influence by
  ``c/(λN)`` (Chaudhuri, Monteleoni & Sarwate, JMLR 2011, Cor. 8), a *proven* range that the
  per-record certificate uses;
* **projection onto a public basis** (``components``): the pool's principal directions are
  public in PAC Privacy's threat model (the adversary knows the pool; the basis never depends
  on the secret subset), and fewer parameters need less total noise;
* **canonical alignment**: the basis has canonical signs (largest entry positive), so the
  output has no sign ambiguity from the eigen-solver.

:class:`SgdBlackBox` is the same training as the DP-SGD rows without noise or clipping (the
comparison's earlier default): the contrast shows what the stabilisers buy.

DP-SGD's threat model (add or remove a record from any dataset) makes a pool-derived basis a
function of the private data, so DP-SGD cannot use it for free; in PAC's threat model (the pool
is known, the subset is secret) it is free. The comparison states each row's secret.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import numpy as np

from pacpriv._validation import check_int, check_real

__all__ = ["BlackBox", "SgdBlackBox", "StableBlackBox", "as_black_box"]


@dataclass(frozen=True)
class StableBlackBox:
    """The stabilised logistic regression (module notes).

    Parameters
    ----------
    l2 : float, default 0.03
        ``λ > 0``.
    clip : float, default 1.0
        Per-example gradient bound ``c > 0``.
    components : "kaiser", "broken_stick", int or None, default "kaiser"
        Principal directions of the pool kept: Kaiser's rule (eigenvalue ``>=`` the mean),
        the broken-stick rule (fewer), a number, or None (all: plain whitening).
    """

    l2: float = 0.03
    clip: float = 1.0
    components: int | str | None = "kaiser"

    name: ClassVar[str] = "stable"

    def __post_init__(self) -> None:
        check_real(self.l2, "l2", low=0.0, low_inclusive=False)
        check_real(self.clip, "clip", low=0.0, low_inclusive=False)
        if not (self.components is None or self.components in ("kaiser", "broken_stick")
                or (isinstance(self.components, int) and self.components >= 1)):
            raise ValueError(f"`components` must be 'kaiser', 'broken_stick', None or an int "
                             f">= 1; got {self.components!r}.")

    def build(self, X: np.ndarray, classes: int, *, sampling_rate: float, **_training: Any):
        """The mechanism for the scaled pool ``X`` (labels ``0..classes−1``)."""
        from pacpriv.mechanisms.stable_logistic import StableLogistic

        if isinstance(self.components, int):
            check_int(self.components, "components", low=1, high=X.shape[1])
        return StableLogistic.for_pool(X, classes=tuple(range(classes)),
                                       sampling_rate=sampling_rate, l2=self.l2,
                                       clip=self.clip, components=self.components)

    def to_dict(self) -> dict:
        """The settings (JSON)."""
        return {"black_box": self.name, **asdict(self)}


@dataclass(frozen=True)
class SgdBlackBox:
    """The DP-SGD rows' training without noise or clipping (public initialisation and batch
    order), :class:`pacpriv.compare.models.LogisticRegressionMechanism`; needs torch."""

    name: ClassVar[str] = "sgd"

    def build(self, X: np.ndarray, classes: int, *, sampling_rate: float, steps_per_epoch: int,
              epochs: int, learning_rate: float, public_seed: int):
        """The mechanism (the same model and schedule as the DP-SGD rows); its per-record
        trials run as vectorised blocks (:mod:`pacpriv.compare.ensemble_path`)."""
        from pacpriv.compare.ensemble_path import EnsemblePerRecord
        from pacpriv.compare.models import LogisticRegressionMechanism

        return EnsemblePerRecord(LogisticRegressionMechanism(
            n_features=X.shape[1], n_classes=classes, steps_per_epoch=steps_per_epoch,
            epochs=epochs, learning_rate=learning_rate, public_seed=public_seed))

    def to_dict(self) -> dict:
        """The settings (JSON)."""
        return {"black_box": self.name}


BlackBox = StableBlackBox | SgdBlackBox


def as_black_box(black_box: Any) -> StableBlackBox | SgdBlackBox:
    """A black-box spec from a spec or a shorthand (``"stable"``, ``"sgd"``; None: stable).

    Raises
    ------
    ValueError, TypeError
        For anything else.
    """
    if black_box is None or black_box == "stable":
        return StableBlackBox()
    if black_box == "sgd":
        return SgdBlackBox()
    if isinstance(black_box, (StableBlackBox, SgdBlackBox)):
        return black_box
    raise ValueError(f"`black_box` must be a StableBlackBox, an SgdBlackBox, 'stable' or "
                     f"'sgd'; got {black_box!r}.")
