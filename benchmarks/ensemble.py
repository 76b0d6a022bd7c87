"""Benchmark: many models at once (pacpriv.ensemble) against a joblib process loop.

Every case is timed against the loop it replaces -- one training per joblib task on the loky
backend with ``n_jobs=2`` (one torch thread per worker) -- measured in the same run after a
warm-up of the workers and of this process (including torch.func's one-time set-up, about 2 s
of CPU per fresh process), and the results are compared (max |Δ| over all parameters):

1. 128 logistic-regression worlds on breast_cancer (standardised): the compare mechanism
   (``pacpriv.compare.models.LogisticRegressionMechanism``: float64 SGD, random allocation
   with M = 5 steps, E = 10 epochs, learning rate 0.5) against
   ``EnsembleLogisticRegression.from_compare``;
2. 128 MLP worlds 64-128-10 on digits trained with minibatches (float32 SGD with momentum,
   batches of 64, as shadow models and prediction worlds are trained): a loop of
   ``train_reference`` against ``train_ensemble``;
3. 128 worlds of the ``mlp`` mechanism (64-128-10, full-batch Adam, float64) against
   ``EnsembleMLP.from_mlp``;
4. a 512-trial PAC simulation of that mechanism: ``pacpriv.pac.simulate`` (loky, n_jobs=2)
   against the same 512 Poisson-½ masks in ensemble blocks of 128;
5. answering one-row queries with 128 worlds (64-128-10): a loop over the 128 modules against
   one ``Ensemble.evaluate`` call per query, in queries per second.

The ensembles run in this process (``--threads`` torch threads) and as two blocks on the two
loky workers (the loop's two cores). Each line gives the wall time and the ratio
``loop time / ensemble time`` as ``N.N×``, then the CPU-time ratio (loop: the workers' CPU
seconds, summed over tasks), which a loaded machine disturbs less. Training shadow models in
bulk is what membership audits need (Carlini et al., Membership Inference Attacks From First
Principles, IEEE S&P 2022); the program is ``torch.func`` model ensembling.

``--device cuda`` (on a GPU machine) instead trains 1,024 worlds of the ``mlp`` mechanism (and
1,024 minibatch worlds) on the device in one call each, against the CPU loop timed on 128
worlds and scaled by 8 (printed as such).

Usage: ``python benchmarks/ensemble.py --quick`` (under 3 minutes on 2 loaded cores).
"""

from __future__ import annotations

import argparse
import time

import joblib
import numpy as np
import torch
from sklearn.datasets import load_breast_cancer, load_digits

from pacpriv._random import trial_seed
from pacpriv.compare.models import LogisticRegressionMechanism
from pacpriv.ensemble import (
    SGD,
    Ensemble,
    EnsembleLogisticRegression,
    EnsembleMLP,
    Shuffled,
    TrainingSpec,
    train_ensemble,
    train_reference,
)
from pacpriv.mechanisms.mlp import MLPParameters
from pacpriv.pac import PoissonSampler, simulate
from pacpriv.pac.engine import ExecutionOptions

WIDTH = 48


def _standardised(loader):
    X, y = loader(return_X_y=True)
    sd = X.std(0)
    return (X - X.mean(0)) / np.where(sd > 0, sd, 1.0), y.astype(np.int64)


def _flat(module) -> np.ndarray:
    return torch.cat([p.detach().reshape(-1) for p in module.parameters()]).double().numpy()


class Mechanism:
    """A trial mechanism ``f((X, y))`` (loop) and its ensemble form ``run_block`` (blocks)."""

    def __init__(self, one, ensemble):
        self.one, self.ensemble = one, ensemble

    def task(self, X, y, mask, k):
        torch.set_num_threads(1)
        tic = time.process_time()
        return self.one(X, y, mask, k), time.process_time() - tic

    def block(self, X, y, masks, start, threads):
        torch.set_num_threads(threads)
        tic = time.process_time()
        return self.ensemble(X, y, masks, start), time.process_time() - tic


class _Minibatch:
    """Worlds trained by ``train_reference`` / ``train_ensemble`` with per-world seeds."""

    def __init__(self, model, spec, n, device="cpu"):
        self.model, self.spec, self.device = model, spec, device
        root = np.random.SeedSequence(17)
        self.seeds = [trial_seed(root, k) for k in range(n)]

    def one(self, X, y, mask, k):
        return _flat(train_reference(self.model, X, y, mask, seed=self.seeds[k],
                                     training=self.spec))

    def ensemble(self, X, y, masks, start):
        return train_ensemble(self.model, X, y, masks, training=self.spec,
                              seeds=self.seeds[start:start + masks.shape[0]],
                              device=self.device).flat_parameters()


def _timed(fn):
    tic, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - tic, time.process_time() - cpu


