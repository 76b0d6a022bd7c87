"""Private files never inside the shareable report folder, and --withhold-pool-statistics
shows nothing derived from the pool (issue 35; sixth new-user pass, c8100/c8101, m8/m9)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pacpriv.cli.main import main
from pacpriv.pac.noise._plan import per_record_noise_excess
from pacpriv.report.pool import PLUGIN_KEYS, private_section

pytestmark = pytest.mark.filterwarnings("always")  # the CLI prints its warnings on stderr

RUN = ["pac", "run", "--no-progress", "--mechanism", "mean", "--dataset", "iris",
       "--mi-budget", "0.1", "--trials", "20", "--seed", "0"]


@pytest.mark.parametrize("checkpoint", ["{out}", "{out}/ck", "{out}/./ck/deeper", "{out}/../r/ck"])
@pytest.mark.parametrize("command", [
    RUN,
    ["pac", "records", "--no-progress", "--mechanism", "mean", "--dataset", "iris",
     "--noise-std", "1", "--trials", "20", "--seed", "0"],
    ["compare", "--dataset", "wine", "--no-progress", "--seed", "0"],
])
def test_a_checkpoint_inside_out_is_refused_before_any_work(tmp_path, capsys, monkeypatch,
                                                            command, checkpoint):
    monkeypatch.chdir(tmp_path)
    out = "r"
    rc = main([*command, "--out", out, "--checkpoint", checkpoint.format(out=out)])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.strip().count("\n") == 0
    assert "--checkpoint must lie outside --out" in err and "un-noised" in err
    assert not (tmp_path / "r").exists()  # nothing created, nothing run


def test_a_checkpoint_beside_out_is_accepted(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main([*RUN, "--out", "r", "--checkpoint", "ck"]) == 0
    assert (tmp_path / "r" / "report.json").exists() and (tmp_path / "ck").is_dir()


def test_a_private_index_list_and_a_state_inside_out_are_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc = main(["pac", "records", "--no-progress", "--mechanism", "mean", "--dataset", "iris",
               "--target-accuracy", "0.6", "--trials", "20", "--out", "r",
               "--private-index-list", "r/private.json"])
    assert rc == 2 and "--private-index-list must lie outside --out" in capsys.readouterr().err
    (tmp_path / "st").mkdir()
    rc = main(["predict", "status", "--state", "st", "--out", "st"])
    assert rc == 2 and "--state must lie outside --out" in capsys.readouterr().err


def _report_numbers(path) -> dict:
    report = json.loads(path.read_text())
    found = {}

    def walk(obj, where=""):
        if isinstance(obj, dict):
            for k, v in obj.items():
                walk(v, f"{where}/{k}")
        elif isinstance(obj, list):
            for i, v in enumerate(obj):
                walk(v, f"{where}/{i}")
        else:
            found[where] = obj

    walk(report)
    return found


def test_withheld_pac_run_shows_no_noise_to_spread_ratio(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    X = np.random.default_rng(0).normal(size=(60, 3)) * [1.0, 10.0, 100.0]
    np.save(tmp_path / "pool.npy", X)
    argv = ["pac", "run", "--no-progress", "--mechanism", "mean", "--dataset", "pool.npy",
            "--mi-budget", "0.1", "--trials", "30", "--seed", "0"]
    assert main([*argv, "--out", "hidden"]) == 0
    default = capsys.readouterr().out
    assert "noise / spread" in default  # the default policy keeps one digit of the ratio
    assert main([*argv, "--out", "withheld", "--withhold-pool-statistics"]) == 0
    shown = capsys.readouterr().out
    assert "spread" not in shown and "Utility" not in shown
    assert "withheld: --withhold-pool-statistics" in shown
    keys = _report_numbers(tmp_path / "withheld" / "report.json")
    assert not [k for k in keys if "noise_to_spread" in k]
    assert any("noise_to_spread" in k for k in _report_numbers(tmp_path / "hidden" /
                                                                "report.json"))
    md = (tmp_path / "withheld" / "report.md").read_text()
    assert "spread of f" not in md.split("## ")[1] if "## " in md else True


def test_withheld_pac_records_shows_no_plug_in_mi(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    X = np.random.default_rng(1).normal(size=(60, 3))
    X[0] *= 50.0  # an outlier, so the per-record and whole-subset plans differ
    np.save(tmp_path / "pool.npy", X)
    argv = ["pac", "records", "--no-progress", "--mechanism", "mean", "--dataset", "pool.npy",
            "--records", "0-4", "--trials", "40", "--seed", "0", "--target-accuracy", "0.6"]
    assert main([*argv, "--out", "w", "--withhold-pool-statistics"]) == 0
    cap = capsys.readouterr()
    assert "whole-subset MI" not in cap.out
    assert "withheld: --withhold-pool-statistics" in cap.out
    assert "x its" not in cap.err and " of 3 coordinates" not in cap.err  # no ratio, no count
    keys = _report_numbers(tmp_path / "w" / "report.json")
    assert not [k for k in keys if k.rsplit("/", 1)[-1] in PLUGIN_KEYS]
    assert "| whole-subset" not in (tmp_path / "w" / "report.md").read_text()
    assert main([*argv, "--out", "shown", "--report-pool-statistics"]) == 0
    assert "whole-subset MI" in capsys.readouterr().out


def test_private_section_drops_plug_in_rows_and_keys():
    section = {"markdown": "a\n| whole-subset MI | 0.3 | estimated |\n| other | 1 | x |",
               "table": {"columns": ["q", "v", "k"],
                         "rows": [["whole-subset MI", "0.3", "e"], ["other", "1", "x"]]},
               "per_record": {"whole_subset_mi": 0.3, "whole_subset_accuracy_bound": 0.8,
                              "max_accuracy_upper": 0.6}}
    out = private_section(section, "per_record", withheld=True)
    assert out["table"]["rows"] == [["other", "1", "x"]]
    assert "whole-subset" not in out["markdown"] and "| other |" in out["markdown"]
    assert set(out["per_record"]) == {"max_accuracy_upper", "pool_statistics"}


class _Plan:
    def __init__(self, power, stds):
        self.dim = len(stds)
        self.expected_noise_power = power
        self.noise_std_per_coordinate = np.asarray(stds, dtype=float)


def test_noise_excess_without_ratios_names_no_number():
    pr, ws = _Plan(1.0, [0.9, 0.1, 0.1]), _Plan(2.0, [0.5, 0.8, 0.8])
    with_ratio = per_record_noise_excess(pr, ws)
    without = per_record_noise_excess(pr, ws, ratios=False)
    assert "0.5x" in with_ratio and "1 of 3" in with_ratio
    assert not any(ch.isdigit() for ch in without.replace("E||B||^2", ""))
    more = per_record_noise_excess(_Plan(3.0, [1.0, 1.0, 1.0]), ws, ratios=False)
    assert "needs more noise" in more
    assert not any(ch.isdigit() for ch in more.replace("E||B||^2", ""))


def test_pac_trials_never_rounds_the_confidence_to_one(capsys):
    assert main(["pac", "trials", "--dim", "5", "--confidence", "0.9999999"]) == 0
    row = capsys.readouterr().out.splitlines()[1].split()
    assert row[2] == "0.9999999"  # was "1": rounded to certainty (bound check, finding 2c)


def test_dpsgd_exact_sigma_rows_name_the_sigma_they_are_of(capsys):
    assert main(["dpsgd", "sigma", "--steps-per-epoch", "100", "--epochs", "10",
                 "--target-accuracy", "0.6", "--method", "exact"]) == 0
    out = capsys.readouterr().out
    assert "accuracy at the exact sigma" in out and "epsilon of the exact sigma at" in out


def test_dpsgd_exact_sigma_json_puts_the_monte_carlo_confidence_on_the_accuracy_only(capsys):
    assert main(["dpsgd", "sigma", "--steps-per-epoch", "20", "--epochs", "2",
                 "--target-accuracy", "0.6", "--k", "2", "--method", "exact", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "confidence" not in out  # the σ is deterministic (bound check, finding 2b)
    assert out["bound_kind"] == "certified" and "confidence 0.999" not in out["bound"]


def test_a_report_inside_a_prediction_state_or_checkpoint_is_refused(tmp_path, capsys,
                                                                      monkeypatch):
    """Re-check of the sixth pass (X1/X6): `--out <state>/models` wrote a report beside the
    world models; a report folder must not lie inside any private pacpriv folder."""
    monkeypatch.chdir(tmp_path)
    state = tmp_path / "st"
    (state / "models").mkdir(parents=True)
    (state / "secret.json").write_text("{}")
    rc = main([*RUN, "--out", str(state / "models" / "r")])
    err = capsys.readouterr().err
    assert rc == 2 and "lies inside" in err and "prediction state" in err
    assert not (state / "models" / "r").exists()
    assert main([*RUN, "--out", "elsewhere"]) == 0


def test_a_checkpoint_into_a_folder_of_other_files_is_refused(tmp_path, capsys, monkeypatch):
    """Re-check of the sixth pass (F16/G14): trials' un-noised outputs were mixed into an
    existing folder of other files (deleting the checkpoint would delete them too)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("x")
    rc = main([*RUN, "--out", "r", "--checkpoint", "mine"])
    assert rc == 2 and "--checkpoint must be a new or empty folder" in capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["notes.txt"]
    (tmp_path / "empty").mkdir()
    assert main([*RUN, "--out", "r2", "--checkpoint", "empty"]) == 0
    assert main([*RUN, "--out", "r3", "--checkpoint", "empty"]) == 0  # an earlier checkpoint


def test_withheld_per_record_noise_plan_has_no_plug_in_mi():
    section = {"per_record": {"noise_plan": {"mi_budget": 0.31, "mi_bound": 0.31,
                                             "mi_claim": 0.31, "linearised_mi_bound": 0.2,
                                             "rule": "isotropic"}}}
    out = private_section(section, "per_record", withheld=True)
    assert out["per_record"]["noise_plan"] == {"rule": "isotropic"}
