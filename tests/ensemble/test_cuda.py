"""The CUDA path: the same models as on the CPU (tests exist only where a GPU is visible).

Without a GPU the module holds one test instead: asking for CUDA is a clear error before any
work. (A ``skipif`` would be turned into a failure by the suite's skip policy, which allows
skips only for a missing optional extra; see tests/conftest.py.)
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from pacpriv.ensemble import (  # noqa: E402
    SGD,
    Adam,
    Clipping,
    Ensemble,
    EnsembleMLP,
    RandomAllocation,
    Shuffled,
    TrainingSpec,
    train_ensemble,
    train_reference,
)

from . import _helpers  # noqa: E402

if torch.cuda.is_available():

    @pytest.mark.parametrize("spec", [
        TrainingSpec(SGD(0.2, momentum=0.9), epochs=2, batching=Shuffled(6)),
        TrainingSpec(Adam(0.05), epochs=2, batching=RandomAllocation(4),
                     clipping=Clipping(0.5, noise_multiplier=1.0)),
    ], ids=["sgd-shuffled", "adam-dpsgd"])
    def test_cuda_training_equals_the_cpu_reference(pool, masks, seeds, spec):
        X, y = pool
        ens = train_ensemble(_helpers.mlp(), X, y, masks, seeds=seeds, training=spec,
                             dtype="float64", device="cuda", chunk_size=2)
        assert ens.device.type == "cuda"
        ref = np.stack([_helpers.flat(train_reference(_helpers.mlp(), X, y, m, seed=s,
                                                      training=spec, dtype="float64"))
                        for m, s in zip(masks, seeds, strict=True)])
        np.testing.assert_allclose(ens.flat_parameters(), ref, rtol=0, atol=1e-10)

    def test_cuda_mechanism_and_evaluation(pool, masks):
        X, y = pool
        mech = EnsembleMLP(classes=(0, 1, 2), hidden_units=5, epochs=4)
        cpu = mech.run_block((X, y), masks)
        gpu = EnsembleMLP(classes=(0, 1, 2), hidden_units=5, epochs=4,
                          device="cuda").run_block((X, y), masks)
        np.testing.assert_allclose(gpu, cpu, rtol=0, atol=1e-10)
        ens = Ensemble.from_flat(_helpers.mlp(), np.zeros((3, 51)), device="cuda")
        assert ens.evaluate(X[:2]).shape == (3, 2, 3)

else:

    def test_cuda_request_without_a_gpu_is_a_clear_error(pool, masks, seeds):
        X, y = pool
        with pytest.raises(ValueError, match=r"`device` is 'cuda' but CUDA is unavailable"):
            train_ensemble(_helpers.mlp(), X, y, masks, seeds=seeds, device="cuda",
                           training=TrainingSpec(SGD(0.1), epochs=1))
