"""Self-contained HTML report (pacpriv.report.html): sections, embedded figures, escaping."""

from __future__ import annotations

import base64
import json
import warnings
from html.parser import HTMLParser

import numpy as np
import pytest

import pacpriv.report.builder
from pacpriv import report as report_mod
from pacpriv._numbers import format_bound
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.job import run_pac
from pacpriv.pac.noise import Certified
from pacpriv.report import ARRAY_LIMIT, build_report, write_report
from pacpriv.report.html import render_html
from pacpriv.report.markdown import markdown_to_html

SERIAL = ExecutionOptions(n_jobs=1, progress=False)
NO_CHECK = Certified(target_inflation=None)  # no trial-count check

PNG_PREFIX = "data:image/png;base64,"
EVIL = '<script>alert("x")</script>"><img src=http://evil.example/x.png>'
PAC_SECTIONS = [
    "Headline", "Threat model", "Dataset and mechanism", "Sampler and simulation",
    "Output spectrum (estimated covariance Σ)", "Noise", "Privacy guarantee", "Release",
]


class _Page(HTMLParser):
    """Collects tags, attributes, h2 texts and text data of a page."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.h2: list[str] = []
        self.text: list[str] = []
        self._in_h2 = False
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_h2 = tag == "h2"
        if self._in_h2:
            self.h2.append("")

    def handle_endtag(self, tag):
        if tag == "h2":
            self._in_h2 = False

    def handle_data(self, data):
        self.text.append(data)
        if self._in_h2:
            self.h2[-1] += data

    def srcs(self) -> list[str]:
        return [a[k] for _, a in self.tags for k in ("src", "href", "data") if k in a]

    def imgs(self) -> list[str]:
        return [a["src"] for t, a in self.tags if t == "img"]


def _mean_mech(subset):
    """Clipped column means (0 for an empty subset)."""
    x = np.clip(np.asarray(subset, dtype=float), 0.0, 10.0)
    return x.mean(axis=0) if x.shape[0] else np.zeros(x.shape[1])


@pytest.fixture(scope="module")
def result():
    """A small PAC job whose dataset and mechanism names try to inject HTML."""
    x = np.linspace(0, 10, 90).reshape(30, 3)
    return run_pac(_mean_mech, x, mi_budget=0.05, n_trials=30, rng=0, release_rng=1,
                   execution=SERIAL,
                   mechanism_name=EVIL, rule=NO_CHECK,
                   dataset={"name": EVIL, "n_records": 30})


@pytest.fixture(scope="module")
def page(result):
    """The parsed HTML of that job (figures on)."""
    pytest.importorskip("matplotlib")
    text = render_html(build_report(result, pool_statistics=True), result)
    return text, _Page(text)


def _assert_self_contained(page: _Page) -> None:
    forbidden = {"script", "link", "iframe", "object", "embed", "base"}
    assert not [t for t, _ in page.tags if t in forbidden]
    for src in page.srcs():
        assert src.startswith(PNG_PREFIX), src[:60]
        assert base64.b64decode(src[len(PNG_PREFIX):]).startswith(b"\x89PNG")


def test_pac_page_has_every_section_in_order(page):
    """All report sections appear as h2, in the order of the Markdown report."""
    h2 = page[1].h2
    assert h2[: len(PAC_SECTIONS)] == PAC_SECTIONS
    assert h2[-1] == "Reproducibility"


def test_pac_figures_are_embedded_pngs(page):
    """The spectrum and posterior figures are embedded as base64 PNGs; nothing external."""
    parsed = page[1]
    assert len(parsed.imgs()) == 2
    _assert_self_contained(parsed)


def test_injection_is_escaped(page):
    """Dataset and mechanism names are text: no tag or attribute comes from them."""
    text, parsed = page
    assert EVIL not in text
    assert "&lt;script&gt;" in text
    assert sum(EVIL in d for d in parsed.text) >= 2  # shown literally (dataset + mechanism)
    _assert_self_contained(parsed)


def test_headline_number_is_the_posterior_bound(result, page):
    """The headline shows the job's posterior success bound (percent, 2 decimals)."""
    want = f"{100 * result.posterior_success_bound:.2f}%"
    assert want in "".join(page[1].text)


