"""The audit figure: every attack's ROC and the certified trade-off curves on log–log axes.

Works from the audit report dict (:meth:`pacpriv.audit.AuditReport.to_dict`) alone: the sampled
ROC of each attack (aggregate rates, no score), its TPR at the reported FPRs with the
Clopper–Pearson interval, and every certified curve. The chance diagonal ``TPR = FPR`` is drawn
for reference (Carlini et al., S&P 2022, Fig. 1 style).
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping

import numpy as np

from pacpriv.plotting._figure import _figure

__all__ = ["plot_audit_roc"]

_CURVE_STYLES = ("-", "--", "-.", ":")


def _positive(x) -> np.ndarray:
    """Values as floats with zeros masked (a log axis cannot show them)."""
    arr = np.asarray(x, dtype=float)
    return np.where(arr > 0, arr, np.nan)


def plot_audit_roc(report: Mapping, *, width: float = 7.8, height: float = 6.0):
    """Log–log ROC of every attack of an audit report, with its certified curves.

    Parameters
    ----------
    report : dict
        :meth:`pacpriv.audit.AuditReport.to_dict` (keys ``attacks``, ``certified_curves`` or
        ``certified_curve``, ``setup``).
    width, height : float
        Figure size in inches.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    TypeError
        If ``report`` is not a mapping with ``attacks``.
    """
    if not isinstance(report, Mapping) or "attacks" not in report:
        raise TypeError("`report` must be an audit report dict (with 'attacks').")
    fig, (ax,) = _figure(1, width=width, height=height)
    attacks = list(report["attacks"])
    # the smallest resolvable FPR, 1/n_nonmembers (a log axis starts above 0)
    lo = min([1e-4, *[1.0 / a["n_nonmembers"] for a in attacks if a.get("n_nonmembers")]])
    diag = np.array([lo, 1.0])
    ax.plot(diag, diag, color="0.6", lw=1, ls=":", label="chance (TPR = FPR)")
    curves = report.get("certified_curves") or [report["certified_curve"]]
    for i, c in enumerate(curves):
        label = "\n".join(textwrap.wrap(str(c["label"]), 70))
        ax.plot(c["fpr"], _positive(c["tpr"]), color="black" if i == 0 else "0.35",
                lw=2.2 if i == 0 else 1.4, ls=_CURVE_STYLES[i % len(_CURVE_STYLES)], label=label)
    colors = ("tab:red", "tab:blue", "tab:orange", "tab:purple", "tab:green", "tab:brown",
              "tab:pink", "tab:olive")
    for i, a in enumerate(attacks):
        color = colors[i % len(colors)]
        roc = a.get("roc") or {}
        if roc.get("fpr"):
            ax.step(_positive(roc["fpr"]), _positive(roc["tpr"]), where="post", color=color,
                    lw=1.3,
                    label=f"{a['name']} (AUC {float(a['auc']):.3f}; estimated)")
        pts = [(float(k), v) for k, v in a["tpr_at_fpr"].items() if v.get("resolved")]
        if pts:
            x = np.array([p[0] for p in pts])
            t = np.array([p[1]["tpr"] for p in pts], dtype=float)
            ci = np.array([p[1]["ci"] for p in pts], dtype=float)
            ok = t > 0
            if ok.any():
                ax.errorbar(x[ok], t[ok], yerr=[t[ok] - np.maximum(ci[ok, 0], 1e-12),
                                                ci[ok, 1] - t[ok]],
                            fmt="o", ms=3.5, color=color, capsize=2, lw=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, 1.0)
    ax.set_ylim(lo, 1.05)
    ax.set_xlabel("false-positive rate")
    ax.set_ylabel("true-positive rate")
    setup = report.get("setup") or {}
    ax.set_title("Membership-inference ROC (log–log): attacks vs certified curve"
                 + (f"\n{setup['reference_models']} models, "
                    f"{setup['candidate_records']} candidate records"
                    if "reference_models" in setup else ""), fontsize=10)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(loc="lower right", fontsize=6.5, framealpha=0.9)
    return fig
