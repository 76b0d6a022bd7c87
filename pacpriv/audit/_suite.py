"""The attack suite and the leave-one-pair-out game on a batch of reference models.

A batch of ``K`` models is trained on complementary pairs of random halves of the pool (model
``2k`` on a Poisson-½ subset, model ``2k + 1`` on its complement), so every record is IN for
exactly half of them. Every model serves as the **target** in turn; its reference models are
the ``K − 2`` others, its pair partner left out. Then every record is IN for exactly
``K/2 − 1`` references and OUT for as many, *whatever its membership in the target*: the
reference design carries no information about the target's secret (leaving only the target
out, as in [1]_, would give members one IN reference fewer than non-members). Pooling the
``K`` games gives ``K·n`` (record, target) pairs, about half of them non-members, so an FPR of
0.1% is resolvable with ``K·n/2 >= 1000``.

Attacks are small frozen objects with a ``name`` and ``scores(view) -> (n,)``; the suite runs
any sequence of them.

References
----------
.. [1] N. Carlini et al. Membership Inference Attacks From First Principles. S&P 2022, Sec. V.
.. [2] S. Zarifzadeh, P. Liu, R. Shokri. Low-Cost High-Power Membership Inference Attacks.
   ICML 2024.
.. [3] S. Yeom et al. Privacy Risk in Machine Learning. CSF 2018 (the loss attack).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special

from pacpriv._random import RNGLike, as_seed_sequence, trial_seed
from pacpriv.audit._lira import lira_scores
from pacpriv.audit._metrics import DEFAULT_FPRS, RocMetrics, roc_metrics
from pacpriv.audit._rmia import rmia_scores
from pacpriv.registry import Registry

__all__ = [
    "ATTACKS",
    "DEFAULT_ATTACKS",
    "LiraAttack",
    "LossAttack",
    "RmiaAttack",
    "TargetView",
    "evaluate_attacks",
    "leave_one_pair_out",
]


@dataclass(frozen=True)
class TargetView:
    """What an attacker sees in one game: statistics under the target and its references.

    Attributes
    ----------
    target : ndarray of shape (n, A)
        Logit-scaled confidences φ of the candidate records (and their ``A`` queries).
    target_population : ndarray of shape (n_z, A)
        φ of the population samples under the target.
    reference : ndarray of shape (R, n, A)
        φ of the candidates under each reference model.
    membership : ndarray of bool, shape (R, n)
        The references' training masks (known to the attacker, who trained them).
    reference_population : ndarray of shape (R, n_z, A)
    """

    target: np.ndarray
    target_population: np.ndarray
    reference: np.ndarray
    membership: np.ndarray
    reference_population: np.ndarray


@dataclass(frozen=True)
class LossAttack:
    """Loss-threshold attack [3]_: score ``−loss = log p`` of the first query (no references)."""

    @property
    def name(self) -> str:
        """``"LOSS"``."""
        return "LOSS"

    def scores(self, view: TargetView) -> np.ndarray:
        """``log p = log_expit(φ)`` of each record (a monotone function of φ)."""
        return special.log_expit(view.target[:, 0])


@dataclass(frozen=True)
class LiraAttack:
    """LiRA [1]_ (online: IN and OUT Gaussians; offline: OUT only), fixed or per-record variance."""

    online: bool = True
    fixed_variance: bool = True

    @property
    def name(self) -> str:
        """``"LiRA (online)"`` or ``"LiRA (offline)"``."""
        return "LiRA (online)" if self.online else "LiRA (offline)"

    def scores(self, view: TargetView) -> np.ndarray:
        """:func:`pacpriv.audit.lira_scores` of the view."""
        return lira_scores(view.target, view.reference, view.membership, online=self.online,
                           fixed_variance=self.fixed_variance)


@dataclass(frozen=True)
class RmiaAttack:
    """RMIA [2]_: online (``offline_a=None``) or offline with the linear ``a`` approximation."""

    offline_a: float | None = None
    gamma: float = 1.0

    @property
    def name(self) -> str:
        """``"RMIA (online)"`` or ``"RMIA (offline, a=…)"``."""
        return ("RMIA (online)" if self.offline_a is None
                else f"RMIA (offline, a={self.offline_a:g})")

    def scores(self, view: TargetView) -> np.ndarray:
        """:func:`pacpriv.audit.rmia_scores` of the view."""
        return rmia_scores(view.target, view.reference, view.membership,
                           view.target_population, view.reference_population,
                           offline_a=self.offline_a, gamma=self.gamma)


#: The registry of attacks: name -> factory of the configured attack (``--attacks`` choices),
#: strongest expected first. A new attack is one ``ATTACKS.register(name, factory)`` line.
ATTACKS: Registry[Callable[[], Any]] = Registry("attack", argument="attacks",
                                                 callable_entries=True)
ATTACKS.register("lira-online", functools.partial(LiraAttack, online=True),
                 doc="LiRA, online: IN and OUT Gaussians per record (Carlini et al. 2022)")
ATTACKS.register("rmia-online", RmiaAttack,
                 doc="RMIA, online: likelihood ratio against population samples "
                 "(Zarifzadeh et al. 2024)")
ATTACKS.register("lira-offline", functools.partial(LiraAttack, online=False),
                 doc="LiRA, offline: OUT Gaussian only")
ATTACKS.register("rmia-offline", functools.partial(RmiaAttack, offline_a=0.3),
                 doc="RMIA, offline: the linear approximation with a = 0.3 (--offline-a)")
ATTACKS.register("loss", LossAttack, doc="loss threshold: score log p (Yeom et al. 2018)")

#: The attacks an audit runs by default: every registered one, in registry order.
DEFAULT_ATTACKS: tuple = tuple(factory() for factory in ATTACKS.values())


def _check_batch(statistics: np.ndarray, population: np.ndarray, masks: np.ndarray) -> None:
    K = masks.shape[0]
    if K < 4 or K % 2:
        raise ValueError(
            f"the reference batch must hold an even number >= 4 of models (complementary "
            f"pairs); got {K}."
        )
    if statistics.shape[:2] != masks.shape or population.shape[0] != K \
            or population.shape[2:] != statistics.shape[2:]:
        raise ValueError(
            f"statistics of shape {statistics.shape} and population statistics of shape "
            f"{population.shape} do not match the masks' shape {masks.shape}."
        )
    pairs = masks[0::2] ^ masks[1::2]
    if not pairs.all():
        bad = np.flatnonzero(~pairs.all(axis=1))
        raise ValueError(
            f"models 2k and 2k+1 must be trained on complementary halves; pair(s) "
            f"{bad.tolist()[:5]} are not."
        )


def leave_one_pair_out(
    statistics, population, masks, attacks: Sequence = DEFAULT_ATTACKS,
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Every model as target in turn, against the others minus its pair partner.

    Parameters
    ----------
    statistics : ndarray of shape (K, n, A)
        φ of every candidate record (and query) under every model of the batch.
    population : ndarray of shape (K, n_z, A)
        φ of the population samples under every model.
    masks : ndarray of bool, shape (K, n)
        Training masks; models ``2k`` and ``2k + 1`` complementary. ``K`` even, ``>= 4``.
    attacks : sequence of attack objects
        Each with ``name`` and ``scores(TargetView) -> (n,)``.

    Returns
    -------
    dict
        ``name -> (member_scores, nonmember_scores)`` pooled over the ``K`` games.

    Raises
    ------
    ValueError
        If ``K`` is odd or below 4, shapes disagree, or a pair is not complementary.
    """
    stats = np.asarray(statistics, dtype=np.float64)
    pop = np.asarray(population, dtype=np.float64)
    masks = np.asarray(masks, dtype=bool)
    _check_batch(stats, pop, masks)
    names = [a.name for a in attacks]
    if not names or len(set(names)) != len(names):
        raise ValueError(f"`attacks` must be a non-empty sequence of distinct attacks; got "
                         f"{len(names)} with {len(set(names))} distinct name(s).")
    K = masks.shape[0]
    pooled: dict[str, tuple[list, list]] = {a.name: ([], []) for a in attacks}
    for t in range(K):
        keep = np.ones(K, dtype=bool)
        keep[[t, t ^ 1]] = False
        view = TargetView(target=stats[t], target_population=pop[t], reference=stats[keep],
                          membership=masks[keep], reference_population=pop[keep])
        for attack in attacks:
            s = attack.scores(view)
            pooled[attack.name][0].append(s[masks[t]])
            pooled[attack.name][1].append(s[~masks[t]])
    return {name: (np.concatenate(m), np.concatenate(o)) for name, (m, o) in pooled.items()}


def evaluate_attacks(
    statistics, population, masks, *, attacks: Sequence = DEFAULT_ATTACKS,
    fprs=DEFAULT_FPRS, confidence: float = 0.95, rng: RNGLike = None,
) -> list[RocMetrics]:
    """:func:`leave_one_pair_out` followed by :func:`pacpriv.audit.roc_metrics` per attack.

    ``rng`` seeds only the held-out split of each balanced accuracy (child ``i`` for attack
    ``i``); the scores and every other metric are deterministic.
    """
    root = as_seed_sequence(rng)
    pooled = leave_one_pair_out(statistics, population, masks, attacks)
    return [roc_metrics(*pooled[a.name], name=a.name, fprs=fprs, confidence=confidence,
                        rng=trial_seed(root, i)) for i, a in enumerate(attacks)]
