"""``pacpriv predict fit|query|status`` and the ``serve`` parser."""

from __future__ import annotations

import json
import os
import stat

import numpy as np
import pytest

from pacpriv._random import seed_to_dict
from pacpriv.cli import build_parser, main
from pacpriv.cli.predict import budget_number
from pacpriv.pac.bounds._posterior import mi_budget_for_accuracy, posterior_success_rate


def test_budget_number_accepts_powers_of_two():
    assert budget_number("2^-16") == 2.0**-16
    assert budget_number("2**-8") == 2.0**-8
    assert budget_number("0.25") == 0.25


def test_fit_query_status_report(tmp_path, capsys):
    state = tmp_path / "s"
    args = ["predict", "fit", "--estimator", "naive_bayes", "--dataset", "iris", "--state",
            str(state), "--n-worlds", "4", "--per-query-budget", "2^-10",
            "--target-accuracy", "0.55", "--seed", "0", "--no-progress"]
    assert main(args) == 0
    total = float(mi_budget_for_accuracy(0.55, prior=0.5))
    assert f"0 of {int(total / 2**-10)}" in capsys.readouterr().out
    assert main(["predict", "query", "--state", str(state), "--dataset", "iris", "--rows",
                 "0:3", "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert len(body["outputs"]) == 3 and len(body["outputs"][0]) == 3
    assert body["spent"] == 3 * 2**-10
    assert main(["predict", "status", "--state", str(state), "--out", str(tmp_path / "r")]) == 0
    md = (tmp_path / "r" / "report.md").read_text()
    want = posterior_success_rate(3 * 2**-10, prior=0.5)
    assert "| queries answered | 3 |" in md and "certified" in md
    shown = float(md.split("above **")[1].split("%")[0])
    assert want * 100 <= shown <= want * 100 + 1e-4  # rounded up, never down
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert "secret_index" not in json.dumps(report)


def test_errors_exit_with_one_line(tmp_path, capsys):
    base = ["predict", "fit", "--estimator", "naive_bayes", "--dataset", "iris", "--state",
            str(tmp_path / "s"), "--per-query-budget", "2^-10", "--total-budget", "2^-9",
            "--no-progress", "--seed", "1"]
    assert main([*base, "--n-worlds", "3"]) == 2
    assert "--n-worlds must be an even integer" in capsys.readouterr().err
    assert main([*base, "--n-worlds", "4"]) == 0
    capsys.readouterr()
    assert main(["predict", "query", "--state", str(tmp_path / "s"), "--dataset", "iris",
                 "--rows", "0:3"]) == 1  # 3 rows > 2 allowed: refused, nothing spent
    assert "Nothing was spent" in capsys.readouterr().err
    assert main(["predict", "status", "--state", str(tmp_path / "s"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n_answered"] == 0
    assert main(["predict", "status", "--state", str(tmp_path / "missing")]) == 2


def test_per_query_budget_above_the_total_names_the_flags_the_user_gave(tmp_path, capsys):
    base = ["predict", "fit", "--estimator", "naive_bayes", "--dataset", "iris", "--state",
            str(tmp_path / "s"), "--per-query-budget", "0.5", "--no-progress"]
    assert main([*base, "--target-accuracy", "0.55"]) == 2
    err = capsys.readouterr().err
    assert "--target-accuracy 0.55 allows" in err and "--total-budget" not in err
    assert main([*base, "--total-budget", "0.01"]) == 2
    assert "exceeds --total-budget 0.01" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()  # refused before anything was created


def test_serve_parser():
    args = build_parser().parse_args(["serve", "--state", "d", "--port", "9001"])
    assert (args.state, args.host, args.port) == ("d", "127.0.0.1", 9001)

def test_serve_needs_state(capsys):
    assert main(["serve"]) == 2  # --state is required (checked by the handler: `serve keys`
    assert "--state is required" in capsys.readouterr().err  # has its own --state)


FIT = ["predict", "fit", "--estimator", "naive_bayes", "--dataset", "iris", "--n-worlds", "4",
       "--per-query-budget", "2^-10", "--total-budget", "2^-6", "--no-progress"]


def _old_secret(seed: int, n_worlds: int) -> tuple[int, int]:
    """(J, noise entropy) as pacpriv 0.1 derived them from ``--seed`` (V1 review F7)."""
    from pacpriv._random import hashed_stream as _derived

    root = np.random.SeedSequence(seed)
    j = int(np.random.default_rng(_derived(root, 1)).integers(n_worlds))
    return j, int(_derived(root, 2).generate_state(4, np.uint64)[0])


def _search_seed(config: dict, seeds) -> int | None:
    """The reviewer's brute force: the seed whose world seed is the one in config.json."""
    from pacpriv._random import hashed_stream as _derived

    for s in seeds:
        if seed_to_dict(_derived(np.random.SeedSequence(s), 0)) == config["world_seed"]:
            return s
    return None


def test_public_files_do_not_give_the_secret_index_or_noise(tmp_path, capsys):
    """V1 review F7: searching --seed over a range with config.json (world-readable) finds the
    seed of the public worlds, as before, but J and the noise no longer derive from it: the
    secret the search derives is not the stored one, and a second fit with the same --seed
    (identical public files) draws another secret from OS entropy."""
    secrets_found = []
    for name in ("a", "b"):
        state = tmp_path / name
        assert main([*FIT, "--state", str(state), "--seed", "777"]) == 0
        assert "OS entropy (not recorded)" in capsys.readouterr().out
        config = json.loads((state / "config.json").read_text())
        assert config["secret_randomness"] == "OS entropy (not recorded)"
        assert _search_seed(config, range(2000)) == 777  # the public seed is found...
        body = json.loads((state / "secret.json").read_text())
        secrets_found.append((body["secret_index"], body["noise_entropy"]))
        # ...but the secret it gives (0.1's derivation) is not the stored one
        assert _old_secret(777, 4)[1] != body["noise_entropy"]
    a, b = tmp_path / "a", tmp_path / "b"
    configs = [json.loads((x / "config.json").read_text()) for x in (a, b)]
    scopes = [c.pop("ledger_scope") for c in configs]  # the ledger's scope: random per state
    assert configs[0] == configs[1] and scopes[0] != scopes[1]
    assert (a / "worlds.npz").read_bytes() == (b / "worlds.npz").read_bytes()
    assert secrets_found[0][1] != secrets_found[1][1]  # 128-bit OS entropy each
    assert all(e.bit_length() > 64 for _, e in secrets_found)


def test_secret_seed_reproduces_the_secret_and_leaves_no_public_trace(tmp_path, capsys):
    """--secret-seed (tests only) fixes J and the noise, is written nowhere but the 0600 file's
    derived values, changes no public file, and marks the state caller-seeded."""
    for name, secret_seed in (("a", "1"), ("b", "1"), ("c", "2")):
        assert main([*FIT, "--state", str(tmp_path / name), "--seed", "777",
                     "--secret-seed", secret_seed]) == 0
        assert "caller-seeded secret (not for production)" in capsys.readouterr().out
    a, b, c = (tmp_path / n for n in "abc")
    assert (a / "secret.json").read_bytes() == (b / "secret.json").read_bytes()
    assert (a / "secret.json").read_bytes() != (c / "secret.json").read_bytes()
    assert stat.S_IMODE(os.stat(a / "secret.json").st_mode) == 0o600
    configs = [json.loads((x / "config.json").read_text()) for x in (a, c)]
    assert configs[0].pop("ledger_scope") != configs[1].pop("ledger_scope")  # random per state
    assert configs[0] == configs[1]
    for public in ("worlds.npz",):  # independent of the secret seed
        assert (a / public).read_bytes() == (c / public).read_bytes()
    assert json.loads((a / "config.json").read_text())["secret_randomness"] == \
        "caller-seeded secret (not for production)"
    assert main(["predict", "status", "--state", str(a), "--out", str(tmp_path / "r")]) == 0
    capsys.readouterr()
    md = (tmp_path / "r" / "report.md").read_text()
    assert "| secret index J and noise | caller-seeded secret (not for production) |" in md
    from pacpriv.report.builder import REDACTED, redact_command

    for argv in (["--secret-seed", "5"], ["--secret-seed=5"], ["--secret-s", "5"]):
        assert "5" not in " ".join(redact_command(["predict", "fit", *argv]))
        assert REDACTED in " ".join(redact_command(argv))


@pytest.mark.parametrize(("extra", "match"), [
    (["--seed", "5", "--secret-seed", "5"], "--secret-seed must differ from --seed"),
    (["--secret-seed", "-1"], "--secret-seed must be a non-negative integer; got -1"),
])
def test_secret_seed_errors(extra, match, tmp_path, capsys):
    assert main([*FIT, "--state", str(tmp_path / "s"), *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and match in err
    assert not (tmp_path / "s").exists()


def test_serving_on_a_non_loopback_host_without_keys_is_refused():
    from pacpriv.prediction._app import check_exposure

    for host in ("127.0.0.1", "::1", "localhost", "127.0.0.2"):
        check_exposure(host, has_keys=False)  # loopback: allowed without keys
    for host in ("0.0.0.0", "10.1.2.3", "::"):
        check_exposure(host, has_keys=True)  # any host with keys
        with pytest.raises(PermissionError, match=f"refusing to serve on {host} without API "
                                                  "keys.*keys add.*127.0.0.1"):
            check_exposure(host, has_keys=False)


def test_estimator_module_attr_is_found_in_the_current_folder(tmp_path, monkeypatch):
    """`--estimator mymodels:make` imports mymodels.py from the working folder (as
    `--mechanism module:function` does), not only from installed packages."""
    import sys

    from pacpriv.cli.predict import _estimator

    (tmp_path / "pp_user_models_cwd.py").write_text(
        "from sklearn.naive_bayes import GaussianNB\n"
        "class Model(GaussianNB):\n    pass\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    est = _estimator("pp_user_models_cwd:Model")
    assert type(est).__name__ == "Model" and hasattr(est, "fit")
    sys.modules.pop("pp_user_models_cwd", None)


def test_estimator_factory_is_called_once_and_its_failure_withheld(tmp_path, monkeypatch):
    """`--estimator est.py:make` with a zero-argument factory (as `audit --model` takes) makes
    the estimator; a factory or class that raises is one withheld UserCodeError (its message,
    which may quote data, was printed or a traceback)."""
    from pacpriv.cli.predict import _estimator
    from pacpriv.exceptions import UserCodeError

    (tmp_path / "pp_factories.py").write_text(
        "from sklearn.linear_model import LogisticRegression\n"
        "def make():\n    return LogisticRegression(C=0.5)\n"
        "def make_kw(C=2.0):\n    return LogisticRegression(C=C)\n"
        "def fit(subset):\n    return None\n"
        "def boom():\n    raise RuntimeError('row 3 is 5.1')\n"
        "class Bad:\n    def __init__(self):\n        raise ValueError('row 4 is 6.2')\n")
    monkeypatch.chdir(tmp_path)
    assert _estimator("pp_factories.py:make").get_params()["C"] == 0.5
    assert _estimator("pp_factories.py:make_kw").get_params()["C"] == 2.0
    assert callable(_estimator("pp_factories.py:fit"))  # a fit function is kept as it is
    for attr in ("boom", "Bad"):
        with pytest.raises(UserCodeError, match="when called with no arguments") as info:
            _estimator(f"pp_factories.py:{attr}")
        assert "5.1" not in str(info.value) and "6.2" not in str(info.value)


def test_estimator_class_from_a_user_file_is_pickled_by_value(tmp_path, monkeypatch, capsys):
    """`--estimator models.py:Model` failed with a PicklingError (the file's module cannot be
    imported by name); the world models are now pickled by value and load from anywhere."""
    from pacpriv.cli.main import main

    (tmp_path / "user_models_by_value.py").write_text(
        "from sklearn.naive_bayes import GaussianNB\n"
        "class Model(GaussianNB):\n    pass\n")
    monkeypatch.chdir(tmp_path)
    assert main(["predict", "fit", "--estimator", "user_models_by_value.py:Model",
                 "--dataset", "iris", "--state", "st", "--n-worlds", "4",
                 "--per-query-budget", "0.001", "--total-budget", "0.01", "--n-jobs", "1",
                 "--no-progress"]) == 0
    np.savetxt(tmp_path / "q.csv", [[5.1, 3.5, 1.4, 0.2]], delimiter=",")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["predict", "query", "--state", str(tmp_path / "st"), "--queries",
                 str(tmp_path / "q.csv")]) == 0
    assert "queries answered      1 of 10" in capsys.readouterr().out


def test_state_of_a_module_estimator_loads_from_the_same_folder(tmp_path, monkeypatch, capsys):
    """`--estimator mymodels:Model` fitted, but `predict query`/`status` in the same folder
    failed with "No module named 'mymodels'" (the console script does not put the current
    folder on sys.path)."""
    import sys

    (tmp_path / "pp_user_models_same.py").write_text(
        "from sklearn.naive_bayes import GaussianNB\n"
        "class Model(GaussianNB):\n    pass\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    assert main(["predict", "fit", "--estimator", "pp_user_models_same:Model", "--dataset",
                 "iris", "--state", "st", "--n-worlds", "4", "--per-query-budget", "0.001",
                 "--total-budget", "0.01", "--n-jobs", "1", "--no-progress"]) == 0
    # a fresh process: the module is not imported yet, nor the folder on the path
    sys.modules.pop("pp_user_models_same", None)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    capsys.readouterr()
    assert main(["predict", "status", "--state", "st"]) == 0
    sys.modules.pop("pp_user_models_same", None)


def test_caller_seeded_secret_is_marked_in_status_and_queries(tmp_path, capsys):
    """`predict status`/`query` of a --secret-seed state did not say so, and status --json's
    threat model said J was drawn from OS entropy."""
    state = str(tmp_path / "st")
    assert main(["predict", "fit", "--estimator", "naive_bayes", "--dataset", "iris",
                 "--state", state, "--n-worlds", "4", "--per-query-budget", "0.001",
                 "--total-budget", "0.01", "--n-jobs", "1", "--no-progress", "--seed", "3",
                 "--secret-seed", "9"]) == 0
    capsys.readouterr()
    assert main(["predict", "status", "--state", state]) == 0
    assert "caller-seeded secret (not for production)" in capsys.readouterr().out
    assert main(["predict", "status", "--state", state, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["secret_randomness"].startswith("caller-seeded")
    assert "from OS entropy" not in d["threat_model"] and "caller-seeded" in d["threat_model"]
    np.savetxt(tmp_path / "q.csv", [[5.1, 3.5, 1.4, 0.2]], delimiter=",")
    assert main(["predict", "query", "--state", state, "--queries",
                 str(tmp_path / "q.csv")]) == 0
    assert "caller-seeded secret (not for production)" in capsys.readouterr().out


@pytest.mark.parametrize(("estimator", "output", "columns"), [
    # iris's class names (its public target_names; a CSV's text labels alike: AD5)
    ("naive_bayes", "proba", ["P(setosa)", "P(versicolor)", "P(virginica)", "label"]),
    ("naive_bayes", "label", ["vote(setosa)", "vote(versicolor)", "vote(virginica)", "label"]),
    ("ridge", "value", ["value"]),
])
def test_query_prints_a_header_and_what_is_released(tmp_path, capsys, estimator, output,
                                                    columns):
    state = tmp_path / "s"
    assert main(["predict", "fit", "--estimator", estimator, "--dataset", "iris", "--state",
                 str(state), "--n-worlds", "4", "--per-query-budget", "2^-10",
                 "--total-budget", "1", "--output", output, "--seed", "0",
                 "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["predict", "query", "--state", str(state), "--dataset", "iris", "--rows",
                 "0:2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["row", *columns]
    assert [line.split()[0] for line in lines[1:3]] == ["0", "1"]
    assert len(lines[1].split()) == 1 + len(columns)
    text = "\n".join(lines)
    assert "released" in text and "exact (no estimation)" in text and "1−γ = 1" not in text
    assert main(["predict", "query", "--state", str(state), "--dataset", "iris", "--rows",
                 "2:3", "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["columns"] == [c for c in columns if c != "label"]
    assert (body["labels"] is None) is (output == "value")
    if output == "proba":
        assert min(body["outputs"][0]) >= 0 and abs(sum(body["outputs"][0]) - 1) < 1e-12


def test_torch_fit_from_the_command_line_with_and_without_the_ensemble(tmp_path, capsys,
                                                                       monkeypatch):
    pytest.importorskip("torch")
    (tmp_path / "tworlds.py").write_text(
        "import torch\n"
        "from pacpriv.ensemble import SGD, TrainingSpec\n"
        "from pacpriv.prediction import TorchFit\n\n"
        "def linear():\n    return torch.nn.Linear(4, 3)\n\n"
        "FIT = TorchFit(linear, TrainingSpec(SGD(0.1), epochs=2), dtype='float64')\n")
    monkeypatch.chdir(tmp_path)
    base = ["predict", "fit", "--estimator", "tworlds:FIT", "--dataset", "iris",
            "--n-worlds", "4", "--per-query-budget", "2^-10", "--total-budget", "1",
            "--seed", "3", "--no-progress"]
    assert main([*base, "--state", "fast"]) == 0
    assert main([*base, "--state", "slow", "--no-ensemble"]) == 0
    fast, slow = np.load("fast/worlds.npz"), np.load("slow/worlds.npz")
    np.testing.assert_array_equal(fast["masks"], slow["masks"])
    np.testing.assert_allclose(fast["params"], slow["params"], rtol=0, atol=1e-12)
    capsys.readouterr()
    assert main(["predict", "query", "--state", "fast", "--dataset", "iris", "--rows",
                 "0:2"]) == 0
    assert capsys.readouterr().out.splitlines()[0].split() == [
        "row", "P(setosa)", "P(versicolor)", "P(virginica)", "label"]
