"""From a mutual-information budget to an adversary's success rate (and back).

All functions follow [1]_, Thm 1 and its corollaries: for any inference task whose
blind-guess success rate is ``p0`` (the *prior*), the adversary's posterior success rate ``p``
satisfies ``KL(Bern(p) || Bern(p0)) <= MI(X; Y) <= v``. Mutual information is in **nats**.

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy: Automatic Privacy Measurement and Control of Data
   Processing. CRYPTO 2023, arXiv:2210.03458 (Thm 1, Thm 2 and corollaries).
"""

from __future__ import annotations

import numpy as np
from scipy.special import xlogy

from pacpriv._validation import _int_to_float, check_array_real, check_int, describe_invalid

__all__ = [
    "accuracy_for_mi_budget",
    "individual_mi_bound",
    "membership_inference_accuracy_bound",
    "mi_budget_for_accuracy",
    "pinsker_bound",
    "posterior_success_rate",
]

_BISECTION_STEPS = 2100  # enough halvings to reach adjacent doubles even for subnormal priors


def _as_scalar_or_array(x: np.ndarray):
    return float(x) if x.ndim == 0 else x


def _check_mi(mi_budget) -> np.ndarray:
    """``mi_budget`` in [0, inf]; +inf is allowed (an unbounded budget gives p* = 1)."""
    if isinstance(mi_budget, int) and not isinstance(mi_budget, bool) and abs(mi_budget) >= 2**63:
        # beyond int64 numpy would make an object array; past float64 a one-line ValueError
        mi_budget = _int_to_float(mi_budget, "mi_budget")
    arr = np.asarray(mi_budget)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number) or arr.dtype.kind == "c":
        raise TypeError(f"`mi_budget` must be real numbers; got dtype {arr.dtype}.")
    arr = arr.astype(np.float64)
    bad = np.isnan(arr) | (arr < 0)
    if np.any(bad):
        got = (repr(float(arr)) if arr.ndim == 0 and not isinstance(mi_budget, np.ndarray)
               else f"{describe_invalid(bad)} (values not shown)")
        raise ValueError(f"`mi_budget` must be in [0, inf] (nats); got {got}.")
    return arr


def check_membership_prior(prior) -> np.ndarray:
    """``prior`` in ``[0.5, 1)``: the blind-guess success rate ``max(q, 1 − q)`` of a binary
    (membership) secret. A value below ½ — typically the inclusion probability ``q`` itself —
    would give a "bound" below the blind guess ``1 − q``: refused, as by the CLI's ``--prior``."""
    try:
        return check_array_real(prior, "prior", low=0.5, high=1.0, high_inclusive=False)
    except ValueError as err:  # one message, with the true range, for every invalid prior
        got = str(err).partition("; got ")[2].rstrip(".") or "an invalid value"
        hint = ""
        if isinstance(prior, (float, np.floating)):  # an integer is never in (0, 0.5)
            q = float(prior)
            if 0 < q < 0.5:
                hint = (f" (for an inclusion probability q = {q:g}, pass "
                        f"prior={1.0 - q:g} = max(q, 1 - q))")
        elif "values not shown" in got:
            hint = " (pass max(q, 1 - q) elementwise)"
        raise ValueError(
            f"`prior` is the blind-guess success rate max(q, 1 - q) and must be in [0.5, 1); "
            f"got {got}{hint}.") from None


#: Values per chunk of a large :func:`mi_budget_for_accuracy` call (each chunk ~1–2 s)
_CHUNK = 65536

_SERIES = np.array([(-1.0) ** k / (k * (k - 1)) for k in range(2, 26)])


def _phi1p(u: np.ndarray) -> np.ndarray:
    """``φ(1+u) = (1+u) ln(1+u) − u >= 0`` without cancellation (series for ``|u| < 0.1``).
    Each branch is evaluated on its own elements only (the same numbers as evaluating both
    everywhere and selecting, at a fraction of the work on large arrays)."""
    u = np.asarray(u, dtype=np.float64)
    small = np.abs(u) < 0.1
    out = np.empty_like(u)
    us = u[small]
    series = np.zeros_like(us)
    for coef in _SERIES[::-1]:  # Horner in u: sum_k c_k u^k, k >= 2
        series = (series + coef) * us
    out[small] = series * us
    ul = u[~small]
    out[~small] = xlogy(1.0 + ul, 1.0 + ul) - ul
    return out


