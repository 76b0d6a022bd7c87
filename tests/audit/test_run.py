"""pacpriv.audit.run_audit end to end: DP-SGD (torch), scikit-learn and PAC-release families."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from pacpriv.audit import (
    DEFAULT_ATTACKS,
    AuditSettings,
    DPSGDModel,
    EstimatorModel,
    LinearLogits,
    LiraAttack,
    LossAttack,
    MLPFactory,
    OneRunSpec,
    PacReleaseModel,
    RmiaAttack,
    curve_value,
    one_run_audit,
    run_audit,
)
from pacpriv.datasets import load_dataset
from pacpriv.datasets.scaling import scale_to_unit_box
from pacpriv.pac.engine import ExecutionOptions

QUIET = ExecutionOptions(progress=False)


@pytest.fixture(scope="module")
def digits():
    ds = load_dataset("digits")
    X = scale_to_unit_box(ds.X, ds.feature_low, ds.feature_high)
    return X, ds.y.astype(np.int64)


def _all_points_under(report) -> None:
    """Every sampled ROC point of every attack: the Clopper–Pearson lower limit of its TPR is
    at most each certified curve at the upper limit of its FPR (95% each)."""
    for a in report.attacks:
        tp = np.rint(a.roc_tpr * a.n_members).astype(int)
        fp = np.rint(a.roc_fpr * a.n_nonmembers).astype(int)
        for k, f in zip(tp, fp, strict=True):
            tpr_lo = stats.beta.ppf(0.025, k, a.n_members - k + 1) if k > 0 else 0.0
            fpr_hi = stats.beta.ppf(0.95, f + 1, a.n_nonmembers - f) if f < a.n_nonmembers \
                else 1.0
            for c in report.curves:
                assert tpr_lo <= curve_value(c, fpr_hi), (a.name, c.label, k, f)


@pytest.mark.slow
def test_attacks_on_dpsgd_models_stay_under_the_certified_curve(digits):
    X, y = digits
    family = DPSGDModel(MLPFactory(64, 10, ()), noise_multiplier=1.0, steps_per_epoch=1,
                        epochs=8, max_grad_norm=1.0, learning_rate=1.0)
    rep = run_audit(X[:600], y[:600], model=family, reference_models=6, rng=3, execution=QUIET)
    names = [a.name for a in rep.attacks]  # every registered attack, the built-ins first
    assert names == [a.name for a in DEFAULT_ATTACKS]
    assert names[:5] == ["LiRA (online)", "RMIA (online)", "LiRA (offline)",
                         "RMIA (offline, a=0.3)", "LOSS"]
    assert rep.curves[0].label.startswith("certified: DP-SGD, random allocation")
    _all_points_under(rep)
    assert all(not g["violations"] for g in rep.gaps())
    # M = 1: one Gaussian mechanism per epoch, μ = √E/σ: exact accuracy Φ(μ/2) gives the TV
    # line, and the PLD curve is the Gaussian trade-off Φ(Φ⁻¹(α) + μ) (Dong, Roth & Su), from
    # above, below the TV line
    pld, tv = rep.curves
    mu = np.sqrt(8)
    assert curve_value(tv, 1e-3) == pytest.approx(1e-3 + 2 * stats.norm.cdf(mu / 2) - 1,
                                                  abs=2e-4)
    for alpha in (1e-4, 1e-3, 1e-2, 1e-1):
        gauss = stats.norm.cdf(stats.norm.ppf(alpha) + mu)
        assert gauss - 1e-9 <= curve_value(pld, alpha) <= gauss + 5e-3
        assert curve_value(pld, alpha) <= curve_value(tv, alpha)


@pytest.mark.slow
def test_online_lira_beats_loss_at_low_fpr_on_an_overfit_model(digits):
    """A non-private MLP on 160 records per model: online LiRA's TPR at 0.1% FPR is above
    the loss attack's, beyond both intervals."""
    X, y = digits
    family = DPSGDModel(MLPFactory(64, 10, (64,)), noise_multiplier=0.0, steps_per_epoch=2,
                        epochs=50, max_grad_norm=None, learning_rate=0.5)
    rep = run_audit(X[:400], y[:400], model=family, reference_models=8,
                    settings=AuditSettings(attacks=(LiraAttack(), LossAttack())), rng=0,
                    execution=QUIET)
    lira, loss = ({t.fpr: t for t in a.tpr_at_fpr} for a in rep.attacks)
    assert lira[1e-3].resolved and lira[1e-3].ci[0] > loss[1e-3].ci[1]
    assert rep.attacks[0].auc > rep.attacks[1].auc
    assert rep.curves[0].label.startswith("certified (trivial: non-private training")


