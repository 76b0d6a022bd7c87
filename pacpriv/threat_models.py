"""Threat models in words: the one place each text is written (a leaf; imports nothing).

Every report, comparison and :class:`pacpriv.dpsgd.DPSGDSpec` section quotes these strings, so a
reader sees the same sentence for the same guarantee everywhere.

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, arXiv:2210.03458, Def. 1, §2, Thm 1.
.. [2] Membership-inference accuracy bound for DP-SGD with random allocation (RA-MIA):
   add/remove adjacency, prior ½.
.. [3] Y. Zhu, S. Sridhar, S. Devadas. PAC-private prediction with adaptive composition,
   arXiv:2601.14033, 2026.
"""

from __future__ import annotations

__all__ = [
    "THREAT_MODELS",
    "THREAT_MODEL_DPSGD",
    "THREAT_MODEL_PAC",
    "THREAT_MODEL_PAC_RECORD",
    "THREAT_MODEL_PREDICTION",
    "THREAT_MODEL_SERVING",
]

#: PAC membership privacy of a black-box release (the PAC report) [1]_.
THREAT_MODEL_PAC = (
    "PAC membership privacy [Xiao & Devadas, CRYPTO 2023, Def. 1 and §2]. The secret is the random "
    "subset X of the data pool that the sampler draws (with Poisson sampling at rate q, every "
    "record is in X with probability q independently, and the best blind guess of a membership "
    "is right with probability max(q, 1 - q): the prior this report states). "
    "The adversary knows the whole pool, the sampler and the mechanism (and this report, including "
    "the noise covariance), sees one noisy release f(X) + B, and tries to infer which records are "
    "in X. The guarantee bounds the mutual information MI(X; f(X) + B) by the budget v (nats) and, "
    "through Thm 1 (KL data-processing inequality), the posterior success rate of every such "
    "adversary. It is an average-case guarantee over the sampler's randomness, computed by "
    "Monte-Carlo simulation on this pool (certified with the stated confidence 1 - gamma, or "
    "estimated, as the headline says); it is not differential privacy (no worst case over "
    "datasets)."
)

#: Per-record PAC membership privacy against an informed adversary [1]_ §2.
THREAT_MODEL_PAC_RECORD = (
    "Per-record PAC membership privacy, informed adversary [Xiao & Devadas, CRYPTO 2023, §2]. "
    "Memberships are independent (Poisson sampling with rate q). The secret is one bit: whether "
    "one target record i was used. The adversary knows the whole pool, the mechanism, its "
    "internal randomness, the noise covariance and whether every other record was used; it sees "
    "one noisy release f(X) + B. Its best accuracy is the Bayes accuracy of two Gaussians, "
    "N(f(X without i) + Δi, Σ_B) against N(f(X without i), Σ_B), averaged over the other "
    "records' memberships; any adversary that knows less does no better. The bound is certified "
    "per audited record from simulation (a confidence bound per record: betting by default, "
    "Waudby-Smith & Ramdas 2024, or empirical Bernstein; union bound over the audited records; "
    "the report names the method) for this pool, on average over the other records' "
    "memberships; it is neither a worst case over datasets (DP) nor a bound on inferences "
    "about the whole subset."
)

#: Threat model of every number a :class:`pacpriv.dpsgd.DPSGDSpec` reports [2]_.
THREAT_MODEL_DPSGD = (
    "Worst case over datasets: the adversary knows every other record, the model "
    "architecture, the clipping norm and the noise multiplier, sees the final model and all "
    "intermediate noisy updates, and must decide whether one target record was added to or "
    "removed from the training set (add/remove adjacency). Membership and non-membership "
    "are equally likely a priori (prior ½), so accuracy ½ is a coin flip. Random "
    "allocation: each epoch has M steps and every record is used exactly once per epoch at "
    "a uniformly random step; Gaussian noise N(0, σ²C²I) is added to each step's sum of "
    "clipped gradients."
)

#: Private prediction with posterior-tracked worlds (:class:`pacpriv.prediction.PrivatePredictor`):
#: reports and the HTTP API [3]_.
THREAT_MODEL_PREDICTION = (
    "The adversary knows the private pool, the sampler, the fitting procedure, every world "
    "model, the budgets and every answer, and chooses each query after seeing the previous "
    "answers. Secret: which world J answers (drawn uniformly from OS entropy) and the noise. "
    "I(J; all answers) <= spent (nats) however the queries are chosen (chain rule, Gaussian "
    "maximum entropy under the tracked posterior; Zhu, Sridhar & Devadas 2026). Any inference "
    "about J whose blind guess succeeds with probability at most the stated prior, such as "
    "whether a record was in the answering model's training set (prior = the larger of the "
    "fractions of worlds holding it and not holding it, ½ for complementary pairs), succeeds "
    "with probability at most the membership bound (Xiao & Devadas 2023, Thm 1); an inference "
    "with a better blind guess has its own, larger bound (the same Thm 1 at its prior)."
)

#: What holds for several analysts of one served predictor (``pacpriv serve``, ``/budget``).
THREAT_MODEL_SERVING = (
    "Several analysts, each with an API key. The guarantee is the global cap: whatever any "
    "analyst or coalition of analysts sees (colluding analysts, one analyst holding several "
    "keys, or anyone who sees every answer) reveals at most I(J; all answers) <= the total "
    "spent by all keys together (nats), and the membership bound is computed from that total, "
    "never from one key's share. A key's quota (nats) only limits how much of the shared "
    "budget that key can spend: it is not a per-analyst privacy bound, since each answer's "
    "noise is calibrated to the posterior left by every earlier answer of every key, so one "
    "analyst's answers alone can reveal more than that analyst's spend (never more than the "
    "total). Keys are bearer tokens: whoever holds one spends its quota. Every answer is "
    "charged in the ledger before it is released, in one transaction."
)

#: The two threat models of the PAC vs DP-SGD comparison, side by side (training setting).
THREAT_MODELS = {
    "pac": (
        "PAC Privacy [Xiao & Devadas 2023]: the secret is the random training subset X, drawn "
        "from the data pool by Poisson sampling with rate 1/2 (each record in or out with "
        "probability 1/2, independently). The adversary knows the whole pool, the training "
        "code with its public seed (initialisation and batch order) and the noise covariance, "
        "sees the noisy parameters once, and tries to infer X. MI(X; release) <= v bounds the "
        "posterior success of every such adversary (Thm 1); the bound holds on average over "
        "the sampler, for this pool, as estimated by simulation; it covers the whole subset "
        "at once, hence every single record's membership."
    ),
    "pac_record": (
        "PAC Privacy per record [Xiao & Devadas 2023, §2]: the secret is whether one target "
        "record is in the training subset (Poisson-1/2, memberships independent). The informed "
        "adversary knows the whole pool, the training code with its public seed, the noise "
        "covariance and the membership of every other record, sees the noisy parameters once "
        "and guesses the target's bit. The bound is the Bayes accuracy of this test, averaged "
        "over the other records' memberships and certified from simulation for each audited "
        "record (empirical Bernstein with a union bound); it concerns one record at a time, "
        "on this pool, not the whole subset and not the worst case over datasets."
    ),
    "dpsgd": (
        "DP-SGD with random allocation [RA-MIA]: the secret is whether one target record is "
        "in the training set, worst case over all datasets and target records (one record "
        "added or removed), membership prior 1/2. The adversary knows the rest of the "
        "dataset, the model, the initialisation and every noisy gradient step; only the "
        "target's presence, the random allocation of records to steps and the Gaussian "
        "noise are secret."
    ),
}
