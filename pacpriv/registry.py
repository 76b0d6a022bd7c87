"""Registries: the one place an extension point (sampler, noise rule, attack, mechanism,
estimator) is named, and the mechanism zoo's factories.

:class:`Registry` maps names to entries (classes or factories) in registration order. Every
consumer -- the CLI's ``choices=``, the docs tables (:func:`registry_table`), the parametrised
tests, ``from_dict`` deserialisation -- reads the registry, so adding an entry is one
``register`` call beside its definition.

Mechanisms
----------
A *factory* is ``factory(dataset_info: DatasetInfo | None) -> mechanism``: it turns the public
facts of a data pool (:class:`pacpriv.datasets.DatasetInfo`: number of features, class list,
public feature ranges) into a configured mechanism ``f(subset, *, rng=None) -> (d,)``. Built-in
factories (the reference mechanisms of :mod:`pacpriv.mechanisms`):

==================  ===========================================================================
name                configuration from ``dataset_info``
==================  ===========================================================================
``mean``            clipped mean over the public feature ranges (``[-1, 1]`` without info)
``median``          clipped median, same bounds
``histogram``       10 equal bins per feature over the public ranges (``[-1, 1]`` without info)
``kmeans``          k = number of classes (3 without classes), ``public_seed`` 0, 10 restarts
``logistic``        public class list, features standardised to ``[-1, 1]`` by the public ranges
``linear_svm``      as ``logistic``, ``public_seed`` 0
``pca``             ``min(2, p)`` components, sign rule
``decision_tree``   depth 3 on 4 equal bins per feature; 16 query points drawn uniformly in the
                    public box with ``public_seed`` 0 (also the tree's seed)
``mlp``             8 hidden units, 50 full-batch Adam steps, ``public_seed`` 0 (needs torch)
==================  ===========================================================================

Supervised built-ins need ``dataset_info`` with a class list and raise ``ValueError`` otherwise.
The public ranges are those documented in :mod:`pacpriv.datasets` (published ranges for the
bundled datasets, the whole pool's range for files).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib
import importlib.util
import os
import re
import sys
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

import numpy as np

from pacpriv._files import check_input_file
from pacpriv._optional import import_torch

if TYPE_CHECKING:
    from pacpriv.datasets import DatasetInfo

__all__ = [
    "MECHANISMS",
    "MechanismFactory",
    "Registry",
    "all_registries",
    "available_mechanisms",
    "load_object",
    "register_mechanism",
    "registry_table",
    "resolve_mechanism",
]

T = TypeVar("T")


class Registry(Generic[T]):
    """Names -> entries of one extension point, in registration order.

    Parameters
    ----------
    kind : str
        What an entry is (``"sampler"``, ``"noise rule"``...), for the error messages.
    argument : str, optional
        The argument or flag that takes a name (``"sampler"``, ``"rule"``); default ``kind``.
    key : str, default "name"
        The key of the name in a ``to_dict()`` description (:meth:`from_dict`).
    callable_entries : bool, default False
        Entries must be callable (a class or a factory): :meth:`register` refuses anything else
        at once, instead of a later failure where the entry is used. pacpriv's own extension
        points set it.

    Examples
    --------
    >>> from pacpriv.registry import Registry
    >>> colours = Registry("colour")
    >>> colours.register("red", 0xFF0000)
    16711680
    >>> colours.names(), colours.get("red")
    (('red',), 16711680)
    """

    #: Every registry created in this process (weakly held), for :func:`all_registries`.
    _live: ClassVar[weakref.WeakSet[Registry]] = weakref.WeakSet()

    def __init__(self, kind: str, *, argument: str | None = None, key: str = "name",
                 callable_entries: bool = False) -> None:
        self.kind = kind
        self.callable_entries = callable_entries
        self.argument = argument or kind
        self.key = key
        self._entries: dict[str, T] = {}
        self._aliases: dict[str, str] = {}
        self._docs: dict[str, str] = {}
        Registry._live.add(self)

    def register(self, name: str, entry: T, *, aliases: tuple[str, ...] = (),
                 doc: str | None = None, force: bool = False) -> T:
        """Register ``entry`` under ``name`` (and ``aliases``); returns ``entry``.

        Parameters
        ----------
        name : str
            Non-empty, without ``":"`` (reserved for ``module:attr`` specs).
        entry : object
            The class or factory the name stands for.
        aliases : tuple of str
            Other names accepted by :meth:`get` (not listed by :meth:`names`).
        doc : str, optional
            One line for the docs table (default: the first line of the entry's docstring).
        force : bool
            Replace an existing registration.

        Raises
        ------
        TypeError
            If ``name`` is not a string, or ``entry`` is not callable where the registry
            needs a class or factory (``callable_entries``).
        ValueError
            If ``name`` is empty, contains ``":"``, or is taken and ``force`` is false.
        """
        if self.callable_entries and not callable(entry):
            raise TypeError(f"a {self.kind} entry must be a class or a factory (callable); got "
                            f"{type(entry).__name__}.")
        for key in (name, *aliases):
            if not isinstance(key, str):
                raise TypeError(f"`name` must be a str; got {type(key).__name__}.")
            if not key or ":" in key:
                raise ValueError(f"`name` must be non-empty and must not contain ':'; got {key!r}.")
            if key in self and not force:
                raise ValueError(f"{self.kind} {key!r} is already registered; pass force=True "
                                 "to replace it.")
        self._entries[name] = entry
        self._aliases.update({a: name for a in aliases})
        self._docs[name] = doc if doc is not None else _summary(entry)
        return entry

    def unregister(self, name: str) -> None:
        """Remove ``name`` and its aliases (tests, plugins that unload)."""
        self._entries.pop(name, None)
        self._docs.pop(name, None)
        self._aliases = {a: n for a, n in self._aliases.items() if n != name}

    @contextlib.contextmanager
    def temporary(self) -> Iterator[Registry[T]]:
        """Registrations made inside the ``with`` block are undone on exit (tests, demos)."""
        saved = dict(self._entries), dict(self._aliases), dict(self._docs)
        try:
            yield self
        finally:
            self._entries, self._aliases, self._docs = saved

    def names(self) -> tuple[str, ...]:
        """Registered names in registration order (aliases excluded)."""
        return tuple(self._entries)

    def choices(self) -> tuple[str, ...]:
        """The names a CLI flag accepts (``argparse`` ``choices=``): :meth:`names`."""
        return self.names()

    def doc(self, name: str) -> str:
        """The one-line description of ``name`` (docs tables, ``--help``)."""
        return self._docs[self._aliases.get(name, name)]

    def get(self, name: str) -> T:
        """The entry of ``name`` (or of an alias).

        Raises
        ------
        ValueError
            For an unknown name; the message names the argument and lists the registered names.
        """
        key = self._aliases.get(name, name) if isinstance(name, str) else None
        if key is None or key not in self._entries:
            raise ValueError(f"`{self.argument}` must be one of {', '.join(self.names())}; "
                             f"got {name!r}.")
        return self._entries[key]

    def from_dict(self, description: dict) -> Any:
        """Rebuild an entry from ``{key: name, **parameters}`` (e.g. a ``to_dict()``).

        The entry's own ``from_dict`` classmethod is used when it has one; a dataclass gets
        the keys that are its init fields (derived keys such as ``"prior"`` are ignored);
        any other entry is called with every key but :attr:`key`.

        Raises
        ------
        ValueError
            If ``description`` has no registered name under :attr:`key`.
        """
        if not isinstance(description, dict):
            raise TypeError(f"`description` must be a dict; got {type(description).__name__}.")
        entry: Any = self.get(description.get(self.key))  # type: ignore[arg-type]
        params = {k: v for k, v in description.items() if k != self.key}
        if hasattr(entry, "from_dict"):
            return entry.from_dict(description)
        if dataclasses.is_dataclass(entry):
            fields = {f.name for f in dataclasses.fields(entry) if f.init}
            params = {k: v for k, v in params.items() if k in fields}
        return entry(**params)

    def __contains__(self, name: object) -> bool:
        return name in self._entries or name in self._aliases

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __getitem__(self, name: str) -> T:
        return self.get(name)

    def items(self) -> list[tuple[str, T]]:
        """``(name, entry)`` pairs in registration order."""
        return list(self._entries.items())

    def values(self) -> list[T]:
        """Entries in registration order."""
        return list(self._entries.values())

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self.names())})"


def _summary(entry: Any) -> str:
    """The first paragraph of ``entry``'s docstring on one line, without citation marks."""
    text = (getattr(entry, "__doc__", None) or "").strip().split("\n\n")[0]
    return re.sub(r"\[\w+\]_\s*", "", " ".join(text.split()))


def registry_table(registry: Registry) -> str:
    """The registry as a reStructuredText list table (name, description) for the docs."""
    lines = [f".. list-table:: {registry.kind}s (``{registry.argument}``)", "   :header-rows: 1",
             "", "   * - name", "     - description"]
    for name in registry.names():
        lines += [f"   * - ``{name}``", f"     - {registry.doc(name) or '-'}"]
    return "\n".join(lines) + "\n"


MechanismFactory = Callable[["DatasetInfo | None"], Callable]

#: ``public_seed`` of every registered mechanism that has one (k-means, linear SVM, decision tree,
#: MLP) and of the decision-tree query points: part of the mechanism's definition, not secret.
PUBLIC_SEED = 0


def _box(info: DatasetInfo | None) -> tuple[np.ndarray, np.ndarray]:
    if info is None:
        return np.array([-1.0]), np.array([1.0])
    return np.asarray(info.feature_low, dtype=float), np.asarray(info.feature_high, dtype=float)


def _scaling(info: DatasetInfo) -> tuple[np.ndarray, np.ndarray]:
    from pacpriv.datasets.scaling import unit_box

    return unit_box(*_box(info))


def _edges(info: DatasetInfo | None, n_bins: int) -> list[np.ndarray]:
    low, high = _box(info)
    return [
        np.linspace(lo, hi, n_bins + 1) if hi > lo else np.linspace(lo - 0.5, lo + 0.5, n_bins + 1)
        for lo, hi in zip(low, high, strict=True)
    ]


def _classes(info: DatasetInfo | None, name: str) -> tuple:
    if info is None or info.classes is None or len(info.classes) < 2:
        raise ValueError(
            f"mechanism {name!r} is supervised: it needs a labelled classification dataset "
            "(dataset_info with at least 2 classes)."
        )
    if 2 < len(info.classes) and 2 * len(info.classes) > info.n_records:  # about one record
        # per class: not labels (pacpriv._validation.check_class_labels, the same rule)
        from pacpriv._validation import class_labels_message

        raise ValueError(f"mechanism {name!r} is supervised: " + class_labels_message(
            f"the label column of {info.name!r}", f"mechanism {name!r}", len(info.classes),
            info.n_records) + ".")
    return tuple(info.classes)


def _mean(info):
    from pacpriv.mechanisms import make_clipped_mean

    return make_clipped_mean(low=_box(info)[0], high=_box(info)[1])


def _median(info):
    from pacpriv.mechanisms import make_clipped_median

    return make_clipped_median(low=_box(info)[0], high=_box(info)[1])


def _histogram(info):
    from pacpriv.mechanisms import feature_histogram, make_feature_histogram

    return feature_histogram if info is None else make_feature_histogram(edges=_edges(info, 10))


def _kmeans(info):
    from pacpriv.mechanisms import make_kmeans

    k = len(info.classes) if info is not None and info.classes else 3
    return make_kmeans(n_clusters=k, public_seed=PUBLIC_SEED)


def _logistic(info):
    from pacpriv.mechanisms import make_logistic

    center, scale = _scaling(info) if info is not None else (None, None)
    return make_logistic(classes=_classes(info, "logistic"), center=center, scale=scale)


def _linear_svm(info):
    from pacpriv.mechanisms import make_linear_svm

    center, scale = _scaling(info) if info is not None else (None, None)
    return make_linear_svm(
        classes=_classes(info, "linear_svm"), center=center, scale=scale, public_seed=PUBLIC_SEED
    )


def _pca(info):
    from pacpriv.mechanisms import make_pca

    return make_pca(n_components=2 if info is None else min(2, info.n_features))


def _decision_tree(info):
    from pacpriv.mechanisms import make_decision_tree

    classes = _classes(info, "decision_tree")
    low, high = _box(info)
    queries = np.random.default_rng(PUBLIC_SEED).uniform(low, high, size=(16, low.size))
    return make_decision_tree(
        edges=_edges(info, 4), query_points=queries, classes=classes, public_seed=PUBLIC_SEED
    )


def _mlp(info):
    from pacpriv.mechanisms import make_mlp

    import_torch("the 'mlp' mechanism")  # fail before any trial, with the install hint

    center, scale = _scaling(info) if info is not None else (None, None)
    return make_mlp(
        classes=_classes(info, "mlp"), center=center, scale=scale, public_seed=PUBLIC_SEED
    )


#: Mechanism names -> factories (the zoo of :mod:`pacpriv.mechanisms`).
MECHANISMS: Registry[MechanismFactory] = Registry("mechanism", callable_entries=True)
for _name, _factory, _doc in (
    ("mean", _mean, "clipped mean over the public feature ranges"),
    ("median", _median, "clipped median over the public feature ranges"),
    ("histogram", _histogram, "10 equal bins per feature over the public ranges"),
    ("kmeans", _kmeans, "k-means centres, k = number of classes"),
    ("logistic", _logistic, "logistic-regression coefficients (supervised)"),
    ("linear_svm", _linear_svm, "linear SVM coefficients (supervised)"),
    ("pca", _pca, "top principal components, sign rule"),
    ("decision_tree", _decision_tree, "depth-3 tree's answers on 16 public query points"),
    ("mlp", _mlp, "8-unit MLP weights (needs torch)"),
):
    MECHANISMS.register(_name, _factory, doc=_doc)


def all_registries() -> tuple[Registry, ...]:
    """Every :class:`Registry` alive in this process (samplers, rules, attacks, mechanisms,
    estimators, shapes...), e.g. to undo a test's or a demo's registrations with
    :meth:`Registry.temporary` on each."""
    return tuple(Registry._live)


def available_mechanisms() -> tuple[str, ...]:
    """Registered mechanism names, sorted."""
    return tuple(sorted(MECHANISMS.names()))


def register_mechanism(name: str, factory: MechanismFactory, *, force: bool = False) -> None:
    """Register ``factory`` under ``name`` in :data:`MECHANISMS`.

    Parameters
    ----------
    name : str
        Non-empty, without ``":"`` (reserved for ``module:function`` specs).
    factory : callable
        ``factory(dataset_info: DatasetInfo | None) -> mechanism``.
    force : bool
        Replace an existing registration.

    Raises
    ------
    TypeError
        If ``name`` is not a string or ``factory`` is not callable.
    ValueError
        If ``name`` is empty, contains ``":"``, or is taken and ``force`` is false.
    """
    if not callable(factory):
        raise TypeError(f"`factory` must be callable; got {type(factory).__name__}.")
    MECHANISMS.register(name, factory, force=force)


#: Private module name of each loaded ``file.py`` -> the file's name as the user wrote it
#: (without its folders), so that errors and warnings say ``funcs.py:mean``.
_USER_FILES: dict[str, str] = {}
_USER_MODULE = re.compile(r"_pacpriv_user_mechanism_[0-9a-f]{16}\.")


def user_facing_name(name: str) -> str:
    """``name`` (``"module.qualname"``, or a message holding one) with the private module name
    of a loaded ``file.py`` replaced by ``file.py:``, the way the user wrote the spec.

    Examples
    --------
    >>> user_facing_name("numpy.mean")
    'numpy.mean'
    """
    return _USER_MODULE.sub(
        lambda m: f"{_USER_FILES.get(m.group(0)[:-1], 'file.py')}:", name)


def loaded_file_of(name: str) -> str | None:
    """The file name (without folders) of the loaded ``file.py`` that ``name``
    (``"module.qualname"``) comes from, ``None`` for a module or a file not loaded here."""
    m = _USER_MODULE.match(name)
    return _USER_FILES.get(m.group(0)[:-1]) if m else None


def _load_file(path_text: str, what: str):
    path = check_input_file(path_text, f"{what} file")  # missing, a folder, unreadable
    # A private module name, removed from sys.modules after loading, so cloudpickle (loky)
    # ships the function by value to worker processes, which cannot import the file by name.
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    mod_name = f"_pacpriv_user_mechanism_{digest}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise ValueError(f"cannot load {str(path)!r} as a Python module.")
    module = importlib.util.module_from_spec(spec)
    _USER_FILES[mod_name] = path.name
    sys.modules[mod_name] = module
    try:
        with _user_code(what, path_text):
            spec.loader.exec_module(module)
    finally:
        sys.modules.pop(mod_name, None)
    return module


@contextlib.contextmanager
def _user_code(what: str, target: str):
    """Run user module code: its prints go to stderr (``--json`` stays valid on stdout), and
    what it raises (or ``sys.exit``) becomes a :class:`~pacpriv.exceptions.UserCodeError`
    naming the spec but not the message (it may quote record values)."""
    from pacpriv.exceptions import WITHHELD_NOTE, UserCodeError
    from pacpriv.pac.engine._isolation import output_to_stderr

    try:
        with output_to_stderr():
            yield
    except SystemExit as err:
        code = (f"sys.exit({err.code!r})" if err.code is None or isinstance(err.code, int)
                else "sys.exit() with a message (withheld: it may quote record values)")
        raise UserCodeError(f"loading the {what} module {target!r} called {code} at import "
                            f"time{_line_in(err, target)}.") from err
    except (ModuleNotFoundError, SyntaxError):
        raise
    except Exception as err:
        raise UserCodeError(f"loading the {what} module {target!r} raised "
                            f"{type(err).__qualname__} at import time{_line_in(err, target)}. "
                            f"{WITHHELD_NOTE}") from err


def _line_in(err: BaseException, target: str) -> str:
    """``" (line N)"`` of the innermost traceback frame in the user's file, if any."""
    name = os.path.basename(target) if target.endswith(".py") else \
        target.rsplit(".", 1)[-1] + ".py"
    line, tb = None, err.__traceback__
    while tb is not None:
        if os.path.basename(tb.tb_frame.f_code.co_filename) == name:
            line = tb.tb_lineno
        tb = tb.tb_next
    return f" (line {line})" if line else ""


def _import_module(name: str, what: str):
    try:
        with _user_code(what, name):
            return importlib.import_module(name)
    except ModuleNotFoundError as err:
        if err.name is not None and (name == err.name or name.startswith(err.name + ".")):
            raise ValueError(f"cannot import {what} module {name!r}: {err}") from err
        raise


def load_object(spec: str, *, what: str = "object") -> Any:
    """The object named by ``"package.module:attr"`` or ``"path/to/file.py:attr"``.

    The one loader of user code behind every ``module:attr`` option of the CLI (mechanisms,
    estimators, world models, output maps). Dotted attributes are allowed after the colon
    (``"mod:Class.method"``). A ``file.py`` is loaded under a private module name that is
    removed from ``sys.modules`` afterwards, so cloudpickle ships its functions by value to
    worker processes (which cannot import the file by name).

    Parameters
    ----------
    spec : str
        ``"module:attr"`` or ``"file.py:attr"`` (a target ending in ``.py`` or holding a path
        separator is a file).
    what : str, default "object"
        What the object is (``"mechanism"``, ``"estimator"``...), for the error messages.

    Returns
    -------
    object
        The attribute, as is (not called, not instantiated).

    Raises
    ------
    ValueError
        If ``spec`` has no ``:``, an empty side, a module that cannot be found, or a missing
        attribute.
    FileNotFoundError
        If the file does not exist.
    TypeError
        If ``spec`` is not a str.

    Examples
    --------
    >>> from pacpriv.registry import load_object
    >>> load_object("math:sqrt")(4.0)
    2.0
    """
    if not isinstance(spec, str):
        raise TypeError(f"`spec` must be a str 'module:attr'; got {type(spec).__name__}.")
    target, sep, attr_path = spec.rpartition(":")
    if not sep or not target or not attr_path:
        raise ValueError(f"spec {spec!r} must look like 'module:attr' or 'file.py:attr'.")
    is_file = target.endswith(".py") or "/" in target or os.sep in target
    module = _load_file(target, what) if is_file else _import_module(target, what)
    if not is_file and getattr(module, "__file__", None) is None \
            and hasattr(module, "__path__"):  # a namespace package: e.g. a folder of reports
        raise ValueError(f"cannot load {what} {spec!r}: {target!r} is a folder without an "
                         f"__init__.py (a namespace package), not a Python module: give "
                         f"'file.py:{attr_path}' or an importable 'module:{attr_path}'.")
    obj = module
    for part in attr_path.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"{target!r} has no attribute {attr_path!r} (spec {spec!r}).")
        obj = getattr(obj, part)
    return obj