def _tiny_dp(epochs=2):
    return DPSGDModel(MLPFactory(64, 10, ()), noise_multiplier=1.0, steps_per_epoch=1,
                      epochs=epochs, max_grad_norm=1.0, learning_rate=1.0)


def test_report_layout_and_no_record_values_or_scores(digits, tmp_path, monkeypatch):
    """JSON in the issue's layout; no record value (a sentinel) and no per-record φ anywhere
    in the written files."""
    import pacpriv.audit._run as run_module

    X, y = digits
    X = X[:240].copy()
    X[7, 5] = 0.123456789012  # sentinel record value
    captured = {}
    train = run_module.train_reference_models

    def spy(*args, **kwargs):
        captured["batch"] = train(*args, **kwargs)
        return captured["batch"]

    monkeypatch.setattr(run_module, "train_reference_models", spy)
    rep = run_audit(X, y[:240], model=_tiny_dp(), reference_models=4, rng=1, execution=QUIET,
                    settings=AuditSettings(fprs=(1e-3, 1e-2, 1e-1)),
                    one_run=OneRunSpec(canaries=40), out=tmp_path)
    compact = rep.compact_dict()
    assert list(compact) == ["attacks", "certified_curve", "one_run"]
    assert list(compact["attacks"][0]) == ["name", "auc", "balanced_accuracy", "tpr_at_fpr"]
    assert list(compact["attacks"][0]["tpr_at_fpr"]) == ["0.001", "0.01", "0.1"]
    unresolved = compact["attacks"][0]["tpr_at_fpr"]["0.001"]
    assert unresolved == {"tpr": None, "ci": None, "resolved": False,
                          "reason": "needs at least 1000 non-member scores to resolve FPR "
                                    "0.001; have 384"}
    assert set(compact["certified_curve"]) == {"label", "fpr", "tpr"}
    assert list(compact["one_run"]) == ["epsilon_lower", "epsilon_accountant", "delta",
                                        "confidence", "canaries"]
    full = json.loads((tmp_path / "report.json").read_text())
    assert list(full)[:3] == ["attacks", "certified_curve", "one_run"]
    assert {p.name for p in tmp_path.iterdir()} == {"report.json", "report.md", "report.html",
                                                    "roc.png"}
    texts = [(tmp_path / f).read_text() for f in ("report.json", "report.md", "report.html")]
    phis = captured["batch"].statistics
    for text in texts:
        assert "0.123456789" not in text and "123456789" not in text
        for v in phis.ravel()[::97]:
            assert repr(float(v)) not in text
    md = texts[1]
    assert "## TPR at low FPR" in md and "## Gap to the certified curve" in md
    assert "| LiRA (online) |" in md and "unresolved" in md and "roc.png" in md
    assert "data:image/png;base64," in texts[2]


def test_sklearn_estimator_family(digits):
    from sklearn.linear_model import LogisticRegression

    X, y = digits
    family = EstimatorModel(LogisticRegression(C=10.0, max_iter=200))
    rep = run_audit(X[:200], y[:200], model=family, reference_models=4, rng=2,
                    settings=AuditSettings(attacks=(LiraAttack(online=False), LossAttack()),
                                         fprs=(0.1,)),
                    execution=QUIET)
    assert rep.attacks[0].n_members + rep.attacks[0].n_nonmembers == 4 * 160
    assert rep.curves[0].label.startswith("certified (trivial: non-private scikit-learn")
    assert rep.model == {"training": "non-private scikit-learn fit",
                         "architecture": "LogisticRegression"}


