"""Other accountants and closed forms on the same axis: membership-inference accuracy.

Every comparator is converted with ``accuracy = ½ + ½·δ(ε = 0)`` (equal priors, TV = δ(0)).
Optional packages (extra ``compare``) are imported lazily; a missing one gives a row that
says so instead of an error. Every row that can run long (exact, and the published
accountants) runs in its own process under a time limit and is killed at the limit; its row
then says "timed out" and the other rows are still computed. Every accuracy is clipped to
[½, 1], its only possible values, and a clipped row says so in its note.
"""

from __future__ import annotations

import contextlib
import io
import math
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from scipy import optimize, special

from pacpriv._numbers import format_bound
from pacpriv._optional import import_optional
from pacpriv._validation import check_int, check_real
from pacpriv.dpsgd._limited import run_limited as _run_limited
from pacpriv.dpsgd.bounds import closed_form_noise_multiplier, membership_inference_accuracy_bound
from pacpriv.dpsgd.labels import COVERS, NEIGHBOURING, ROUNDING, bound_fields, kind_text
from pacpriv.dpsgd.sampling import RandomAllocation, poisson_delta_allowance
from pacpriv.dpsgd.spec import DPSGDSpec, spec_triple

__all__ = [
    "ComparisonRow",
    "ComparisonTable",
    "ckp_accuracy",
    "compare_accountants",
    "gdp_clt_accuracy",
]

BOUND = "bound"
APPROX = "approximation (may understate)"


@dataclass(frozen=True)
class ComparisonRow:
    """One method: accuracy at σ, σ needed for the target, wall time (s), a note, a status.

    ``accuracy`` lies in [½, 1] or is None; ``status`` is ``"ok"``, ``"timed out"``,
    ``"failed"`` or ``"missing"`` (optional package not installed).
    """

    method: str
    kind: str
    accuracy: float | None
    noise_multiplier_for_target: float | None
    wall_time_s: float
    note: str = ""
    status: str = "ok"


@dataclass(frozen=True)
class ComparisonTable:
    """Rows of :class:`ComparisonRow` for one (M, E, σ, target)."""

    steps_per_epoch: int
    epochs: int
    noise_multiplier: float
    target_accuracy: float | None
    rows: list = field(default_factory=list)
    k: int = 1

    def to_dict(self) -> dict:
        """JSON-serialisable dict (strict JSON: every number is finite); every row carries its
        label fields (:func:`pacpriv.dpsgd.labels.bound_fields`: ``bound_kind``, ``covers``,
        ``neighbouring``, ``assumes``)."""
        out = asdict(self)
        out["rows"] = [{**asdict(r), **bound_fields(_row_kind(r)[0], sampling=_row_kind(r)[1])}
                       for r in self.rows]
        out.update(covers=COVERS, neighbouring=NEIGHBOURING)
        return out

    def to_markdown(self) -> str:
        """Markdown table."""
        head = (
            f"M={self.steps_per_epoch}, E={self.epochs}"
            + ("" if self.k == 1 else f", k={self.k}") + ": accuracy at sigma="
            f"{format_bound(self.noise_multiplier, side='up')}"
            + (f"; sigma for target {self.target_accuracy:g}" if self.target_accuracy else "")
        )
        lines = [
            head,
            f"Every accuracy covers {COVERS}; each row assumes the trainer's per-example "
            f"clipping and the batch sampling its kind names. {ROUNDING}.",
            "",
            "| method | kind | accuracy | sigma for target | time (s) | note |",
            "|---|---|---|---|---|---|",
        ]
        for r in self.rows:
            acc = (r.status if r.status != "ok" else "-") if r.accuracy is None else (
                format_bound(r.accuracy, side="up")
            )
            sig = "-" if r.noise_multiplier_for_target is None else (
                format_bound(r.noise_multiplier_for_target, side="up")
            )
            kind, sampling = _row_kind(r)
            kind = f"{kind_text(kind)}, {_SAMPLING_WORD[sampling]} sampling"
            lines.append(
                f"| {r.method} | {kind} | {acc} | {sig} | {r.wall_time_s:.3g} | {r.note} |"
            )
        return "\n".join(lines) + "\n"


_SAMPLING_WORD = {"poisson": "Poisson", "random_allocation": "random-allocation"}


