"""Tests for pacpriv.registry: built-in names, module/file specs, registration errors."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from pacpriv import registry
from pacpriv.datasets import load_dataset
from pacpriv.registry import (
    MECHANISMS,
    Registry,
    available_mechanisms,
    register_mechanism,
    registry_table,
    resolve_mechanism,
)

pytestmark = pytest.mark.usefixtures("one_native_thread")

IRIS = load_dataset("iris")
#: Every registered mechanism (a new one is tested here without editing this file).
BUILTINS = MECHANISMS.names()
# Expected output length on iris (p = 4, K = 3) from each mechanism's documented layout.
IRIS_DIMS = {
    "mean": 4, "median": 4, "histogram": 40, "kmeans": 12, "logistic": 15, "linear_svm": 15,
    "pca": 8, "decision_tree": 48, "mlp": 4 * 8 + 8 + 8 * 3 + 3,
}  # fmt: skip

MECH_FILE = """
import numpy as np

def column_sums(subset, *, rng=None):
    X = subset[0] if isinstance(subset, tuple) else subset
    return np.asarray(X, dtype=float).sum(axis=0)

NOT_CALLABLE = 3
"""


def test_builtin_names():
    """The nine reference mechanisms are registered; available_mechanisms sorts them."""
    assert set(IRIS_DIMS) <= set(BUILTINS)
    assert available_mechanisms() == tuple(sorted(BUILTINS))


@pytest.mark.parametrize("name", BUILTINS)
def test_builtin_on_iris_shape_and_pickle(name):
    """Each built-in resolves for iris, returns the documented shape, and pickles."""
    if name == "mlp":
        pytest.importorskip("torch")
    f, resolved = resolve_mechanism(name, dataset_info=IRIS.info())
    assert resolved == name
    out = f(IRIS.pool)
    assert out.ndim == 1 and out.shape == (IRIS_DIMS.get(name, out.size),)
    assert np.all(np.isfinite(out))
    pickle.dumps(f)


def test_mean_uses_public_ranges():
    """'mean' clips to the dataset's public ranges: on iris it is the ordinary mean."""
    f, _ = resolve_mechanism("mean", dataset_info=IRIS.info())
    np.testing.assert_allclose(f(IRIS.pool), IRIS.X.mean(axis=0))


def test_kmeans_uses_class_count():
    """'kmeans' uses k = number of classes (10 for digits)."""
    digits = load_dataset("digits")
    f, _ = resolve_mechanism("kmeans", dataset_info=digits.info())
    assert f.n_clusters == 10


def test_unsupervised_without_info_uses_defaults():
    """Without dataset info, 'mean' falls back to the data-independent box [-1, 1]."""
    f, _ = resolve_mechanism("mean")
    np.testing.assert_array_equal(f(np.array([[5.0, -5.0]])), [1.0, -1.0])


def test_supervised_without_classes_rejected():
    """Supervised built-ins need a labelled classification dataset."""
    with pytest.raises(ValueError, match="'logistic' is supervised"):
        resolve_mechanism("logistic", dataset_info=load_dataset("diabetes").info())


def test_unknown_name_lists_available():
    """An unknown name raises ValueError listing the registered names."""
    with pytest.raises(ValueError, match=r"unknown mechanism 'nope'; registered: .*kmeans"):
        resolve_mechanism("nope")


def test_module_function_spec():
    """'module:function' imports the attribute and returns it unchanged."""
    f, name = resolve_mechanism("pacpriv.mechanisms.kmeans:kmeans_centers")
    from pacpriv.mechanisms.kmeans import kmeans_centers

    assert f is kmeans_centers and name == "pacpriv.mechanisms.kmeans:kmeans_centers"


def test_dotted_attribute_spec():
    """Dotted attributes after the colon are followed."""
    f, _ = resolve_mechanism("pacpriv.mechanisms.kmeans:_DEFAULT.__call__")
    assert f(np.zeros((0, 2))).shape == (6,)


def test_missing_module():
    """A module that cannot be found is a ValueError naming it."""
    with pytest.raises(ValueError, match="cannot import mechanism module 'no_such_mod_xyz'"):
        resolve_mechanism("no_such_mod_xyz:f")


def test_missing_attribute():
    """A missing attribute is a ValueError."""
    with pytest.raises(ValueError, match="has no attribute 'nothing_here'"):
        resolve_mechanism("pacpriv.mechanisms.mean:nothing_here")


def test_not_callable_attribute(tmp_path):
    """An attribute that is not callable is a TypeError."""
    path = tmp_path / "mech.py"
    path.write_text(MECH_FILE)
    with pytest.raises(TypeError, match="non-callable int"):
        resolve_mechanism(f"{path}:NOT_CALLABLE")


def test_file_spec(tmp_path):
    """'path/to/file.py:function' loads the file and returns the function."""
    path = tmp_path / "mech.py"
    path.write_text(MECH_FILE)
    f, name = resolve_mechanism(f"{path}:column_sums")
    np.testing.assert_array_equal(f(np.ones((3, 2))), [3.0, 3.0])
    assert name == f"{path}:column_sums"


def test_file_spec_runs_in_loky_workers(tmp_path):
    """A file-loaded mechanism ships to loky worker processes (pickled by value)."""
    from joblib import Parallel, delayed

    path = tmp_path / "mech.py"
    path.write_text(MECH_FILE)
    f, _ = resolve_mechanism(f"{path}:column_sums")
    outs = Parallel(n_jobs=2, backend="loky")(delayed(f)(np.full((2, 2), k)) for k in range(3))
    np.testing.assert_array_equal(np.array(outs), [[0, 0], [2, 2], [4, 4]])


