"""Benchmark: many models at once (pacpriv.ensemble) against a joblib process loop.

Three cases, each timed against the loop it replaces -- one training per joblib task on the
loky backend with ``n_jobs=2`` (one thread per worker, workers warmed up first) -- measured in
the same run, and checked for equal results:

1. 128 logistic-regression worlds on breast_cancer (standardised): the compare mechanism
   (``pacpriv.compare.models.LogisticRegressionMechanism``: float64, SGD, random allocation
   with M = 5 steps for E = 10 epochs, learning rate 0.5) against
   ``EnsembleLogisticRegression.from_compare``;
2. 128 MLP worlds, 64-128-10 on digits: the ``mlp`` mechanism (full-batch Adam, float64)
   against ``EnsembleMLP.from_mlp`` in float64 (the same numbers) and float32;
3. a 512-trial PAC simulation of that MLP mechanism: ``pacpriv.pac.simulate`` (loky,
   n_jobs=2) against the same 512 Poisson-½ masks run as ensemble blocks of 128.

Each ensemble runs in this process (``--threads`` torch threads) and as blocks split over two
joblib workers (the same two cores as the loop). Ratios are printed as ``N.N×`` (loop time /
ensemble time). Multiple-model training in one program is the approach of shadow-model attacks
(Carlini et al., Membership Inference Attacks From First Principles, IEEE S&P 2022) and of
``torch.func`` model ensembling.

``--device cuda`` (a GPU machine) instead trains 1,024 MLP worlds on the device in one call and
compares it with the CPU loop, timed on 128 worlds and scaled by 8 (printed as such).

Usage: ``python benchmarks/ensemble.py --quick`` (under 3 minutes on 2 loaded cores).
"""

from __future__ import annotations

import argparse
import time

import joblib
import numpy as np
import torch
from pacpriv.mechanisms.mlp import MLPParameters
from sklearn.datasets import load_breast_cancer, load_digits

from pacpriv.compare.models import LogisticRegressionMechanism
from pacpriv.ensemble import EnsembleLogisticRegression, EnsembleMLP
from pacpriv.pac import PoissonSampler, simulate


def _standardised(loader):
    X, y = loader(return_X_y=True)
    sd = X.std(0)
    return (X - X.mean(0)) / np.where(sd > 0, sd, 1.0), y.astype(np.int64)


def _timed(fn):
    tic = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - tic


def _train_one(mechanism, X, y, mask):
    return mechanism((X[mask], y[mask]))


def loop(mechanism, X, y, masks) -> np.ndarray:
    """One training per task, loky, 2 workers (the baseline)."""
    rows = joblib.Parallel()(joblib.delayed(_train_one)(mechanism, X, y, m) for m in masks)
    return np.stack(rows)


def _block(ensemble, X, y, masks, threads):
    torch.set_num_threads(threads)
    return ensemble.run_block((X, y), masks)


def ensemble_two_processes(ensemble, X, y, masks, threads=1) -> np.ndarray:
    """The ensemble as blocks split over the two loky workers."""
    halves = np.array_split(masks, 2)
    rows = joblib.Parallel()(joblib.delayed(_block)(ensemble, X, y, h, threads) for h in halves)
    return np.concatenate(rows)


def _report(label, t_loop, t_ens, diff):
    print(f"  {label:<44} {t_ens:7.2f} s  {t_loop / t_ens:5.1f}×   max |Δ| {diff:.1e}")


def _case(title, mechanism, ensemble, X, y, masks, threads, extra=()):
    print(f"\n{title}")
    ref, t_loop = _timed(lambda: loop(mechanism, X, y, masks))
    print(f"  {'joblib loop (loky, n_jobs=2)':<44} {t_loop:7.2f} s")
    out, t = _timed(lambda: ensemble.run_block((X, y), masks))
    _report(f"ensemble, 1 process, {threads} thread(s)", t_loop, t, np.abs(out - ref).max())
    out, t = _timed(lambda: ensemble_two_processes(ensemble, X, y, masks))
    _report("ensemble, 2 blocks on the 2 loky workers", t_loop, t, np.abs(out - ref).max())
    for label, other in extra:
        out, t = _timed(lambda other=other: other.run_block((X, y), masks))
        _report(label, t_loop, t, np.abs(out - ref).max())
    return t_loop