def _bernoulli_kl(p: np.ndarray, p0: np.ndarray) -> np.ndarray:
    """KL(Bern(p) || Bern(p0)) in nats, elementwise and accurate near ``p = p0``.

    Written as ``p0 φ(p/p0) + (1−p0) φ((1−p)/(1−p0))`` with ``φ(x) = x ln x − x + 1 >= 0``
    (the linear parts cancel exactly), so no two large terms are subtracted.
    """
    delta = p - p0
    return p0 * _phi1p(delta / p0) + (1.0 - p0) * _phi1p(-delta / (1.0 - p0))


def posterior_success_rate(mi_budget, *, prior):
    """Largest posterior success rate compatible with a mutual-information budget.

    ``p* = max{p in [p0, 1] : KL(Bern(p) || Bern(p0)) <= v}``, with ``p* = 1`` once
    ``v >= ln(1/p0)`` and ``p* = p0`` at ``v = 0``.

    Parameters
    ----------
    mi_budget : float or array_like
        Mutual-information budget ``v`` in nats, in ``[0, inf]``.
    prior : float or array_like
        Blind-guess success rate ``p0`` in ``[0.5, 1)``, required (no default: a silent ½
        understates the risk of any other sampler); broadcast against ``mi_budget``. For
        membership with inclusion probability ``q`` use the best blind guess
        ``max(q, 1 − q)`` (:func:`pacpriv.pac.bounds.resolve_membership_prior`); for
        Poisson-½ membership it is ½ and ``p*`` is the attack accuracy bound.

    Returns
    -------
    float or ndarray
        ``p*`` in ``[p0, 1]`` (an array of the broadcast shape when an input is an array).

    Raises
    ------
    TypeError
        If an input is not numeric.
    ValueError
        If ``mi_budget`` is negative or NaN, or ``prior`` is outside ``[0.5, 1)`` (a prior
        below ½, such as an inclusion probability ``q < ½``, would give a bound below the
        blind guess ``1 − q``: pass ``max(q, 1 − q)``).

    Notes
    -----
    The KL divergence is increasing on ``[p0, 1]``; the root is found by a vectorised bisection
    that keeps ``KL(lo) <= v < KL(hi)`` and returns the *upper* end ``hi``: the answer never
    understates the bound (it exceeds the exact root by at most a few units in the last place).

    References
    ----------
    .. [1] Xiao & Devadas, PAC Privacy, CRYPTO 2023, Thm 1 and corollaries.

    Examples
    --------
    >>> round(posterior_success_rate(0.5, prior=0.5), 6)
    0.951811
    >>> round(posterior_success_rate(0.05, prior=0.9), 4)  # sampling rate 0.9
    0.9792
    """
    v, p0 = np.broadcast_arrays(_check_mi(mi_budget), check_membership_prior(prior))
    return _as_scalar_or_array(_kl_root(v.astype(np.float64), p0.astype(np.float64)))


