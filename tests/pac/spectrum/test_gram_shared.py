"""The one Gram pass shared by the spectrum and the certificate (pac/spectrum/_gram.py)."""

import warnings

import numpy as np
import pytest

from pacpriv.pac import run_pac
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.engine._mechanism import InvalidOutput, check_output
from pacpriv.pac.noise import certify_noise
from pacpriv.pac.noise._certificate import RelativeOutputs
from pacpriv.pac.samplers import ComplementaryPairsSampler
from pacpriv.pac.spectrum import estimate_output_spectrum
from pacpriv.pac.spectrum._gram import centred_gram, rows_all_equal


def _outputs(n=40, d=300, seed=0, offset=5.0):
    rng = np.random.default_rng(seed)
    scales = 1.0 / np.arange(1, d + 1) ** 0.6
    return offset + rng.normal(size=(n, d)) * scales


def _centred(x):
    z = x - x.mean(axis=0)
    return z @ z.T


@pytest.mark.parametrize("block_size", [None, 7])
def test_centred_gram_is_the_centred_product(block_size):
    x = _outputs()
    cg = centred_gram(x, block_size=block_size)
    np.testing.assert_allclose(cg.gram, _centred(x), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(cg.mean, x.mean(axis=0), rtol=1e-14)
    np.testing.assert_allclose(cg.variances, x.var(axis=0, ddof=1), rtol=1e-11)
    assert not cg.gram.flags.writeable and cg.outputs is x


@pytest.mark.parametrize("rows", [slice(0, 40, 2), np.array([0, 3, 4, 9, 17, 20, 33, 39])])
def test_restrict_equals_the_subset_own_gram(rows):
    """C_S K[S, S] C_S is the centred Gram of the subset (its own mean), no new product."""
    x = _outputs(seed=1)
    sub = centred_gram(x).restrict(rows)
    np.testing.assert_allclose(sub.gram, _centred(x[rows]), rtol=1e-11, atol=1e-10)
    np.testing.assert_allclose(sub.mean, x[rows].mean(axis=0), rtol=1e-14)
    np.testing.assert_allclose(sub.gram.sum(axis=1), 0.0, atol=1e-10)
    assert sub.variances is None


def test_restrict_to_every_row_is_the_same_object():
    cg = centred_gram(_outputs())
    assert cg.restrict(slice(0, 40, 1)) is cg
    assert cg.restrict(np.arange(40)) is cg


def test_spectrum_with_the_shared_gram_is_identical():
    x = _outputs(seed=2)
    plain = estimate_output_spectrum(x)
    shared = estimate_output_spectrum(x, gram=centred_gram(x))
    np.testing.assert_array_equal(plain.eigenvalues, shared.eigenvalues)
    np.testing.assert_array_equal(plain.variances, shared.variances)
    assert plain.tail_variance == shared.tail_variance and plain.rank == shared.rank
    np.testing.assert_array_equal(np.asarray(plain.eigenvectors),
                                  np.asarray(shared.eigenvectors))


def test_certificate_with_the_shared_gram_is_identical():
    """Also with a reference (float32 storage): the clip centre takes it back."""
    x = _outputs(n=64, d=500, seed=3)
    ref = np.linspace(-1.0, 1.0, 500)
    a = certify_noise(x, mi_budget=0.5, offset=ref, output_bound=1e3)
    b = certify_noise(RelativeOutputs(x, ref, centred_gram(x)), mi_budget=0.5, output_bound=1e3)
    assert a.certificate == b.certificate
    np.testing.assert_array_equal(a.clip_center, b.clip_center)
    plain = certify_noise(x, mi_budget=0.5)
    shared = certify_noise(RelativeOutputs(x, None, centred_gram(x)), mi_budget=0.5)
    assert plain.certificate == shared.certificate
    np.testing.assert_array_equal(plain.noise_std, shared.noise_std)
    np.testing.assert_array_equal(plain.basis, shared.basis)


def test_certificate_with_a_restricted_gram_matches_to_round_off():
    x = _outputs(n=64, d=500, seed=4)
    sub = centred_gram(x).restrict(slice(0, 64, 2))
    plain = certify_noise(x[::2], mi_budget=0.5).certificate
    shared = certify_noise(RelativeOutputs(sub.outputs, None, sub), mi_budget=0.5).certificate
    _same_to_round_off(shared, plain)


def _same_to_round_off(got, ref):
    """Equal certificates up to the round-off each charged (the lift from a restricted Gram
    charges its double centring's round-off too: a larger ε, never a smaller bound)."""
    eps = max(got.roundoff, ref.roundoff)
    assert eps <= 1e-5
    for key, value in ref.to_dict().items():
        if key == "roundoff":
            continue
        if isinstance(value, float):
            assert got.to_dict()[key] == pytest.approx(value, rel=1e-9 + eps), key
        else:
            assert got.to_dict()[key] == value, key


def test_a_gram_of_other_outputs_is_refused():
    x = _outputs()
    cg = centred_gram(x)
    with pytest.raises(ValueError, match="`gram`"):
        certify_noise(RelativeOutputs(x.copy(), None, cg), mi_budget=0.5)
    with pytest.raises(ValueError, match="`gram`"):
        estimate_output_spectrum(x.copy(), gram=cg)
    with pytest.raises(ValueError, match="`gram`"):
        estimate_output_spectrum(x, gram=cg.restrict(slice(0, 40, 2)))
    with pytest.raises(TypeError, match="`gram`"):
        certify_noise(RelativeOutputs(x, None, cg.gram), mi_budget=0.5)
    with pytest.raises(ValueError, match="gram_dtype"):
        estimate_output_spectrum(x, gram=cg, gram_dtype=np.float32)
    with pytest.raises(ValueError, match="offset"):
        certify_noise(RelativeOutputs(x, np.zeros(300), cg), mi_budget=0.5, offset=np.ones(300))


def test_centred_gram_refuses_non_finite_outputs():
    x = _outputs()
    x[3, 17] = np.nan
    with pytest.raises(ValueError, match="finite"):
        centred_gram(x)


def test_run_pac_certificate_equals_certify_noise_on_its_independent_trials():
    """The pipeline's shared (restricted) Gram gives the certificate of the independent rows."""
    pool = np.random.default_rng(5).normal(size=(300, 150)) + 2.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = run_pac(lambda s: s.sum(axis=0), pool, mi_budget=1.0, n_trials=64, rng=0,
                      sampler=ComplementaryPairsSampler(), release=False,
                      execution=ExecutionOptions(progress=False))
        ref = certify_noise(np.array(res.simulation.outputs[::2]), mi_budget=1.0)
    _same_to_round_off(res.plan.certificate, ref.certificate)


def test_rows_all_equal():
    x = np.tile(np.arange(5.0), (9, 1))
    assert rows_all_equal(x)
    x[8, 4] = 4.5
    assert not rows_all_equal(x)
    assert rows_all_equal(x[:1])


@pytest.mark.parametrize("bad, match", [
    ([0.0, 1e-300, 1.0], "non-zero magnitude below"),
    ([0.0, 2.0**401], "magnitude above"),
    ([np.nan, 2.0**401], "magnitude above"),
    ([0.0, np.inf], "not finite"),
    ([1.0, np.nan], "not finite"),
])
def test_check_output_fast_path_keeps_every_refusal(bad, match):
    with pytest.raises(InvalidOutput, match=match):
        check_output(np.array(bad), None)


def test_check_output_accepts_zeros_and_normal_values():
    out = check_output(np.array([0.0, -0.0, 3.0, -2.0**399]), None)
    assert out.dtype == np.float64 and out.shape == (4,)
    with pytest.raises(InvalidOutput, match="not finite"):
        check_output(np.array([0.0, 1e39]), None, dtype=np.float32)  # float32 overflow