def _loop(mech, X, y, masks):
    out, wall, _ = _timed(lambda: joblib.Parallel()(
        joblib.delayed(mech.task)(X, y, m, k) for k, m in enumerate(masks)))
    return np.stack([r for r, _ in out]), wall, sum(c for _, c in out)


def _line(label, wall, cpu, base, diff=None):
    ratio = "" if base is None else f"{base[0] / wall:6.1f}×  CPU {base[1] / cpu:6.1f}×"
    delta = "" if diff is None else f"   max |Δ| {diff:.1e}"
    print(f"  {label:<{WIDTH}} {wall:7.2f} s {ratio}{delta}")


def case(title, mech, X, y, masks, threads):
    """Loop, in-process ensemble, two ensemble blocks on the workers."""
    print(f"\n{title}")
    ref, wall, cpu = _loop(mech, X, y, masks)
    _line("joblib loop (loky, n_jobs=2)", wall, cpu, None)
    base = (wall, cpu)
    (out, _), wall, cpu = _timed(lambda: mech.block(X, y, masks, 0, threads))
    _line(f"ensemble, 1 process, {threads} thread(s)", wall, cpu, base, np.abs(out - ref).max())
    halves = np.array_split(np.arange(masks.shape[0]), 2)
    parts, wall, _ = _timed(lambda: joblib.Parallel()(
        joblib.delayed(mech.block)(X, y, masks[h], int(h[0]), 1) for h in halves))
    out = np.concatenate([r for r, _ in parts])
    _line("ensemble, 2 blocks on the 2 loky workers", wall, sum(c for _, c in parts), base,
          np.abs(out - ref).max())
    return base


def simulation(mlp, X, y, n_trials, seed, block, threads):
    print(f"\nPAC simulation of the mlp mechanism, {n_trials} trials (Poisson-½), "
          f"{mlp.epochs} Adam steps")
    res, wall, _ = _timed(lambda: simulate(
        mlp, (X, y), n_trials=n_trials, rng=seed,
        execution=ExecutionOptions(n_jobs=2, backend="loky", progress=False)))
    _line("pacpriv.pac.simulate (loky, n_jobs=2)", wall, float("nan"), None)
    masks = PoissonSampler().masks(X.shape[0], n_trials=n_trials, rng=seed)
    assert np.array_equal(masks, res.masks)
    ens = EnsembleMLP.from_mlp(mlp)
    torch.set_num_threads(threads)
    out, t, _ = _timed(lambda: np.concatenate([ens.run_block((X, y), masks[i:i + block])
                                               for i in range(0, n_trials, block)]))
    print(f"  {f'ensemble blocks of {block}, 1 process':<{WIDTH}} {t:7.2f} s "
          f"{wall / t:6.1f}×   max |Δ| {np.abs(out - res.outputs).max():.1e}")
    # the engine's block contract: simulate() runs the ensemble mechanism by canonical blocks
    eng, te, _ = _timed(lambda: simulate(ens, (X, y), n_trials=n_trials, rng=seed,
                                         execution=ExecutionOptions(n_jobs=1, progress=False)))
    print(f"  {'pacpriv.pac.simulate, block path, 1 process':<{WIDTH}} {te:7.2f} s "
          f"{wall / te:6.1f}×   max |Δ| {np.abs(eng.outputs - res.outputs).max():.1e}")


def queries(X, n_worlds, n_queries, device="cpu"):
    print(f"\nanswering one-row queries with {n_worlds} worlds (64-128-10, float32, {device})")
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10))
    d = sum(p.numel() for p in model.parameters())
    rng = np.random.default_rng(5)
    ens = Ensemble.from_flat(model, rng.normal(size=(n_worlds, d)) * 0.1, device=device)
    modules = [ens.module(k).eval() for k in range(n_worlds)]
    rows = X[:n_queries]

    def per_world():
        with torch.no_grad():
            return np.stack([np.stack([m(torch.as_tensor(r[None, :], dtype=torch.float32,
                                                         device=device)).cpu().numpy()
                                       for m in modules]) for r in rows])

    ref, t_loop, _ = _timed(per_world)
    out, t, _ = _timed(lambda: np.stack([ens.evaluate(r[None, :]) for r in rows]))
    print(f"  {'a loop over the worlds':<{WIDTH}} {n_queries / t_loop:7.0f} queries/s")
    print(f"  {'Ensemble.evaluate, one call per query':<{WIDTH}} {n_queries / t:7.0f} "
          f"queries/s {t_loop / t:6.1f}×   max |Δ| {np.abs(out - ref).max():.1e}")


def _warm_up() -> int:
    """One tiny torch.func training: its one-time set-up (about 2 s of CPU in a fresh process)
    is paid before any timing, in this process and in each worker."""
    torch.set_num_threads(1)
    X = np.random.default_rng(0).normal(size=(8, 3))
    train_ensemble(torch.nn.Sequential(torch.nn.Linear(3, 2)), X, np.arange(8) % 2,
                   np.ones((2, 8), bool), seeds=0, training=TrainingSpec(SGD(0.1), epochs=1))
    return torch.get_num_threads()