def test_missing_file():
    """A file spec naming a missing file raises FileNotFoundError."""
    with pytest.raises(FileNotFoundError, match="mechanism file not found"):
        resolve_mechanism("does/not/exist.py:f")


def test_callable_spec_passes_through():
    """A callable is returned as is, named by __name__."""
    from pacpriv.mechanisms import clipped_mean

    assert resolve_mechanism(clipped_mean) == (clipped_mean, "clipped_mean")


def test_bad_spec_type():
    """A spec that is neither str nor callable is a TypeError."""
    with pytest.raises(TypeError, match="`spec` must be a str or a callable"):
        resolve_mechanism(3)


@pytest.fixture
def scratch():
    """Registrations of the test are undone afterwards."""
    with registry.MECHANISMS.temporary():
        yield


def test_register_and_force(scratch):
    """Registering a new name works; re-registering needs force=True."""

    def factory(info):
        return lambda subset, *, rng=None: np.zeros(2)

    register_mechanism("zeros2", factory)
    f, _ = resolve_mechanism("zeros2")
    np.testing.assert_array_equal(f(None), [0.0, 0.0])
    with pytest.raises(ValueError, match="'zeros2' is already registered; pass force=True"):
        register_mechanism("zeros2", factory)
    register_mechanism("zeros2", lambda info: (lambda subset, *, rng=None: np.ones(1)), force=True)
    np.testing.assert_array_equal(resolve_mechanism("zeros2")[0](None), [1.0])


def test_register_builtin_needs_force(scratch):
    """Built-in names are protected the same way."""
    with pytest.raises(ValueError, match="'mean' is already registered"):
        register_mechanism("mean", lambda info: None)


def test_register_name_with_colon():
    """Names with ':' are reserved for module specs."""
    with pytest.raises(ValueError, match="must not contain ':'"):
        register_mechanism("a:b", lambda info: None)


def test_register_non_callable_factory():
    """The factory must be callable."""
    with pytest.raises(TypeError, match="`factory` must be callable"):
        register_mechanism("x", 3)


def test_factory_returning_non_callable(scratch):
    """A factory that returns a non-callable is reported when resolving."""
    register_mechanism("broken", lambda info: 5)
    with pytest.raises(TypeError, match="factory of 'broken' returned a non-callable"):
        resolve_mechanism("broken")


# --- the generic Registry -----------------------------------------------------------------


def test_registry_register_get_names_choices():
    """Names keep registration order; aliases resolve but are not listed; errors list names."""
    r: Registry = Registry("colour", argument="paint")
    assert r.register("red", 1, aliases=("crimson",), doc="warm") == 1
    r.register("blue", 2)
    assert r.names() == r.choices() == ("red", "blue") and len(r) == 2
    assert r.get("crimson") == r["red"] == 1 and "crimson" in r and "green" not in r
    assert r.doc("red") == "warm" and r.doc("crimson") == "warm"
    with pytest.raises(ValueError, match=r"`paint` must be one of red, blue; got 'green'"):
        r.get("green")
    with pytest.raises(ValueError, match="'crimson' is already registered"):
        r.register("crimson", 3)
    with pytest.raises(ValueError, match="must not contain ':'"):
        r.register("a:b", 3)
    with r.temporary():
        r.register("green", 3)
        assert r.names() == ("red", "blue", "green")
    assert r.names() == ("red", "blue") and "green" not in r
    r.unregister("red")
    assert r.names() == ("blue",) and "crimson" not in r


def test_registry_from_dict_keeps_init_fields():
    """from_dict calls a dataclass with its init fields only (derived keys are ignored)."""
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Box:
        """A box of a given width."""

        width: float = 1.0

    r: Registry = Registry("box")
    r.register("box", Box)
    assert r.from_dict({"name": "box", "width": 2.5, "area": 6.25}) == Box(2.5)
    with pytest.raises(ValueError, match="`box` must be one of box; got None"):
        r.from_dict({"width": 1})
    table = registry_table(r)
    assert "``box``" in table and "A box of a given width." in table


@pytest.mark.parametrize("name", BUILTINS)
def test_every_registered_mechanism_is_seeded_and_deterministic(name):
    """The contract of a registered mechanism (a new one is covered without a test edit):
    the same subset and seed give the same finite float64 output."""
    if name == "mlp":
        pytest.importorskip("torch")
    f, _ = resolve_mechanism(name, dataset_info=IRIS.info())
    half = np.random.default_rng(1).random(IRIS.n_records) < 0.5
    subset = (IRIS.X[half], IRIS.y[half])
    a = f(subset if IRIS.y is not None else IRIS.X[half], rng=np.random.default_rng(5))
    b = f(subset if IRIS.y is not None else IRIS.X[half], rng=np.random.default_rng(5))
    assert a.dtype == np.float64 and np.all(np.isfinite(a))
    np.testing.assert_array_equal(a, b)


def test_docs_rows_are_one_line_summaries_without_citation_marks():
    """A docs row is the docstring's first paragraph on one line; ``[2]_`` marks would be
    dangling references in the generated table."""
    from pacpriv.pac.noise import RULE_CLASSES

    table = registry_table(RULE_CLASSES)
    assert "]_" not in table
    assert "(Thm 1; an estimate)" in table
    assert "mechanism with probability ``>= confidence`` over the simulation." in table
