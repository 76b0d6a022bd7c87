"""A JSON number beyond the float64 range is a located one-line 422 naming the field path,
never echoing the number (issue 35, eleventh new-user pass #5): a 100,000-digit integer was a
bare 400 "There was an error parsing the body"; ``1e400`` a row's "non-finite value"."""

from __future__ import annotations

import warnings

import pytest
from starlette.exceptions import StarletteDeprecationWarning

pytest.importorskip("fastapi")

from pacpriv.pac.engine import ExecutionOptions
from pacpriv.prediction import PrivatePredictor, create_app
from pacpriv.prediction._limits import number_range_error

from ._helpers import cancer, logreg

with warnings.catch_warnings():
    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from fastapi.testclient import TestClient

BIG = "9" * 100_000


@pytest.fixture(scope="module")
def client():
    X, y = cancer()
    pp = PrivatePredictor(logreg(), (X, y), n_worlds=4, per_query_budget=2.0**-8,
                          total_budget=2.0**-4, rng=3, secret_rng=30
                          ).fit(execution=ExecutionOptions(progress=False))
    return TestClient(create_app(pp)), pp


@pytest.mark.parametrize("body, loc, what", [
    ('{"rows": [[' + BIG + ", 1, 0, 0]]}", ["body", "rows", "0", "0"], "100000 digits"),
    ('{"rows": [[1, 0, 0, 0], [0, -' + "9" * 5000 + ", 0, 0]]}", ["body", "rows", "1", "1"],
     "5000 digits"),
    ('{"rows": [[' + "9" * 400 + ", 1, 0, 0]]}", ["body", "rows", "0", "0"], "400 digits"),
    ('{"rows": [[0, 1e400, 0, 0]]}', ["body", "rows", "0", "1"], "overflows to infinity"),
    ('{"rows": [[0, 0, -' + "9" * 400 + '.5, 0]]}', ["body", "rows", "0", "2"],
     "overflows to infinity"),
    ('{"rows": [[0, 1, 0, 0]], "extra": ' + BIG + "}", ["body", "extra"], "100000 digits"),
])
def test_out_of_range_numbers_are_located_422s_and_charge_nothing(client, body, loc, what):
    c, pp = client
    spent = pp.budget()["spent"]
    r = c.post("/predict", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422
    (err,) = r.json()["detail"]
    assert err["loc"] == loc and what in err["msg"] and "float64 range" in err["msg"]
    assert "\n" not in err["msg"] and "999" not in r.text and "parsing the body" not in r.text
    assert pp.budget()["spent"] == spent


def test_long_but_representable_numbers_pass_and_bad_json_is_left_to_the_parser():
    assert number_range_error(b'{"rows": [[0.' + b"1" * 100_000 + b", 1e-400, 1e308]]}") is None
    assert number_range_error(b'{"rows": [[1, 2') is None  # the application's json_invalid
    assert number_range_error(b'{"rows": [[' + b"9" * 309 + b"]]}")[0]["loc"] == [
        "body", "rows", "0", "0"]
