"""Certified upper end of k-of-t allocation by partial stratification.

Private helper of :mod:`pacpriv.dpsgd.k_of_t`. Split the ``t`` steps of an epoch into blocks
``S_1..S_b`` of sizes ``t_j`` (``Σ t_j ≤ t``) and draw a uniform ``k_j``-subset inside each
block, independently (``Σ k_j = k``). For any fixed ``k``-set ``B`` and a uniformly random
permutation ``π`` of the steps, ``π(B)`` is a uniform ``k``-subset, and permuting the
coordinates of ``1_B + σZ`` leaves the noise i.i.d.; so the k-of-t pair ``(P, Q)`` is the
image of the block pair ``(P, Q_S)`` under "permute the coordinates uniformly at random" (a
garbling). ``(P, Q_S)`` is the product of the ``b`` pairs "``k_j`` of ``t_j``" (and a pair of
equal laws on the unused steps), so any certified upper bound on the TV of that product over
``E`` epochs is a certified upper bound for k of t (the argument of Theorem 2 of
docs/guide/k_of_t.md, which is the split into ``k`` blocks of ``k_j = 1``).

Each block's law is the upper k-of-t chain of :mod:`pacpriv.dpsgd._exact.koft_chain` (an
increase of its likelihood ratio ``T_j`` under ``P`` in the convex order, with Q-mass at
``+∞``), put on the log-lattice ``ln T = aΔ`` by mean-preserving splits
(:func:`pacpriv.dpsgd._exact.composition.to_log_lattice`). The epoch's likelihood ratio is the
product ``Π_j T_j`` of independent factors, so its lattice law is the convolution of the
blocks' (labels add); a convex-order increase of one independent factor is one of the
product (``x ↦ E f(x·R)`` is convex for convex ``f`` and ``R ≥ 0``), so the convolved pair
still bounds every ``E[(T − c)_+]`` from above. The ``E``-fold composition and its errors are
those of the one-block case (:func:`pacpriv.dpsgd._exact.composition.compose_tv`).
"""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np

from pacpriv.dpsgd._exact import composition as _comp
from pacpriv.dpsgd._exact.koft_chain import ChainSettings, _Atoms, epoch_atoms
from pacpriv.dpsgd._exact.roundoff import _U

__all__ = ["split_blocks", "split_upper_tv"]

_WINDOW_TAU = 1e-15  # as in koft_chain: Chernoff mass outside the FFT window


def split_blocks(t: int, k: int, max_part: int = 2) -> tuple[tuple[int, int], ...]:
    """Public split of ``k`` of ``t`` into blocks ``((t_1, k_1), …)`` with ``k_j ≤ max_part``.

    Parts of ``max_part`` (and one of the rest), all ``t`` steps used, block sizes as close
    to proportional to ``k_j`` as integers allow (each next step goes to the block with the
    largest ``k_j/t_j``); a function of ``(t, k)`` only. Requires ``1 ≤ k ≤ t``.
    """
    parts = [max_part] * (k // max_part) + ([k % max_part] if k % max_part else [])
    sizes = [kj * t // k for kj in parts]  # ≥ k_j since t ≥ k
    for _ in range(t - sum(sizes)):
        j = max(range(len(parts)), key=lambda i: (parts[i] / sizes[i], -i))
        sizes[j] += 1
    return tuple(sorted(zip(sizes, parts, strict=True), reverse=True))


def _convolve(a: _comp.EpochPair, b: _comp.EpochPair) -> _comp.EpochPair:
    """The pair of the product of two independent likelihood ratios on one log-lattice.

    ``q = p·e^{aΔ}`` is kept (labels add, so ``q_1 ⊛ q_2 = (p_1 ⊛ p_2)·e^{aΔ}``); the Q-mass
    at ``+∞`` is every product with a factor at ``+∞``. Round-off: each output is a sum of at
    most ``min(n_a, n_b)`` non-negative products, relative error ``≤ (min + 1)u``; with the
    inputs' l1 errors ``ε_a, ε_b`` the product errs by ``ε_a + ε_b + ε_a ε_b`` plus that.
    """
    assert a.upper and b.upper and a.delta == b.delta
    p, q = np.convolve(a.p, b.p), np.convolve(a.q, b.q)
    sqa, sqb = float(a.q.sum()), float(b.q.sum())
    q_inf = (sqa + a.q_inf) * (sqb + b.q_inf) - sqa * sqb
    p_zero = max(0.0, 1.0 - float(a.p.sum()) * float(b.p.sum()))
    conv = (min(a.p.size, b.p.size) + 4.0) * _U
    err = a.binning_err + b.binning_err + a.binning_err * b.binning_err + conv
    return _comp.EpochPair(a.a0 + b.a0, a.delta, p, q, p_zero, q_inf, True, err)


def split_upper_tv(sigma: float, blocks: tuple[tuple[int, int], ...], epochs: int,
                   settings: ChainSettings, *, work_budget: float = math.inf
                   ) -> dict | None:
    """Certified ``TV(P^⊗E, Q^⊗E) ≤ tv_upper`` of k-of-t allocation through ``blocks``.

    ``blocks`` is a split ``((t_j, k_j), …)`` with ``Σ k_j = k`` and ``Σ t_j ≤ t`` (see the
    module docstring). Returns a dict (``tv_upper``, ``blocks``, resolution, atoms, work) or
    None when a block's chain would exceed ``settings.max_atoms`` or the work budget (all
    blocks together): the caller keeps its other bounds.
    """
    laws: dict[tuple[int, int], dict] = {}
    work = 0.0
    for tj, kj in sorted(set(blocks)):
        at = epoch_atoms(sigma, tj, kj, upper=True, settings=settings,
                         work_budget=work_budget - work)
        if at is None:
            return None
        work += at["work"]
        laws[(tj, kj)] = at
    # lattice step: a fraction of the spread of one epoch's ln T (independent blocks: the
    # variances add), as in the one-block chain
    var = 0.0
    for block in blocks:
        lr, p = laws[block]["T"], laws[block]["p"]
        pos = (lr > 0) & (p > 0)
        w = p[pos] / p[pos].sum()
        ln = np.log(lr[pos])
        var += float(np.dot(w, (ln - np.dot(w, ln)) ** 2))
    delta = max(math.sqrt(max(var, 1e-300)) / settings.c_epoch, 1e-9)
    pairs = {block: _comp.to_log_lattice(
        cast(Any, _Atoms(at["T"], at["p"], at["q_inf"], True)), delta=delta, ln_range=60.0,
        upper=True) for block, at in laws.items()}
    epoch = pairs[blocks[0]]
    for block in blocks[1:]:
        epoch = _convolve(epoch, pairs[block])
    tv, err, rnd = _comp.compose_tv(epoch, epochs, direction="add", tau=_WINDOW_TAU)
    eps = epoch.binning_err
    # l1 error eps per epoch: TV of the E-fold products moves by ≤ 2E·eps·(1 + eps)^(E−1)
    prop = 2.0 * epochs * eps * math.exp(min(700.0, (epochs - 1) * math.log1p(eps)))
    return {"tv_upper": min(1.0, tv + err + rnd + prop), "blocks": blocks,
            "n_w": settings.n_w, "dln": settings.dln, "work": work,
            "atoms_upper": int(sum(at["atoms"] for at in laws.values()))}