def _row_kind(row: ComparisonRow) -> tuple[str, str]:
    """(kind, sampling) of a row for :mod:`pacpriv.dpsgd.labels`: an approximation, pacpriv's
    certified exact rows, the chi-square closed forms, else a published accountant's bound;
    Poisson where the method or its note says so, else random allocation."""
    text = f"{row.method} {row.note}"
    sampling = "poisson" if "Poisson" in text else "random_allocation"
    if row.kind == APPROX:
        return "approximation", sampling
    if "certified (pacpriv)" in row.method:
        return "certified", sampling
    if row.method.startswith("chi-square"):
        return "closed-form", sampling
    return "accountant", sampling


def ckp_accuracy(noise_multiplier: float, *, steps_per_epoch: int, epochs: int,
                 k: int = 1) -> float:
    """[CKP] leading term, add/remove: ``½ + ½·erf(p√T/(2√2σ))`` with p = k/M, T = M·E.

    Cherubin et al., Closed-Form Bounds for DP-SGD against Record-level Inference, USENIX
    Security 2024. A leading-order term: it can understate the risk.
    """
    x = k * math.sqrt(epochs / steps_per_epoch) / (2.0 * math.sqrt(2.0) * noise_multiplier)
    return 0.5 + 0.5 * math.erf(x)


def gdp_clt_accuracy(noise_multiplier: float, *, steps_per_epoch: int, epochs: int,
                     k: int = 1) -> float:
    """[GDP] CLT: μ = p√T·sqrt(e^{1/σ²} − 1), p = k/M, accuracy ``Φ(μ/2)`` (Dong, Roth, Su
    2022).

    An asymptotic approximation, not a bound (it can understate the risk).
    """
    r = 1.0 / noise_multiplier  # σ² would overflow (σ > 1e154) or underflow (σ < 1e-154)
    inv = 700.0 if r > math.sqrt(700.0) else r * r
    mu = k * math.sqrt(epochs / steps_per_epoch) * math.sqrt(math.expm1(inv))
    return float(special.ndtr(mu / 2.0))


def _poisson_accuracy(sigma: float, steps: int, epochs: int, discretization: float,
                      k: int = 1) -> float:
    pld = import_optional("dp_accounting.pld.privacy_loss_distribution",
                          "the dp-accounting row", extra="compare")

    dist = pld.from_gaussian_mechanism(
        standard_deviation=sigma,
        sensitivity=1.0,
        sampling_prob=k / steps,
        value_discretization_interval=discretization,
        pessimistic_estimate=True,
        use_connect_dots=True,
    )
    n = steps * epochs  # the composition's round-off allowance is charged, as for ε
    tv = dist.self_compose(n).get_delta_for_epsilon(0.0) + poisson_delta_allowance(n)
    return 0.5 + 0.5 * min(1.0, tv)


#: Loss discretisation passed to ``pld-accounting`` (its default is 0.01; see the note above).
FS_PLD_LOSS_DISCRETIZATION = 0.05


def _fs_pld_accuracy(sigma: float, steps: int, epochs: int, k: int = 1) -> float:
    from PLD_accounting import (
        AllocationSchemeConfig,
        BoundType,
        PrivacyParams,
        gaussian_allocation_pld,
    )

    full = gaussian_allocation_pld(
        params=PrivacyParams(sigma=sigma, num_steps=steps, num_epochs=epochs, num_selected=k),
        # The package default (0.01) costs ~10 min per call on 2 cores; 0.05 keeps the
        # dominating (upper) bound valid, only looser, and runs in ~20 s.
        config=AllocationSchemeConfig(loss_discretization=FS_PLD_LOSS_DISCRETIZATION),
        bound_type=BoundType.DOMINATES,
    )
    return 0.5 + 0.5 * float(full.get_delta_for_epsilon(0.0))


def _random_allocation_accuracy(sigma: float, steps: int, epochs: int, k: int = 1) -> float:
    from random_allocation.comparisons.definitions import Direction, PrivacyParams, SchemeConfig
    from random_allocation.random_allocation_scheme.combined import allocation_delta_combined

    eps = 1e-6  # the package needs epsilon > 0; delta(0) <= delta(eps) + expm1(eps)
    with contextlib.redirect_stdout(io.StringIO()):  # the package prints search diagnostics
        delta = allocation_delta_combined(
            PrivacyParams(sigma=sigma, num_steps=steps, num_epochs=epochs, epsilon=eps,
                          num_selected=k),
            SchemeConfig(allocation_direct_alpha_orders=list(range(2, 61))),  # authors' setting
            Direction.BOTH,
        )
    return 0.5 + 0.5 * min(1.0, delta + math.expm1(eps))


