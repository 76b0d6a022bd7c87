"""PAC vs DP-SGD comparison (``pacpriv.compare``): rows, calibration, bounds, report, seeds."""

from __future__ import annotations

import dataclasses
import json
import math
import pickle
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("torch")

from pacpriv._random import trial_seed
from pacpriv.compare import (
    THREAT_MODELS,
    ComparisonResult,
    ComparisonSettings,
    StableBlackBox,
    compare_pac_dpsgd,
    compare_table,
)
from pacpriv.compare.models import LogisticRegressionMechanism, scale_features
from pacpriv.datasets import load_dataset
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.samplers import PoissonSampler

pytestmark = pytest.mark.usefixtures("one_native_thread")

A = 0.6
QUIET = ExecutionOptions(n_jobs=1, progress=False)
TINY = dict(epochs=2, steps_per_epoch=2, n_repeats=2, execution=QUIET,
            per_record_trials=0)  # the per-record row has its own tests below


@pytest.fixture(scope="module")
def result() -> ComparisonResult:
    """One small seeded comparison on breast cancer with the SGD black box (64 trials > d =
    62: dense spectrum)."""
    return compare_pac_dpsgd("breast_cancer", target_accuracy=A, n_trials=64, rng=0,
                             black_box="sgd", **TINY)


def _members(seed: int, n: int) -> np.ndarray:
    """The secret Poisson-½ membership of ``compare_pac_dpsgd(rng=seed)`` (root child 0)."""
    gen = np.random.default_rng(trial_seed(np.random.SeedSequence(seed), 0))
    return PoissonSampler(sampling_rate=0.5).draw(n, gen)


def test_rows_are_closed_form_exact_and_pac(result):
    """The table has the DP-SGD closed-form, DP-SGD exact (if available) and PAC rows, then
    the non-private and majority-class references; each row names its bound and secret."""
    methods = [r.method for r in result.rows]
    expected = ["DP-SGD (chi-square closed form)", "DP-SGD (exact)",
                "PAC, whole subset (certified)"]
    assert methods == expected
    assert [r.family for r in result.rows] == ["dpsgd"] * (len(expected) - 1) + ["pac"]
    assert result.baseline.family == "none" and result.baseline.accuracy_bound == 1.0
    assert [r.method for r in result.references] == ["majority class (of the training set)"]
    for r in result.all_rows:
        assert r.dataset == "breast_cancer" and r.secret and r.bound_label
    assert result.rows[1].bound_label == "certified (exact, analytic: every record)"
    assert result.rows[2].bound_label == "certified (1−γ = 0.95)"
    assert result.rows[2].secret.startswith("the training subset as a whole")
    assert result.rows[2].mechanism is not None and result.rows[2].noise_plan is not None


def test_exact_sigma_not_above_closed_form(result):
    """The exact calibration needs no more noise than the chi-square closed form."""
    closed = result.row("dpsgd", exact=False).noise_multiplier
    exact = result.row("dpsgd", exact=True).noise_multiplier
    assert 0 < exact <= closed


def test_closed_form_sigma_matches_math_md(result):
    """σ = 1/sqrt(ln(1 + M((1 + 16(a−½)²)^{1/E} − 1))) (MATH.md §3), and σ·C/(n/M) per step."""
    M, E = TINY["steps_per_epoch"], TINY["epochs"]
    sigma = 1.0 / math.sqrt(math.log(1 + M * ((1 + 16 * (A - 0.5) ** 2) ** (1 / E) - 1)))
    row = result.row("dpsgd", exact=False)
    assert row.noise == row.noise_multiplier == pytest.approx(sigma, rel=1e-12)
    n = result.settings["n_members"]
    assert row.gradient_noise_std == pytest.approx(sigma * 1.0 / (n / M), rel=1e-12)


def test_pac_budget_and_posterior_bound(result):
    """PAC: v = a ln 2a + (1−a) ln 2(1−a) = ln 2 − H(a) and its posterior bound is a (1e-9)."""
    v = A * math.log(2 * A) + (1 - A) * math.log(2 * (1 - A))
    pac = result.row("pac")
    assert result.mi_budget == pac.mi_budget == pytest.approx(v, rel=1e-12)
    assert abs(pac.accuracy_bound - A) < 1e-9
    assert abs(result.pac_result.posterior_success_bound - A) < 1e-9
    assert result.pac_result.plan.mi_bound <= v * (1 + 1e-12)