def test_extra_section_markdown_figures_and_plot(result):
    """A section's Markdown table, data-URI figure and plot spec render; URLs are dropped."""
    pytest.importorskip("matplotlib")
    png = PNG_PREFIX + base64.b64encode(b"\x89PNG\r\n\x1a\nfake").decode()
    section = {
        "title": "PAC vs DP-SGD <b>", "markdown": "| method | noise |\n|---|---|\n| PAC | 1.5 |",
        "figures": [png, "http://evil.example/x.png", "javascript:alert(1)"],
        "plot": {"kind": "pac_vs_dpsgd", "rows": [
            {"method": "PAC", "noise": 1.5, "test_accuracy": 0.9, "accuracy_bound": 0.6,
             "attack_accuracy": 0.51}]},
    }
    rep = build_report(result.with_sections(section), pool_statistics=True)
    parsed = _Page(render_html(rep, result))
    assert "PAC vs DP-SGD <b>" in parsed.h2
    cells = [t for t, _ in parsed.tags if t == "td"]
    assert ("th", {}) in parsed.tags and len(cells) > 0
    assert "1.5" in parsed.text
    assert len(parsed.imgs()) == 4  # spectrum, posterior, given PNG, bar chart
    assert png in parsed.imgs()
    _assert_self_contained(parsed)


def test_report_json_without_arrays_still_renders(result):
    """A report dict lacking the per-direction arrays (older JSON) renders without the spectrum."""
    pytest.importorskip("matplotlib")
    rep = json.loads(json.dumps(build_report(result, pool_statistics=True)))
    del rep["spectrum"]["eigenvalues"]
    parsed = _Page(render_html(rep))
    assert len(parsed.imgs()) == 1  # posterior curve only
    assert parsed.h2[: len(PAC_SECTIONS)] == PAC_SECTIONS


def test_unknown_plot_kind_is_rejected(result):
    """A plot spec of an unknown kind is a ValueError listing the known kinds."""
    pytest.importorskip("matplotlib")
    rep = build_report(result.with_sections({"title": "t", "markdown": "",
                                             "plot": {"kind": "pie"}}))
    with pytest.raises(ValueError, match="pac_vs_dpsgd"):
        render_html(rep, result)


def test_plot_spec_without_kind_is_rejected(result):
    """A plot spec must be a dict with 'kind'."""
    pytest.importorskip("matplotlib")
    rep = build_report(result.with_sections({"title": "t", "markdown": "", "plot": [1]}))
    with pytest.raises(ValueError, match="'kind'"):
        render_html(rep, result)


class _AnalyticStub:
    """Minimal analytic mechanism: report_section() plus the DP-SGD spec attributes."""

    noise_multiplier = 1.5
    steps_per_epoch = 20
    epochs = 3

    def report_section(self):
        return {"title": "DP-SGD <analytic>", "threat_model": "worst case over datasets",
                "markdown": "Accuracy bound **0.6** for `σ = 1.5`."}


def test_analytic_report_gets_accuracy_vs_sigma_figure():
    """An analytic report renders its section and the accuracy-vs-σ figure."""
    pytest.importorskip("matplotlib")
    stub = _AnalyticStub()
    parsed = _Page(render_html(build_report(stub), stub))
    assert parsed.h2 == ["Threat model", "DP-SGD <analytic>", "Reproducibility"]
    assert len(parsed.imgs()) == 1
    assert ("strong", {}) in parsed.tags and ("code", {}) in parsed.tags
    _assert_self_contained(parsed)


def test_dpsgd_spec_renders_with_figure():
    """pacpriv.dpsgd.DPSGDSpec renders with the accuracy-vs-σ figure."""
    pytest.importorskip("matplotlib")
    from pacpriv.dpsgd import DPSGDSpec

    spec = DPSGDSpec(noise_multiplier=2.0, steps_per_epoch=10, epochs=2)
    parsed = _Page(render_html(build_report(spec), spec))
    assert len(parsed.imgs()) == 1
    _assert_self_contained(parsed)
    bound = spec.membership_inference_accuracy_bound().accuracy
    # the section's numbers are shown, rounded upward (a bound never looks lower)
    assert format_bound(bound, 6, side="up") in parsed.text
    again = _Page(render_html(json.loads(json.dumps(build_report(spec)))))  # from JSON alone
    assert len(again.imgs()) == 1