def _sigma_by_search(acc: Callable[[float], float], target: float, sigma0: float) -> float:
    """Root of ``acc(σ) = target`` by Brent in log σ, then nudged to the safe side."""
    lo, hi = sigma0 * 0.5, sigma0 * 2.0
    f = lambda ls: acc(math.exp(ls)) - target  # noqa: E731
    root = math.exp(optimize.brentq(f, math.log(lo), math.log(hi), xtol=1e-3))
    while acc(root) > target:
        root *= 1.001
    return root


# --- running one row under a time limit --------------------------------------------------

#: Default time limit of one comparator row, seconds (``timeout=`` / ``--comparator-timeout``).
DEFAULT_TIMEOUT_S = 60.0

def _checked_accuracy(value: Any) -> tuple[float | None, str]:
    """An accuracy clipped to [½, 1] (its only possible values) and a note when clipped."""
    if value is None:
        return None, ""
    acc = float(value)
    if not math.isfinite(acc):
        return None, f"the accountant returned {acc!r}: no value"
    if acc > 1.0:
        return 1.0, f"clipped from {acc!r} to 1 (an accuracy cannot exceed 1)"
    if acc < 0.5:
        return 0.5, f"clipped from {acc!r} to 0.5 (an accuracy cannot be below 1/2)"
    return acc, ""


def _checked_sigma(value: Any) -> tuple[float | None, str]:
    if value is None:
        return None, ""
    sigma = float(value)
    if not (math.isfinite(sigma) and sigma > 0):
        return None, f"sigma search returned {sigma!r}: no value"
    return sigma, ""


def _join(*notes: str) -> str:
    return "; ".join(n for n in notes if n)


# --- the rows ------------------------------------------------------------------------------


def _exact_sigma(target: float, steps: int, epochs: int, k: int = 1) -> float:
    import warnings

    from pacpriv.dpsgd.calibration import calibrate_noise_multiplier

    with warnings.catch_warnings():  # k > 1: the Monte-Carlo lower end is not needed here
        warnings.simplefilter("ignore")
        return calibrate_noise_multiplier(target, steps_per_epoch=steps, epochs=epochs,
                                          k=k).noise_multiplier


def _exact_interval(sigma: float, steps: int, epochs: int,
                    k: int = 1) -> tuple[float, float, float]:
    import warnings

    from pacpriv.dpsgd.exact import exact_membership_inference_accuracy

    with warnings.catch_warnings():  # k > 1: a wide Monte-Carlo lower end is shown as such
        warnings.simplefilter("ignore")
        res = exact_membership_inference_accuracy(sigma, steps_per_epoch=steps, epochs=epochs,
                                                  k=k, tolerance=1e-4 if k == 1 else 5e-3)
    return float(res.lower), float(res.upper), float(res.lower_confidence)


def _poisson_default(sigma: float, steps: int, epochs: int, k: int = 1) -> float:
    return _poisson_accuracy(sigma, steps, epochs, 1e-3, k)


#: key -> (label, accuracy function ``f(σ, M, E, k)``, σ search by default, note).
_PUBLISHED: dict[str, tuple[str, Callable[[float, int, int, int], float], bool, str]] = {
    "poisson-pld": ("Poisson subsampling, dp-accounting PLD", _poisson_default, True,
                    "rate k/M over M·E steps"),
    "fs-pld": ("random allocation, pld-accounting [FS-PLD]", _fs_pld_accuracy, False,
               f"loss_discretization={FS_PLD_LOSS_DISCRETIZATION} (looser, faster)"),
    "random-allocation": ("random allocation, random-allocation pkg",
                          _random_allocation_accuracy, False,
                          "delta(eps=1e-6)+eps; the package's bounds are loose near eps = 0"),
}


def _published_value(fn, sigma, steps, epochs, target, search,
                     k=1) -> tuple[float, float | None]:
    acc = fn(sigma, steps, epochs, k)
    sig = None
    if search:
        sig = _sigma_by_search(lambda s: fn(s, steps, epochs, k), target, sigma)
    return acc, sig


#: The accountant rows, in the table's order (a new row: its name here and its row function).
_METHODS = ("chi-square", "exact", "poisson-pld", "fs-pld", "random-allocation", "ckp",
            "gdp-clt")