def test_pac_noise_is_square_root_rule(result):
    """Certified default: E||B||² = κ·tr(A) >= (Σ sqrt λ̂)²/(2v), the plug-in square-root rule
    (Cauchy–Schwarz, MATH.md §4, when no simulated output was clipped); the noise column is
    sqrt(E||B||²/d)."""
    pac = result.row("pac")
    plan = result.pac_result.plan
    assert plan.rule == "certified" and plan.certificate.n_clipped == 0
    lam = np.clip(result.pac_result.spectrum.eigenvalues, 0, None)
    assert pac.expected_noise_power >= np.sqrt(lam).sum() ** 2 / (2 * pac.mi_budget) * (1 - 1e-9)
    assert "certified (1−γ = 0.95)" in pac.bound_source
    d = result.settings["dim"]
    assert d == 62
    assert pac.noise == pac.parameter_noise_rms == pytest.approx(
        math.sqrt(pac.expected_noise_power / d), rel=1e-12)


def test_bound_column_and_attack_intervals(result):
    """Every certified row's bound is a; measured attack accuracies come with CIs around them."""
    for r in (*result.rows, result.baseline):
        if r.family != "none":
            assert r.accuracy_bound == pytest.approx(A, abs=1e-9)
        a = r.attack
        assert 0.0 <= a.ci_low <= a.accuracy <= a.ci_high <= 1.0
        assert a.ci_high - a.ci_low > 0.0
        assert a.confidence == 0.95
        assert a.n_members + a.n_nonmembers == result.settings["n_records"]
        assert 0.0 <= r.test_accuracy <= 1.0 and r.test_accuracy_std >= 0.0


def test_baseline_test_accuracy_matches_numpy_oracle(result):
    """The baseline's test accuracy equals argmax(XWᵀ + b) on the non-members, in numpy."""
    ds = load_dataset("breast_cancer")
    X = scale_features(ds.X, ds.feature_low, ds.feature_high)
    y = np.asarray(ds.y)
    members = _members(0, X.shape[0])
    assert int(members.sum()) == result.settings["n_members"]
    mech = LogisticRegressionMechanism(n_features=30, n_classes=2, steps_per_epoch=2, epochs=2,
                                       learning_rate=0.5, public_seed=0)
    theta = mech((X[members], y[members]))
    W, b = theta[:60].reshape(2, 30), theta[60:]
    acc = np.mean((X[~members] @ W.T + b).argmax(1) == y[~members])
    assert result.baseline.test_accuracy == pytest.approx(acc, abs=1e-12)


def test_mechanism_is_deterministic_and_picklable():
    """The PAC black box: picklable, same subset → same θ, other subset → other θ, ∅ → θ₀."""
    ds = load_dataset("breast_cancer")
    X = scale_features(ds.X, ds.feature_low, ds.feature_high)
    y = np.asarray(ds.y)
    mech = LogisticRegressionMechanism(n_features=30, n_classes=2, steps_per_epoch=2, epochs=1,
                                       learning_rate=0.5, public_seed=3)
    clone = pickle.loads(pickle.dumps(mech))
    first = mech((X[:100], y[:100]))
    assert first.shape == (62,) and first.dtype == np.float64
    np.testing.assert_array_equal(clone((X[:100], y[:100])), first)
    assert not np.array_equal(mech((X[1:100], y[1:100])), first)
    np.testing.assert_array_equal(mech((X[:0], y[:0])), mech.initial_parameters())


def test_scale_features_maps_published_range_to_unit_box():
    """Min-max scaling sends the published low/high to −1/+1 (constant features to 0)."""
    X = np.array([[0.0, 5.0, 1.0], [10.0, 7.0, 1.0], [5.0, 6.0, 1.0]])
    out = scale_features(X, [0.0, 5.0, 1.0], [10.0, 7.0, 1.0])
    np.testing.assert_allclose(out, [[-1, -1, 0], [1, 1, 0], [0, 0, 0]])


