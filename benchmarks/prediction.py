"""Benchmark: PAC-private prediction (posterior-tracked worlds; Zhu, Sridhar &
Devadas, Private Prediction via PAC Privacy, arXiv:2601.14033, 2026).

For breast_cancer and digits (70/30 stratified split; the 70 % is the private pool), ``m`` world
models (standardised logistic regression, complementary pairs) answer every test row as one
query, in order, as a served stream would. Prints, for per-query budgets 2⁻⁸, 2⁻¹⁶, 2⁻²⁴,
2⁻³² nats: the accuracy of the private answers (argmax of the noisy probabilities) next to the
non-private ensemble (argmax of the mean world probabilities), the spend and certified
membership bound after the test stream, and how many queries the budget allows before the
membership bound reaches 55 %. Two outputs are compared: ``proba`` (the worlds' class
probabilities) and ``label`` (one-hot votes: a query on which every world predicts the same
class is answered exactly, without noise).

Then the throughput with ``m = 128`` models: one ``predict`` call on the whole batch (model
evaluation batched across worlds and queries) against one call per query row, as queries/s and
their ratio, both measured in this run.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from pacpriv.pac.bounds import mi_budget_for_accuracy
from pacpriv.prediction import PrivatePredictor

BUDGETS = (8, 16, 24, 32)  # b = 2^-k nats
TARGET = 0.55


def _model():
    return make_pipeline(StandardScaler(), LogisticRegression(max_iter=300))


def _data(name: str):
    loader = {"breast_cancer": load_breast_cancer, "digits": load_digits}[name]
    X, y = loader(return_X_y=True)
    return train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)


def accuracy_table(name: str, n_worlds: int, seed: int, n_jobs) -> None:
    X_tr, X_te, y_tr, y_te = _data(name)
    v55 = float(mi_budget_for_accuracy(TARGET, prior=0.5))
    print(f"\n{name}: pool {len(X_tr)}, {len(X_te)} test queries, m = {n_worlds} worlds")
    base = None
    rows = []
    for k in BUDGETS:
        b = 2.0**-k
        accs = {}
        for output in ("proba", "label"):
            pp = PrivatePredictor(_model(), (X_tr, y_tr), n_worlds=n_worlds, per_query_budget=b,
                                  total_budget=len(X_te) * b, output=output, rng=seed)
            pp.fit(n_jobs=n_jobs, progress=False)  # same seed: the same worlds every time
            if base is None:
                base = float(np.mean(
                    pp.world_outputs(X_te).mean(axis=0).argmax(axis=1) == y_te))
            accs[output] = float(np.mean(pp.predict(X_te).argmax(axis=1) == y_te))
        rows.append((k, accs["proba"], accs["label"], pp.spent, pp.membership_bound,
                     math.floor(v55 / b)))
    print(f"{'b (nats)':>9} {'acc proba':>10} {'acc label':>10} {'ensemble':>9} {'spent':>10} "
          f"{'bound after stream':>19} {'queries at 55%':>15}")
    for k, acc_p, acc_l, spent, bound, n55 in rows:
        up = math.ceil(bound * 1e6) / 1e4
        print(f"{'2^-' + str(k):>9} {acc_p:>10.4f} {acc_l:>10.4f} {base:>9.4f} {spent:>10.3g} "
              f"{up:>18.4f}% {n55:>15,d}")


def throughput(n_worlds: int, seed: int, n_jobs, n_queries: int) -> None:
    X_tr, X_te, y_tr, _ = _data("digits")
    X_q = np.resize(X_te, (n_queries, X_te.shape[1]))
    pp = PrivatePredictor(_model(), (X_tr, y_tr), n_worlds=n_worlds, per_query_budget=2.0**-32,
                          total_budget=1.0, rng=seed)
    tic = time.perf_counter()
    pp.fit(n_jobs=n_jobs, progress=True)
    fit_s = time.perf_counter() - tic
    pp.predict(X_q[:2])  # warm-up
    tic = time.perf_counter()
    pp.predict(X_q)
    batched = n_queries / (time.perf_counter() - tic)
    tic = time.perf_counter()
    for i in range(n_queries):
        pp.predict(X_q[i : i + 1])
    single = n_queries / (time.perf_counter() - tic)
    print(f"\nthroughput, digits, m = {n_worlds} sklearn models (fit in {fit_s:.1f} s), "
          f"{n_queries} queries")
    print(f"  one query per call : {single:10.1f} queries/s (baseline)")
    print(f"  batched            : {batched:10.1f} queries/s  ({batched / single:.2f}x)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worlds", type=int, default=64, help="worlds for the accuracy tables")
    ap.add_argument("--throughput-worlds", type=int, default=128)
    ap.add_argument("--queries", type=int, default=200, help="queries for the throughput")
    ap.add_argument("--n-jobs", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0, help="secret seed (benchmark only)")
    args = ap.parse_args()
    for name in ("breast_cancer", "digits"):
        accuracy_table(name, args.worlds, args.seed, args.n_jobs)
    throughput(args.throughput_worlds, args.seed, args.n_jobs, args.queries)


if __name__ == "__main__":
    main()