def _checked_arguments(spec, noise_multiplier, steps_per_epoch, epochs, target_accuracy,
                       methods, timeout, progress, k) -> tuple:
    """:func:`compare_accountants`'s arguments validated: ``(σ or None, M, E, k, target or
    None, timeout, methods)``."""
    noise_multiplier, steps_per_epoch, epochs = spec_triple(
        spec, noise_multiplier, steps_per_epoch, epochs
    )
    steps = check_int(steps_per_epoch, "steps_per_epoch", low=1)
    n_ep = check_int(epochs, "epochs", low=1)
    if spec is not None and k == 1:
        k = spec.k
    k = RandomAllocation(k).k
    RandomAllocation(k).check(steps)
    if noise_multiplier is None and target_accuracy is None:
        raise ValueError("give `noise_multiplier` or `target_accuracy` (or both).")
    target = None
    if target_accuracy is not None:
        target = check_real(
            target_accuracy, "target_accuracy", low=0.5, high=1.0, low_inclusive=False,
            high_inclusive=False,
        )
    if noise_multiplier is not None:
        noise_multiplier = check_real(noise_multiplier, "noise_multiplier", low=0,
                                      low_inclusive=False)
    if timeout is not None:
        timeout = check_real(timeout, "timeout", low=0, low_inclusive=False)
    if not isinstance(progress, bool):
        raise TypeError(f"`progress` must be a bool; got {type(progress).__name__}.")
    chosen = _METHODS if methods is None else tuple(methods)
    unknown = set(chosen) - set(_METHODS)
    if unknown:
        raise ValueError(f"unknown methods {sorted(unknown)}; choose from {list(_METHODS)}")
    return noise_multiplier, steps, n_ep, k, target, timeout, chosen


def compare_accountants(
    *,
    steps_per_epoch: int | None = None,
    epochs: int | None = None,
    noise_multiplier: float | None = None,
    target_accuracy: float | None = None,
    methods: tuple[str, ...] | None = None,
    search_published: bool = False,
    timeout: float | None = DEFAULT_TIMEOUT_S,
    progress: bool = True,
    spec: DPSGDSpec | None = None,
    k: int = 1,
) -> ComparisonTable:
    """One table of accountants on the membership-inference accuracy axis.

    Parameters
    ----------
    steps_per_epoch, epochs : int
        ``M ≥ 1``, ``E ≥ 1``.
    noise_multiplier : float, optional
        σ at which accuracies are evaluated; default: the exact-calibrated σ for the target.
    target_accuracy : float, optional
        Target in (½, 1) for the "σ for target" column. At least one of σ/target is needed.
    methods : tuple of str, optional
        Subset of ``("chi-square", "exact", "poisson-pld", "fs-pld", "random-allocation",
        "ckp", "gdp-clt")``; default all.
    search_published : bool, default False
        Also search σ for the target with the published random-allocation accountants
        (minutes per evaluation for ``fs-pld``; off by default).
    timeout : float or None, default 60
        Time limit in seconds of each row whose cost grows with M·E or lies in third-party
        code (exact, and the three published accountants); each runs in a fresh process that
        is killed at the limit (its start-up counts against it), and its row says "timed
        out": any limit > 0 ends the call in about rows × limit plus a second or so a row
        (a killed process holds no lock the caller waits on). The three closed forms are
        O(1) formulas evaluated in this process. ``None``: no limit, everything in-process
        (also the case inside a daemonic process, such as a joblib worker, which cannot
        start child processes).
    progress : bool, default True
        A tqdm bar over the rows (stderr) and one line per finished row.
    spec : DPSGDSpec, optional
        Instead of ``noise_multiplier``, ``steps_per_epoch``, ``epochs`` (see ``spec_arguments``);
        its ``k`` is used unless ``k`` is given.
    k : int, default 1
        Steps per record per epoch (k of t): the chi-square and exact rows are k-of-t (exact:
        deterministic upper end, Monte-Carlo lower end), the Poisson, CKP and GDP rows use
        rate ``k/M`` over ``M·E`` steps, the published allocation accountants ``num_selected=k``.

    Returns
    -------
    ComparisonTable
        Every accuracy lies in [½, 1]: an accountant value outside is clipped and the row's
        note says so; a non-finite one becomes ``None`` with a note.

    Raises
    ------
    ValueError
        If M or E < 1, the target is outside (½, 1), σ ≤ 0, ``timeout`` ≤ 0, a method name is
        unknown, or neither σ nor target is given.
    """
    noise_multiplier, steps, n_ep, k, target, timeout, chosen = _checked_arguments(
        spec, noise_multiplier, steps_per_epoch, epochs, target_accuracy, methods, timeout,
        progress, k)
    ordered = [m for m in _METHODS if m in chosen]

    from tqdm.auto import tqdm

    bar = tqdm(total=len(ordered), disable=not progress, unit="row", desc="compare",
               file=sys.stderr)
    rows: list[ComparisonRow] = []

    def add(row: ComparisonRow) -> None:
        acc, acc_note = _checked_accuracy(row.accuracy)
        sig, sig_note = _checked_sigma(row.noise_multiplier_for_target)
        row = ComparisonRow(row.method, row.kind, acc, sig, row.wall_time_s,
                            _join(row.note, acc_note, sig_note), row.status)
        rows.append(row)
        bar.update(1)
        if progress:
            bar.write(f"compare: {row.method}: {row.status} ({row.wall_time_s:.1f} s)",
                      file=sys.stderr)

    with bar:
        exact_sigma, cal = None, ("ok", None, 0.0)
        if target is not None and "exact" in chosen:
            bar.set_postfix_str("exact sigma")
            cal = _run_limited(_exact_sigma, (target, steps, n_ep, k), timeout)
            exact_sigma = cal[1] if cal[0] == "ok" else None
        if noise_multiplier is not None:
            sigma = noise_multiplier
        elif exact_sigma is not None:
            sigma = exact_sigma
        else:
            sigma = float(closed_form_noise_multiplier(target, steps_per_epoch=steps,
                                                       epochs=n_ep, k=k))
        kw = {"steps_per_epoch": steps, "epochs": n_ep, "k": k}
        scheme = "random allocation" if k == 1 else f"random allocation, {k} of {steps}"
        for key in ordered:
            bar.set_postfix_str(key)
            if key == "chi-square":
                add(_closed_row(
                    "chi-square closed form [RA-MIA]" if k == 1 else
                    "chi-square, hypergeometric (k of t)", BOUND,
                    lambda: float(membership_inference_accuracy_bound(sigma, **kw).accuracy),
                    lambda: float(closed_form_noise_multiplier(target, **kw)),
                    target, scheme,
                ))
            elif key == "exact":
                add(_exact_row(sigma, steps, n_ep, cal, target, timeout, k))
            elif key in _PUBLISHED:
                add(_published_row(key, sigma, steps, n_ep, target, search_published, timeout,
                                   k))
            elif key == "ckp":
                add(_closed_row(
                    "CKP leading term [CKP]", APPROX, lambda: ckp_accuracy(sigma, **kw),
                    lambda: k * math.sqrt(n_ep / steps) / (2.0 * float(special.ndtri(target))),
                    target, "Poisson rate k/M, add/remove",
                ))
            else:  # gdp-clt
                add(_closed_row(
                    "GDP CLT [GDP]", APPROX, lambda: gdp_clt_accuracy(sigma, **kw),
                    lambda: 1.0 / math.sqrt(math.log1p(4.0 * float(special.ndtri(target)) ** 2
                                                       * steps / (n_ep * k * k))),
                    target, "Poisson rate k/M",
                ))
    return ComparisonTable(steps, n_ep, sigma, target, rows, k)


