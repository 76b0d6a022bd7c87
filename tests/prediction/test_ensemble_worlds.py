"""Torch worlds trained as one vectorised ensemble (TorchFit), and batched answering.

Equality statement under test: with the same ``rng``, sampler and :class:`TorchFit`, the
vectorised path (``ExecutionOptions(ensemble=True)``, the default) and the per-world engine path
(``ensemble=False``) give bit-identical world masks and world parameters equal to float
round-off (float64: within 1e-12), because world ``j`` is trained from the same seed
``stream_seed(world_seed, j, MECHANISM_STREAM)`` by ``train_ensemble`` and by the sequential
``train_reference``; ``J`` and the noise do not depend on the path.
"""

from __future__ import annotations

import numpy as np
import pytest

from pacpriv._random import MECHANISM_STREAM, stream_seed
from pacpriv.exceptions import MechanismError
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.prediction import PrivatePredictor

from ._helpers import cancer, torch_fit, torch_mlp

torch = pytest.importorskip("torch")
B = 2.0**-8
QUIET = {"progress": False}


def _predictor(fit, state=None, **kw):
    X, y = cancer()
    return PrivatePredictor(fit, (X, y), n_worlds=4, per_query_budget=B, total_budget=1.0,
                            state=state, rng=11, secret_rng=12, **kw)


def _params(pp) -> np.ndarray:
    return np.stack([torch.nn.utils.parameters_to_vector(m.parameters()).detach().numpy()
                     for m in pp._worlds.models])


def _adam_full_batch():
    from pacpriv.ensemble import Adam, FullBatch, TrainingSpec

    return TrainingSpec(Adam(0.05), epochs=8, batching=FullBatch())


@pytest.mark.parametrize("case", ["linear-sgd-minibatch", pytest.param(
    "mlp-adam-full-batch", marks=pytest.mark.slow)])
def test_ensemble_and_per_world_paths_fit_the_same_worlds(case):
    fit = torch_fit() if case.startswith("linear") else \
        torch_fit(torch_mlp, training=_adam_full_batch())
    fast = _predictor(fit).fit(execution=ExecutionOptions(**QUIET))
    slow = _predictor(fit).fit(execution=ExecutionOptions(ensemble=False, **QUIET))
    np.testing.assert_array_equal(fast._masks, slow._masks)
    np.testing.assert_allclose(_params(fast), _params(slow), rtol=0, atol=1e-12)
    assert fast._secret_index == slow._secret_index
    X, y = cancer()
    np.testing.assert_allclose(fast.answer(X[:4]), slow.answer(X[:4]), rtol=0, atol=1e-9)
    assert fast._worlds.evaluation.startswith("torch ensemble")
    assert np.mean(fast.world_outputs(X).argmax(axis=2) == y) > 0.8  # the worlds learned


def test_world_j_is_the_engine_trial_j():
    """World j's mask is the sampler's trial-j mask and its seed the engine's trial-j seed."""
    from pacpriv.ensemble import train_reference
    from pacpriv.pac.samplers import ComplementaryPairsSampler

    fit = torch_fit()
    pp = _predictor(fit).fit(execution=ExecutionOptions(**QUIET))
    X, y = cancer()
    root = pp._seeds.world_seed
    for j in (0, 3):
        mask = ComplementaryPairsSampler().trial_mask(len(X), root=root, index=j)
        np.testing.assert_array_equal(pp._masks[j], mask)
        alone = train_reference(fit.template(), X, y, mask,
                                seed=stream_seed(root, j, MECHANISM_STREAM),
                                training=fit.training, dtype="float64")
        want = torch.nn.utils.parameters_to_vector(alone.parameters()).detach().numpy()
        np.testing.assert_allclose(_params(pp)[j], want, rtol=0, atol=1e-12)


def test_torch_fit_state_loads_and_answers_batched(tmp_path):
    X, _ = cancer()
    pp = _predictor(torch_fit(torch_mlp), tmp_path / "s").fit(execution=ExecutionOptions(**QUIET))
    first = pp.answer(X[:3])
    loaded = PrivatePredictor.load(tmp_path / "s")
    assert loaded._worlds.evaluation.startswith("torch ensemble")
    np.testing.assert_array_equal(loaded.world_outputs(X[:20]), pp.world_outputs(X[:20]))
    again = _predictor(torch_fit(torch_mlp)).fit(execution=ExecutionOptions(**QUIET))
    np.testing.assert_allclose(np.vstack([first, loaded.answer(X[3:5])]), again.answer(X[:5]),
                               rtol=0, atol=1e-9)
    assert loaded.predict(X[:2]).tolist() in ([0, 0], [0, 1], [1, 0], [1, 1])
    np.testing.assert_array_equal(loaded.classes_, [0, 1])


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"training": "sgd"}, TypeError, "training"),
    ({"loss": "hinge"}, ValueError, "loss"),
    ({"init": "zeros"}, ValueError, "init"),
    ({"dtype": "float16"}, ValueError, "dtype"),
    ({"memory_limit": 0.5}, ValueError, "memory_limit"),
    ({"model_factory": 3}, TypeError, "model_factory"),
])
def test_torch_fit_arguments_are_checked_at_construction(kwargs, error, match):
    from pacpriv.ensemble import SGD, TrainingSpec
    from pacpriv.prediction import TorchFit

    from ._helpers import torch_linear

    args = {"model_factory": torch_linear, "training": TrainingSpec(SGD(0.1), epochs=1),
            **kwargs}
    with pytest.raises(error, match=match):
        TorchFit(**args)


def test_labels_that_are_not_class_indices_fail_before_training():
    X, y = cancer()
    # non-integer labels are refused when the predictor is built (the one label check), before
    # any world is trained; the message holds no label value
    with pytest.raises(ValueError, match="holds continuous values") as info:
        PrivatePredictor(torch_fit(), (X, np.where(y == 1, 7.25, -3.5)), n_worlds=4,
                         per_query_budget=B, total_budget=1.0, rng=1)
    assert "7.25" not in str(info.value) and "3.5" not in str(info.value)  # no data values
    # whole-number labels that are not 0..C-1 pass that check and fail before training
    pp = PrivatePredictor(torch_fit(), (X, np.where(y == 1, 7, -3)), n_worlds=4,
                          per_query_budget=B, total_budget=1.0, rng=1)
    with pytest.raises(ValueError, match="class indices") as info:
        pp.fit(execution=ExecutionOptions(**QUIET))
    assert "7" not in str(info.value) and "-3" not in str(info.value)


def test_diverging_worlds_are_named_not_answered():
    from pacpriv.ensemble import SGD, FullBatch, TrainingSpec
    from pacpriv.prediction import TorchFit

    from ._helpers import torch_linear

    X, y = cancer()
    fit = TorchFit(torch_linear, TrainingSpec(SGD(1e300), epochs=3, batching=FullBatch()),
                   dtype="float64")
    pp = PrivatePredictor(fit, (X * 1e10, y), n_worlds=4, per_query_budget=B,
                          total_budget=1.0, rng=1)
    with pytest.raises(MechanismError, match="non-finite parameters"):
        pp.fit(execution=ExecutionOptions(**QUIET))
    assert not pp.is_fitted
