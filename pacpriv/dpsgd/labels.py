"""What a printed DP-SGD number is and whom it covers: one label for text and JSON.

Every accuracy, ε and σ that ``pacpriv dpsgd`` prints is one of

* ``"certified"``: a proven bound on the exact value, whose only slack is discretisation
  and floating-point round-off, both charged on the safe side (a lower end down, an upper end
  up); with a ``confidence`` below 1 where a
  Monte Carlo step gives the end (the k-of-t lower end);
* ``"closed-form"``: a closed-form upper bound (chi-square, Gaussian dominance), looser;
* ``"accountant"``: an upper bound from a published accountant (e.g. dp-accounting's
  pessimistic privacy-loss distribution for Poisson sampling);
* ``"approximation"``: a leading-order or asymptotic term that can understate the risk;

and holds for every record, in the worst case over neighbouring datasets that differ by adding
or removing one record (both directions) [1]_, assuming the trainer's per-example clipping and its
batch sampling (random allocation unless stated).

References
----------
.. [1] Feldman, Shenfeld. Privacy amplification by random allocation. 2025 (the neighbouring
   relation and the dominating pair, both directions of add/remove).
"""

from __future__ import annotations

__all__ = ["BOUND_KINDS", "COVERS", "COVERS_SHORT", "NEIGHBOURING", "ROUNDING", "assumes",
           "bound_fields", "bound_label", "kind_text", "label_rows"]

#: The neighbouring relation of every DP-SGD bound in pacpriv.
NEIGHBOURING = "add/remove one record"

#: Whom every DP-SGD bound covers (full text: JSON and the ``covers`` line).
COVERS = "every record, worst case over neighbouring datasets (add/remove one record)"

#: The same, short enough for a row label.
COVERS_SHORT = "every record, worst case, add/remove one record"

#: Text of each bound kind.
BOUND_KINDS = {
    "certified": "certified (proven bound; discretisation and round-off charged on the safe side)",
    "closed-form": "closed-form upper bound",
    "accountant": "accountant upper bound",
    "approximation": "approximation (may understate)",
}

#: What "certified" means and how every printed number is rounded (the text's footer line).
ROUNDING = ("certified = a proven bound (discretisation and round-off charged on the safe "
            "side); every number is rounded on the safe side (upper ends and noise up, lower "
            "ends down)")

_SHORT = {"certified": "certified", "closed-form": "closed-form upper bound",
          "accountant": "accountant upper bound", "approximation": "approximation (may understate)"}

_SAMPLING = {"random_allocation": "random-allocation batch sampling",
             "poisson": "Poisson batch sampling"}


def _kind(kind: str) -> str:
    if kind not in BOUND_KINDS:
        raise ValueError(f"`kind` must be one of {', '.join(BOUND_KINDS)}; got {kind!r}.")
    return kind


def assumes(sampling: str = "random_allocation") -> str:
    """What the bounds assume of the trainer: its clipping and ``sampling`` (``"poisson"`` or
    ``"random_allocation"``)."""
    return f"the trainer's per-example clipping and {_SAMPLING[sampling]}"


def bound_label(kind: str, *, detail: str = "", confidence: float | None = None) -> str:
    """Short text for a row label: the kind (``detail``, e.g. ``"chi-square"``, after it; a
    ``confidence`` below 1 named), then :data:`COVERS_SHORT`.

    Examples
    --------
    >>> bound_label("closed-form", detail="chi-square")
    'closed-form upper bound, chi-square; every record, worst case, add/remove one record'
    """
    return f"{kind_text(kind, detail=detail, confidence=confidence)}; {COVERS_SHORT}"


def kind_text(kind: str, *, detail: str = "", confidence: float | None = None) -> str:
    """The kind alone, short (a table cell): e.g. ``"certified, PLD"``, ``"certified with
    confidence 0.999"``, ``"closed-form upper bound, chi-square"``."""
    text = _SHORT[_kind(kind)]
    if confidence is not None and confidence < 1.0:
        text += f" with confidence {confidence:g}"
    return f"{text}{', ' + detail if detail else ''}"


def bound_fields(kind: str, *, detail: str = "", confidence: float | None = None,
                 sampling: str = "random_allocation") -> dict:
    """The JSON fields of one number (or one group of numbers of the same kind):
    ``bound_kind``, ``bound`` (the text of the kind), ``covers``, ``neighbouring``,
    ``assumes`` and, below 1, ``confidence``.

    Examples
    --------
    >>> bound_fields("certified")["covers"] == COVERS
    True
    """
    out: dict[str, object] = {
        "bound_kind": _kind(kind), "bound": BOUND_KINDS[kind] + (f", {detail}" if detail else ""),
        "covers": COVERS, "neighbouring": NEIGHBOURING, "assumes": assumes(sampling)}
    if confidence is not None and confidence < 1.0:
        out["confidence"] = confidence
    return out


def label_rows(kind: str, *, detail: str = "", confidence: float | None = None,
               sampling: str = "random_allocation") -> list[tuple[str, str, str]]:
    """The :class:`~pacpriv._display.Summary` rows of :func:`bound_fields`: what the bound is,
    whom it covers (with the neighbouring relation) and what it assumes.

    Examples
    --------
    >>> label_rows("certified", detail="PLD")[1][1] == COVERS
    True
    """
    return [("bound", kind_text(kind, detail=detail, confidence=confidence), "plain"),
            ("covers", COVERS, "plain"), ("assumes", assumes(sampling), "plain")]
