"""Issue 33 item 6: a new sampler, noise rule, attack and mechanism, each defined and registered
in one place (a temporary user module), reach the CLI's ``--help``, the docs tables and a run
without any other file changing."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from pacpriv.audit._suite import ATTACKS, leave_one_pair_out
from pacpriv.cli._extensions import extension_tables
from pacpriv.cli.main import build_parser, main
from pacpriv.pac.noise import RULE_CLASSES
from pacpriv.pac.per_record import SHAPES
from pacpriv.pac.samplers import SAMPLERS
from pacpriv.registry import MECHANISMS

ROOT = Path(__file__).resolve().parent.parent

#: The user's module: each extension is defined and registered here, nowhere else.
TOY_MODULE = '''
from dataclasses import dataclass, field

import numpy as np

from pacpriv.audit import ATTACKS
from pacpriv.pac.noise import RULE_CLASSES, Isotropic
from pacpriv.pac.per_record import SHAPES
from pacpriv.pac.samplers import SAMPLERS, Sampler
from pacpriv.registry import register_mechanism


@dataclass(frozen=True)
class EveryThirdSampler(Sampler):
    """Each record kept independently with probability 1/3 (a toy)."""

    name = "every-third"
    independent_memberships = True

    def draw(self, n_records, rng):
        return rng.random(n_records) < 1 / 3

    @property
    def prior(self):
        return 1 / 3

    def describe(self):
        return "a toy subset: each record kept with probability 1/3"


@dataclass(frozen=True, kw_only=True)
class MarginIsotropic(Isotropic):
    """Isotropic noise for a budget divided by a public margin (a toy, more noise)."""

    margin: float = field(default=1.0, metadata={"flag": "--toy-margin",
                                                  "help": "budget divisor, >= 1 (toy rule)"})
    name = "margin-isotropic"

    def __post_init__(self):
        if not self.margin >= 1:
            raise ValueError(f"`margin` must be >= 1; got {self.margin!r}.")

    def _plan(self, source, mi_budget):
        return super()._plan(source, mi_budget / self.margin)


@dataclass(frozen=True)
class FirstQueryAttack:
    """Scores each record by its first query's statistic under the target (a toy)."""

    name = "first query"

    def scores(self, view):
        return np.asarray(view.target)[:, 0]


def _column_sums(info):
    return lambda subset, *, rng=None: np.asarray(
        subset[0] if isinstance(subset, tuple) else subset, dtype=float).sum(axis=0) / 150.0


SAMPLERS.register("every-third", EveryThirdSampler)
RULE_CLASSES.register(MarginIsotropic.name, MarginIsotropic)
ATTACKS.register("first-query", FirstQueryAttack)
register_mechanism("column-sums", _column_sums)


def _top_heavy(lam):
    """Twice the noise along the direction a record moves the output most (a toy shape)."""
    var = np.ones_like(lam)
    var[np.argmax(lam)] = 2.0
    return var * (lam.size / var.sum())


