"""Issue 35 (c1045, c1077): every DP-SGD number says what it is and whom it covers.

Each printed accuracy/ε/σ line names its kind (certified, closed-form upper bound, accountant
upper bound, approximation) and the coverage (every record, worst case, add/remove one
record); the text closes with the full coverage, the assumptions and the rounding; the JSON
carries ``bound_kind``, ``covers``, ``neighbouring`` and ``assumes`` for every number.
"""

from __future__ import annotations

import json

import pytest

from pacpriv.cli import main
from pacpriv.dpsgd import compare_accountants
from pacpriv.dpsgd.labels import BOUND_KINDS, COVERS, COVERS_SHORT, NEIGHBOURING, bound_fields

_MODEL = ["--steps-per-epoch", "20", "--epochs", "3"]

COMMANDS = {
    "bound": ["bound", *_MODEL, "--noise-multiplier", "1"],
    "sigma": ["sigma", *_MODEL, "--target-accuracy", "0.6"],
    "sigma-exact": ["sigma", *_MODEL, "--target-accuracy", "0.6", "--method", "exact"],
    "sigma-epsilon": ["sigma", *_MODEL, "--target-epsilon", "3"],
    "sigma-poisson": ["sigma", *_MODEL, "--target-epsilon", "3", "--sampling", "poisson"],
    "exact": ["exact", *_MODEL, "--noise-multiplier", "1"],
    "exact-k": ["exact", "--steps-per-epoch", "10", "--epochs", "1", "--noise-multiplier", "1",
                "--k", "3", "--tolerance", "0.05"],  # a Monte-Carlo lower end
    "exact-sweep": ["exact", *_MODEL, "--noise-multiplier", "1", "0.5"],
}

#: Words of a line that prints a bound (or the σ for one).
_NUMBERS = ("accuracy", "epsilon", "noise multiplier")


def _is_number(text: str) -> bool:
    try:
        float(text.strip("[],"))
    except ValueError:
        return False
    return True


