"""k-out-of-t batch sampler, the trainer's allocation option, and TrainingResult's privacy."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

torch = pytest.importorskip("torch")
nn = torch.nn

from pacpriv.dpsgd import (  # noqa: E402
    DPSGDSpec,
    RandomAllocation,
    membership_inference_accuracy_bound,
    tradeoff_curve,
)
from pacpriv.dpsgd.allocation import RandomAllocationSampler, random_allocation  # noqa: E402
from pacpriv.dpsgd.trainer import train_dpsgd  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_k1_allocation_is_unchanged():
    """k = 1 draws exactly what it drew before k existed (one randint per record)."""
    gen_a, gen_b = torch.Generator().manual_seed(9), torch.Generator().manual_seed(9)
    got = random_allocation(50, steps_per_epoch=7, generator=gen_a)
    step = torch.randint(7, (50,), generator=gen_b, dtype=torch.int64)
    for j, batch in enumerate(got):
        assert batch.tolist() == torch.nonzero(step == j).flatten().tolist()


@pytest.mark.parametrize(("t", "k"), [(5, 2), (6, 3), (4, 4), (9, 1), (10, 9)])
def test_each_record_in_k_distinct_steps(t, k):
    batches = random_allocation(40, steps_per_epoch=t, generator=torch.Generator().manual_seed(t),
                                k=k)
    assert len(batches) == t
    where = [[j for j, b in enumerate(batches) if r in set(b.tolist())] for r in range(40)]
    assert all(len(w) == k for w in where)  # k distinct steps per record
    assert all(b.tolist() == sorted(b.tolist()) for b in batches)


def test_k_subsets_are_uniform():
    """t = 4, k = 2: the 6 subsets are equally likely (chi-square test, 60 000 records)."""
    n = 60_000
    batches = random_allocation(n, steps_per_epoch=4, generator=torch.Generator().manual_seed(1),
                                k=2)
    member = np.zeros((n, 4), dtype=bool)
    for j, b in enumerate(batches):
        member[b.numpy(), j] = True
    subsets = list(itertools.combinations(range(4), 2))
    counts = [int(np.sum(member[:, a] & member[:, b])) for a, b in subsets]
    assert sum(counts) == n
    assert stats.chisquare(counts).pvalue > 1e-4


def test_sampler_yields_k_of_t_batches():
    s = RandomAllocationSampler(30, steps_per_epoch=5, generator=torch.Generator().manual_seed(2),
                                k=3)
    batches = list(s)
    assert len(batches) == len(s) == 5
    assert sorted(i for b in batches for i in b) == sorted(list(range(30)) * 3)
    with pytest.raises(ValueError, match="k"):
        RandomAllocationSampler(30, steps_per_epoch=5, k=6)


def _train(**kw):
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(20, 3)), rng.integers(0, 2, size=20)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 2)).double()
    args = dict(noise_multiplier=1.5, steps_per_epoch=5, epochs=2, max_grad_norm=1.0, rng=3)
    args.update(kw)
    return train_dpsgd(model, nn.CrossEntropyLoss(), X, y, **args)


def test_trainer_k_of_t_and_its_certified_privacy():
    """allocation=RandomAllocation(2): k·n/t expected batch, every record twice per epoch, and
    the result carries the k-of-t chi-square bound and ε from the certified PLD."""
    r = _train(allocation=RandomAllocation(k=2))
    assert r.k == 2 and r.expected_batch_size == pytest.approx(2 * 20 / 5)
    assert r.min_batch_size >= 0 and r.n_steps == 10
    ref = membership_inference_accuracy_bound(1.5, steps_per_epoch=5, epochs=2, k=2).accuracy
    assert r.membership_inference_accuracy_bound == ref
    eps = tradeoff_curve(noise_multiplier=1.5, steps_per_epoch=5, epochs=2, k=2).get_epsilon(1e-5)
    assert r.get_epsilon(1e-5) == eps and 0 < eps < math.inf
    exact = r.exact_membership_inference_accuracy(tolerance=0.1)  # k ∤ t: loose upper
    assert exact.k == 2 and exact.upper <= r.membership_inference_accuracy_bound
    assert r.to_dict()["k"] == 2


def test_spec_k_and_string_shorthand():
    spec = DPSGDSpec(noise_multiplier=1.5, steps_per_epoch=5, epochs=2, k=2)
    a = _train(noise_multiplier=None, steps_per_epoch=None, epochs=None, spec=spec)
    b = _train(noise_multiplier=None, steps_per_epoch=None, epochs=None, spec=spec,
               allocation="k_of_t")
    assert a.k == b.k == 2 and a.epoch_losses == b.epoch_losses
    with pytest.raises(TypeError, match="not both"):
        _train(noise_multiplier=None, steps_per_epoch=None, epochs=None, spec=spec,
               allocation=RandomAllocation(3))
    with pytest.raises(ValueError, match="allocation"):
        _train(allocation="poisson")
    with pytest.raises(ValueError, match="k"):
        _train(allocation=RandomAllocation(6))


def test_k1_result_privacy_and_non_private_runs():
    r = _train()
    assert r.k == 1
    assert r.membership_inference_accuracy_bound == membership_inference_accuracy_bound(
        1.5, steps_per_epoch=5, epochs=2).accuracy
    assert r.get_epsilon(1e-5) == DPSGDSpec(1.5, 5, 2).get_epsilon(1e-5)
    plain = _train(noise_multiplier=0.0)
    assert plain.membership_inference_accuracy_bound is None
    assert plain.get_epsilon(1e-5) == math.inf
    with pytest.raises(ValueError, match="no noise"):
        plain.exact_membership_inference_accuracy()


def test_divisor_uses_the_public_dataset_size_of_the_spec():
    """The divisor must not depend on which records are present: a spec's dataset_size
    (public) sets it; without one it is the number of records passed."""
    spec = DPSGDSpec(noise_multiplier=1.5, steps_per_epoch=5, epochs=1, dataset_size=40, k=2)
    r = _train(noise_multiplier=None, steps_per_epoch=None, epochs=None, spec=spec)
    assert r.expected_batch_size == 2 * 40 / 5 and r.n_records == 20
    assert _train().expected_batch_size == 20 / 5