@pytest.mark.filterwarnings("ignore::pacpriv.exceptions.UndersampledWarning")
def test_exact_row_uses_the_exact_calibration(monkeypatch):
    """The exact row trains with σ from noise_multiplier_for_accuracy(method="exact")."""
    from pacpriv.compare import models
    from pacpriv.dpsgd.bounds import closed_form_noise_multiplier

    calls = []

    def fake(*, target_accuracy, steps_per_epoch, epochs, method):
        calls.append((target_accuracy, steps_per_epoch, epochs, method))
        return 0.8 * closed_form_noise_multiplier(target_accuracy, steps_per_epoch=steps_per_epoch,
                                                  epochs=epochs)

    monkeypatch.setattr(models, "noise_multiplier_for_accuracy", fake)
    res = compare_pac_dpsgd("breast_cancer", target_accuracy=0.7, n_trials=6, epochs=1,
                            steps_per_epoch=3, n_repeats=1,
                                execution=QUIET, rng=1,
                            per_record_trials=0)
    assert calls == [(0.7, 3, 1, "exact")]
    closed, exact = res.row("dpsgd", exact=False), res.row("dpsgd", exact=True)
    assert exact.noise_multiplier == pytest.approx(0.8 * closed.noise_multiplier, rel=1e-12)
    assert exact.accuracy_bound == 0.7 and "exact" in exact.bound_source
    assert not any("unavailable" in n for n in res.notes)


@pytest.mark.filterwarnings("ignore::pacpriv.exceptions.UndersampledWarning")
def test_seeded_comparison_is_reproducible():
    """Same seed → the same table; another seed → another membership and table."""
    kw = dict(n_trials=6, epochs=1, steps_per_epoch=1, n_repeats=1, exact=False,
              per_record_trials=0, execution=QUIET)

    def table(seed):
        return _stripped(compare_pac_dpsgd("breast_cancer", rng=seed, **kw).to_dict())

    first = table(7)
    assert table(7) == first
    assert table(8)["settings"]["n_members"] != first["settings"]["n_members"]


def test_report_section_reaches_the_pac_report(result, tmp_path):
    """write_report(PacResult.with_sections(section)) shows the comparison (md and JSON)."""
    from pacpriv.report import write_report

    section = result.report_section()
    assert {"title", "markdown", "table", "plot", "threat_model"} <= set(section)
    assert section["plot"]["kind"] == "pac_vs_dpsgd"
    assert len(section["table"]["rows"]) == len(result.all_rows)
    json.dumps(section)  # JSON-serialisable
    paths = write_report(result.pac_result.with_sections(section), tmp_path, formats=("json", "md"))
    md = paths["md"].read_text()
    assert section["title"] in md and "DP-SGD (chi-square closed form)" in md
    assert THREAT_MODELS["pac"] in md and THREAT_MODELS["dpsgd"] in md
    rep = json.loads(paths["json"].read_text())
    rows = rep["sections"][0]["comparison"]["rows"]
    assert [r["method"] for r in rows] == [r.method for r in result.rows]
    alone = write_report(result, tmp_path / "alone", formats=("md",))["md"].read_text()
    assert section["title"] in alone and THREAT_MODELS["dpsgd"] in alone


