"""The audit report's renderers (pacpriv.report.audit) and figure (pacpriv.plotting.audit)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pacpriv.audit import AuditReport, OneRunResult, accuracy_curve
from pacpriv.audit._curves import curve_grid
from pacpriv.audit._suite import LiraAttack, LossAttack, evaluate_attacks
from pacpriv.report.audit import audit_markdown, render_audit_html, write_audit_report


class _Named(LossAttack):
    """The loss attack under a hostile name (HTML and Markdown must show it as text)."""

    @property
    def name(self) -> str:
        return "<script>alert(1)</script> | **x**"


def _report(shift: float = 1.0, *, one_run: OneRunResult | None = None) -> AuditReport:
    rng = np.random.default_rng(0)
    K, n, nz = 8, 300, 50
    masks = np.zeros((K, n), dtype=bool)
    for k in range(0, K, 2):
        masks[k] = rng.random(n) < 0.5
        masks[k + 1] = ~masks[k]
    phi = rng.normal(0, 2, size=n + nz) + rng.normal(0, 0.5, size=(K, n + nz))
    phi[:, :n] += shift * masks
    fprs = (1e-4, 1e-3, 1e-2, 1e-1)
    attacks = evaluate_attacks(phi[:, :n, None], phi[:, n:, None], masks,
                               attacks=(LiraAttack(), _Named()), fprs=fprs, rng=0)
    curve = accuracy_curve(0.6, curve_grid(fprs), label="test bound")
    return AuditReport(
        attacks=tuple(attacks), curves=(curve,), one_run=one_run,
        model={"training": "synthetic"}, dataset={"name": "synthetic"},
        setup={"candidate_records": n, "population_samples": nz, "reference_models": K,
               "queries": 1, "fprs": list(fprs), "confidence": 0.95},
        simulation={"backend": "sequential", "n_jobs": 1, "reproducible": True},
        seed={"entropy": 1, "spawn_key": []}, timings={"total_s": 1.0}, notes=("a caveat",))


def test_markdown_tables_rounding_and_unresolved():
    one = OneRunResult(epsilon_lower=1.23456, epsilon_accountant=5.00001, accountant="acc",
                       delta=1e-5, confidence=0.95, canaries=100, guesses=20, correct=19,
                       guess_fraction=0.2, tests=5, mislabeled=True, elapsed_s=1.0)
    r = _report(one_run=one).to_dict()
    md = audit_markdown(r)
    assert "## TPR at low FPR (estimated, with Clopper–Pearson intervals)" in md
    assert "| attack | AUC | balanced accuracy [CI] | TPR @ FPR 0.01% [CI] |" in md
    # 8 x 150 non-members cannot resolve 0.01%
    assert "FPR 0.01%: unresolved, needs at least 10000 non-member scores" in md
    assert "| 0.01% | — | unresolved |" in md
    # ε lower bound rounded down, the accountant's ε up (4 significant digits)
    assert "| ε lower bound (one run; rounded down) | 1.234 |" in md
    assert "| accountant's ε (certified; rounded up) | 5.001 |" in md
    assert "- a caveat" in md and "![log–log ROC" in md
    # the hostile attack name is escaped in the table
    assert "<script>" not in md and "&lt;script&gt;" in md and "\\|" in md


def test_gap_rows_round_the_certified_tpr_up_and_flag_violations():
    rep = _report(shift=4.0)
    gaps = rep.gaps()
    ten = next(g for g in gaps if g["fpr"] == 0.1)
    assert ten["certified_tpr"] == pytest.approx(0.3)
    assert ten["violations"]  # a strong planted signal exceeds an accuracy-0.6 curve
    md = audit_markdown(rep.to_dict())
    assert "yes: LiRA (online)" in md  # significant violation column
    assert "attack/curve pair(s) exceed a certified curve" in md


def test_html_is_escaped_and_embeds_the_figure(tmp_path):
    r = _report().to_dict()
    paths = write_audit_report(r, tmp_path)
    assert set(paths) == {"json", "png", "md", "html"}
    page = (tmp_path / "report.html").read_text()
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert page.count("data:image/png;base64,") == 1
    assert json.loads((tmp_path / "report.json").read_text())["attacks"][0]["name"] == \
        "LiRA (online)"
    no_fig = render_audit_html(r)
    assert "data:image" not in no_fig and "<h2>Gap to the certified curve</h2>" in no_fig


def test_figure_has_log_axes_every_attack_and_the_curve():
    from pacpriv.plotting.audit import plot_audit_roc

    fig = plot_audit_roc(_report().to_dict())
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(lab.startswith("certified: test bound") for lab in labels)
    assert any(lab.startswith("LiRA (online) (AUC") for lab in labels)
    assert ax.get_xlim()[0] == pytest.approx(1e-4)  # the axis always reaches FPR 0.01%
    with pytest.raises(TypeError, match="audit report dict"):
        plot_audit_roc({"kind": "pac"})


def test_formats_are_checked():
    with pytest.raises(ValueError, match="subset of json, md, html"):
        write_audit_report(_report().to_dict(), "unused", formats=("pdf",))