SHAPES.register("top-heavy", _top_heavy)
'''


@pytest.fixture
def toy(tmp_path):
    """Import the user's module with every registry restored afterwards."""
    path = tmp_path / "toy_extensions.py"
    path.write_text(TOY_MODULE)
    with SAMPLERS.temporary(), RULE_CLASSES.temporary(), ATTACKS.temporary(), \
            MECHANISMS.temporary(), SHAPES.temporary():
        spec = importlib.util.spec_from_file_location("toy_extensions", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["toy_extensions"] = module
        try:
            spec.loader.exec_module(module)
            yield module
        finally:
            sys.modules.pop("toy_extensions", None)
    assert "every-third" not in SAMPLERS and "column-sums" not in MECHANISMS
    assert "top-heavy" not in SHAPES


def _help(*argv: str) -> str:
    parser = build_parser()
    sub = parser
    for name in argv:
        action = next(a for a in sub._actions if a.__class__.__name__ == "_SubParsersAction")
        sub = action.choices[name]
    return " ".join(sub.format_help().split())


def test_each_extension_reaches_help_and_docs(toy):
    help_run = _help("pac", "run")
    assert re.search(r"--sampler \{poisson,fixed,pairs[^}]*,every-third\}", help_run)
    assert "margin-isotropic" in help_run and "--toy-margin" in help_run
    assert "column-sums" in help_run
    assert "first-query" in _help("audit")
    assert re.search(r"--shape \{isotropic,sqrt,second_moment,top-heavy\}",
                     _help("pac", "records"))
    tables = extension_tables()
    for name, doc in (("every-third", "Each record kept independently with probability 1/3"),
                      ("top-heavy", "Twice the noise along the direction a record moves"),
                      ("margin-isotropic", "Isotropic noise for a budget divided by"),
                      ("first-query", "Scores each record by its first query"),
                      ("column-sums", "")):
        assert f"``{name}``" in tables and doc in tables


def test_each_extension_runs(toy, tmp_path, monkeypatch, capsys):
    """One ``pacpriv pac run`` uses the toy sampler, rule (with its flag) and mechanism; the
    report describes the sampler in its own words; the attack scores a reference batch."""
    monkeypatch.chdir(tmp_path)
    code = main(["pac", "run", "--mechanism", "column-sums", "--dataset", "iris",
                 "--sampler", "every-third", "--rule", "margin-isotropic", "--toy-margin", "2",
                 "--mi-budget", "0.5", "--trials", "30", "--seed", "3", "--release-seed", "4",
                 "--no-progress", "--out", "rep", "--format", "json,md"])
    assert code == 0, capsys.readouterr().err
    report = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert report["simulation"]["sampler"]["name"] == "every-third"
    assert "margin-isotropic" in json.dumps(report)
    assert "a toy subset: each record kept with probability 1/3" in \
        (tmp_path / "rep" / "report.md").read_text()
    # the rule's own validation names the flag the user typed
    assert main(["pac", "run", "--mechanism", "column-sums", "--dataset", "iris", "--rule",
                 "margin-isotropic", "--toy-margin", "0.5", "--mi-budget", "0.5",
                 "--out", "rep2"]) == 2
    assert "--toy-margin must be >= 1; got 0.5" in capsys.readouterr().err

    rng = np.random.default_rng(0)
    masks = np.zeros((4, 12), dtype=bool)
    masks[0::2] = rng.random((2, 12)) < 0.5
    masks[1::2] = ~masks[0::2]
    stats = rng.normal(size=(4, 12, 1)) + 2.0 * masks[:, :, None]
    population = rng.normal(size=(4, 3, 1))
    pooled = leave_one_pair_out(stats, population, masks,
                                attacks=(ATTACKS.get("first-query")(),))
    members, nonmembers = pooled["first query"]
    assert members.size + nonmembers.size == 4 * 12 and members.mean() > nonmembers.mean()

    # the shape fits the per-record noise: twice the variance along the records' main direction
    from pacpriv.pac.per_record._shapes import fit_shape

    geom = fit_shape("top-heavy", rng.normal(size=(6, 5, 2)) * [3.0, 0.1], 2)
    assert geom.variances == pytest.approx([2 / 3, 4 / 3])
    assert abs(geom.basis[0, 1]) == pytest.approx(1.0, abs=0.05)


def test_the_docs_snippet_registers_a_sampler(toy):
    """The code block of docs/guide/extending.rst runs and registers its sampler."""
    text = (ROOT / "docs" / "guide" / "extending.rst").read_text()
    block = text.split(".. code-block:: python", 1)[1].split("\n\n", 1)[1]
    code = "\n".join(line[3:] for line in block.split("\nA sampler")[0].splitlines())
    exec(compile(code, "extending.rst", "exec"), {"__name__": "__docs__"})
    assert SAMPLERS.get("half")().draw(4, np.random.default_rng(0)).tolist() == \
        [True, True, False, False]


def test_a_registry_refuses_an_entry_it_cannot_call():
    """SAMPLERS.register('weird', 42) was accepted; run_pac(sampler='weird') then raised an
    AttributeError from inside pacpriv (eighth new-user pass)."""
    from pacpriv.audit._suite import ATTACKS
    from pacpriv.pac.noise._registry import RULE_CLASSES
    from pacpriv.pac.samplers import SAMPLERS, as_sampler
    from pacpriv.registry import MECHANISMS

    for reg in (SAMPLERS, RULE_CLASSES, ATTACKS, MECHANISMS):
        with pytest.raises(TypeError, match="must be a class or a factory"):
            reg.register("weird-entry", 42)
        assert "weird-entry" not in reg.names()
    with SAMPLERS.temporary():
        SAMPLERS.register("not-a-sampler", lambda: 42)
        with pytest.raises(TypeError, match=r"registered as 'not-a-sampler' \(<lambda>\) made "
                                            r"a int value, not a Sampler"):
            as_sampler("not-a-sampler")