def test_plot_rows_fit_the_plotting_helper(result):
    """plot_rows() has exactly the keys plot_pac_vs_dpsgd accepts, and it draws them."""
    pytest.importorskip("matplotlib")
    from pacpriv import plotting

    rows = result.plot_rows()
    assert all(set(r) == set(plotting.COMPARISON_KEYS) for r in rows)
    assert len(result.figure().axes) == 3


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"target_accuracy": 0.5}, ValueError, r"`target_accuracy` must be in \(0.5, 1.0\)"),
        ({"target_accuracy": 1.0}, ValueError, r"`target_accuracy` must be in \(0.5, 1.0\)"),
        ({"epochs": 0}, ValueError, r"`epochs` must be an integer in \[1, 10000000\]"),
        ({"max_grad_norm": 0.0}, ValueError, r"`max_grad_norm` must be in \(0.0, inf\)"),
        ({"learning_rate": -1.0}, ValueError, r"`learning_rate` must be in \(0.0, inf\)"),
        ({"n_trials": 1}, ValueError, r"`n_trials` must be an integer in \[2, 1000000\]"),
        ({"n_repeats": 0}, ValueError, r"`n_repeats` must be an integer in \[1, 1000\]"),
        ({"confidence": 1.0}, ValueError, r"`confidence` must be in \(0.0, 1.0\)"),
        ({"rule": "algorithm1"}, ValueError, r"`rule` must be one of certified"),
        ({"dataset": "diabetes"}, ValueError, r"label column of `dataset` .diabetes. holds "
         r"continuous values: compare_pac_dpsgd trains a classifier"),
        ({"dataset": 3}, TypeError, r"`dataset` must be a name, a path or a Dataset"),
        ({"exact": "yes"}, TypeError, r"`exact` must be a bool"),
        ({"per_record_trials": 5}, ValueError, r"`per_record_trials` must be 0 or >= 10"),
        ({"per_record_trials": 20, "black_box": "sgd"}, ValueError,
         r"`per_record_trials`.*cannot be certified for 569 records"),
        ({"per_record_records": 0}, ValueError, r"`per_record_records` must be an integer"),
        ({"black_box": "forest"}, ValueError, r"`black_box` must be a StableBlackBox"),
        ({"black_box": StableBlackBox(components=99)}, ValueError, r"`components`"),
    ],
)
def test_invalid_arguments(kwargs, exc, match):
    """Each invalid argument raises before any training, naming it and its range."""
    with pytest.raises(exc, match=match):
        compare_pac_dpsgd(**{"n_trials": 8, **kwargs})  # >= the certified rule's 6


