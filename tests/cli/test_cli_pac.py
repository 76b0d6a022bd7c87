"""``pacpriv pac ...`` command line: the main job, conversions and one-line errors."""

from __future__ import annotations

import json

import pytest

from pacpriv.cli import main
from pacpriv.pac.engine import ExecutionOptions

pytestmark = pytest.mark.usefixtures("one_native_thread")


@pytest.mark.filterwarnings("always::pacpriv.exceptions.UndersampledWarning")  # CLI prints it
def test_pac_run_writes_report(tmp_path, capsys):
    """The main job writes report.json and report.md with the 58.82% posterior bound."""
    out = tmp_path / "rep"
    rc = main(["pac", "run", "--mechanism", "kmeans", "--dataset", "iris", "--mi-budget",
               "0.015625", "--trials", "100", "--n-jobs", "1", "--out", str(out), "--seed",
               "1", "--release-seed", "2", "--no-progress", "--format", "json,md"])
    assert rc == 0
    report = json.loads((out / "report.json").read_text())
    assert report["privacy"]["posterior_success_bound"] == pytest.approx(0.588157, abs=5e-6)
    assert report["privacy"]["posterior_success_bound_label"] == "certified (1−γ = 0.95)"
    assert report["privacy"]["certification"]["n_shape_trials"] == 41  # default split, d = 12
    assert len(report["release"]) == 12
    md = (out / "report.md").read_text()
    assert "58.82%**, **certified (1−γ = 0.95)**" in md and "Threat model" in md
    captured = capsys.readouterr()
    printed = captured.out
    # 100 trials are below the trial plan for a 1.2x noise inflation at d = 12 (113)
    assert "pacpriv: warning: n_trials = 100 is below the 113 trials" in captured.err
    assert "report (json)" in printed
    assert "posterior bound      58.82% certified (1−γ = 0.95)" in printed
    # No raw records: iris' first record never appears in the report.
    assert "5.1, 3.5, 1.4, 0.2" not in md
    # new-user review F9: a seeded release says so on the screen, as the report does
    assert report["release_randomness"] == "seeded, not for release (caller-seeded)"
    assert ("release randomness   seeded, not for release (caller-seeded): --release-seed "
            "fixes the secret subset and the noise\n") in printed


@pytest.mark.filterwarnings("always::pacpriv.exceptions.UndersampledWarning")  # CLI prints it
def test_pac_run_unseeded_release_says_os_entropy(tmp_path, capsys):
    """Without --release-seed the summary says the release used fresh OS entropy."""
    rc = main(["pac", "run", "--mechanism", "mean", "--dataset", "iris", "--mi-budget", "0.5",
               "--trials", "20", "--n-jobs", "1", "--out", str(tmp_path / "r"), "--seed", "1",
               "--no-progress", "--format", "json"])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "release randomness   fresh OS entropy (not recorded)\n" in printed
    assert "caller-seeded" not in printed


def test_pac_posterior_and_budget_tables(capsys):
    """`pac posterior` and `pac budget` are inverse conversions (prior ½)."""
    assert main(["pac", "posterior", "--mi-budget", "0.015625", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    acc = rows[0]["posterior_success_bound"]
    assert acc == pytest.approx(0.588157, abs=5e-6)
    assert main(["pac", "budget", "--target-accuracy", str(acc), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["mi_budget_nats"] == pytest.approx(0.015625)


@pytest.mark.parametrize("command", [["posterior", "--mi-budget", "0.02"],
                                     ["budget", "--target-accuracy", "0.8"]])
def test_prior_below_half_is_refused(command, capsys):
    """A prior below ½ (e.g. the inclusion probability q = 0.3 itself) would print a bound
    below the blind guess max(q, 1 − q) = 0.7: refused, with the value to pass instead."""
    assert main(["pac", *command, "--prior", "0.3"]) == 2
    err = capsys.readouterr().err
    assert "--prior" in err and "[0.5, 1)" in err and "--prior 0.7" in err
    assert main(["pac", *command, "--prior", "0.7", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)[0]
    assert row.get("posterior_success_bound", 0.8) >= 0.7


@pytest.mark.filterwarnings("always::pacpriv.exceptions.UndersampledWarning")  # CLI prints it
def test_pac_run_target_accuracy_uses_best_blind_guess(tmp_path):
    """--target-accuracy with sampling rate 0.25: the budget is calibrated at the blind-guess
    rate 0.75, so the reported bound meets the target (it was computed at prior ½ before)."""
    out = tmp_path / "rep"
    rc = main(["pac", "run", "--mechanism", "kmeans", "--dataset", "iris",
               "--target-accuracy", "0.8", "--sampling-rate", "0.25", "--trials", "100",
               "--n-jobs", "1", "--out", str(out), "--seed", "1", "--no-release",
               "--no-progress", "--format", "json"])
    assert rc == 0
    report = json.loads((out / "report.json").read_text())
    assert report["privacy"]["posterior_success_bound"] == pytest.approx(0.8, abs=1e-9)


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--mechanism", "kmeans", "--dataset", "iris", "--target-accuracy", "0.7",
          "--sampling-rate", "0.25"], "blind-guess"),
        (["--mechanism", "nope", "--dataset", "iris", "--mi-budget", "0.1"], "nope"),
        (["--mechanism", "kmeans", "--dataset", "nodata", "--mi-budget", "0.1"], "nodata"),
        (["--mechanism", "kmeans", "--dataset", "/no/such.csv", "--mi-budget", "0.1"], "no/such"),
        (["--mechanism", "kmeans", "--dataset", "iris", "--mi-budget", "0"], "mi-budget"),
        (["--mechanism", "kmeans", "--dataset", "iris", "--mi-budget", "-2"], "mi-budget"),
        (["--mechanism", "kmeans", "--dataset", "iris", "--mi-budget", "0.1", "--trials", "1"],
         "trials"),
        (["--mechanism", "kmeans", "--dataset", "iris"], "mi-budget"),
        (["--mechanism", "kmeans", "--dataset", "iris", "--mi-budget", "0.1", "--format", "pdf"],
         "format"),
        (["--mechanism", "kmeans", "--dataset", "iris", "--mi-budget", "0.1", "--sampler",
          "fixed"], "subset-size"),
        (["--mechanism", "kmeans", "--dataset", "iris", "--mi-budget", "0.1", "--seed", "7",
          "--release-seed", "7"], "--release-seed must differ from --seed"),
    ],
)
def test_pac_run_bad_input_is_one_line_exit_2(argv, match, tmp_path, capsys):
    """Bad input: exit status 2 and a single `pacpriv: error:` line naming the problem."""
    rc = main(["pac", "run", "--no-progress", "--out", str(tmp_path), *argv])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err.startswith("pacpriv: error:") and "\n" not in err
    assert match in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "argv",
    [["pac", "run", "--mechanism", "kmeans"], ["nope"], ["dpsgd", "bound", "--epochs", "x"]],
)
def test_argparse_errors_are_one_line_exit_2(argv, capsys):
    """Errors found by argparse follow the same one-line, exit-2 contract."""
    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err.strip()
    assert info.value.code == 2
    assert err.startswith("pacpriv: error:") and "\n" not in err


