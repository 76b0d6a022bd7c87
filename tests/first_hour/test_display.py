"""Issue 15, items 8-10 of a new user's first hour: numbers on screen, utility, help.

Each test runs the CLI in-process (``pacpriv.cli.main``) on a small user CSV and user functions
written into ``tmp_path``, with few trials so the file stays fast.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import warnings
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pacpriv._numbers import format_bound, format_percent
from pacpriv.cli import build_parser
from pacpriv.cli.main import _print_warnings

from .conftest import BASE, _run


# ----------------------------------------------------------------------------- item 8
@settings(max_examples=300, deadline=None)
@given(st.floats(min_value=-1e12, max_value=1e12, allow_nan=False), st.integers(1, 10))
def test_format_bound_rounds_toward_the_safe_side(x, digits):
    up, down = Decimal(format_bound(x, digits)), Decimal(format_bound(x, digits, side="down"))
    exact = Decimal(repr(x))
    assert down <= exact <= up  # no digit dropped before the directed rounding
    assert Decimal(format_percent(x, side="down")[:-1]) <= exact * 100 <= Decimal(
        format_percent(x)[:-1])
    if x != 0:
        ulp = Decimal(10) ** (exact.adjusted() - digits + 1)
        assert up - down <= ulp


def test_format_bound_examples_and_vacuous():
    assert format_bound(0.599998, 4) == "0.6"
    assert format_bound(0.5999981, 6) == "0.599999"
    assert format_bound(0.1) == "0.1" and format_bound(np.float64(0.25)) == "0.25"
    assert format_bound(1.0, vacuous=True) == "1 (vacuous)"
    assert format_percent(0.887251) == "88.73%" and format_percent(0.88720001) == "88.73%"
    # a float above 0.6, however little, never shows as 60.00%
    assert format_percent(0.6000000000000001) == "60.01%"
    assert format_percent(0.6) == "60.00%" and format_percent(0.6, side="down") == "60.00%"
    assert format_percent(0.600000001) == "60.01%"


def test_figure_labels_agree_with_the_tables(user, capsys):
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from pacpriv.plotting import plot_dpsgd_accuracy_vs_sigma, plot_posterior_curve

    code, _, err = _run(capsys, *BASE, "--mechanism", "myfuncs.py:clipped_mean", "--out", "rep")
    assert code == 0, err
    p = json.loads(Path("rep/report.json").read_text())["privacy"]
    fig = plot_posterior_curve(p["mi_claim_nats"], prior=0.5)
    labels = " ".join(t.get_text() for t in fig.axes[0].get_legend().get_texts())
    plt.close(fig)
    shown = format_bound(p["posterior_success_bound"], 4, side="up")
    assert f": {shown}" in labels
    table = Path("rep/report.md").read_text()
    row = re.search(r"\| posterior success bound \(KL inversion, Thm 1\)[^|]* \| ([^ |]+)", table)
    assert format_bound(float(row.group(1)), 4, side="up") == shown  # same number, same way

    code, out, _ = _run(capsys, "dpsgd", "bound", "--steps-per-epoch", "10", "--epochs", "2",
                        "--noise-multiplier", "1")
    cli_value = float(next(line for line in out.splitlines()  # after the "setting" row
                           if line.startswith("membership-inference accuracy bound")).split()[-1])
    fig = plot_dpsgd_accuracy_vs_sigma(steps_per_epoch=10, epochs=2, noise_multiplier=1.0,
                                       exact=False, comparators=False)
    labels = " ".join(t.get_text() for t in fig.axes[0].get_legend().get_texts())
    plt.close(fig)
    assert f"chi-square {format_bound(cli_value, 4, side='up')}" in labels


def test_vacuous_bounds_are_marked(capsys):
    code, out, _ = _run(capsys, "dpsgd", "bound", "--steps-per-epoch", "10", "--epochs", "500",
                        "--noise-multiplier", "0.1")
    assert code == 0 and "1 (vacuous)" in out


# ----------------------------------------------------------------------------- item 9
def test_release_subset_and_utility_hint(user, capsys):
    code, out, err = _run(capsys, *BASE, "--mechanism", "myfuncs.py:clipped_mean", "--out", "rep")
    assert code == 0, err
    assert "f was released on a random secret subset" in out and "50% of the pool" in out
    report = json.loads(Path("rep/report.json").read_text())
    s, n = report["spectrum"], report["noise"]
    # a user CSV is not public: the report states the noise relative to the spread only
    assert "total_variance" not in s and "expected_noise_power" not in n
    ratio = n["noise_to_spread_rms"]  # one significant digit (a statistic of a private pool)
    assert f"noise / spread {format_bound(ratio, 3, side='down')}" in out
    md = Path("rep/report.md").read_text()
    assert "f was released on a random secret subset" in md
    assert (f"the noise is at least about {format_bound(ratio, 1, side='down')}× the spread"
            in md)
    assert ("| noise / spread of f across trials (RMS, one significant digit) | "
            f"{format_bound(ratio, 6, side='down')} |") in md
    # with --report-pool-statistics the absolute values are there, and give the same ratio
    code, out, err = _run(capsys, *BASE, "--mechanism", "myfuncs.py:clipped_mean", "--out", "rep2",
                          "--report-pool-statistics")
    assert code == 0, err
    full = json.loads(Path("rep2/report.json").read_text())
    d = full["simulation"]["dim"]
    again = (math.sqrt(full["noise"]["expected_noise_power"] / d)
             / math.sqrt(full["spectrum"]["total_variance"] / d))
    assert ratio <= again < ratio + 10.0 ** math.floor(math.log10(ratio))  # one digit, down


# ----------------------------------------------------------------------------- item 10
def _all_parsers(parser):
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _all_parsers(sub)


def test_every_flag_has_help_and_defaults_are_shown():
    parser = build_parser()
    for p in _all_parsers(parser):
        for action in p._actions:
            if action.option_strings and not isinstance(action, argparse._HelpAction):
                assert action.help, f"{p.prog} {action.option_strings} has no help"
    # whitespace collapsed: argparse wraps at the terminal's width ($COLUMNS), which a CI
    # runner or a narrow terminal sets differently (at COLUMNS=40 "(default:\n 1000)")
    run = " ".join(next(p for p in _all_parsers(parser)
                        if p.prog.endswith("pac run")).format_help().split())
    assert "(default: 1000)" in run and "(default: poisson)" in run
    assert "(default: None)" not in run
    post = next(p for p in _all_parsers(parser) if p.prog.endswith("pac posterior"))
    assert "(default: 0.5)" in " ".join(post.format_help().split())


def test_messages_show_plain_numbers(user, capsys):
    code, _, err = _run(capsys, *BASE[:4], "--target-accuracy", "0.6", "--sampling-rate", "0.1",
                        "--mechanism", "mean", "--out", "r")
    assert code == 2 and "np.float64" not in err and "0.9" in err


def test_warnings_are_printed_once_per_kind(capsys):

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(15):
            warnings.warn(f"interval width {i}e-4 exceeds tolerance 1e-05 for sigma={i}",
                          UserWarning, stacklevel=1)
        warnings.warn("something else", UserWarning, stacklevel=1)
    _print_warnings(caught)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2
    assert err[0].endswith("(and 14 more like it)") and err[1].endswith("something else")


@pytest.mark.filterwarnings("ignore::pacpriv.exceptions.UndersampledWarning")
def test_report_rounds_the_budget_up_and_labels_the_plugin_row(tmp_path, capsys, monkeypatch):
    """V2 review: v = KL(Bern(.75) || Bern(.7)) = 0.0061642644… showed as 0.00616426 (down)."""
    monkeypatch.chdir(tmp_path)
    code, _, err = _run(capsys, "pac", "run", "--mechanism", "mean", "--dataset", "iris",
                        "--target-accuracy", "0.75", "--sampling-rate", "0.3", "--trials", "60",
                        "--seed", "0", "--no-progress", "--out", "r")
    assert code == 0, err
    rep = json.loads(Path("r/report.json").read_text())
    v = rep["privacy"]["mi_budget_nats"]
    assert 0.00616426 < v < 0.00616427
    md = Path("r/report.md").read_text()
    assert "v = 0.00616427 nats" in md and not re.search(r"0\.00616426(?!\d)", md)
    cert = rep["noise"]["details"]["certificate"]
    plugin = rep["privacy"]["mi_bound_at_estimated_covariance_nats"]
    assert plugin == pytest.approx(cert["plugin_trace"] / (2 * cert["kappa"]), rel=1e-12)
    assert plugin <= v


@pytest.mark.filterwarnings("ignore::pacpriv.exceptions.UndersampledWarning")
@pytest.mark.filterwarnings("ignore::pacpriv.exceptions.ConstantOutputWarning")
def test_no_release_and_constant_mechanism_wording(user, capsys):
    """V1 review: --no-release said "f was released"; a constant f gave "inf×" and "xnan"."""
    (user / "consts.py").write_text("import numpy as np\n\ndef const(X):\n"
                                    "    return np.array([1.0, 2.0])\n")
    code, out, err = _run(capsys, *BASE, "--mechanism", "mean", "--no-release", "--out", "n")
    assert code == 0, err
    assert "was released" not in out and "release              none" in out
    assert "No release was made" in Path("n/report.md").read_text()
    code, out, err = _run(capsys, "pac", "run", "--dataset", "data.csv", "--mi-budget", "0.1",
                          "--trials", "20", "--no-progress", "--seed", "3", "--mechanism",
                          "consts.py:const", "--out", "c")
    assert code == 0, err
    text = out + Path("c/report.md").read_text()
    assert "inf×" not in text and "nan" not in text.lower().replace("nats", "")
    assert "returned the same value on every simulated subset" in text


def test_redact_command_shows_local_paths_by_base_name():
    from pacpriv.report.builder import redact_command

    got = redact_command(["pac", "run", "--dataset", "/home/alice/hr/payroll.csv",
                          "--out=/tmp/x/rep", "--mechanism", "mean", "C:\\Users\\bob\\d.csv"])
    assert got == ["pac", "run", "--dataset", "payroll.csv", "--out=rep", "--mechanism", "mean",
                   "d.csv"]
    assert not any("alice" in t or "bob" in t for t in got)
    # text that merely contains a slash is not a path (a label column named '<i>lab</i>|z')
    assert redact_command(["--label-column", "<i>lab</i>|z", "--x=a/b"]) == [
        "--label-column", "<i>lab</i>|z", "--x=a/b"]


def test_markdown_cells_keep_link_and_image_syntax_as_text():
    from pacpriv.report.builder import _md_cell

    cell = _md_cell("[x](javascript:alert(1)) ![i](http://evil.example/p.png)")
    assert "](" not in cell and "![" not in cell


def test_markdown_command_line_cannot_be_closed_by_a_backtick():
    from pacpriv.report.builder import to_markdown

    rep = {"title": "t", "created": "now", "kind": "analytic", "sections": [],
           "reproducibility": {"command": "pacpriv pac run --dataset e`<img src=x>`.csv"}}
    line = next(ln for ln in to_markdown(rep).splitlines() if ln.startswith("Command:"))
    assert line.count("`") == 2  # one code span: the tag stays inside it


def test_local_directories_do_not_reach_the_report(user, capsys):
    # an absolute mechanism path and checkpoint printed the user's directories in the title,
    # the mechanism field, the simulation section and the terminal summary
    here = str(user)
    code, out, _ = _run(capsys, "pac", "run", "--dataset", f"{here}/data.csv",
                        "--mechanism", f"{here}/myfuncs.py:label_rate", "--mi-budget", "0.1",
                        "--trials", "12", "--no-progress", "--seed", "3", "--rule",
                        "anisotropic", "--label-column", "label",
                        "--checkpoint", f"{here}/ck", "--out", f"{here}/rep")
    assert code == 0
    assert "myfuncs.py:label_rate" in out
    # (the terminal says where the reports were written; nothing else names the directory)
    assert not [ln for ln in out.splitlines() if here in ln and not ln.startswith("report")]
    for name in ("report.json", "report.md", "report.html"):
        text = (user / "rep" / name).read_text()
        assert here not in text, name
    rep = json.loads((user / "rep" / "report.json").read_text())
    assert rep["mechanism"] == "myfuncs.py:label_rate"
    assert rep["simulation"]["checkpoint"] == "ck"


def test_markdown_report_neutralises_html_and_pipes_from_column_names(tmp_path, capsys,
                                                                      monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = ["\"<script>alert(1)</script>\",\"a|b\",c"] + [
        f"{i * 0.1},{(i % 5) * 0.2},{i % 3}" for i in range(30)]
    (tmp_path / "x.csv").write_text("\n".join(rows) + "\n")
    code, _, err = _run(capsys, "pac", "run", "--mechanism", "mean", "--dataset", "x.csv",
                        "--feature-ranges", "-3:3", "--mi-budget", "0.1", "--trials", "12",
                        "--no-progress", "--seed", "0", "--rule", "anisotropic",
                        "--out", "rep")
    assert code == 0, err
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "<script>" not in md and "&lt;script&gt;" in md
    rows = [ln for ln in md.splitlines() if ln.startswith("| dataset feature_names")]
    assert len(rows) == 1
    assert rows[0].count(" | ") == 1 and "a\\|b" in rows[0]  # one separator: two cells
