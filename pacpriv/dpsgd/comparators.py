"""Other accountants and closed forms on the same axis: membership-inference accuracy.

Every comparator is converted with ``accuracy = ½ + ½·δ(ε = 0)`` (equal priors, TV = δ(0)).
Optional packages (extra ``compare``) are imported lazily; a missing one gives a row that
says so instead of an error.
"""

from __future__ import annotations

import contextlib
import io
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from scipy import optimize, special

from pacpriv._validation import check_int, check_real
from pacpriv.dpsgd.bounds import closed_form_noise_multiplier, membership_inference_accuracy_bound

__all__ = [
    "ComparisonRow",
    "ComparisonTable",
    "ckp_accuracy",
    "compare_accountants",
    "gdp_clt_accuracy",
]

_MISSING = "not installed (pip install pacpriv[compare])"
BOUND = "bound"
APPROX = "approximation (may understate)"


@dataclass(frozen=True)
class ComparisonRow:
    """One method: accuracy at σ, σ needed for the target, wall time (s), and a note."""

    method: str
    kind: str
    accuracy: float | None
    noise_multiplier_for_target: float | None
    wall_time_s: float
    note: str = ""


@dataclass(frozen=True)
class ComparisonTable:
    """Rows of :class:`ComparisonRow` for one (M, E, σ, target)."""

    steps_per_epoch: int
    epochs: int
    noise_multiplier: float
    target_accuracy: float | None
    rows: list = field(default_factory=list)

    def to_dict(self) -> dict:
        """JSON-serialisable dict."""
        return asdict(self)

    def to_markdown(self) -> str:
        """Markdown table."""
        head = (
            f"M={self.steps_per_epoch}, E={self.epochs}: accuracy at sigma="
            f"{self.noise_multiplier:.6g}"
            + (f"; sigma for target {self.target_accuracy:g}" if self.target_accuracy else "")
        )
        lines = [
            head,
            "",
            "| method | kind | accuracy | sigma for target | time (s) | note |",
            "|---|---|---|---|---|---|",
        ]
        for r in self.rows:
            acc = "-" if r.accuracy is None else f"{r.accuracy:.6f}"
            sig = "-" if r.noise_multiplier_for_target is None else (
                f"{r.noise_multiplier_for_target:.5f}"
            )
            lines.append(
                f"| {r.method} | {r.kind} | {acc} | {sig} | {r.wall_time_s:.3g} | {r.note} |"
            )
        return "\n".join(lines) + "\n"


def ckp_accuracy(noise_multiplier: float, *, steps_per_epoch: int, epochs: int) -> float:
    """[CKP] leading term, add/remove: ``½ + ½·erf(p√T/(2√2σ))`` with p = 1/M, T = M·E.

    Cherubin et al., Closed-Form Bounds for DP-SGD against Record-level Inference, USENIX
    Security 2024. A leading-order term: it can understate the risk.
    """
    x = math.sqrt(epochs / steps_per_epoch) / (2.0 * math.sqrt(2.0) * noise_multiplier)
    return 0.5 + 0.5 * math.erf(x)


def gdp_clt_accuracy(noise_multiplier: float, *, steps_per_epoch: int, epochs: int) -> float:
    """[GDP] CLT: μ = p√T·sqrt(e^{1/σ²} − 1), accuracy ``Φ(μ/2)`` (Dong, Roth, Su 2022).

    An asymptotic approximation, not a bound (it can understate the risk).
    """
    inv = min(1.0 / noise_multiplier**2, 700.0)
    mu = math.sqrt(epochs / steps_per_epoch) * math.sqrt(math.expm1(inv))
    return float(special.ndtr(mu / 2.0))


def _poisson_accuracy(sigma: float, steps: int, epochs: int, discretization: float) -> float:
    from dp_accounting.pld import privacy_loss_distribution as pld

    dist = pld.from_gaussian_mechanism(
        standard_deviation=sigma,
        sensitivity=1.0,
        sampling_prob=1.0 / steps,
        value_discretization_interval=discretization,
        pessimistic_estimate=True,
        use_connect_dots=True,
    )
    return 0.5 + 0.5 * dist.self_compose(steps * epochs).get_delta_for_epsilon(0.0)


#: Loss discretisation passed to ``pld-accounting`` (its default is 0.01; see the note above).
FS_PLD_LOSS_DISCRETIZATION = 0.05


def _fs_pld_accuracy(sigma: float, steps: int, epochs: int) -> float:
    from PLD_accounting import (
        AllocationSchemeConfig,
        BoundType,
        PrivacyParams,
        gaussian_allocation_pld,
    )

    full = gaussian_allocation_pld(
        params=PrivacyParams(sigma=sigma, num_steps=steps, num_epochs=epochs),
        # The package default (0.01) costs ~10 min per call on 2 cores; 0.05 keeps the
        # dominating (upper) bound valid, only looser, and runs in ~20 s.
        config=AllocationSchemeConfig(loss_discretization=FS_PLD_LOSS_DISCRETIZATION),
        bound_type=BoundType.DOMINATES,
    )
    return 0.5 + 0.5 * float(full.get_delta_for_epsilon(0.0))


