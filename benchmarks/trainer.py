"""Per-step time of pacpriv's DP-SGD trainer vs opacus, on the same model and batch size.

Both sides do the full private step: per-sample gradients, clipping to C, Gaussian noise
σ·C on the sum, division by the expected batch size, an SGD update. pacpriv uses its
single-backward path for these models (per-example norms and clipped sums from each layer's
inputs and backprops, ``pacpriv.dpsgd._ghost``); the ``torch.func`` column (``--func``) forces
its general path (vmap of grad) on the same model. opacus 1.6 uses ``GradSampleModule``
(backward hooks) + ``DPOptimizer`` on fixed-size batches (``poisson_sampling=False``
equivalent). Models: a logistic regression, two MLPs, and opacus' MNIST example CNN (``examples/mnist.py``:
Conv2d(1,16,8,2,pad 3)-ReLU-MaxPool(2,1)-Conv2d(16,32,4,2)-ReLU-MaxPool(2,1)-Linear(512,32)
-ReLU-Linear(32,10)) on 28×28 inputs.

Our time per step is ``train_dpsgd`` over one run of ``--steps`` steps divided by its number
of steps: wall time of the training loop (``wall_time_s``), and CPU time (``process_time``)
of the whole call, setup and checks included. opacus' loop indexes a random batch of the same
(expected) size each step, timed the same two ways. Warm-up runs precede timing; the three are
timed in turn in each repeat (so load changes hit all of them) and the best repeat of each is
kept; the same number of torch threads on every side (``--threads``, default 1), CPU. The
machine is shared: CPU time is the steadier measure under load, and ``uptime`` is printed
before and after.

Run: ``python benchmarks/trainer.py [--repeats 3] [--steps 20] [--threads 1] [--only cnn]
[--func]`` (about 2 minutes on a quiet core without ``--func``).
Prints a table; the ratio columns are opacus time / pacpriv time (> 1: pacpriv faster).
Targets (issue 35 item 9): >= 1.5 for the CNN at batch 256, and the 784-256-10 MLP lead kept.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time
import warnings
from unittest import mock

import numpy as np
import torch

import pacpriv.dpsgd.trainer as trainer
from pacpriv.dpsgd.trainer import train_dpsgd

SIGMA, C, LR = 1.0, 1.0, 0.1
nn = torch.nn


def _cnn():
    """opacus' MNIST example model (opacus/examples/mnist.py, ``SampleConvNet``)."""
    return nn.Sequential(
        nn.Conv2d(1, 16, 8, 2, padding=3), nn.ReLU(), nn.MaxPool2d(2, 1),
        nn.Conv2d(16, 32, 4, 2), nn.ReLU(), nn.MaxPool2d(2, 1), nn.Flatten(),
        nn.Linear(32 * 4 * 4, 32), nn.ReLU(), nn.Linear(32, 10))


def _models():
    """name -> (input shape, classes, factory, batch sizes)."""
    return {
        "logreg 64->10": ((64,), 10, lambda: nn.Linear(64, 10), (32, 256)),
        "mlp 64-64-10": ((64,), 10, lambda: nn.Sequential(
            nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10)), (32, 256)),
        "mlp 784-256-10": ((784,), 10, lambda: nn.Sequential(
            nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10)), (64, 256)),
        "cnn mnist": ((1, 28, 28), 10, _cnn, (64, 256)),
    }


def _ours(factory, X, y, steps: int, *, general: bool = False) -> tuple[float, float]:
    model = factory()
    if general:  # the torch.func path every other model takes
        with mock.patch.object(trainer, "linear_layers", lambda m: None):
            return _ours(lambda: model, X, y, steps)
    cpu = time.process_time()
    res = train_dpsgd(model, nn.CrossEntropyLoss(), X, y, noise_multiplier=SIGMA,
                      steps_per_epoch=steps, epochs=1, max_grad_norm=C, rng=0,
                      optimizer=lambda p: torch.optim.SGD(p, lr=LR))
    return res.wall_time_s / res.n_steps, (time.process_time() - cpu) / res.n_steps


