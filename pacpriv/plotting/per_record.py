"""Histogram of per-record membership exposure (informed adversary).

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, §2 (individual privacy).
"""

from __future__ import annotations

import numpy as np

from pacpriv._validation import check_array_real, check_real
from pacpriv.plotting._figure import _figure

__all__ = ["plot_per_record_histogram"]


def plot_per_record_histogram(accuracy_upper, *, target_accuracy: float | None = None,
                              baseline: float = 0.5, bins: int = 30):
    """Histogram of per-record accuracy upper bounds, with the target and the blind guess.

    Parameters
    ----------
    accuracy_upper : array_like of shape (k,)
        Certified per-record upper bounds in ``[baseline, 1]`` (values only, no indices).
    target_accuracy : float, optional
        Calibration target, drawn as a vertical line.
    baseline : float, default 0.5
        Blind-guess accuracy ``max(q, 1 − q)``, drawn dotted.
    bins : int, default 30
        Number of bins.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        If values are outside ``[0, 1]`` or the array is empty.
    ImportError
        Without matplotlib (``pip install pacpriv[plot]``).
    """
    acc = check_array_real(accuracy_upper, "accuracy_upper", low=0.0, high=1.0).ravel()
    if acc.size == 0:
        raise ValueError("`accuracy_upper` must hold at least one value.")
    base = check_real(baseline, "baseline", low=0.0, high=1.0)
    fig, axes = _figure(1)
    ax = axes[0]
    hi = max(float(acc.max()), target_accuracy or 0.0)
    ax.hist(acc, bins=np.linspace(base, min(1.0, hi + 0.02), bins + 1), color="#4a7ab5",
            edgecolor="white")
    ax.axvline(base, color="grey", linestyle=":", label=f"blind guess {base:.2f}")
    if target_accuracy is not None:
        t = check_real(target_accuracy, "target_accuracy", low=0.0, high=1.0)
        ax.axvline(t, color="#c0392b", linewidth=2, label=f"target {t:.3f}")
    ax.set_xlabel("informed-adversary accuracy, certified upper bound per record")
    ax.set_ylabel("records")
    ax.set_title(f"Per-record membership exposure ({acc.size} records)")
    ax.legend(loc="upper right")
    return fig
