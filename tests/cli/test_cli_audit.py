"""``pacpriv audit``: the report files, the ``--json`` layout and one-line errors."""

from __future__ import annotations

import json

import pytest

from pacpriv.audit._suite import ATTACKS
from pacpriv.cli import main

pytest.importorskip("torch")

SMALL = ["--model", "logistic", "--reference-models", "4", "--epochs", "1",
         "--steps-per-epoch", "1", "--seed", "3", "--n-jobs", "1", "--no-progress"]


def test_json_prints_exactly_the_issue_layout(tmp_path, capsys):
    out = tmp_path / "aud"
    rc = main(["audit", "--dataset", "digits", "--noise-multiplier", "2", "--one-run",
               "--canaries", "50", "--out", str(out), "--json", *SMALL])
    assert rc == 0
    printed = json.loads(capsys.readouterr().out)
    assert list(printed) == ["attacks", "certified_curve", "one_run"]
    names = [a["name"] for a in printed["attacks"]]  # every registered attack, built-ins first
    assert names == [f().name for f in ATTACKS.values()]
    assert names[:5] == [
        "LiRA (online)", "RMIA (online)", "LiRA (offline)", "RMIA (offline, a=0.3)", "LOSS"]
    first = printed["attacks"][0]
    assert list(first) == ["name", "auc", "balanced_accuracy", "tpr_at_fpr"]
    assert list(first["tpr_at_fpr"]) == ["0.0001", "0.001", "0.01", "0.1"]
    # 4 models x 719 candidates / 2 ≈ 1438 non-member scores: 0.01% is unresolved, 0.1% is not
    assert first["tpr_at_fpr"]["0.0001"]["resolved"] is False
    assert first["tpr_at_fpr"]["0.0001"]["tpr"] is None
    assert first["tpr_at_fpr"]["0.001"]["resolved"] is True
    assert set(first["tpr_at_fpr"]["0.001"]) == {"tpr", "ci", "resolved"}
    assert list(printed["certified_curve"]) == ["label", "fpr", "tpr"]
    assert printed["certified_curve"]["label"].startswith("certified: DP-SGD")
    one = printed["one_run"]
    assert list(one) == ["epsilon_lower", "epsilon_accountant", "delta", "confidence",
                         "canaries"]
    assert one["canaries"] == 50 and one["epsilon_lower"] <= one["epsilon_accountant"]
    assert {p.name for p in out.iterdir()} == {"report.json", "report.md", "report.html",
                                               "roc.png"}
    full = json.loads((out / "report.json").read_text())
    assert full["model"]["noise_multiplier"] == 2.0 and full["setup"]["reference_models"] == 4


def test_table_output_and_target_accuracy(tmp_path, capsys):
    out = tmp_path / "t"
    rc = main(["audit", "--target-accuracy", "0.6", "--out", str(out), "--format", "json",
               *SMALL])
    assert rc == 0
    text = capsys.readouterr().out
    assert "TPR@0.01%" in text and "LiRA (online)" in text and "unresolved" in text
    assert "certified curve: certified: DP-SGD" in text and "wrote (json)" in text
    report = json.loads((out / "report.json").read_text())
    assert report["model"]["target_accuracy"] == 0.6
    # the TV curve of the calibrated sigma: at most FPR + 2(0.6 − ½)
    tv = report["certified_curves"][-1]
    assert max(t - f for f, t in zip(tv["fpr"], tv["tpr"], strict=True)) <= 0.2 + 1e-12


@pytest.mark.parametrize(("argv", "match"), [
    (["--non-private", "--reference-models", "5"], "--reference-models must be an even number"),
    (["--non-private", "--canaries", "10"], "--canaries needs --one-run"),
    (["--noise-multiplier", "-1"], "--noise-multiplier must be a finite number > 0; got -1"),
    (["--target-accuracy", "1.2"], "--target-accuracy must be in (0.5, 1); got 1.2"),
    (["--non-private", "--population", "1.5"], "--population must be in (0, 1); got 1.5"),
    (["--non-private", "--dataset", "breast_cancer", "--augment", "shifts"],
     "--augment shifts needs square images (a square number of features); the dataset has 30"),
    (["--non-private", "--dataset", "nope"], "unknown dataset 'nope'"),
    (["--non-private", "--n-jobs", "0"], "--n-jobs must be a positive number"),
    (["--non-private", "--epochs", "0"], "--epochs must be an integer in [1, inf); got 0"),
    (["--non-private", "--steps-per-epoch", "0"], "--steps-per-epoch must be an integer"),
    (["--non-private", "--learning-rate", "-1"], "--learning-rate must be in (0.0, inf)"),
    (["--noise-multiplier", "1", "--learning-rate", "inf"], "--learning-rate must be a finite"),
    (["--non-private", "--max-grad-norm", "0"], "--max-grad-norm must be in (0.0, inf)"),
])
def test_bad_input_exits_2_with_one_line(argv, match, tmp_path, capsys):
    rc = main(["audit", "--out", str(tmp_path / "x"), "--no-progress", *argv])
    assert rc == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("pacpriv: error: ")
    assert match in err
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(("argv", "match"), [
    ([], "one of the arguments --non-private --noise-multiplier --target-accuracy is required"),
    (["--non-private", "--noise-multiplier", "1"], "not allowed with argument"),
])
def test_privacy_flags_are_exclusive_and_required(argv, match, tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(["audit", "--out", str(tmp_path / "x"), *argv])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and match in err


def test_out_must_not_be_a_file(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("x")
    assert main(["audit", "--non-private", "--out", str(f), *SMALL]) == 2
    assert "--out" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "sigma", "clip", "target"), [
    (["--noise-multiplier", "2"], 2.0, 1.0, None),
    (["--non-private"], 0.0, None, None),
    (["--target-accuracy", "0.6"], None, 1.0, 0.6),
])
def test_training_flags_default_to_the_audit_s_own_values(argv, sigma, clip, target):
    """The DP-SGD flags come from DPSGDModel's fields with the audit's defaults (E = 30,
    M = 10, learning rate 0.5, C = 1), and the family built is the one the flags describe."""
    from pacpriv.audit import DPSGDModel, MLPFactory
    from pacpriv.cli.audit import _family
    from pacpriv.cli.main import build_parser

    args = build_parser().parse_args(["audit", *argv])
    family = _family(args, 64, 10)
    assert isinstance(family, DPSGDModel)
    assert (family.epochs, family.steps_per_epoch, family.learning_rate) == (30, 10, 0.5)
    assert (family.max_grad_norm, family.ensemble, family.target_accuracy) == (clip, False,
                                                                                target)
    assert family.model_factory == MLPFactory(64, 10, (128,))
    if sigma is not None:
        assert family.noise_multiplier == sigma
    args = build_parser().parse_args(["audit", "--noise-multiplier", "3", "--epochs", "2",
                                      "--steps-per-epoch", "4", "--learning-rate", "0.1",
                                      "--max-grad-norm", "2", "--ensemble", "--model",
                                      "logistic"])
    assert _family(args, 64, 10) == DPSGDModel(MLPFactory(64, 10, ()), noise_multiplier=3.0,
                                               steps_per_epoch=4, epochs=2, max_grad_norm=2.0,
                                               learning_rate=0.1, ensemble=True)
