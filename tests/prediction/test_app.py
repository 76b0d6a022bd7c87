"""HTTP serving: FastAPI TestClient, concurrency, and one real uvicorn process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
import pytest
from starlette.exceptions import StarletteDeprecationWarning

from pacpriv.pac.bounds._posterior import posterior_success_rate
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.prediction import PrivatePredictor, create_app

from ._helpers import cancer, logreg

QUIET = ExecutionOptions(progress=False)

B = 2.0**-8
ROOT = Path(__file__).resolve().parents[2]

with warnings.catch_warnings():  # starlette >= 1.0 prefers httpx2 for its test client; httpx works
    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from fastapi.testclient import TestClient


def _fitted(state=None, total=20 * B):
    X, y = cancer()
    return PrivatePredictor(logreg(), (X, y), n_worlds=4, per_query_budget=B,
                            total_budget=total, state=state, rng=3,
                            secret_rng=30).fit(execution=QUIET)


def test_predict_and_budget_endpoints():
    X, _ = cancer()
    pp = _fitted()
    client = TestClient(create_app(pp))
    r = client.post("/predict", json={"rows": X[:3].tolist()})
    assert r.status_code == 200, r.text
    body = r.json()
    assert np.asarray(body["outputs"]).shape == (3, 2)
    assert body["spent"] == 3 * B and body["n_answered"] == 3
    assert body["membership_bound"] == posterior_success_rate(3 * B, prior=0.5)
    assert body["bound_kind"].startswith("certified")
    budget = client.get("/budget").json()
    assert budget["remaining"] == pytest.approx(17 * B)
    assert budget["max_queries"] == 20
    assert "J" in budget["threat_model"]
    text = r.text + client.get("/budget").text
    assert "secret_index" not in text and str(pp._noise_entropy) not in text


@pytest.mark.parametrize(
    "payload",
    [
        {"rows": [[0.0, 1.0, 2.0]]},  # wrong length
        {"rows": [[0.0, 1.0, 2.0, "a"]]},  # not a number
        {"rows": [[True, True, False, True]]},  # JSON booleans (lax floats: were answered)
        {"rows": [[0.0, 1.0, 2.0, "3.0"]]},  # a numeric string
        {"rows": [[0.0, 1.0, 2.0, None]]},  # null
        {"rows": []},  # empty batch
        '{"rows": [[0.0, 1.0, 2.0, NaN]]}',  # NaN (Python's JSON extension)
        '{"rows": [[0.0, 1.0, 2.0, Infinity]]}',
        {"data": [[0.0, 1.0, 2.0, 3.0]]},  # wrong field
    ],
)
def test_malformed_rows_get_422_and_spend_nothing(payload):
    pp = _fitted()
    client = TestClient(create_app(pp))
    if isinstance(payload, str):
        r = client.post("/predict", content=payload,
                        headers={"content-type": "application/json"})
    else:
        r = client.post("/predict", json=payload)
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["msg"]  # a message, not the echoed input
    assert pp.n_answered == 0


def test_over_budget_gets_429_and_spends_nothing():
    X, _ = cancer()
    pp = _fitted(total=2 * B)
    client = TestClient(create_app(pp))
    assert client.post("/predict", json={"rows": X[:1].tolist()}).status_code == 200
    lp = pp.log_posterior
    r = client.post("/predict", json={"rows": X[:2].tolist()})
    assert r.status_code == 429
    assert "total_budget" in r.json()["detail"] and "Nothing was spent" in r.json()["detail"]
    assert client.get("/budget").json()["spent"] == B
    np.testing.assert_array_equal(pp.log_posterior, lp)


def test_concurrent_requests_spend_like_sequential_ones(tmp_path):
    X, _ = cancer()
    row = X[:1].tolist()
    conc = _fitted(tmp_path / "c")
    client = TestClient(create_app(conc))
    with ThreadPoolExecutor(max_workers=8) as pool:
        codes = list(pool.map(lambda _: client.post("/predict", json={"rows": row}).status_code,
                              range(12)))
    assert codes == [200] * 12
    seq = _fitted(tmp_path / "s")
    for _ in range(12):
        seq.answer(X[:1])
    assert conc.spent == seq.spent == 12 * B
    assert conc.n_answered == 12
    # the same query 12 times with noise indexed by query number: any serial order gives the
    # same posterior, so a lost or doubled update would show here
    np.testing.assert_array_equal(conc.log_posterior, seq.log_posterior)


SERVER = textwrap.dedent(
    """
    import sys
    import uvicorn
    from pacpriv.prediction import PrivatePredictor, create_app
    app = create_app(PrivatePredictor.load(sys.argv[1]))
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
    """
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_real_uvicorn_process(tmp_path):
    X, _ = cancer()
    _fitted(tmp_path / "s", total=3 * B)
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(tmp_path / "s"), str(port)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{url}/budget", timeout=2).raise_for_status()
                break
            except httpx.TransportError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(proc.stderr.read().decode()) from None
                time.sleep(0.2)
        r = httpx.post(f"{url}/predict", json={"rows": X[:2].tolist()}, timeout=30)
        assert r.status_code == 200 and r.json()["spent"] == 2 * B
        r = httpx.post(f"{url}/predict", json={"rows": X[:2].tolist()}, timeout=30)
        assert r.status_code == 429
        assert httpx.get(f"{url}/budget", timeout=30).json()["n_answered"] == 2
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        proc.stderr.close()
    assert PrivatePredictor.load(tmp_path / "s").spent == 2 * B  # durable on disk


def test_rows_the_models_cannot_evaluate_get_422_not_500():
    """Finite rows that overflow inside a world model: 422, nothing spent."""
    pp = _fitted()
    client = TestClient(create_app(pp))
    r = client.post("/predict", json={"rows": [[1e308, -1e308, 1e308, -1e308]]})
    assert r.status_code in (200, 422), r.text  # was 500 (overflow inside the model)
    if r.status_code == 422:
        assert "could not evaluate" in r.json()["detail"]
        assert pp.n_answered == 0
    else:
        assert np.all(np.isfinite(r.json()["outputs"]))


@pytest.mark.slow
@pytest.mark.parametrize("sig, code, twice", [("SIGINT", 130, False), ("SIGTERM", 0, False),
                                              ("SIGINT", 130, True)])
def test_pacpriv_serve_stops_cleanly_on_ctrl_c_and_sigterm(tmp_path, sig, code, twice):
    """h58: Ctrl-C (SIGINT) to the real `pacpriv serve` is a graceful shutdown with one line
    and exit 130 (the CLI's Ctrl-C convention), SIGTERM exits 0; neither logs a traceback."""
    import signal

    _fitted(tmp_path / "s", total=3 * B)
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "pacpriv", "serve", "--state",
                             str(tmp_path / "s"), "--port", str(port)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/budget", timeout=2).raise_for_status()
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.2)
        proc.send_signal(getattr(signal, sig))
        if twice:  # one Ctrl-C delivered twice (`timeout` forwards it to its child and its
            time.sleep(0.02)  # process group): still graceful (twelfth new-user pass, H45)
            proc.send_signal(getattr(signal, sig))
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    text = out.decode()
    assert proc.returncode == code, text
    assert "Traceback" not in text and "Error" not in text and "CancelledError" not in text
    assert "Application shutdown complete" in text
    assert ("pacpriv: interrupted; the server stopped" in text) == (sig == "SIGINT")


