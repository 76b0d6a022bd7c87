"""``ExactAccuracy``: the certified interval of the exact membership-inference accuracy.

Private module; the class is public as :class:`pacpriv.dpsgd.ExactAccuracy` (re-exported by
:mod:`pacpriv.dpsgd.exact`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from pacpriv._display import Displayable, Summary
from pacpriv._display import shown as _shown
from pacpriv.dpsgd.labels import bound_fields, label_rows

__all__ = ["ExactAccuracy"]


@dataclass(frozen=True)
class ExactAccuracy(Displayable):
    """Certified interval for the exact membership-inference accuracy ``½ + ½·TV``.

    Attributes
    ----------
    lower, upper : float
        Certified bounds, ``½ ≤ lower ≤ exact ≤ upper ≤ 1``. ``upper`` is also capped by the
        chi-square bound (itself a certified upper bound).
    estimate : float
        A point estimate inside ``[lower, upper]``, not a bound: the midpoint of the interval,
        except for ``k >= 3`` when the deterministic chains do not both run, where it is the
        Monte-Carlo mean of the lower end's draws, clipped to the interval (so it can sit at
        ``lower``). Risk statements use ``upper``.
    tolerance : float
        Requested width ``upper − lower`` (absolute, accuracy units).
    converged : bool
        Whether the width met ``tolerance`` (otherwise a :class:`PacprivWarning` was issued;
        the interval is still certified, only wider).
    noise_multiplier, steps_per_epoch, epochs : float, int, int
        The inputs.
    direction : {"add", "remove"}
        Which privacy-loss direction evaluated the total variation (both give the same TV).
    method : str
        Short description of the algorithm.
    details : dict
        Grid parameters, lattice sizes, total variation bounds, error terms and wall time.
    k : int
        Steps per record per epoch (k of t).
    lower_confidence : float
        1 when ``lower`` is deterministic; for ``k > 1`` the confidence 1 − γ of its
        Monte-Carlo lower end (``upper`` stays deterministic).
    """

    lower: float | np.ndarray
    upper: float | np.ndarray
    estimate: float | np.ndarray
    tolerance: float
    converged: bool | np.ndarray
    noise_multiplier: float | np.ndarray
    steps_per_epoch: int | np.ndarray
    epochs: int | np.ndarray
    direction: str
    method: str
    details: dict = field(default_factory=dict)
    k: int = 1
    lower_confidence: float = 1.0

    @property
    def width(self) -> float | np.ndarray:
        """``upper − lower``."""
        return self.upper - self.lower

    def summary(self) -> Summary:
        """Rows shown by ``str(result)`` and in Jupyter (lower rounded down, upper up)."""
        return Summary("DP-SGD exact membership-inference accuracy (certified interval)", [
            ("noise multiplier σ", _shown(self.noise_multiplier), "plain"),
            ("steps per epoch M", _shown(self.steps_per_epoch), "plain"),
            ("epochs E", _shown(self.epochs), "plain"),
            ("lower (certified)", _shown(self.lower, up=False), "plain"),
            ("upper (certified)", _shown(self.upper, up=True), "plain"),
            ("converged to tolerance", _shown(self.converged), "plain"),
            *label_rows("certified", detail=self._detail()),
        ])

    def _detail(self) -> str:
        """The interval's detail label (its lower end's confidence where below 1)."""
        conf = self.lower_confidence
        return "exact interval" + (
            "" if conf == 1.0 else f", lower end with confidence {conf:g} (Monte Carlo)")

    def to_dict(self) -> dict:
        """JSON-serialisable dict (arrays become lists)."""
        out = asdict(self)
        out["width"] = self.width
        # what the interval is and whom it covers (the CLI's JSON fields; issue 35, a1302); a
        # Monte Carlo lower end is named with its confidence
        out.update(bound_fields("certified", detail=self._detail()))
        return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in out.items()}