def simulation(mlp, ensemble, X, y, n_trials, seed, block):
    print(f"\nPAC simulation of the MLP mechanism, {n_trials} trials (Poisson-½)")
    res, t_loop = _timed(lambda: simulate(mlp, (X, y), n_trials=n_trials, n_jobs=2,
                                          backend="loky", rng=seed, progress=False))
    print(f"  {'pacpriv.pac.simulate (loky, n_jobs=2)':<44} {t_loop:7.2f} s")
    masks = PoissonSampler().masks(X.shape[0], n_trials=n_trials, rng=seed)
    assert np.array_equal(masks, res.masks)

    def blocks():
        return np.concatenate([ensemble.run_block((X, y), masks[i:i + block])
                               for i in range(0, n_trials, block)])

    out, t = _timed(blocks)
    _report(f"ensemble blocks of {block}, 1 process", t_loop, t, np.abs(out - res.outputs).max())
    out, t = _timed(lambda: ensemble_two_processes(ensemble, X, y, masks))
    _report("ensemble, 2 blocks on the 2 loky workers", t_loop, t,
            np.abs(out - res.outputs).max())


def gpu(args, X, y, mlp, masks_cpu):
    device = torch.device(args.device)
    name = torch.cuda.get_device_name(device)
    n_worlds = 1024
    rng = np.random.default_rng(args.seed + 3)
    masks = rng.random((n_worlds, X.shape[0])) < 0.5
    print(f"\nGPU: {n_worlds} MLP worlds (64-128-10, {mlp.epochs} Adam steps) on {name}")
    _, t_loop = _timed(lambda: loop(mlp, X, y, masks_cpu))
    t_loop *= n_worlds / masks_cpu.shape[0]
    print(f"  {'CPU joblib loop (loky, n_jobs=2), 128 x 8':<44} {t_loop:7.2f} s (scaled)")
    for dtype in ("float64", "float32"):
        ens = EnsembleMLP.from_mlp(mlp, dtype=dtype, device=args.device)
        ens.run_block((X, y), masks[:8])  # warm-up (CUDA context, kernels)
        torch.cuda.synchronize(device)
        out, t = _timed(lambda ens=ens: ens.run_block((X, y), masks))
        ref = np.stack([mlp((X[m], y[m])) for m in masks[:4]])
        _report(f"ensemble on {args.device}, {dtype}", t_loop, t, np.abs(out[:4] - ref).max())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer epochs (under 3 minutes)")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda[:i]")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads of the in-process ensemble (default 1)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    mlp_epochs = 20 if args.quick else 50
    rng = np.random.default_rng(args.seed)
    Xd, yd = _standardised(load_digits)
    mlp = MLPParameters(classes=tuple(range(10)), hidden_units=128, epochs=mlp_epochs,
                        learning_rate=0.01, weight_decay=1e-4)
    mlp_masks = rng.random((128, Xd.shape[0])) < 0.5
    print(f"pacpriv.ensemble benchmark ({'quick' if args.quick else 'full'}; torch "
          f"{torch.__version__}, {args.threads} thread(s) in process; loop: loky, n_jobs=2)")
    with joblib.parallel_config(backend="loky", n_jobs=2):
        joblib.Parallel()(joblib.delayed(_train_one)(mlp, Xd, yd, m) for m in mlp_masks[:4])
        if args.device != "cpu":
            gpu(args, Xd, yd, mlp, mlp_masks)
            return
        Xb, yb = _standardised(load_breast_cancer)
        lr = LogisticRegressionMechanism(n_features=Xb.shape[1], n_classes=2,
                                         steps_per_epoch=5, epochs=10, learning_rate=0.5,
                                         public_seed=0)
        _case("logistic regression (compare mechanism), 128 worlds on breast_cancer", lr,
              EnsembleLogisticRegression.from_compare(lr), Xb, yb,
              rng.random((128, Xb.shape[0])) < 0.5, args.threads)
        _case(f"MLP 64-128-10 ({mlp_epochs} full-batch Adam steps), 128 worlds on digits", mlp,
              EnsembleMLP.from_mlp(mlp), Xd, yd, mlp_masks, args.threads,
              extra=[("ensemble, 1 process, float32", EnsembleMLP.from_mlp(mlp,
                                                                           dtype="float32"))])
        sim_mlp = MLPParameters(classes=tuple(range(10)), hidden_units=128,
                                epochs=10 if args.quick else 50, learning_rate=0.01)
        simulation(sim_mlp, EnsembleMLP.from_mlp(sim_mlp), Xd, yd, 512, args.seed, 128)


if __name__ == "__main__":
    main()