def test_a_later_second_ctrl_c_forces_the_exit_without_a_traceback():
    """A second Ctrl-C after ``SAME_SIGNAL_S`` forces the exit (uvicorn's convention); the
    lifespan's CancelledError traceback that a forced exit logs is dropped, other errors are
    kept. A repeat within ``SAME_SIGNAL_S`` is the same interrupt."""
    import logging
    import signal

    import uvicorn

    from pacpriv.prediction import _app

    server = _app._quiet_server(uvicorn)(uvicorn.Config(lambda *a: None))
    server.handle_exit(signal.SIGINT, None)
    server.handle_exit(signal.SIGINT, None)  # the same Ctrl-C, delivered twice
    assert server.should_exit and not server.force_exit
    assert server.stopped_by == signal.SIGINT
    server._first_signal_at -= _app.SAME_SIGNAL_S  # a later, deliberate second Ctrl-C
    server.handle_exit(signal.SIGINT, None)
    assert server.force_exit
    noise = logging.LogRecord("uvicorn.error", logging.ERROR, __file__, 1,
                              "Traceback ...\nasyncio.exceptions.CancelledError", None, None)
    other = logging.LogRecord("uvicorn.error", logging.ERROR, __file__, 1,
                              "Exception in ASGI application", None, None)
    logger = logging.getLogger("uvicorn.error")
    assert not logger.filter(noise) and logger.filter(other)
    logger.removeFilter(server._forced_exit_noise)