def test_section_without_markdown_shows_its_fields_and_table():
    """A section with only data (no Markdown) renders its table and flattened fields."""
    rep = {"kind": "analytic", "title": "t", "sections": [{
        "title": "data only", "spec": {"noise_multiplier": 1.25}, "note": "<i>x</i>",
        "table": {"columns": ["method", "accuracy"], "rows": [["chi-square", 0.61]]}}]}
    text = render_html(rep, figures=False)
    parsed = _Page(text)
    assert {"spec: noise multiplier", "1.25", "<i>x</i>", "chi-square", "0.61"} <= set(
        parsed.text)
    assert ("th", {}) in parsed.tags and "<i>" not in text


def test_figures_false_gives_text_only(result):
    """figures=False renders every section without images."""
    parsed = _Page(render_html(build_report(result), result, figures=False))
    assert parsed.imgs() == []
    assert parsed.h2[: len(PAC_SECTIONS)] == PAC_SECTIONS


def test_render_html_rejects_non_report():
    """Anything but a report dict is a TypeError."""
    with pytest.raises(TypeError, match="build_report"):
        render_html({"title": "no kind"})


def test_missing_matplotlib_writes_html_without_figures(result, tmp_path, monkeypatch,
                                                        hide_modules):
    """Without matplotlib render_html names the extra; write_report still writes the HTML,
    without figures, and says so once."""
    hide_modules("matplotlib")
    with pytest.raises(ImportError, match=r"pip install pacpriv\[plot\]"):
        render_html(build_report(result, pool_statistics=True), result)
    monkeypatch.setattr(pacpriv.report.builder, "_warned_no_figures", False)
    with pytest.warns(UserWarning, match=r"without figures.*pacpriv\[plot\]"):
        paths = write_report(result, tmp_path, pool_statistics=True)
    assert set(paths) == {"json", "md", "html"}
    page = paths["html"].read_text()
    assert "<img" not in page and "Posterior success bound" not in page
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        write_report(result, tmp_path / "again")  # said once per process


def test_write_report_writes_self_contained_html(result, tmp_path):
    """write_report's report.html parses and embeds its figures."""
    pytest.importorskip("matplotlib")
    paths = write_report(result, tmp_path, pool_statistics=True)
    assert paths["html"] == tmp_path / "report.html"
    parsed = _Page(paths["html"].read_text())
    assert len(parsed.imgs()) == 2
    _assert_self_contained(parsed)


@pytest.mark.filterwarnings("ignore::pacpriv.exceptions.UndersampledWarning")
def test_report_arrays_truncated_to_limit():
    """Per-direction arrays in the report dict stop at ARRAY_LIMIT = 200 values."""
    x = np.linspace(0, 1, 20 * 250).reshape(20, 250)
    res = run_pac(_mean_mech, x, mi_budget=0.1, n_trials=12, rng=0, release=False,
                  execution=SERIAL, rule="variance-only")
    rep = build_report(res, pool_statistics=True)
    assert ARRAY_LIMIT == report_mod.ARRAY_LIMIT == 200
    assert len(rep["noise"]["noise_std"]) == 200
    assert len(rep["spectrum"]["coordinate_variances"]) == 200
    np.testing.assert_allclose(rep["noise"]["noise_std"], res.plan.noise_std[:200])
    assert len(rep["spectrum"]["eigenvalues"]) == res.spectrum.n_components <= 11


def test_markdown_escapes_raw_html_and_renders_subset():
    """The Markdown subset escapes raw HTML, keeps snake_case, renders code, bold and lists."""
    out = markdown_to_html("<b>x</b> **y** `<i>` noise_multiplier\n\n- a\n- _b_")
    assert "<b>" not in out and "&lt;b&gt;x&lt;/b&gt;" in out
    assert "<strong>y</strong>" in out and "<code>&lt;i&gt;</code>" in out
    assert "noise_multiplier" in out and "<ul><li>a</li><li><em>b</em></li></ul>" in out


def test_report_json_stores_the_eigenvalues_once(result):
    """One list of eigenvalues in report.json (issue 9): the renderings slice it."""
    rep = build_report(result, pool_statistics=True)
    text = json.dumps(rep)
    assert "top_eigenvalues" not in text and "eigenvalues_top" not in text
    top = [float(v) for v in result.spectrum.eigenvalues[:3]]
    assert rep["spectrum"]["eigenvalues"][:3] == top
    assert "| top eigenvalues | [" in report_mod.to_markdown(rep)