def _random_allocation_accuracy(sigma: float, steps: int, epochs: int) -> float:
    from random_allocation.comparisons.definitions import Direction, PrivacyParams, SchemeConfig
    from random_allocation.random_allocation_scheme.combined import allocation_delta_combined

    eps = 1e-6  # the package needs epsilon > 0; delta(0) <= delta(eps) + expm1(eps)
    with contextlib.redirect_stdout(io.StringIO()):  # the package prints search diagnostics
        delta = allocation_delta_combined(
            PrivacyParams(sigma=sigma, num_steps=steps, num_epochs=epochs, epsilon=eps),
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


def compare_accountants(
    *,
    steps_per_epoch: int,
    epochs: int,
    noise_multiplier: float | None = None,
    target_accuracy: float | None = None,
    methods: tuple[str, ...] | None = None,
    search_published: bool = False,
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

    Returns
    -------
    ComparisonTable
    """
    steps = check_int(steps_per_epoch, "steps_per_epoch", low=1)
    n_ep = check_int(epochs, "epochs", low=1)
    if noise_multiplier is None and target_accuracy is None:
        raise ValueError("give `noise_multiplier` or `target_accuracy` (or both).")
    target = None
    if target_accuracy is not None:
        target = check_real(
            target_accuracy, "target_accuracy", low=0.5, high=1.0, low_inclusive=False,
            high_inclusive=False,
        )
    all_methods = (
        "chi-square", "exact", "poisson-pld", "fs-pld", "random-allocation", "ckp", "gdp-clt",
    )
    chosen = all_methods if methods is None else tuple(methods)
    unknown = set(chosen) - set(all_methods)
    if unknown:
        raise ValueError(f"unknown methods {sorted(unknown)}; choose from {list(all_methods)}")
    from pacpriv.dpsgd.calibration import calibrate_noise_multiplier
    from pacpriv.dpsgd.exact import exact_membership_inference_accuracy

    rows: list[ComparisonRow] = []
    exact_sigma = None
    t_cal = 0.0
    if target is not None and "exact" in chosen:
        start = time.perf_counter()
        exact_sigma = calibrate_noise_multiplier(target, steps_per_epoch=steps, epochs=n_ep)
        t_cal = time.perf_counter() - start
    if noise_multiplier is not None:
        sigma = check_real(noise_multiplier, "noise_multiplier", low=0, low_inclusive=False)
    elif exact_sigma is not None:
        sigma = exact_sigma.noise_multiplier
    else:
        sigma = float(closed_form_noise_multiplier(target, steps_per_epoch=steps, epochs=n_ep))
    kw = {"steps_per_epoch": steps, "epochs": n_ep}

    def closed(name, kind, acc_fn, sig_fn, note):
        start = time.perf_counter()
        acc = acc_fn()
        sig = sig_fn() if target is not None else None
        rows.append(ComparisonRow(name, kind, acc, sig, time.perf_counter() - start, note))

    if "chi-square" in chosen:
        closed(
            "chi-square closed form [RA-MIA]", BOUND,
            lambda: float(membership_inference_accuracy_bound(sigma, **kw).accuracy),
            lambda: float(closed_form_noise_multiplier(target, **kw)), "random allocation",
        )
    if "exact" in chosen:
        start = time.perf_counter()
        res = exact_membership_inference_accuracy(sigma, **kw)
        rows.append(ComparisonRow(
            "exact, certified (pacpriv)", BOUND, res.upper,
            None if exact_sigma is None else exact_sigma.noise_multiplier,
            time.perf_counter() - start + t_cal,
            f"interval [{res.lower:.6f}, {res.upper:.6f}]; random allocation",
        ))
    published = {
        "poisson-pld": ("Poisson subsampling, dp-accounting PLD", _poisson_accuracy, True),
        "fs-pld": ("random allocation, pld-accounting [FS-PLD]", _fs_pld_accuracy, False),
        "random-allocation": ("random allocation, random-allocation pkg", None, False),
    }
    for key, (label, fn, search) in published.items():
        if key not in chosen:
            continue
        if key == "random-allocation":
            fn = _random_allocation_accuracy
        acc_fn = (lambda s, fn=fn: fn(s, steps, n_ep, 1e-3)) if key == "poisson-pld" else (
            lambda s, fn=fn: fn(s, steps, n_ep)
        )
        start = time.perf_counter()
        try:
            acc = acc_fn(sigma)
            sig = None
            note = {
                "poisson-pld": "rate 1/M over M·E steps",
                "fs-pld": f"loss_discretization={FS_PLD_LOSS_DISCRETIZATION} (looser, faster)",
                "random-allocation": "delta(eps=1e-6)+eps; the package's bounds are loose "
                "near eps = 0",
            }[key]
            if target is not None and (search or search_published):
                sig = _sigma_by_search(acc_fn, target, sigma)
            elif target is not None:
                note = (note + "; " if note else "") + "sigma search skipped (slow)"
            rows.append(ComparisonRow(label, BOUND, acc, sig, time.perf_counter() - start, note))
        except ImportError as exc:
            rows.append(ComparisonRow(label, BOUND, None, None, time.perf_counter() - start,
                                      f"{_MISSING}: {exc}"))
        except Exception as exc:  # a third-party accountant failed: keep the other rows
            msg = " ".join(str(exc).split())[:160]
            rows.append(ComparisonRow(label, BOUND, None, None, time.perf_counter() - start,
                                      f"failed here: {type(exc).__name__}: {msg}"))
    if "ckp" in chosen:
        closed(
            "CKP leading term [CKP]", APPROX, lambda: ckp_accuracy(sigma, **kw),
            lambda: math.sqrt(n_ep / steps) / (2.0 * float(special.ndtri(target))),
            "Poisson rate 1/M, add/remove",
        )
    if "gdp-clt" in chosen:
        closed(
            "GDP CLT [GDP]", APPROX, lambda: gdp_clt_accuracy(sigma, **kw),
            lambda: 1.0 / math.sqrt(math.log1p(4.0 * float(special.ndtri(target)) ** 2
                                               * steps / n_ep)),
            "Poisson rate 1/M",
        )
    return ComparisonTable(steps, n_ep, sigma, target, rows)