def _labelled(d: dict) -> list[dict]:
    """Every dict in ``d`` (any depth) that holds a bound's number."""
    found = []
    if isinstance(d, dict):
        if (any(k in d for k in ("accuracy", "epsilon", "upper")) and not isinstance(
                d.get("epsilon"), (dict, list))) or "bound_kind" in d:
            found.append(d)
        for v in d.values():
            found += _labelled(v)
    elif isinstance(d, list):
        for v in d:
            found += _labelled(v)
    return found


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name", sorted(set(COMMANDS) - {"sigma-poisson"}))  # (JSON: 7 s)
def test_every_printed_bound_names_its_kind_and_coverage(capsys, name):
    assert main(["dpsgd", *COMMANDS[name]]) == 0
    out = capsys.readouterr().out
    assert COVERS in out and "per-example clipping" in out and "safe side" in out
    kinds = ("certified", "closed-form upper bound", "accountant upper bound")
    if name == "exact-sweep":  # a title line with the kind and coverage, a kind per ε
        setting, title, _header, *rows, _covers = out.splitlines()
        assert setting.startswith("setting: M = ") and "k = " in setting
        assert "certified" in title and COVERS_SHORT in title
        assert len(rows) == 2 and all("(certified, PLD)" in r for r in rows)
        return
    lines = [ln for ln in out.splitlines()
             if any(w in ln for w in _NUMBERS) and _is_number(ln.split()[-1])]
    assert lines
    for ln in lines:
        assert COVERS_SHORT in ln and any(k in ln for k in kinds), ln


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_json_number_carries_its_label_fields(capsys, monkeypatch, name):
    if name == "exact-k":  # no k-of-t chain fits: the Monte-Carlo lower end (the pruned
        from pacpriv.dpsgd import k_of_t  # chains give a deterministic one here otherwise)

        monkeypatch.setattr(k_of_t, "CHAIN_WORK_BUDGET", 0.0)
    assert main(["dpsgd", *COMMANDS[name], "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    groups = _labelled(payload)
    assert groups
    for g in groups:
        assert g["bound_kind"] in BOUND_KINDS, g
        assert g["covers"] == COVERS and g["neighbouring"] == NEIGHBOURING
        assert "per-example clipping" in g["assumes"]
    top = payload if isinstance(payload, dict) else {}
    if name == "bound":  # the chi-square accuracy is a closed form, its ε the certified PLD
        assert top["bound_kind"] == "closed-form" and top["epsilon"]["bound_kind"] == "certified"
    if name == "sigma-poisson":
        assert top["bound_kind"] == "accountant" and "Poisson" in top["assumes"]
    if name == "exact-k":  # the Monte-Carlo lower end says so
        assert "lower end with confidence 0.999" in top["bound"]


def test_epsilon_from_a_closed_form_is_not_called_certified(capsys):
    # σ = 1e308: the PLD cannot be built; Gaussian dominance answers (a closed form)
    assert main(["dpsgd", "bound", *_MODEL, "--noise-multiplier", "1e308", "--json"]) == 0
    eps = json.loads(capsys.readouterr().out)["epsilon"]
    assert eps == {**eps, **bound_fields("closed-form", detail=eps["bound"].split(", ")[1])}
    assert eps["bound_kind"] == "closed-form"


def test_compare_rows_carry_their_kind_and_coverage():
    t = compare_accountants(steps_per_epoch=20, epochs=3, noise_multiplier=1.0,
                            methods=("chi-square", "exact", "ckp"), progress=False)
    rows = {r["method"].split()[0]: r for r in t.to_dict()["rows"]}
    assert rows["chi-square"]["bound_kind"] == "closed-form"
    assert rows["exact,"]["bound_kind"] == "certified"
    assert rows["CKP"]["bound_kind"] == "approximation" and "Poisson" in rows["CKP"]["assumes"]
    assert all(r["covers"] == COVERS for r in rows.values())
    text = t.to_markdown()
    assert COVERS in text and "approximation (may understate), Poisson sampling" in text


def test_a_sweep_marks_each_row_whose_lower_end_is_monte_carlo(capsys, monkeypatch):
    """`dpsgd exact` with several σ: the header said "lower ends with confidence 0.999" from the
    first row alone, so a Monte-Carlo lower end in a later row read as a proven bound. Each
    such row is now marked, and only those."""
    import dataclasses

    from pacpriv.cli import dpsgd as cli_dpsgd
    from pacpriv.dpsgd.exact import exact_membership_inference_accuracy as real

    def second_is_monte_carlo(sigma, **kw):
        r = real(sigma, **kw)
        return dataclasses.replace(r, lower_confidence=0.999) if sigma == 2.0 else r

    monkeypatch.setattr(cli_dpsgd, "exact_membership_inference_accuracy", second_is_monte_carlo)
    assert main(["dpsgd", "exact", "--steps-per-epoch", "6", "--epochs", "1", "--k", "3",
                 "--noise-multiplier", "1", "2", "--tolerance", "0.05"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "* lower end with confidence 0.999 (Monte Carlo)" in lines[1]
    rows = {line.split()[0]: line.split()[1] for line in lines[3:5]}
    assert not rows["1"].endswith("*") and rows["2"].endswith("*")


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("argv, sigma", [
    (["bound", "--noise-multiplier", "1.5"], "1.5"),
    (["exact", "--noise-multiplier", "1.5", "--tolerance", "0.05"], "1.5"),
    (["sigma", "--target-accuracy", "0.6"], None),
    (["sigma", "--target-accuracy", "0.6", "--method", "exact", "--rtol", "0.05"], None),
])
def test_every_text_output_states_the_setting_it_bounds(capsys, argv, sigma):
    """bounds6: a k-of-t result (--k 2) read like a k = 1 one: the text never stated σ, M, E, k."""
    assert main(["dpsgd", *argv, "--steps-per-epoch", "12", "--epochs", "3", "--k", "2"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    want = ("M = 12 steps per epoch, E = 3 epochs, k = 2 of the M steps per record per epoch")
    assert first.split(None, 1) == ["setting", want if sigma is None
                                    else f"sigma = {sigma}, {want}"]


def test_a_sweep_states_the_setting_above_its_table(capsys):
    assert main(["dpsgd", "exact", "--noise-multiplier", "1.5", "2", "--steps-per-epoch",
                 "12", "--epochs", "3", "--k", "2", "--tolerance", "0.05"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        "setting: M = 12 steps per epoch, E = 3 epochs, k = 2 of the M steps per record per "
        "epoch; sigma per row")
