"""The advice of a refused ε target is actionable (issue 35, fix9a item 1).

``dpsgd sigma --sampling poisson`` advised "lower --tolerance" with --tolerance already at its
floor (1e-6), and at δ below dp-accounting's composition tail mass (1e-15) no σ and no
tolerance can help: that δ is refused before the search, naming the floor."""

from __future__ import annotations

import re

import pytest

from pacpriv.cli.main import main
from pacpriv.dpsgd import epsilon_calibration as mod

_POISSON = {"steps_per_epoch": 10, "epochs": 1, "sampling": "poisson"}


def _advice(monkeypatch, **kw) -> str:
    monkeypatch.setattr(mod, "_poisson_epsilon", lambda *a: 1e3)  # never reaches any target
    with pytest.raises(ValueError, match="no noise_multiplier") as info:
        mod.calibrate_epsilon(kw.pop("eps", 1e-4), 1e-5, **_POISSON, **kw)
    return str(info.value)


def test_tolerance_advised_only_above_its_floor(monkeypatch):
    assert "lower `tolerance` (at least 1e-06)" in _advice(monkeypatch, tolerance=1e-4)
    at_floor = _advice(monkeypatch, tolerance=1e-6)
    assert "lower `tolerance`" not in at_floor and "at its floor" in at_floor


def test_target_epsilon_advised_only_below_its_maximum(monkeypatch):
    assert "Raise `target_epsilon` (at most 50)" in _advice(monkeypatch)
    at_max = _advice(monkeypatch, eps=50.0)
    assert "`target_epsilon`" not in at_max and "Raise `delta`" in at_max


def test_every_advised_number_lies_in_its_valid_range(monkeypatch):
    for tol in (1e-6, 3e-6, 1e-4, 1e-2):
        text = _advice(monkeypatch, tolerance=tol)
        for m in re.finditer(r"lower `tolerance` \(at least ([0-9.e+-]+)\)", text):
            assert float(m.group(1)) < tol


@pytest.mark.parametrize("delta", [1e-20, 1e-16, 1e-15])
def test_poisson_delta_below_the_tail_mass_is_refused_before_the_search(monkeypatch, delta):
    monkeypatch.setattr(mod, "_poisson_epsilon", lambda *a: pytest.fail("searched"))
    with pytest.raises(ValueError, match=r"`delta` must be above 1e-15 with Poisson"):
        mod.calibrate_epsilon(1.0, delta, **_POISSON)


def test_the_tail_mass_is_dp_accountings_floor():
    """Just above the floor Poisson answers; the floor is the composed infinity mass."""
    pld = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    dist = pld.from_gaussian_mechanism(standard_deviation=10.0, sampling_prob=0.1)
    assert dist.self_compose(10).get_epsilon_for_delta(mod._POISSON_TAIL_MASS) == float("inf")
    r = mod.calibrate_epsilon(1.0, 1e-14, **_POISSON)
    assert 0 < r.epsilon <= 1.0


def test_cli_names_flags_and_the_floor(capsys):
    code = main(["dpsgd", "sigma", "--steps-per-epoch", "100", "--epochs", "5",
                 "--target-epsilon", "1", "--delta", "1e-20", "--sampling", "poisson",
                 "--tolerance", "1e-6"])
    err = capsys.readouterr().err
    assert code == 2 and "--delta must be above 1e-15" in err and "--tolerance" not in err
    assert len(err.strip().splitlines()) == 1


def test_a_small_poisson_tolerance_announces_the_wait_first(monkeypatch, capsys):
    """Seventh new-user pass #593: --tolerance 1e-6 searched for minutes without a word."""
    import pacpriv.dpsgd.epsilon_calibration as calib

    def stop(*a, **k):
        raise KeyboardInterrupt  # the search would start here: the note came before it

    monkeypatch.setattr(calib, "calibrate_epsilon", stop)
    argv = ["dpsgd", "sigma", "--steps-per-epoch", "20", "--epochs", "2", "--target-epsilon",
            "3", "--sampling", "poisson", "--tolerance"]
    assert main([*argv, "1e-6"]) == 130
    assert "note: searching sigma on dp-accounting's PLD at --tolerance 1e-06" in (
        capsys.readouterr().err)
    assert main([*argv, "1e-6", "--delta", "1e-20"]) == 2  # refused: no promise of work
    err = capsys.readouterr().err
    assert "note:" not in err and "--delta must be above 1e-15" in err
    assert main([*argv, "1e-4"]) == 130  # the default tolerance: no note
    assert "note:" not in capsys.readouterr().err