def test_pac_trials_plans_the_certificate(capsys):
    """``pacpriv pac trials`` prints trials_for_inflation (113 trials for d = 12 at 1.2x)."""
    from pacpriv.pac.noise import trials_for_inflation

    assert main(["pac", "trials", "--dim", "12", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["n_trials"] == trials_for_inflation(12) == 113
    assert rows[0]["predicted_inflation"] <= 1.2


@pytest.mark.filterwarnings("always::pacpriv.exceptions.UndersampledWarning")  # CLI prints it
def test_checkpoint_of_another_seed_tells_a_cli_user_to_omit_seed(tmp_path, capsys):
    """New-user review F6: the CLI has no `rng`; the fix it names is omitting --seed."""
    ckpt = tmp_path / "ck"
    base = ["pac", "run", "--mechanism", "mean", "--dataset", "iris", "--mi-budget", "0.5",
            "--trials", "20", "--n-jobs", "1", "--no-progress", "--no-release", "--format",
            "json", "--checkpoint", str(ckpt)]
    assert main([*base, "--seed", "1", "--out", str(tmp_path / "a")]) == 0
    capsys.readouterr()
    assert main([*base, "--seed", "2", "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pacpriv: error: Checkpoint") and err.count("\n") == 1
    assert ("the root seed (--seed): checkpoint entropy 1, now entropy 2; omit --seed to "
            "reuse the checkpoint's seed" in err)
    assert "rng" not in err
    assert main([*base, "--out", str(tmp_path / "c")]) == 0  # without --seed: resumed
    first = json.loads((tmp_path / "a" / "report.json").read_text())
    again = json.loads((tmp_path / "c" / "report.json").read_text())
    assert again["privacy"]["posterior_success_bound"] == first["privacy"][
        "posterior_success_bound"]
    assert again["spectrum"] == first["spectrum"]


def test_checkpoint_seed_advice_in_the_api_names_rng(tmp_path):
    """The API message keeps "pass rng=None" (the CLI rewords only its own copy)."""
    import numpy as np

    from pacpriv.exceptions import CheckpointError
    from pacpriv.pac.engine._simulate import simulate

    pool = np.arange(10.0)
    simulate(np.mean, pool, n_trials=3, rng=1,
             execution=ExecutionOptions(checkpoint=tmp_path / "ck", progress=False))
    with pytest.raises(CheckpointError, match="pass rng=None to reuse the checkpoint's seed"):
        simulate(np.mean, pool, n_trials=3, rng=2,
                 execution=ExecutionOptions(checkpoint=tmp_path / "ck", progress=False))


def test_listed_values_answer_each_like_a_single_call_and_are_capped(capsys):
    """`pac posterior` / `pac budget` answer a list with one vectorised root per call (2,000
    values took 40–100 s one by one): each row equals the single-value call bit for bit, and
    more than `MAX_LISTED` values are refused in one line before any work."""
    from pacpriv.cli.pac import MAX_LISTED
    from pacpriv.pac.bounds import mi_budget_for_accuracy, posterior_success_rate

    budgets = ["1e-300", "2^-20", "0.01", "0.5", "3", "1e6"]
    assert main(["pac", "posterior", "--mi-budget", *budgets, "--prior", "0.7", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["posterior_success_bound"] for r in rows] == [
        float(posterior_success_rate(v, prior=0.7)) for v in (1e-300, 2**-20, 0.01, 0.5, 3, 1e6)]
    targets = [0.5000001, 0.6, 0.9, 0.999999]
    assert main(["pac", "budget", "--target-accuracy", *map(str, targets), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["mi_budget_nats"] for r in rows] == [
        float(mi_budget_for_accuracy(a, prior=0.5)) for a in targets]
    for command, flag, value in (("posterior", "--mi-budget", "0.01"),
                                 ("budget", "--target-accuracy", "0.6"),
                                 ("trials", "--dim", "10")):
        assert main(["pac", command, flag, *[value] * (MAX_LISTED + 1)]) == 2
        err = capsys.readouterr().err
        assert f"{flag} takes at most {MAX_LISTED} values per call; got {MAX_LISTED + 1}" in err