@pytest.mark.slow
def test_pac_release_family_gets_the_mi_curve(digits):
    """A PAC release of logistic regression: the MI-budget curve, labelled estimated for a
    plug-in plan; the attacks stay under it."""
    from sklearn.linear_model import LogisticRegression

    from pacpriv.pac.engine import EstimatorMechanism, simulate
    from pacpriv.pac.noise import calibrate_variance_only

    X, y = digits
    X, y = X[:300, :16], (y[:300] >= 5).astype(np.int64)
    mech = EstimatorMechanism(LogisticRegression(C=1.0, max_iter=300))
    sim = simulate(mech, (X, y), n_trials=40, sampler="pairs", rng=0, execution=QUIET)
    plan = calibrate_variance_only(np.var(sim.outputs, axis=0), mi_budget=0.1)
    family = PacReleaseModel(mech, plan, LinearLogits(16, 1))
    rep = run_audit(X, y, model=family, reference_models=4, rng=4, execution=QUIET,
                    settings=AuditSettings(attacks=(RmiaAttack(), LossAttack()), fprs=(0.1,)))
    assert rep.curves[0].label.startswith("estimated: PAC Privacy")
    assert "I(b; decision) <= v = 0.1 nats" in rep.curves[0].label
    _all_points_under(rep)
    assert rep.model["mi_budget_nats"] == 0.1


@pytest.mark.parametrize(("kw", "exc", "match"), [
    ({"reference_models": 5}, ValueError, "`reference_models` must be even"),
    ({"reference_models": 2}, ValueError, r"`reference_models` must be an integer in \[4, inf\)"),
    ({"settings": "fast"}, TypeError, "`settings` must be an AuditSettings"),
    ({"model": object()}, TypeError, "`model` must be a model family with a `fit` method"),
    ({"one_run": OneRunSpec(canaries=500)}, ValueError,
     "needs more candidate records than canaries: 500 canaries, 80 candidate records"),
    ({"execution": {"n_jobs": 2}}, TypeError, "`execution` must be an ExecutionOptions"),
])
def test_bad_input_fails_before_any_training(digits, kw, exc, match):
    class Untrainable:
        def fit(self, *a, **k):
            raise AssertionError("trained")

        statistics = describe = certified_curves = accountant_epsilon = fit

    X, y = digits
    args = {"model": Untrainable(), "reference_models": 4, **kw}
    with pytest.raises(exc, match=match):
        run_audit(X[:100], y[:100], **args)


def test_population_and_options_errors():
    with pytest.raises(ValueError, match=r"`population` must be in \(0.0, 1.0\)"):
        AuditSettings(population=1.0)
    with pytest.raises(ValueError, match="distinct names; got 2 attack"):
        AuditSettings(attacks=(LossAttack(), LossAttack()))
    with pytest.raises(ValueError, match=r"at least 1 population sample and 8 candidate "
                                         r"records; got 9 records"):
        run_audit(np.zeros((9, 2)), np.zeros(9, dtype=int), model=_tiny_dp(),
                  settings=AuditSettings(population=0.2))


def test_seeded_audit_is_reproducible_and_resumes_from_a_checkpoint(digits, tmp_path):
    X, y = digits
    kw = dict(model=_tiny_dp(1), reference_models=4, rng=5,
              settings=AuditSettings(attacks=(LossAttack(), LiraAttack(online=False)),
                                   fprs=(0.1,)))
    first = run_audit(X[:150], y[:150], execution=ExecutionOptions(
        progress=False, checkpoint=tmp_path / "ckpt"), **kw)
    again = run_audit(X[:150], y[:150], execution=ExecutionOptions(
        progress=False, checkpoint=tmp_path / "ckpt"), **kw)
    assert again.simulation["resumed_trials"] == 4
    assert again.compact_dict() == first.compact_dict()
    assert first.simulation["reproducible"] is True


@pytest.mark.slow
def test_one_run_bound_is_positive_with_weak_noise_and_below_the_accountant(digits):
    """σ = 0.3 (weak): ε̂ > 0; σ = 5 (strong): ε̂ <= the accountant's ε; both ≤ accountant."""
    X, y = digits
    weak = DPSGDModel(MLPFactory(64, 10, (128,)), noise_multiplier=0.3, steps_per_epoch=1,
                      epochs=100, max_grad_norm=1.0, learning_rate=2.0)
    strong = DPSGDModel(MLPFactory(64, 10, (128,)), noise_multiplier=5.0, steps_per_epoch=1,
                        epochs=100, max_grad_norm=1.0, learning_rate=2.0)
    spec = OneRunSpec(canaries=150)
    r_weak = one_run_audit(weak, X[:300], y[:300], spec=spec, rng=0)
    r_strong = one_run_audit(strong, X[:300], y[:300], spec=spec, rng=0)
    assert 0 < r_weak.epsilon_lower <= r_weak.epsilon_accountant
    assert r_strong.epsilon_lower <= r_strong.epsilon_accountant
    assert r_weak.consistent and r_strong.consistent
    assert "without amplification" in r_weak.accountant  # M = 1: the Gaussian bound is exact


