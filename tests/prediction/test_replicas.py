"""Two `pacpriv serve` replicas on one PostgreSQL ledger (a real server, started here): bounded
concurrent clients with several keys and idempotent retries get exactly the answers that the
budget and the quotas allow; a replica killed with SIGKILL mid-load loses no spend and doubles
none; a restarted replica continues."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from pacpriv.pac.engine import ExecutionOptions
from pacpriv.prediction import PrivatePredictor

from ._helpers import cancer, logreg
from ._postgres import PostgresServer, _free_ports

QUIET = ExecutionOptions(progress=False)

psycopg = pytest.importorskip("psycopg")  # the `postgres` extra

B = 2.0**-8
ROOT = Path(__file__).resolve().parents[2]
SERVER = textwrap.dedent(
    """
    import sys
    import uvicorn
    from pacpriv.prediction import PrivatePredictor, create_app
    from pacpriv.prediction._limits import ServeLimits
    pp = PrivatePredictor.load(sys.argv[1], ledger=sys.argv[3])
    uvicorn.run(create_app(pp, ServeLimits(rate=1000.0, burst=1000)), host="127.0.0.1",
                port=int(sys.argv[2]), log_level="warning")
    """
)


@pytest.fixture(scope="module")
def postgres():
    server = PostgresServer().start()
    try:
        yield server
    finally:
        server.stop()


def _start(state, port, url):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-c", SERVER, str(state), str(port), url],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _wait(proc, url):
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(f"{url}/budget", timeout=2, headers=HEADERS).raise_for_status()
            return
        except (httpx.TransportError, httpx.HTTPStatusError):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(proc.stderr.read().decode()[-2000:]) from None
            time.sleep(0.2)


HEADERS: dict = {}


@pytest.mark.slow
def test_two_replicas_one_postgres_ledger_sigkill_mid_load(tmp_path, postgres):
    from pacpriv.pac.bounds._ledger import PrivacyLedger
    from pacpriv.storage import add_key, open_store

    X, y = cancer()
    state = tmp_path / "s"
    PrivatePredictor(logreg(), (X, y), n_worlds=4, per_query_budget=B, total_budget=40 * B,
                     state=state, rng=5).fit(execution=QUIET)
    store = open_store(postgres.url)
    keys = {"a": add_key(store, "a", quota=10 * B), "b": add_key(store, "b", quota=10 * B),
            "c": add_key(store, "c")}
    HEADERS["Authorization"] = f"Bearer {keys['c'][1]}"
    ports = _free_ports(2)  # distinct (two bind(0) in a row may give one port)
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    procs = [_start(state, p, postgres.url) for p in ports]
    killed = threading.Event()
    answered = []
    lock = threading.Lock()

    def ask(job):
        name, i = job
        headers = {"Authorization": f"Bearer {keys[name][1]}", "Idempotency-Key": f"{name}-{i}"}
        body = {"rows": X[i:i + 1].tolist()}
        results = []
        for attempt in range(2 if i % 4 == 0 else 1):  # every 4th request is sent twice
            for hop in range(6):  # fail over to the other replica on a dead connection
                url = urls[(i + attempt + hop) % 2]
                if url == urls[0] and killed.is_set():
                    continue
                try:
                    r = httpx.post(f"{url}/predict", json=body, headers=headers, timeout=30)
                except httpx.TransportError:
                    continue
                results.append((r.status_code, r.json().get("outputs")))
                if r.status_code == 200:
                    with lock:
                        answered.append(name)
                        if len(answered) == 12 and not killed.is_set():
                            procs[0].send_signal(signal.SIGKILL)  # mid-load
                            killed.set()
                break
        assert results, f"request {name}-{i} got no answer from either replica"
        assert all(r == results[0] for r in results)  # a retry returns the same answer
        return name, results[0][0]

    try:
        for proc, url in zip(procs, urls, strict=True):
            _wait(proc, url)
        jobs = [(name, i) for i in range(30) for name in ("a", "b", "c") if name == "c" or i < 15]
        with ThreadPoolExecutor(max_workers=6) as pool:
            codes = list(pool.map(ask, jobs))
        assert killed.is_set() and procs[0].wait(timeout=30) == -signal.SIGKILL
        ok = {name: sum(1 for n, c in codes if n == name and c == 200) for name in keys}
        assert {c for _, c in codes} <= {200, 429}
        # exactly what the budget and the quotas allow: 40 rows in all, at most 10 for a and b
        assert sum(ok.values()) == 40 and ok["a"] <= 10 and ok["b"] <= 10
        assert ok["a"] + ok["b"] + ok["c"] == 40
        ledger_rows = {k.name: k.rows for k in store.keys()}
        assert ledger_rows == ok  # no lost and no doubled spend, per key
        pp = PrivatePredictor.load(state, ledger=postgres.url)
        ledger = PrivacyLedger(store=open_store(postgres.url), scope=pp.ledger.scope)
        assert pp.n_answered == 40 and pp.spent == 40 * B
        assert ledger.spent == math.fsum(e.mi if e.kind == "charge" else -e.mi
                                         for e in ledger.releases) == 40 * B
        # a restarted replica continues the same ledger
        procs[0] = _start(state, ports[0], postgres.url)
        _wait(procs[0], urls[0])
        budget = httpx.get(f"{urls[0]}/budget", headers=HEADERS, timeout=30).json()
        assert budget["n_answered"] == 40 and budget["remaining"] == 0.0
        r = httpx.post(f"{urls[0]}/predict", json={"rows": X[:1].tolist()}, headers=HEADERS,
                       timeout=30)
        assert r.status_code == 429
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=30)
            proc.stderr.close()
        store.close()