def test_import_does_not_load_torch():
    """``import pacpriv.compare`` imports neither torch nor matplotlib."""
    code = ("import sys, pacpriv.compare; "
            "print(any(m in sys.modules for m in ('torch', 'matplotlib')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _stripped(d: dict) -> dict:
    """A comparison's JSON without its timings (they differ between identical runs)."""
    for r in (*d["rows"], d["baseline"], *d.get("references", [])):
        r.pop("wall_time_s")
        if r.get("noise_plan"):
            r["noise_plan"]["details"].pop("elapsed_s", None)
    d["settings"].pop("pac_simulation_s")
    d["settings"].pop("per_record_simulation_s", None)
    d.pop("elapsed_s")
    return d


def _small_pool(n: int = 40):
    """The first ``n`` breast-cancer records as a Dataset (both classes present)."""
    from dataclasses import replace

    ds = load_dataset("breast_cancer")
    return replace(ds, X=ds.X[:n], y=ds.y[:n], name=f"breast_cancer[:{n}]")


SMALL = dict(n_trials=16, epochs=1, steps_per_epoch=1, n_repeats=2, execution=QUIET)


@pytest.fixture(scope="module")
def stable() -> ComparisonResult:
    """The default (stabilised) black box with the per-record row on 120 records."""
    return compare_pac_dpsgd(_small_pool(120), target_accuracy=0.7, rng=3,
                             per_record_trials=80, **SMALL)


def test_per_record_row_covers_every_record_by_default(stable):
    """Default: every record of the pool is audited, the row, its label and the note say so,
    and the bound holds for all n records at once."""
    row = stable.row("pac", per_record=True)
    assert row.method == "PAC, per record (informed adversary)"
    assert row.accuracy_bound == 0.7
    assert row.bound_label == "certified (1−γ = 0.95), every record (120)"
    assert row.bound_source.startswith("certified (1−γ = 0.95, every record)")
    assert "every record of the pool (all 120)" in row.bound_source
    assert row.secret.endswith("(every record)")
    assert stable.settings["per_record_records"] == 120
    assert stable.settings["per_record_audited"] == "all"
    note = next(n for n in stable.notes if n.startswith("PAC per record"))
    assert "every record of the pool (all 120)" in note and "betting confidence bound" in note
    assert "declared sensitivity bound" in note
    assert "(certified (1−γ = 0.95), every record (120))" in stable.to_markdown()
    assert row.informed_attack["ci_low"] <= row.accuracy_bound


def test_rows_carry_mechanism_plan_and_the_pool_to_recheck_the_bound(stable):
    """Anyone can re-check the per-record bound: a fresh simulation of ``row.mechanism`` on
    ``result.pool`` under ``row.noise_plan`` estimates every record below the target."""
    from pacpriv.pac.per_record import record_exposure

    row = stable.row("pac", per_record=True)
    X, y = stable.pool
    assert X.shape == (120, 30) and y.shape == (120,)
    expo = record_exposure(row.mechanism, stable.pool, noise_cov=row.noise_plan, n_trials=40,
                           rng=11, execution=QUIET)
    assert expo.max_accuracy <= row.accuracy_bound
    d = stable.to_dict()
    assert "pool" not in d and d["dataset"] == "breast_cancer[:120]"
    for r in d["rows"]:
        assert r["dataset"] == "breast_cancer[:120]" and r["target_accuracy"] == 0.7
    per = d["rows"][-1]
    assert per["mechanism"].startswith("exact minimiser of the L2-regularised")
    assert per["noise_plan"]["coverage"] == "every record (120)"
    json.dumps(d)


def test_references_majority_and_the_black_box_without_noise(stable):
    """References: the majority class of the training set (computed here), the PAC black box
    without noise, DP-SGD (exact σ) on the PAC black box's features."""
    members = _members(3, 120)
    ds = _small_pool(120)
    y = np.searchsorted(np.asarray(ds.classes), np.asarray(ds.y))
    top = np.bincount(y[members]).argmax()
    methods = [r.method for r in stable.references]
    assert methods == ["majority class (of the training set)",
                       "non-private, PAC black box (no noise)",
                       "DP-SGD (exact), PAC black box's features"]
    assert stable.references[0].test_accuracy == pytest.approx(np.mean(y[~members] == top))
    assert stable.references[0].attack is None
    assert stable.references[2].family == "dpsgd"
    md = stable.to_markdown()
    assert "| majority class (of the training set) |" in md


@pytest.mark.slow
def test_per_record_sample_row_is_labelled_certified_and_attacked():
    """A sample of 3 records: the label, the bound and the note say SAMPLE (the other records
    are not bounded); informed attack below the bound; three threat models in the Markdown."""
    res = compare_pac_dpsgd("breast_cancer", target_accuracy=0.75, n_trials=8, epochs=1,
                            steps_per_epoch=1, n_repeats=1, exact=False, execution=QUIET, rng=3,
                            per_record_trials=60, per_record_records=3)
    methods = [r.method for r in res.rows]
    assert methods[-2:] == ["PAC, whole subset (certified)",
                            "PAC, per record, SAMPLE of 3 of 569 records (informed adversary)"]
    row = res.rows[-1]
    assert row.family == "pac" and row.accuracy_bound <= 0.75 and row.mi_budget is None
    assert row.bound_label == "certified (1−γ = 0.95), SAMPLE of 3 of 569 records"
    assert "SAMPLE of 3 of 569 records only" in row.bound_source
    assert "the other 566 records are NOT bounded" in row.bound_source
    assert row.informed_attack["ci_low"] <= row.accuracy_bound
    assert res.settings["per_record_records"] == 3
    assert len(res.settings["per_record_audited"]) == 3
    md = res.to_markdown()
    assert "SAMPLE of 3 of 569 records" in md
    assert "the other 566 records are NOT bounded" in md
    assert "PAC Privacy, per record (informed adversary)." in md
    assert "PAC Privacy, whole subset." in md and "**DP-SGD.**" in md
    assert "informed-attack accuracy" in md
    json.dumps(res.to_dict())


def test_table_shares_simulations_and_equals_separate_comparisons():
    """compare_table over two bounds: each comparison equals compare_pac_dpsgd with the same
    seed (the per-record trials are simulated once and reused); rows carry dataset and bound;
    the figure has one panel per (dataset, bound)."""
    kw = dict(n_trials=8, epochs=1, steps_per_epoch=1, n_repeats=1, exact=False,
              per_record_trials=60)
    pool = _small_pool(60)
    table = compare_table([pool], target_accuracies=[0.7, 0.65, 0.7],
                          settings=ComparisonSettings(**kw), rng=4, execution=QUIET)
    assert [r.target_accuracy for r in table.results] == [0.65, 0.7]
    for res in table.results:
        alone = compare_pac_dpsgd(pool, target_accuracy=res.target_accuracy, rng=4,
                                  execution=QUIET, **kw)
        assert _stripped(alone.to_dict()) == _stripped(res.to_dict())
    rows = table.to_dict()["rows"]
    assert {(r["dataset"], r["target_accuracy"]) for r in rows} == {
        ("breast_cancer[:60]", 0.65), ("breast_cancer[:60]", 0.7)}
    md = table.to_markdown()
    assert "| breast_cancer[:60] | 0.65 | PAC, per record (informed adversary) |" in md
    assert "certified (1−γ = 0.95), every record (60)" in md
    section = table.report_section()
    assert section["plot"]["kind"] == "comparison_table"
    json.dumps(section)
    pytest.importorskip("matplotlib")
    assert len(table.figure().axes) == 2


@pytest.mark.filterwarnings("ignore::pacpriv.exceptions.UndersampledWarning")
def test_execution_options_give_the_same_table():
    """The backend and batch size change nothing; an output path is refused (several
    simulations)."""
    kw = dict(target_accuracy=0.75, n_trials=8, epochs=1, steps_per_epoch=1, n_repeats=1,
              exact=False, per_record_trials=30, per_record_records=1, rng=5,
              black_box="sgd")
    opts = ExecutionOptions(n_jobs=1, backend="threading", progress=False, batch_size=3)
    first = _stripped(compare_pac_dpsgd("breast_cancer", execution=opts, **kw).to_dict())
    plain = compare_pac_dpsgd("breast_cancer", execution=QUIET, **kw)
    assert _stripped(plain.to_dict()) == first
    with pytest.raises(ValueError, match=r"`options\.output_path` must be None"):
        compare_pac_dpsgd("breast_cancer", execution=ExecutionOptions(output_path="o.npy"))


def test_checkpoint_resumes_every_simulation_with_the_recorded_seed(tmp_path):
    """``checkpoint``: a first run records its seed and trials; the same call with
    ``rng=None`` reuses them (every simulation resumes all its trials) and gives the same
    comparison; another seed is refused, naming the seed."""
    from pacpriv.exceptions import CheckpointError

    ck = tmp_path / "ck"
    kw = dict(target_accuracy=0.7, per_record_trials=40, epochs=1, steps_per_epoch=1,
              n_trials=8, n_repeats=1, exact=False)
    opts = dataclasses.replace(QUIET, checkpoint=ck)
    first = compare_pac_dpsgd(_small_pool(60), rng=11, execution=opts, **kw)
    again = compare_pac_dpsgd(_small_pool(60), rng=None, execution=opts, **kw)
    assert _stripped(again.to_dict()) == _stripped(first.to_dict())
    fresh = compare_pac_dpsgd(_small_pool(60), rng=11, execution=QUIET, **kw)
    assert _stripped(fresh.to_dict()) == _stripped(first.to_dict())
    folders = sorted(str(p.parent.relative_to(ck)) for p in ck.rglob("manifest.json"))
    assert folders[0] == "." and len(folders) == 4
    assert [f.split("/", 1)[1] for f in folders[1:]] == ["pac", "per_record/certify",
                                                          "per_record/shape"]
    assert folders[1].startswith("breast_cancer_60_-")
    assert again.pac_result.simulation.resumed_trials == 8
    with pytest.raises(CheckpointError, match="the root seed"):
        compare_pac_dpsgd(_small_pool(60), rng=12, execution=opts, **kw)


def test_ensemble_per_record_path_equals_sequential_training():
    """The SGD black box's per-record trials through pacpriv.ensemble equal 1 + n sequential
    trainings (to round-off), for records in and out of the subset."""
    from pacpriv.compare.ensemble_path import EnsemblePerRecord

    ds = _small_pool(30)
    X = scale_features(ds.X, ds.feature_low, ds.feature_high)
    y = np.asarray(ds.y)
    mech = LogisticRegressionMechanism(n_features=30, n_classes=2, steps_per_epoch=2,
                                       epochs=2, learning_rate=0.5, public_seed=1)
    fast = EnsemblePerRecord(mech)
    mask = np.random.default_rng(2).random(30) < 0.5
    base, diffs = fast.per_record_differences((X, y), mask, np.array([0, 3, 17]))
    np.testing.assert_allclose(base, mech((X[mask], y[mask])), atol=1e-10)
    for row, i in zip(diffs, (0, 3, 17), strict=True):
        up, down = mask.copy(), mask.copy()
        up[i], down[i] = True, False
        np.testing.assert_allclose(row, mech((X[up], y[up])) - mech((X[down], y[down])),
                                   atol=1e-10)
