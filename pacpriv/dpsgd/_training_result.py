"""``TrainingResult``: what a DP-SGD training run did, and its certified privacy (no torch).

Private module of :mod:`pacpriv.dpsgd.trainer` (which re-exports :class:`TrainingResult`).

References
----------
.. [1] Membership-inference accuracy bound for DP-SGD with random allocation (RA-MIA,
   CWI / VU Amsterdam), Sec. 3.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from pacpriv.dpsgd.spec import DPSGDSpec

__all__ = ["TrainingResult"]


@dataclass(frozen=True)
class TrainingResult:
    """What :func:`train_dpsgd` did (the model itself is trained in place).

    Attributes
    ----------
    noise_multiplier : float
        σ; the noise on each step's summed clipped gradients has std σ·C per coordinate.
    steps_per_epoch, epochs : int
        M and E; ``n_steps = M·E`` noisy steps were taken.
    max_grad_norm : float or None
        Clipping norm C (``None``: no clipping, non-private training).
    n_records : int
        Number of training records n.
    expected_batch_size : float
        ``k·n/t``, the divisor of every step's noisy sum (``n``: the spec's ``dataset_size``
        when given, else the number of records).
    n_steps, n_empty_steps, min_batch_size, max_batch_size : int
        Realised allocation statistics (for diagnostics only; never used by the update).
    clipped_fraction : float or None
        Fraction of per-sample gradients whose norm exceeded C (``None`` without clipping).
    epoch_losses : tuple of float
        Mean per-example training loss of each epoch, evaluated at the parameters of the
        step that used the example (before its update).
    secure_noise : bool
        Whether the noise generator was reseeded from OS entropy at every step.
    seed : dict or None
        ``None`` when ``train_dpsgd`` ran with ``rng=None``: the allocation and the noise came
        from fresh OS entropy that is not recorded anywhere (it would regenerate both, and
        the bound of [1]_ assumes they are secret). With a caller-given ``rng``,
        ``seed_to_dict`` of its root SeedSequence (child 0: allocation, child 1: noise),
        which regenerates the allocation and, unless ``secure_noise``, every noise draw: the
        caller's choice, for tests and experiments only.
    randomness : str
        ``"fresh OS entropy (not recorded)"`` or ``"caller-seeded (not for production)"``.
    wall_time_s : float
        Training wall-clock time in seconds.
    k : int
        Steps per record per epoch (k of t random allocation).
    membership_inference_accuracy_bound : float or None
        Certified chi-square bound on the membership-inference accuracy of this run (equal
        priors, worst case over datasets; ``k > 1``: the hypergeometric form), ``None`` for
        non-private training (σ = 0 or no clipping). It assumes what [1]_ assumes: the
        allocation and the noise are secret (``rng=None`` in deployment), the adversary sees
        every step's noisy gradient, and exact arithmetic as in ``arithmetic``.
    arithmetic : str
        The arithmetic of the noisy step that the certificates assume
        (:data:`pacpriv.dpsgd._noise.ARITHMETIC`).
    target_accuracy : float or None
        The membership-inference accuracy σ was calibrated to (certified exact accuracy), or
        None.
    target_epsilon, delta : float or None
        The ``(ε, δ)`` σ was calibrated to (``get_epsilon(delta) <= target_epsilon``), or None.
    """

    noise_multiplier: float
    steps_per_epoch: int
    epochs: int
    max_grad_norm: float | None
    n_records: int
    expected_batch_size: float
    n_steps: int
    n_empty_steps: int
    min_batch_size: int
    max_batch_size: int
    clipped_fraction: float | None
    epoch_losses: tuple[float, ...]
    secure_noise: bool
    seed: dict | None
    wall_time_s: float
    randomness: str = "caller-seeded (not for production)"
    k: int = 1
    membership_inference_accuracy_bound: float | None = None
    arithmetic: str = ""
    target_accuracy: float | None = None
    target_epsilon: float | None = None
    delta: float | None = None

    @property
    def private(self) -> bool:
        """Whether noise was added to clipped gradients (σ > 0 and a clipping norm)."""
        return self.noise_multiplier > 0 and self.max_grad_norm is not None

    def spec(self) -> DPSGDSpec:
        """The run as a :class:`~pacpriv.dpsgd.DPSGDSpec` (σ, t, E, n, C, k)."""
        return DPSGDSpec(self.noise_multiplier, self.steps_per_epoch, self.epochs,
                         self.n_records, self.max_grad_norm, self.k)

    def exact_membership_inference_accuracy(self, *, tolerance: float = 1e-4):
        """Certified interval for the exact membership-inference accuracy of this run
        (:func:`pacpriv.dpsgd.exact_membership_inference_accuracy`; ``ValueError`` for
        non-private training)."""
        self._require_private()
        return self.spec().exact_membership_inference_accuracy(tolerance=tolerance)

    def get_epsilon(self, delta: float) -> float:
        """ε of this run at ``delta`` (add or remove one record, both directions), from the
        same certified privacy-loss distribution as :meth:`tradeoff_curve`, as opacus'
        ``get_epsilon`` and dp-accounting report it; ``inf`` for non-private training."""
        if not self.private:
            return math.inf
        return self.spec().get_epsilon(delta)

    def tradeoff_curve(self, *, fpr=None):
        """Certified membership trade-off curve of this run
        (:func:`pacpriv.dpsgd.tradeoff_curve`)."""
        self._require_private()
        return self.spec().tradeoff_curve(fpr=fpr)

    def _require_private(self) -> None:
        if not self.private:
            raise ValueError("this run added no noise (noise_multiplier=0 or no clipping): "
                             "it has no privacy guarantee to compute.")

    def to_dict(self) -> dict:
        """JSON-serialisable dictionary of all fields."""
        out = asdict(self)
        out["epoch_losses"] = list(self.epoch_losses)
        return out
