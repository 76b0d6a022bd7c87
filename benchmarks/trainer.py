"""Per-step time of pacpriv's DP-SGD trainer vs opacus, on the same model and batch size.

Both sides do the full private step: per-sample gradients, clipping to C, Gaussian noise
σ·C on the sum, division by the expected batch size, an SGD update. pacpriv uses its
single-backward path for these Linear-only models (per-example norms from activations and
backprops, ``pacpriv.dpsgd``); the ``torch.func`` column forces its general path
(vmap of grad) on the same model. opacus 1.6 uses ``GradSampleModule``
(backward hooks) + ``DPOptimizer`` on fixed-size batches (``poisson_sampling=False``
equivalent). Our time per step is ``train_dpsgd`` wall time over one run divided by its number
of steps (so it includes allocation and indexing); opacus' loop indexes a random batch of the
same (expected) size each step. Warm-up runs precede timing; the three are timed in turn in
each repeat (so load changes hit all of them) and the best repeat of each is kept; one
thread, CPU.

Run: ``python benchmarks/trainer.py [--repeats 5] [--steps 30]``. Prints a table; the
ratio columns are opacus time / pacpriv time (> 1: pacpriv faster). Targets (issue 13 item
5): >= 1 for the small models at every batch size, >= 1.8 for the 784-256-10 MLP.
"""

from __future__ import annotations

import argparse
import time
from unittest import mock

import numpy as np
import torch

import pacpriv.dpsgd.trainer as trainer
from pacpriv.dpsgd.trainer import train_dpsgd

SIGMA, C, LR = 1.0, 1.0, 0.1


def _models():
    return {
        "logreg 64->10": (64, 10, lambda: torch.nn.Linear(64, 10)),
        "mlp 64-64-10": (64, 10, lambda: torch.nn.Sequential(
            torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))),
        "mlp 784-256-10": (784, 10, lambda: torch.nn.Sequential(
            torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))),
    }


def _ours(factory, X, y, steps: int, *, general: bool = False) -> float:
    model = factory()
    if general:  # the torch.func path every other model takes
        with mock.patch.object(trainer, "linear_layers", lambda m: None):
            return _ours(lambda: model, X, y, steps)
    res = train_dpsgd(model, torch.nn.CrossEntropyLoss(), X, y, noise_multiplier=SIGMA,
                      steps_per_epoch=steps, epochs=1, max_grad_norm=C, rng=0,
                      optimizer=lambda p: torch.optim.SGD(p, lr=LR))
    return res.wall_time_s / res.n_steps


def _opacus(factory, X, y, steps: int, batch: int) -> float:
    from opacus import GradSampleModule
    from opacus.optimizers import DPOptimizer

    model = GradSampleModule(factory())
    opt = DPOptimizer(torch.optim.SGD(model.parameters(), lr=LR), noise_multiplier=SIGMA,
                      max_grad_norm=C, expected_batch_size=batch)
    loss_fn = torch.nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(0)
    n = X.shape[0]
    start = time.perf_counter()
    for _ in range(steps):
        idx = torch.randperm(n, generator=gen)[:batch]
        loss = loss_fn(model(X[idx]), y[idx])
        loss.backward()
        opt.step()
        opt.zero_grad()
    return (time.perf_counter() - start) / steps


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="best of this many runs")
    parser.add_argument("--steps", type=int, default=30, help="timed steps per run")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    import warnings

    warnings.filterwarnings("ignore")  # opacus' secure-RNG and hook warnings
    rows = []
    for name, (d, k, factory) in _models().items():
        for batch in (32, 64, 128, 256) if d < 784 else (64, 256):
            n = batch * args.steps
            rng = np.random.default_rng(0)
            X = torch.as_tensor(rng.normal(size=(n, d)), dtype=torch.float32)
            y = torch.as_tensor(rng.integers(0, k, size=n))
            _ours(factory, X[: batch * 5], y[: batch * 5], 5)  # warm-up
            _ours(factory, X[: batch * 5], y[: batch * 5], 5, general=True)
            _opacus(factory, X, y, 5, batch)
            times = {"ours": [], "func": [], "opacus": []}
            for _ in range(args.repeats):
                times["ours"].append(_ours(factory, X, y, args.steps))
                times["func"].append(_ours(factory, X, y, args.steps, general=True))
                times["opacus"].append(_opacus(factory, X, y, args.steps, batch))
            ours, func, theirs = (min(times[k]) for k in ("ours", "func", "opacus"))
            rows.append((name, batch, ours * 1e3, func * 1e3, theirs * 1e3))
    print(f"{'model':<15} {'batch':>5} {'pacpriv ms':>10} {'torch.func ms':>13} "
          f"{'opacus ms':>9} {'opacus/pacpriv':>14} {'opacus/torch.func':>17}")
    for name, batch, ours, func, theirs in rows:
        print(f"{name:<15} {batch:>5} {ours:>10.3f} {func:>13.3f} {theirs:>9.3f} "
              f"{theirs / ours:>14.2f} {theirs / func:>17.2f}")
    print(f"(per step; σ={SIGMA}, C={C}, SGD lr={LR}; pacpriv batches vary: random allocation "
          "with expected size = batch; best of --repeats interleaved runs; 1 torch thread)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
