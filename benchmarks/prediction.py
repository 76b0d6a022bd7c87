"""Benchmark: PAC-private prediction (posterior-tracked worlds; Zhu, Sridhar &
Devadas, Private Prediction via PAC Privacy, arXiv:2601.14033, 2026).

Three parts, every speed printed as a ratio against a baseline measured in the same run:

1. Answering throughput with ``m = 128`` worlds on digits: one-row queries per second from the
   Python API (``PrivatePredictor.answer``), with all worlds evaluated in one batched call
   (stacked linear model for a standardised logistic regression; the vectorised torch
   ensemble for a :class:`~pacpriv.prediction.TorchFit` MLP) against the per-world loop (one
   model call per world, the 0.2 evaluation) on the same worlds; with and without a state
   directory (a durable ledger write per query); and the same over HTTP (FastAPI
   ``TestClient``, or a uvicorn server on 127.0.0.1 with ``--uvicorn``; a bounded loop of
   one-row ``POST /predict`` requests).
2. Fitting 128 torch worlds: the vectorised ensemble (``ExecutionOptions(ensemble=True)``,
   the default) against the per-world engine path (``ensemble=False``) on the same seeds, with
   the largest parameter difference between the two (the equality statement).
3. (without ``--quick``) Accuracy against the budget: breast_cancer and digits (70/30
   stratified split; the 70 % is the private pool), ``m`` worlds, every test row one query;
   the accuracy of the private labels (``predict``) next to the non-private ensemble, the spend
   and certified membership bound after the stream, and the queries the budget allows before
   the bound reaches 55 %, for ``proba`` and ``label`` (one-hot votes, exact where all worlds
   agree) outputs.

4. (``--serving``) The served path as deployed: durable SQLite ledger, an analyst's API key,
   hardened (OS CSPRNG, discrete Gaussian on a grid) noise. A 1,000-row batch against one-row
   calls from Python (rows per second, ratio); HTTP one-row requests against a plain FastAPI
   app serving one of the same scikit-learn models (uvicorn in a thread, the same settings, one
   keep-alive client; ratio); and an oversized body (136 MB announced, streamed): the time to
   the 413 and the server process's resident memory before and after.

``--quick`` runs parts 1-2 at reduced sizes (about 3 minutes on 2 loaded cores).
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from pacpriv.pac.bounds import PrivacyLedger, mi_budget_for_accuracy
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.prediction import PrivatePredictor, TorchFit
from pacpriv.prediction._evaluate import Worlds

BUDGETS = (8, 16, 24, 32)  # b = 2^-k nats
TARGET = 0.55


def _model():
    return make_pipeline(StandardScaler(), LogisticRegression(max_iter=300))


def mlp():
    """The torch worlds' architecture: 64 -> 32 -> 10, tanh (module level: picklable)."""
    import torch

    return torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.Tanh(), torch.nn.Linear(32, 10))


def _torch_fit(epochs: int) -> TorchFit:
    from pacpriv.ensemble import SGD, Shuffled, TrainingSpec

    return TorchFit(mlp, TrainingSpec(SGD(0.05, momentum=0.9), epochs=epochs,
                                      batching=Shuffled(128)))


def _data(name: str):
    loader = {"breast_cancer": load_breast_cancer, "digits": load_digits}[name]
    X, y = loader(return_X_y=True)
    if name == "digits":
        X = X / 16.0
    return train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)


def _rate(n: int, seconds: float) -> float:
    return n / seconds if seconds > 0 else float("inf")


class _Clock:
    """Wall time and this process's CPU time (all threads) of a block: on a shared machine
    the CPU-time rate is what the code costs, the wall-time rate what a caller sees."""

    def __enter__(self) -> _Clock:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc) -> None:
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu

    def rates(self, n: int) -> tuple[float, float]:
        return _rate(n, self.wall), _rate(n, self.cpu)


def _queries_per_second(pp: PrivatePredictor, X_q: np.ndarray) -> tuple[float, float]:
    pp.answer(X_q[:1])  # warm-up
    with _Clock() as clock:
        for i in range(len(X_q)):
            pp.answer(X_q[i:i + 1])
    return clock.rates(len(X_q))


def _per_world(pp: PrivatePredictor) -> PrivatePredictor:
    """The same predictor answering through the per-world loop (the baseline)."""
    pp._worlds = Worlds(pp._worlds.models, pp.output, batched=False)
    return pp


