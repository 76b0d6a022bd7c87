"""Tests for pacpriv.pac.noise._confidence (conservative trial counts, matrix Bernstein)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pacpriv.pac.noise._confidence import confidence_for_trials, trials_for_confidence


def test_closed_form_value():
    """c = 0.1, r = 1, d = 10, 95 %: N = ceil(2(2 + 2c/3) ln(400) / c²) = 2477 pairs."""
    n_pairs = math.ceil(2 * (2 + 2 * 0.1 / 3) * math.log(2 * 10 / 0.05) / 0.01)
    assert trials_for_confidence(confidence=0.95, c=0.1, output_bound=1.0, dim=10) == 2 * n_pairs


@pytest.mark.parametrize("conf", [0.5, 0.9, 0.999])
def test_round_trip(conf):
    """The returned count reaches the confidence; two fewer trials do not."""
    kw = {"c": 0.05, "output_bound": 2.0, "dim": 7}
    m = trials_for_confidence(confidence=conf, **kw)
    assert confidence_for_trials(m, **kw) >= conf
    assert confidence_for_trials(m - 2, **kw) < conf


def test_monotone_and_vacuous():
    """Confidence grows with n_trials and is 0 (vacuous) for few trials."""
    kw = {"c": 0.1, "output_bound": 1.0, "dim": 3}
    vals = [confidence_for_trials(m, **kw) for m in (2, 100, 1000, 10_000)]
    assert vals[0] == 0.0 and bool(np.all(np.diff(vals) >= 0))
    assert vals[-1] > 0.99


def test_covariance_norm_bound_tightens():
    """A smaller known ||Σ|| bound needs fewer trials."""
    kw = {"confidence": 0.9, "c": 0.05, "output_bound": 1.0, "dim": 2}
    assert trials_for_confidence(**kw, covariance_norm_bound=0.1) < trials_for_confidence(**kw)


def test_monte_carlo_coverage():
    """Uniform outputs on the unit circle (Σ = I/2): ||Σ̂ − Σ||₂ > c in <= γ of 300 runs."""
    c, conf = 0.2, 0.9
    m = trials_for_confidence(confidence=conf, c=c, output_bound=1.0, dim=2)
    rng = np.random.default_rng(0)
    fails = 0
    for _ in range(300):
        ang = rng.uniform(0, 2 * np.pi, size=m)
        y = np.stack([np.cos(ang), np.sin(ang)], axis=1)
        fails += np.linalg.norm(np.cov(y.T) - np.eye(2) / 2, 2) > c
    assert fails / 300 <= 1 - conf


def test_error_confidence():
    """confidence must be in the open interval (0, 1)."""
    with pytest.raises(ValueError, match=r"`confidence` must be in \(0.0, 1.0\)"):
        trials_for_confidence(confidence=1.0, c=0.1, output_bound=1.0, dim=1)


def test_error_c():
    """c must be positive."""
    with pytest.raises(ValueError, match=r"`c` must be in \(0.0, inf\)"):
        confidence_for_trials(10, c=0.0, output_bound=1.0, dim=1)


def test_error_output_bound():
    """output_bound must be positive."""
    with pytest.raises(ValueError, match=r"`output_bound` must be in \(0.0, inf\)"):
        confidence_for_trials(10, c=0.1, output_bound=-1.0, dim=1)


def test_error_dim():
    """dim must be a positive integer."""
    with pytest.raises(ValueError, match="`dim` must be an integer in"):
        confidence_for_trials(10, c=0.1, output_bound=1.0, dim=0)


def test_error_n_trials():
    """At least two trials."""
    with pytest.raises(ValueError, match="`n_trials` must be an integer in"):
        confidence_for_trials(1, c=0.1, output_bound=1.0, dim=1)


def test_error_covariance_norm_bound():
    """A ||Σ|| bound above r² is impossible for bounded outputs."""
    with pytest.raises(ValueError, match=r"`covariance_norm_bound` must be in \[0.0, 4.0\]"):
        confidence_for_trials(10, c=0.1, output_bound=2.0, dim=1, covariance_norm_bound=5.0)