def _opacus(factory, X, y, steps: int, batch: int) -> tuple[float, float]:
    from opacus import GradSampleModule
    from opacus.optimizers import DPOptimizer

    cpu = time.process_time()
    model = GradSampleModule(factory())
    opt = DPOptimizer(torch.optim.SGD(model.parameters(), lr=LR), noise_multiplier=SIGMA,
                      max_grad_norm=C, expected_batch_size=batch)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(0)
    n = X.shape[0]
    start = time.perf_counter()
    for _ in range(steps):
        idx = torch.randperm(n, generator=gen)[:batch]
        loss = loss_fn(model(X[idx]), y[idx])
        loss.backward()
        opt.step()
        opt.zero_grad()
    wall = time.perf_counter() - start
    return wall / steps, (time.process_time() - cpu) / steps


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True,
                              timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "load average: " + ", ".join(f"{v:.2f}" for v in os.getloadavg())


def _row(factory, shape, k, batch, steps, repeats, func):
    """Best (wall, cpu) per step of pacpriv, its torch.func path and opacus, interleaved."""
    n = batch * steps
    rng = np.random.default_rng(0)
    X = torch.as_tensor(rng.normal(size=(n, *shape)), dtype=torch.float32)
    y = torch.as_tensor(rng.integers(0, k, size=n))
    torch.manual_seed(0)
    _ours(factory, X[: batch * 3], y[: batch * 3], 3)  # warm-up
    if func:
        _ours(factory, X[: batch * 3], y[: batch * 3], 3, general=True)
    _opacus(factory, X, y, 3, batch)
    times: dict[str, list] = {"ours": [], "func": [], "opacus": []}
    for _ in range(repeats):
        times["ours"].append(_ours(factory, X, y, steps))
        if func:
            times["func"].append(_ours(factory, X, y, steps, general=True))
        times["opacus"].append(_opacus(factory, X, y, steps, batch))
    nan = (float("nan"), float("nan"))
    return {key: (min(w for w, _ in v), min(c for _, c in v)) if v else nan
            for key, v in times.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="best of this many runs")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per run")
    parser.add_argument("--threads", type=int, default=1, help="torch threads, every side")
    parser.add_argument("--only", default="", help="run only models whose name contains this")
    parser.add_argument("--func", action="store_true",
                        help="also time pacpriv's torch.func path (slow for the 784 MLP)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")  # opacus' secure-RNG and hook warnings
    print(f"before: {_uptime()}", flush=True)
    rows = []
    for name, (shape, k, factory, batches) in _models().items():
        if args.only not in name:
            continue
        for batch in batches:
            best = _row(factory, shape, k, batch, args.steps, args.repeats, args.func)
            rows.append((name, batch, best))
    print(f"after:  {_uptime()}")
    print(f"{'model':<15} {'batch':>5} {'pacpriv ms':>10} {'torch.func ms':>13} "
          f"{'opacus ms':>9} {'opacus/pacpriv':>14} {'opacus/torch.func':>17} "
          f"{'pacpriv cpu ms':>14} {'opacus cpu ms':>13} {'cpu ratio':>9}")
    for name, batch, best in rows:
        (ours, ours_cpu), (func, _), (theirs, theirs_cpu) = (
            best["ours"], best["func"], best["opacus"])
        print(f"{name:<15} {batch:>5} {ours * 1e3:>10.3f} {func * 1e3:>13.3f} "
              f"{theirs * 1e3:>9.3f} {theirs / ours:>14.2f} {theirs / func:>17.2f} "
              f"{ours_cpu * 1e3:>14.3f} {theirs_cpu * 1e3:>13.3f} "
              f"{theirs_cpu / ours_cpu:>9.2f}")
    print(f"(per step; σ={SIGMA}, C={C}, SGD lr={LR}; pacpriv batches vary: random allocation "
          f"with expected size = batch; best of {args.repeats} interleaved runs of "
          f"{args.steps} steps; {args.threads} torch thread(s); ratios: opacus / pacpriv)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