def _centroids(subset):
    """Class means of a binary (X, y) subset, flattened (a cheap PAC mechanism)."""
    X, y = subset
    return np.concatenate([X[y == c].mean(axis=0) if np.any(y == c) else np.zeros(X.shape[1])
                           for c in (0, 1)])


def _centroid_logits(vector, X):
    """Negative squared distance to each released class mean."""
    means = np.asarray(vector).reshape(2, -1)
    return -((X[:, None, :] - means[None]) ** 2).sum(axis=2)


def test_per_record_pac_plan_adds_its_certificate_curve(digits):
    """A per-record plan: the MI curve (its whole-subset claim is a plug-in estimate) and the
    certificate's accuracy curve, certified at 1−γ for the audited records only; explicit
    population samples keep every given record a candidate (the plan's pool)."""
    from pacpriv.pac.per_record import calibrate_per_record

    X, y = digits
    X, y = X[:120, :8], (y[:120] >= 5).astype(np.int64)
    plan = calibrate_per_record(_centroids, (X, y), target_accuracy=0.6, n_trials=200,
                                records=[0, 5, 17, 40, 77, 99], rng=0, execution=QUIET)
    family = PacReleaseModel(_centroids, plan, _centroid_logits)
    digits_z = digits[0][1500:1540, :8], (digits[1][1500:1540] >= 5).astype(np.int64)
    rep = run_audit(X, y, model=family, reference_models=4, rng=6, execution=QUIET,
                    settings=AuditSettings(attacks=(LossAttack(),), fprs=(0.1,),
                                         population=digits_z))
    assert rep.setup["candidate_records"] == 120 and rep.setup["population_samples"] == 40
    mi, per_record = rep.curves
    assert mi.label.startswith("estimated: PAC Privacy") and mi.scope == "every record"
    assert per_record.label.startswith("certified (1−γ = 0.95): per-record PAC certificate")
    assert per_record.scope == "the 6 audited records of the plan"
    assert curve_value(per_record, 0.1) == pytest.approx(
        0.1 + 2 * (plan.max_accuracy_upper - 0.5))
    assert plan.max_accuracy_upper <= 0.6


@pytest.mark.slow
def test_results_do_not_depend_on_the_number_of_workers(digits):
    """One torch thread per model and one seed per model: n_jobs = 1 and 2 agree exactly."""
    X, y = digits
    kw = dict(model=_tiny_dp(1), reference_models=4, rng=8,
              settings=AuditSettings(attacks=(LiraAttack(), RmiaAttack()), fprs=(0.1,)))
    one = run_audit(X[:200], y[:200], execution=ExecutionOptions(n_jobs=1, progress=False),
                    **kw)
    two = run_audit(X[:200], y[:200], execution=ExecutionOptions(n_jobs=2, progress=False),
                    **kw)
    assert two.simulation["n_jobs"] == 2 and two.simulation["backend"] == "loky"
    assert one.compact_dict() == two.compact_dict()


def test_ensemble_path_trains_the_same_models_as_the_engine_path(digits):
    """``ensemble=True``: the batch trained as one block (pacpriv.ensemble) equals the engine's
    one-model-per-trial path (block of one, the same seed and mask) to float round-off."""
    from pacpriv.audit._reference import train_reference_models

    X, y = digits
    family = DPSGDModel(MLPFactory(64, 10, (16,)), noise_multiplier=0.5, steps_per_epoch=3,
                        epochs=2, max_grad_norm=1.0, learning_rate=0.5, ensemble=True)
    pool, pop = (X[:90], y[:90]), (X[90:100], y[90:100])
    block = train_reference_models(family, pool, population=pop, n_models=4, rng=9,
                                   execution=QUIET)
    engine = train_reference_models(family, pool, population=pop, n_models=4, rng=9,
                                    execution=ExecutionOptions(progress=False, ensemble=False))
    assert block.simulation["backend"] == "pacpriv.ensemble"
    assert engine.simulation["backend"] == "sequential" and engine.simulation["reproducible"]
    np.testing.assert_array_equal(block.masks, engine.masks)
    np.testing.assert_allclose(block.statistics, engine.statistics, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(block.population, engine.population, rtol=1e-4, atol=1e-4)
