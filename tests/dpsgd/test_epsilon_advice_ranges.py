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


@pytest.mark.parametrize("delta", [1e-20, 1e-16, 1e-15, 1e-14, 2e-13])
def test_poisson_delta_below_the_tail_mass_is_refused_before_the_search(monkeypatch, delta):
    # 10 steps: the floor is twice the round-off allowance, 2e-13, above the 1e-15 tail
    monkeypatch.setattr(mod, "_poisson_epsilon", lambda *a: pytest.fail("searched"))
    with pytest.raises(ValueError, match=r"`delta` must be above 2e-13 with Poisson sampling "
                                         r"over 10 steps"):
        mod.calibrate_epsilon(1.0, delta, **_POISSON)
    with pytest.raises(ValueError, match=r"`delta` must be above 2e-13"):
        mod.epsilon_of(1.0, delta, **_POISSON)


@pytest.mark.parametrize(("delta", "lower"), [(1e-11, 4.52135), (3e-12, 4.71790),
                                              (1.3e-12, 4.85388)])
def test_poisson_epsilon_near_its_floor_is_above_an_independent_lower_bound(delta, lower):
    """dp-accounting's FFT composition alone gave ε below the truth at δ <= 1e-13 (5.2672 at
    1e-13 against a lower bound 5.2689; σ = 1.14, q = 0.05, 60 steps). The lower bounds here
    were computed independently: the add-direction pair binned at 0.002σ, privacy losses
    merged at 0.005 (post-processing: a valid lower bound), 60 steps composed by direct
    convolution, hockey-stick divergence read exactly."""
    pytest.importorskip("dp_accounting")
    eps = mod.epsilon_of(1.14, delta, steps_per_epoch=20, epochs=3, sampling="poisson")
    assert lower <= eps <= lower + 0.2
    with pytest.raises(ValueError, match=r"above 1.2e-12 with Poisson sampling over 60 steps"):
        mod.epsilon_of(1.14, 1e-13, steps_per_epoch=20, epochs=3, sampling="poisson")


def test_the_tail_mass_is_dp_accountings_floor():
    """Just above the floor Poisson answers; the floor is the composed infinity mass."""
    pld = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    dist = pld.from_gaussian_mechanism(standard_deviation=10.0, sampling_prob=0.1)
    assert dist.self_compose(10).get_epsilon_for_delta(mod._POISSON_TAIL_MASS) == float("inf")
    r = mod.calibrate_epsilon(1.0, 1e-12, **_POISSON)
    assert 0 < r.epsilon <= 1.0


def test_cli_names_flags_and_the_floor(capsys):
    code = main(["dpsgd", "sigma", "--steps-per-epoch", "100", "--epochs", "5",
                 "--target-epsilon", "1", "--delta", "1e-20", "--sampling", "poisson",
                 "--tolerance", "1e-6"])
    err = capsys.readouterr().err
    assert code == 2 and "--tolerance" not in err
    assert "--delta must be above 1e-11 with Poisson sampling over 500 steps" in err
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
    assert "note:" not in err and "--delta must be above" in err
    assert main([*argv, "1e-4"]) == 130  # the default tolerance: no note
    assert "note:" not in capsys.readouterr().err