def _mlp_mechanism(epochs):
    return MLPParameters(classes=tuple(range(10)), hidden_units=128, epochs=epochs,
                         learning_rate=0.01, weight_decay=1e-4)


def _mlp_case(mlp, dtype="float64", device="cpu"):
    ens = EnsembleMLP.from_mlp(mlp, dtype=dtype, device=device)
    return Mechanism(lambda X, y, m, k: mlp((X[m], y[m])),
                     lambda X, y, masks, start: ens.run_block((X, y), masks))


def _minibatch_case(n, epochs, device="cpu"):
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10))
    spec = TrainingSpec(SGD(0.05, momentum=0.9), epochs=epochs, batching=Shuffled(64))
    mb = _Minibatch(model, spec, n, device)
    return Mechanism(mb.one, mb.ensemble)


def gpu(args, X, y, quick):
    """1,024 worlds on the device, against the CPU loop on 128 worlds scaled by 8."""
    device = torch.device(args.device)
    print(f"\nGPU: {torch.cuda.get_device_name(device)}")
    n_worlds, rng = 1024, np.random.default_rng(args.seed + 3)
    masks = rng.random((n_worlds, X.shape[0])) < 0.5
    epochs = 5 if quick else 50
    for title, cpu_case, dev_case, Xc in (
            (f"mlp mechanism 64-128-10, {epochs} full-batch Adam steps, float64",
             _mlp_case(_mlp_mechanism(epochs)),
             _mlp_case(_mlp_mechanism(epochs), device=args.device), X),
            ("MLP 64-128-10 worlds, minibatches of 64, 2 epochs, float32",
             _minibatch_case(n_worlds, 2), _minibatch_case(n_worlds, 2, args.device),
             X.astype(np.float32))):
        print(f"\n{title}, {n_worlds} worlds")
        ref, wall, cpu = _loop(cpu_case, Xc, y, masks[:128])
        base = (wall * n_worlds / 128, cpu * n_worlds / 128)
        _line("CPU joblib loop (loky, n_jobs=2), 128 worlds x 8", *base, None)
        dev_case.ensemble(Xc, y, masks[:8], 0)  # warm-up: CUDA context and kernels
        torch.cuda.synchronize(device)
        out, t, c = _timed(lambda d=dev_case, x=Xc: d.ensemble(x, y, masks, 0))
        _line(f"ensemble on {args.device}, one call", t, c, base,
              np.abs(out[:128] - ref).max())
    queries(X, 128, 1000, device=args.device)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer epochs (under 3 minutes)")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda[:i]")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads of the in-process ensemble (default 1)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    quick = args.quick
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(args.seed)
    Xd, yd = _standardised(load_digits)
    print(f"pacpriv.ensemble benchmark ({'quick' if quick else 'full'}; torch "
          f"{torch.__version__}; loop: loky, n_jobs=2)")
    with joblib.parallel_config(backend="loky", n_jobs=2):
        joblib.Parallel()(joblib.delayed(_warm_up)() for _ in range(8))
        _warm_up()
        torch.set_num_threads(args.threads)
        if args.device != "cpu":
            gpu(args, Xd, yd, quick)
            return
        Xb, yb = _standardised(load_breast_cancer)
        lr = LogisticRegressionMechanism(n_features=Xb.shape[1], n_classes=2,
                                         steps_per_epoch=5, epochs=10, learning_rate=0.5,
                                         public_seed=0)
        ens_lr = EnsembleLogisticRegression.from_compare(lr)
        case("logistic regression (compare mechanism), 128 worlds on breast_cancer",
             Mechanism(lambda X, y, m, k: lr((X[m], y[m])),
                       lambda X, y, masks, start: ens_lr.run_block((X, y), masks)),
             Xb, yb, rng.random((128, Xb.shape[0])) < 0.5, args.threads)
        masks = rng.random((128, Xd.shape[0])) < 0.5
        epochs = 1 if quick else 5
        case(f"MLP 64-128-10 worlds on digits, minibatches of 64 (float32 SGD, momentum 0.9, "
             f"{epochs} epochs), 128 worlds", _minibatch_case(128, epochs),
             Xd.astype(np.float32), yd, masks, args.threads)
        mlp = _mlp_mechanism(3 if quick else 50)
        case(f"mlp mechanism 64-128-10 ({mlp.epochs} full-batch Adam steps, float64), "
             "128 worlds on digits", _mlp_case(mlp), Xd, yd, masks, args.threads)
        simulation(_mlp_mechanism(2 if quick else 50), Xd, yd, 512, args.seed, 128,
                   args.threads)
    queries(Xd, 128, 300 if quick else 2000)


if __name__ == "__main__":
    main()