def _kl_root(v: np.ndarray, p0: np.ndarray) -> np.ndarray:
    """Thm 1's root ``max{p in [p0, 1] : KL(Bern(p) || Bern(p0)) <= v}`` for any ``p0`` in
    (0, 1) (a k-ary secret's blind guess may be below ½), rounded up; inputs checked."""
    saturated = v >= -np.log(p0)
    lo = p0.copy()
    hi = np.ones_like(p0)
    todo = ~saturated & (v > 0)
    for _ in range(_BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        active = todo & (mid > lo) & (mid < hi)  # stop once lo and hi are adjacent doubles
        if not np.any(active):
            break
        below = _bernoulli_kl(mid, p0) <= v
        lo = np.where(active & below, mid, lo)
        hi = np.where(active & ~below, mid, hi)
    # The bisection's KL has a few ulps of round-off, so ``hi`` can sit a few ulps below the
    # exact root (seen: up to 9 ulps against mpmath). Move up by 32 ulps: the safe side.
    hi = np.minimum(1.0, hi * (1.0 + 32.0 * np.finfo(np.float64).eps))
    return np.where(saturated, 1.0, np.where(v == 0, p0, hi))


#: ``sqrt(½)`` rounded up to a float64 (the nearest double, 0.70710678118654757..., lies above).
_SQRT_HALF_UP = float(np.sqrt(0.5))


def pinsker_bound(mi_budget, *, prior):
    """Pinsker's looser bound ``min(1, p0 + sqrt(v/2))`` on the posterior success rate.

    Parameters
    ----------
    mi_budget : float or array_like
        Budget ``v`` in nats, in ``[0, inf]``.
    prior : float or array_like
        Blind-guess success rate ``p0 = max(q, 1 − q)`` in ``[0.5, 1)`` (required).

    Returns
    -------
    float or ndarray
        Upper bound (always ``>= posterior_success_rate``).

    Raises
    ------
    TypeError, ValueError
        As :func:`posterior_success_rate`.

    References
    ----------
    .. [1] Xiao & Devadas, PAC Privacy, CRYPTO 2023, Thm 1 (with Pinsker's inequality).
    """
    v, p0 = np.broadcast_arrays(_check_mi(mi_budget), check_membership_prior(prior))
    # rounded up in floating point: sqrt(v/2) carries <= 1.5 ulp, inflated by 4 ulp; the sum is
    # rounded up exactly (Fast2Sum: p0 >= gap is not needed for the error term below)
    # (sqrt(v)·sqrt(½), not sqrt(v/2): v/2 underflows to 0 at the smallest subnormal v, which
    # printed the prior itself for a positive budget; sqrt(½) in float64 is above the exact one)
    gap = np.sqrt(v) * (_SQRT_HALF_UP * (1.0 + 4.0 * np.finfo(np.float64).eps))
    total = p0 + gap
    big, small = np.maximum(p0, gap), np.minimum(p0, gap)
    with np.errstate(invalid="ignore"):  # v = inf: inf − inf, and the bound is 1 below
        err = small - (total - big)  # exact (Fast2Sum, |big| >= |small|): what rounding dropped
    total = np.where(err > 0, np.nextafter(total, 2.0), total)
    # at tiny budgets the exact bound's safe-side rounding (32 ulps) can pass p0 + sqrt(v/2)'s:
    # keep the documented order Pinsker >= posterior_success_rate in floating point too
    total = np.maximum(total, _kl_root(v.astype(np.float64), p0.astype(np.float64)))
    return _as_scalar_or_array(np.minimum(1.0, total))


def mi_budget_for_accuracy(target_accuracy, *, prior):
    """Mutual-information budget whose posterior bound equals ``target_accuracy``.

    The inverse of :func:`posterior_success_rate`: ``v = KL(Bern(a) || Bern(p0))``; with
    ``prior = 0.5`` this is ``ln 2 - H(a)`` (``H`` the binary entropy in nats). The returned
    float is lowered where needed so that ``posterior_success_rate(v, prior=p0) <=
    target_accuracy`` holds in floating point (the safe side: the forward bound rounds its root
    up by 32 ulps, so ``v`` moves down by the equivalent of about a hundred ulps of the
    accuracy).

    Parameters
    ----------
    target_accuracy : float or array_like
        Target posterior success rate ``a`` in ``[p0, 1]``.
    prior : float or array_like
        Blind-guess success rate ``p0 = max(q, 1 − q)`` in ``[0.5, 1)`` (required).

    Returns
    -------
    float or ndarray
        Budget in nats (``ln(1/p0)`` at ``a = 1``).

    Raises
    ------
    TypeError
        If an input is not numeric.
    ValueError
        If ``prior`` is outside ``[0.5, 1)`` or ``target_accuracy`` outside ``[prior, 1]``.

    References
    ----------
    .. [1] Xiao & Devadas, PAC Privacy, CRYPTO 2023, Thm 1.
    """
    a = check_array_real(target_accuracy, "target_accuracy", low=0.0, high=1.0)
    a, p0 = np.broadcast_arrays(a, check_membership_prior(prior))
    if np.any(a < p0):
        got = (repr(float(a)) if a.ndim == 0 else
               f"{describe_invalid(a < p0)} below the prior (values not shown)")
        raise ValueError(
            f"`target_accuracy` must be in [prior, 1] (no budget gives less than the blind "
            f"guess); got {got}."
        )
    if a.size > 64:  # repeated (target, prior) pairs are computed once (the same numbers)
        pairs = np.stack([a.reshape(-1), p0.reshape(-1)], axis=1).astype(np.float64)
        uniq, inverse = np.unique(pairs, axis=0, return_inverse=True)
        if uniq.shape[0] < pairs.shape[0]:
            once = np.asarray(mi_budget_for_accuracy(uniq[:, 0], prior=uniq[:, 1]))
            return once.reshape(-1)[inverse.reshape(-1)].reshape(a.shape)
        if a.size > _CHUNK:  # ~30 µs a value: chunks, with a progress bar (never silent)
            from tqdm.auto import tqdm

            flat_a, flat_p = pairs[:, 0], pairs[:, 1]
            out = np.empty(flat_a.size)
            for start in tqdm(range(0, flat_a.size, _CHUNK), desc="mi_budget_for_accuracy",
                              unit="chunk", leave=False):
                stop = start + _CHUNK
                out[start:stop] = mi_budget_for_accuracy(flat_a[start:stop],
                                                         prior=flat_p[start:stop])
            return out.reshape(a.shape)
    v = np.maximum(_bernoulli_kl(a, p0), 0.0)
    # Safe side in floating point: the forward bound at the returned budget never exceeds the
    # target (it rounds its root up by a few ulps), so lower v by growing multiples of an ulp.
    # Steps double (2, 4, 8, ... ulps of v), so v ends within a factor 2 of the smallest
    # lowering that works: the round trip stays within ~100 ulps of the target.
    eps = np.finfo(np.float64).eps
    v = np.array(v, dtype=np.float64)
    a_b, p0_b = np.broadcast_to(a, v.shape), np.broadcast_to(p0, v.shape)
    base = v.copy()
    flat, a_f, p0_f = v.reshape(-1), a_b.reshape(-1), p0_b.reshape(-1)  # v's own buffer
    todo = np.flatnonzero((flat > 0) & (a_f < 1))  # only the values still over are re-checked
    for k in range(1, 60):
        todo = todo[posterior_success_rate(flat[todo], prior=p0_f[todo]) > a_f[todo]]
        if todo.size == 0:
            break
        flat[todo] = base.reshape(-1)[todo] * (1.0 - 2.0**k * eps)
    return _as_scalar_or_array(v)


def membership_inference_accuracy_bound(mi_budget):
    """Membership-inference accuracy bound for equal priors: ``posterior_success_rate(v, prior=½)``.

    Parameters
    ----------
    mi_budget : float or array_like
        Budget ``v`` in nats, in ``[0, inf]``; the bound is 1 once ``v >= ln 2``.

    Returns
    -------
    float or ndarray
        Accuracy bound in ``[0.5, 1]``.

    References
    ----------
    .. [1] Xiao & Devadas, PAC Privacy, CRYPTO 2023, Thm 1.
    """
    return posterior_success_rate(mi_budget, prior=0.5)


def accuracy_for_mi_budget(mi_budget, *, prior=0.5):
    """Membership-inference accuracy bound of a budget: the inverse of
    :func:`mi_budget_for_accuracy`, ``posterior_success_rate(mi_budget, prior=prior)``.

    Parameters
    ----------
    mi_budget : float or array_like
        Budget ``v`` in nats, in ``[0, inf]``.
    prior : float or array_like, default 0.5
        Blind-guess success rate ``p0 = max(q, 1 − q)`` in ``[0.5, 1)`` for inclusion
        probability ``q``; ½ is Poisson-½ membership (equal priors). Give it for any other
        sampler: ½ would understate the risk there.

    Returns
    -------
    float or ndarray
        Accuracy bound in ``[p0, 1]`` (1 once ``v >= ln(1/p0)``).

    Raises
    ------
    TypeError, ValueError
        As :func:`posterior_success_rate`.

    References
    ----------
    .. [1] Xiao & Devadas, PAC Privacy, CRYPTO 2023, Thm 1.
    """
    return posterior_success_rate(mi_budget, prior=prior)


def individual_mi_bound(mi_budget, *, n_records: int):
    """Average per-record mutual information ``v / n`` for a budget ``v`` on the whole input.

    A bound for **every** record only under Thm 2's assumptions (i.i.d. records, a symmetric
    mechanism); with a fixed pool and independent memberships it bounds the **average** over
    records, and one record may carry up to ``v`` (see the Notes and
    :func:`pacpriv.pac.per_record.calibrate_per_record` for each record's exposure).

    Parameters
    ----------
    mi_budget : float or array_like
        Budget ``v = MI(X; Y)`` in nats on the whole secret input, in ``[0, inf]``.
    n_records : int
        Number of records ``n >= 1``.

    Returns
    -------
    float or ndarray
        ``v / n`` in nats.

    Raises
    ------
    TypeError, ValueError
        If ``n_records`` is not an integer ``>= 1`` or ``mi_budget`` is invalid.

    Notes
    -----
    Two statements support ``v / n`` ([1]_ Thm 2 and Thm 1):

    * [PAC Thm 2]: if the records ``x_1..x_n`` are i.i.d. and the mechanism is symmetric under
      permutations of its input, then ``MI(x_i; Y) <= MI(X; Y) / n`` for **every** ``i``.
    * Independent membership bits ``b_i`` (e.g. Poisson sampling): ``sum_i MI(b_i; Y) <= MI(b; Y)``,
      so the **average** per-record MI is ``<= v / n`` (a single record may still take more).

    References
    ----------
    .. [1] Xiao & Devadas, PAC Privacy, CRYPTO 2023, Thm 2.
    """
    n = check_int(n_records, "n_records", low=1)
    v = _check_mi(mi_budget)
    # v / n rounded up in floating point: the division is correctly rounded (<= ½ ulp off),
    # so one ulp up is never below the exact quotient
    out = np.where(v > 0, np.nextafter(v / n, np.inf), v / n)
    return _as_scalar_or_array(out)