def _closed_row(name, kind, acc_fn, sig_fn, target, note) -> ComparisonRow:
    start = time.perf_counter()
    acc = acc_fn()
    sig = sig_fn() if target is not None else None
    return ComparisonRow(name, kind, acc, sig, time.perf_counter() - start, note)


def _exact_row(sigma, steps, epochs, cal, target, timeout, k=1) -> ComparisonRow:
    label = "exact, certified (pacpriv)" if k == 1 else "k of t, certified (pacpriv)"
    cal_status, cal_value, cal_s = cal
    status, value, wall = _run_limited(_exact_interval, (sigma, steps, epochs, k), timeout)
    wall += cal_s
    cal_note = "" if cal_status == "ok" else f"sigma for target: {cal_value}"
    sig = cal_value if (target is not None and cal_status == "ok") else None
    if status != "ok":
        return ComparisonRow(label, BOUND, None, sig, wall, _join(value, cal_note), status)
    lower, upper, conf = value
    conf_note = "" if conf == 1.0 else (
        f" (lower end Monte Carlo, confidence {conf:g}; upper deterministic, via one-of-"
        f"{steps // k} over {k * epochs} epochs)")
    note = (f"interval [{format_bound(lower, side='down')}, {format_bound(upper, side='up')}]"
            f"{conf_note}; random allocation" + ("" if k == 1 else f", {k} of {steps}"))
    return ComparisonRow(label, BOUND, upper, sig, wall, _join(note, cal_note))


def _published_row(key, sigma, steps, epochs, target, search_published, timeout, k=1):
    label, fn, search, note = _PUBLISHED[key]
    search = target is not None and (search or search_published)
    status, value, wall = _run_limited(
        _published_value, (fn, sigma, steps, epochs, target, search, k), timeout
    )
    if status != "ok":
        return ComparisonRow(label, BOUND, None, None, wall, value, status)
    acc, sig = value
    if target is not None and not search:
        note = _join(note, "sigma search skipped (slow)")
    return ComparisonRow(label, BOUND, acc, sig, wall, note)