def resolve_mechanism(
    spec: str | Callable, *, dataset_info: DatasetInfo | None = None
) -> tuple[Callable, str]:
    """Turn a mechanism spec into ``(mechanism, name)``.

    Parameters
    ----------
    spec : str or callable
        A registered name (see :func:`available_mechanisms`), ``"package.module:function"``,
        ``"path/to/file.py:function"`` (dotted attributes allowed after the colon), or a
        callable (returned as is). Attributes are returned as is, not called: name the
        mechanism, not its factory.
    dataset_info : DatasetInfo or None
        Public facts passed to a registered factory.

    Returns
    -------
    mechanism : callable
        ``f(subset, *, rng=None) -> ndarray of shape (d,)``.
    name : str
        The registered name, the spec string, or the callable's ``__name__``.

    Raises
    ------
    ValueError
        Unknown name (the message lists the registered ones), a module that cannot be found,
        a missing attribute, or a supervised built-in without class information.
    FileNotFoundError
        If a ``file.py`` spec names a file that does not exist.
    TypeError
        If ``spec`` is neither a str nor callable, or the resolved object is not callable.
    pacpriv.exceptions.UserCodeError
        A registered factory raised (its name and the exception's type; the cause chained).

    Examples
    --------
    >>> from pacpriv.datasets import load_dataset
    >>> from pacpriv.registry import resolve_mechanism
    >>> iris = load_dataset("iris")
    >>> f, name = resolve_mechanism("kmeans", dataset_info=iris.info())
    >>> f(iris.pool).shape
    (12,)
    """
    if callable(spec):
        return spec, getattr(spec, "__name__", type(spec).__name__)
    if not isinstance(spec, str):
        raise TypeError(f"`spec` must be a str or a callable; got {type(spec).__name__}.")
    if spec in MECHANISMS:
        factory = MECHANISMS.get(spec)
        try:
            mechanism = factory(dataset_info)
        except Exception as err:  # a user's factory (thirteenth new-user pass); the built-ins'
            if (getattr(factory, "__module__", None) or "").startswith("pacpriv."):
                raise  # own errors are pacpriv's words
            from pacpriv.exceptions import UserCodeError

            raise UserCodeError(
                f"the mechanism factory registered as {spec!r} raised {type(err).__name__} "
                "when called as factory(dataset_info) (one positional argument: a DatasetInfo "
                "or None; see register_mechanism); its message is withheld (it may quote "
                "data)") from err
        if not callable(mechanism):
            raise TypeError(f"factory of {spec!r} returned a non-callable {mechanism!r}.")
        return mechanism, spec
    if ":" not in spec:
        raise ValueError(
            f"unknown mechanism {spec!r}; registered: {', '.join(available_mechanisms())}; "
            "or give 'module:function' or 'path/to/file.py:function'."
        )
    obj = load_object(spec, what="mechanism")
    if not callable(obj):
        raise TypeError(f"{spec!r} resolved to a non-callable {type(obj).__name__}.")
    return obj, spec