def _http_queries_per_second(pp: PrivatePredictor, X_q: np.ndarray, uvicorn: bool
                             ) -> tuple[float, float]:
    from pacpriv.prediction import create_app

    app = create_app(pp)
    rows = [{"rows": [row.tolist()]} for row in X_q]
    if uvicorn:
        return _uvicorn_loop(app, rows)
    from starlette.exceptions import StarletteDeprecationWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StarletteDeprecationWarning)
        from fastapi.testclient import TestClient
    client = TestClient(app)
    client.post("/predict", json=rows[0])  # warm-up
    with _Clock() as clock:
        for body in rows:
            r = client.post("/predict", json=body)
            assert r.status_code == 200, r.text
    return clock.rates(len(rows))


def _uvicorn_loop(app, rows: list) -> tuple[float, float]:
    """A uvicorn server on 127.0.0.1 (a free port) in a thread; one keep-alive client."""
    import socket
    import threading

    import httpx
    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            client.post("/predict", json=rows[0])
            with _Clock() as clock:  # server and client share this process
                for body in rows:
                    r = client.post("/predict", json=body)
                    assert r.status_code == 200, r.text
            return clock.rates(len(rows))
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def throughput(n_worlds: int, n_queries: int, n_http: int, epochs: int, n_jobs,
               uvicorn: bool) -> None:
    X_tr, X_te, y_tr, _ = _data("digits")
    X_q = np.resize(X_te, (n_queries, X_te.shape[1]))
    quiet = ExecutionOptions(progress=False, n_jobs=n_jobs)
    print(f"\nanswering: digits, m = {n_worlds} worlds, one-row queries "
          f"({n_queries} from Python, {n_http} over HTTP)")
    print(f"{'worlds':<31}{'answered':<40}{'queries/s':>10}{'vs loop':>9}"
          f"{'per CPU s':>11}{'vs loop':>9}")

    def row(name: str, what: str, rates, base) -> None:
        print(f"{name:<31}{what:<40}{rates[0]:>10.1f}{rates[0] / base[0]:>8.1f}×"
              f"{rates[1]:>11.1f}{rates[1] / base[1]:>8.1f}×")

    for label, fit in (("logistic regression (sklearn)", _model()),
                       ("MLP 64-32-10 (TorchFit)", _torch_fit(epochs))):
        tic = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            pp = PrivatePredictor(fit, (X_tr, y_tr), n_worlds=n_worlds,
                                  per_query_budget=2.0**-32, total_budget=1.0,
                                  state=Path(tmp) / "s", rng=0).fit(execution=quiet)
            fit_s = time.perf_counter() - tic
            durable = _queries_per_second(pp, X_q[: max(20, n_queries // 4)])
            memory = PrivatePredictor.load(Path(tmp) / "s")
            memory._ledger = PrivacyLedger(None, scope="predictor")  # in memory: no ledger write
            batched = _queries_per_second(memory, X_q)
            http = _http_queries_per_second(memory, X_q[:n_http], uvicorn)
            kind = memory._worlds.evaluation.split(" (")[0]
            loop = _queries_per_second(_per_world(memory), X_q[: max(10, n_queries // 10)])
            http_loop = _http_queries_per_second(memory, X_q[: max(5, n_http // 10)], uvicorn)
        server = "uvicorn" if uvicorn else "TestClient"
        print(f"{label} (fit {fit_s:.1f} s)")
        row("  Python API", f"{kind}, batched", batched, loop)
        row("", "  with a state directory (fsync)", durable, loop)
        row("", "per world (baseline)", loop, loop)
        row(f"  HTTP ({server})", f"{kind}, batched", http, http_loop)
        row("", "per world (baseline)", http_loop, http_loop)


def fit_time(n_worlds: int, epochs: int, n_jobs) -> None:
    X_tr, _, y_tr, _ = _data("digits")
    fit = _torch_fit(epochs)
    times, params = {}, {}
    for ensemble in (True, False):
        pp = PrivatePredictor(fit, (X_tr, y_tr), n_worlds=n_worlds, per_query_budget=2.0**-32,
                              total_budget=1.0, rng=0)
        with _Clock() as clock:
            pp.fit(execution=ExecutionOptions(ensemble=ensemble, n_jobs=n_jobs, progress=False))
        times[ensemble] = (clock.wall, clock.cpu)
        params[ensemble] = np.stack([np.concatenate([p.detach().numpy().ravel()
                                                     for p in m.parameters()])
                                     for m in pp._worlds.models])
    diff = float(np.abs(params[True] - params[False]).max())
    scale = float(np.abs(params[False]).max())
    print(f"\nfitting {n_worlds} TorchFit worlds (MLP 64-32-10, {epochs} epochs, minibatches of "
          "128, float32) on digits")
    (w_loop, c_loop), (w_ens, c_ens) = times[False], times[True]
    print(f"  per-world engine path (ensemble=False, n_jobs={n_jobs}): {w_loop:7.1f} s wall, "
          f"{c_loop:7.1f} s CPU")
    print(f"  vectorised ensemble (ensemble=True)            : {w_ens:7.1f} s wall, "
          f"{c_ens:7.1f} s CPU  ({w_loop / w_ens:.1f}× wall, {c_loop / c_ens:.1f}× CPU)")
    print(f"  same masks and seeds; max |Δθ| = {diff:.3g} ({diff / scale:.2g} of max |θ|)")


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
            pp.fit(execution=ExecutionOptions(n_jobs=n_jobs, progress=False))  # same worlds
            if base is None:
                base = float(np.mean(
                    pp.world_outputs(X_te).mean(axis=0).argmax(axis=1) == y_te))
            accs[output] = float(np.mean(pp.predict(X_te) == y_te))
        rows.append((k, accs["proba"], accs["label"], pp.spent, pp.membership_bound,
                     math.floor(v55 / b)))
    print(f"{'b (nats)':>9} {'acc proba':>10} {'acc label':>10} {'ensemble':>9} {'spent':>10} "
          f"{'bound after stream':>19} {'queries at 55%':>15}")
    for k, acc_p, acc_l, spent, bound, n55 in rows:
        up = math.ceil(bound * 1e6) / 1e4
        print(f"{'2^-' + str(k):>9} {acc_p:>10.4f} {acc_l:>10.4f} {base:>9.4f} {spent:>10.3g} "
              f"{up:>18.4f}% {n55:>15,d}")


def _uvicorn_server(app):
    """A uvicorn server on 127.0.0.1 (free port) in a thread: ``(server, thread, url)``."""
    import socket
    import threading

    import uvicorn

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    return server, thread, f"http://127.0.0.1:{port}"


def _http_rate(app, bodies: list, headers: dict) -> float:
    import httpx

    server, thread, url = _uvicorn_server(app)
    try:
        with httpx.Client(base_url=url, timeout=30, headers=headers) as client:
            client.post("/predict", json=bodies[0])
            tic = time.perf_counter()
            for body in bodies:
                r = client.post("/predict", json=body)
                assert r.status_code == 200, r.text
            return len(bodies) / (time.perf_counter() - tic)
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def _plain_app(model, n_features: int):
    """The baseline: FastAPI serving ``model.predict_proba`` for one row, same request shape."""
    import fastapi
    import pydantic

    class Rows(pydantic.BaseModel):
        rows: list[list[float]]

    app = fastapi.FastAPI()

    def predict(request) -> dict:
        X = np.asarray(request.rows, dtype=np.float64).reshape(-1, n_features)
        return {"outputs": model.predict_proba(X).tolist()}

    predict.__annotations__ = {"request": Rows, "return": dict}  # a local model for FastAPI
    app.post("/predict")(predict)
    return app


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        line = next(x for x in f if x.startswith("VmRSS"))
    return int(line.split()[1]) / 1024


def _oversized(app) -> tuple[float, float, float]:
    """Seconds from sending the headers of a 136 MB request (and its first 1 MB) to the 413,
    and the server process's RSS before and after (MB): a raw socket, so the time is the
    server's, not a client's upload."""
    import socket
    from urllib.parse import urlparse

    server, thread, url = _uvicorn_server(app)
    size = 136_000_000
    address = urlparse(url)
    try:
        before = _rss_mb()
        with socket.create_connection((address.hostname, address.port), timeout=30) as sock:
            head = (f"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {size}\r\n\r\n").encode()
            tic = time.perf_counter()
            sock.sendall(head + b"0.0," * 250_000)
            reply = sock.recv(65536)
            seconds = time.perf_counter() - tic
        assert reply.startswith(b"HTTP/1.1 413"), reply[:40]
        return seconds, before, _rss_mb()
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def serving(n_worlds: int, n_one: int, n_http: int) -> None:
    """Part 4 (see the module docstring)."""
    import os

    from pacpriv.prediction import create_app
    from pacpriv.prediction._limits import ServeLimits
    from pacpriv.storage import add_key, open_store

    X_tr, X_te, y_tr, _ = _data("breast_cancer")
    X_q = np.resize(X_te, (1000, X_te.shape[1]))
    quiet = ExecutionOptions(progress=False)
    print(f"\nserving: breast_cancer, m = {n_worlds} worlds, durable SQLite ledger, API key, "
          f"hardened noise; load {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        pp = PrivatePredictor(_model(), (X_tr, y_tr), n_worlds=n_worlds, per_query_budget=2**-20,
                              total_budget=1.0, state=Path(tmp) / "s", rng=0).fit(execution=quiet)
        print(f"  noise: {pp.noise_source}")
        tic = time.perf_counter()
        for i in range(n_one):
            pp.answer(X_q[i:i + 1])
        one = n_one / (time.perf_counter() - tic)
        tic = time.perf_counter()
        pp.answer(X_q)
        batch = len(X_q) / (time.perf_counter() - tic)
        print(f"  Python API, one-row calls     {one:>10.1f} rows/s")
        print(f"  Python API, 1,000-row batch   {batch:>10.1f} rows/s   {batch / one:.1f}× "
              "per row (target >= 20×)")
        _, token = add_key(pp.ledger.store, "bench")
        bodies = [{"rows": X_q[i:i + 1].tolist()} for i in range(n_http)]
        auth = {"Authorization": f"Bearer {token}"}
        plain = _http_rate(_plain_app(_model().fit(X_tr, y_tr), X_tr.shape[1]), bodies, {})
        print(f"  HTTP one-row, plain FastAPI   {plain:>10.1f} requests/s")
        for sync in ("FULL", "NORMAL"):  # fsync per commit, or WAL without (process crash)
            served = PrivatePredictor.load(Path(tmp) / "s", ledger=open_store(
                Path(tmp) / "s" / "ledger.db", synchronous=sync))
            ours = _http_rate(create_app(served, ServeLimits(rate=1e6, burst=10**6)), bodies,
                              auth)  # no rate limit: the plain app has none
            print(f"  HTTP one-row, pacpriv serve   {ours:>10.1f} requests/s   "
                  f"{ours / plain:.2f}× (target >= 0.8×), SQLite synchronous={sync}")
        seconds, before, after = _oversized(create_app(pp))
        print(f"  136 MB body: 413 after {seconds * 1000:.1f} ms; server RSS {before:.0f} -> "
              f"{after:.0f} MB (target < 100 ms, no growth)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="answering and fitting only, smaller sizes (about 3 minutes)")
    ap.add_argument("--worlds", type=int, default=64, help="worlds for the accuracy tables")
    ap.add_argument("--throughput-worlds", type=int, default=128)
    ap.add_argument("--queries", type=int, default=None, help="one-row Python queries")
    ap.add_argument("--http-queries", type=int, default=None, help="one-row HTTP requests")
    ap.add_argument("--epochs", type=int, default=None, help="epochs of the torch worlds")
    ap.add_argument("--n-jobs", type=int, default=None)
    ap.add_argument("--uvicorn", action="store_true",
                    help="measure HTTP against a uvicorn server on 127.0.0.1 (not TestClient)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the public worlds")
    ap.add_argument("--serving", action="store_true",
                    help="only part 4: the served path (SQLite ledger, API key, hardened noise)")
    args = ap.parse_args()
    if args.serving:
        serving(16, 200 if args.quick else 500, 200 if args.quick else 1000)
        return
    queries = args.queries or (300 if args.quick else 2000)
    http = args.http_queries or (150 if args.quick else 1000)
    epochs = args.epochs or (2 if args.quick else 10)
    throughput(args.throughput_worlds, queries, http, epochs, args.n_jobs, args.uvicorn)
    fit_time(args.throughput_worlds, epochs, args.n_jobs)
    if not args.quick:
        for name in ("breast_cancer", "digits"):
            accuracy_table(name, args.worlds, args.seed, args.n_jobs)


if __name__ == "__main__":
    main()
