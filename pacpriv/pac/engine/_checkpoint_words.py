"""A refused checkpoint in words: which kind of run wrote it, and what differs from this call.

A checkpoint's fingerprint (:func:`pacpriv.pac.engine._checkpoint.run_fingerprint`) is a JSON
dict of hashes and internal descriptions. Its raw differences (``mechanism.bound (checkpoint:
['((PerRecordBlocks(...' ...``) told a user nothing (ninth new-user pass, #64/#67). Here each
difference becomes a phrase that names the argument (in API terms, which the command line
rewords as its flags) and, where they are public facts, the old and the new value: a name, a
shape, a dtype, the audited records' indices, a seed; never a record's value. A checkpoint
that another kind of run wrote (``run_pac`` / ``simulate``, the per-record calibration,
``compare_pac_dpsgd``) is named as such, alone.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["differences_in_words", "fingerprint_kind", "kind_phrase", "records_text",
           "run_kind", "seed_text"]

#: What wrote a checkpoint, by :func:`fingerprint_kind`.
_RUN_NAMES = {
    "simulation": "a simulation of the whole subset (`run_pac` / `simulate`; `pac run`)",
    "per_record_simulation": "a per-record simulation (`record_exposure`, or a part of a "
                             "calibration; `pac records`)",
    "pacpriv.per_record": "the per-record calibration (`calibrate_per_record`; `pac records "
                          "--target-accuracy`)",
    "pacpriv.compare": "a comparison (`compare_pac_dpsgd`; `compare`)",
}
#: The audited records in a per-record simulation's bound arguments (PerRecordPairs' repr).
_RECORDS = re.compile(r"records=([0-9][0-9,\-]*(?:…)?(?: \(\d+ records\))?)")
#: The loader's private module prefix of a mechanism loaded from a user's ``file.py``.
_USER_PREFIX = re.compile(r"^_pacpriv_user_mechanism_[0-9a-f]+\.")
#: Longest value quoted from a bound argument's repr.
_QUOTE_MAX = 120


def fingerprint_kind(fingerprint: Any) -> str:
    """Which kind of run a checkpoint's fingerprint belongs to (a key of the names above):
    its ``run`` field, else a simulation, per-record when its mechanism is bound to the
    audited records."""
    if not isinstance(fingerprint, dict):
        return "unknown"
    if fingerprint.get("run"):
        return str(fingerprint["run"])
    mechanism = fingerprint.get("mechanism")
    bound = mechanism.get("bound") if isinstance(mechanism, dict) else None
    return "per_record_simulation" if "PerRecord" in str(bound) else "simulation"


def run_kind(fingerprint: Any) -> str:
    """What wrote a checkpoint with this fingerprint, in words."""
    kind = fingerprint_kind(fingerprint)
    return _RUN_NAMES.get(kind, f"another kind of run ({kind!r})")


#: The per-record calibration's bound (``bound``, ``--bound``) decides which kind of run its
#: checkpoint folder holds (fourteenth new-user pass: a changed --bound was told as a kind).
_BOUND_NOTE = (" (the per-record calibration's `bound` decides it: betting, the default, "
               "writes a calibration folder; bernstein a per-record simulation)")


def kind_phrase(old: str, new: str) -> str:
    """The refusal's phrase for a checkpoint of kind ``old`` given to a run of kind ``new``."""
    note = _BOUND_NOTE if {old, new} == {"pacpriv.per_record", "per_record_simulation"} else ""
    return (f"it was written by {_RUN_NAMES.get(old, repr(old))}, not by "
            f"{_RUN_NAMES.get(new, repr(new))}{note}: a checkpoint resumes only the kind of run "
            "that wrote it")


def records_text(records: Any, limit: int = 12) -> str:
    """Record indices as ranges: ``"0-4"``, ``"0-4,7,9-12"``; past ``limit`` ranges the rest is
    cut (``"…"``) and the count added, ``"0,2,4,…(57 records)"``. Indices are public."""
    idx = sorted({int(i) for i in records})
    runs: list[tuple[int, int]] = []
    for i in idx:
        if runs and i == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], i)
        else:
            runs.append((i, i))
    parts = [f"{a}" if a == b else f"{a}-{b}" for a, b in runs[:limit]]
    text = ",".join(parts)
    return text if len(runs) <= limit else f"{text},… ({len(idx)} records)"


def _short_name(name: Any) -> str:
    """A mechanism's name without the loader's private module prefix."""
    return _USER_PREFIX.sub("", str(name))


def _origin(name: Any) -> str:
    """Where a mechanism named ``name`` (``"module.qualname"``) comes from: ``file mech.py``
    (a file loaded in this process), ``a file loaded from another path`` (the checkpoint keeps
    only a digest of the path), or ``module pkg.mod``. Public facts only."""
    from pacpriv.registry import loaded_file_of

    text = str(name)
    if _USER_PREFIX.match(text):
        file = loaded_file_of(text)
        return f"file {file}" if file else "a file loaded from another path (not recorded)"
    module = text.rsplit(".", 1)[0] if "." in text else "?"
    return f"module {module}"


def _file_note(name: Any) -> str:
    """`` (from file mech.py)`` for a mechanism loaded from a user's file, else nothing."""
    return f" (from {_origin(name)})" if _USER_PREFIX.match(str(name)) else ""


def _arrays(pool: Any) -> str:
    if not isinstance(pool, dict):
        return "unknown"
    shapes, dtypes = pool.get("shapes") or [], pool.get("dtypes") or []
    parts = ["×".join(map(str, s)) + f" {_dtype(d)}" for s, d in zip(shapes, dtypes,
                                                                     strict=False)]
    return " and ".join(parts) or "unknown"


def _dtype(value: Any) -> str:
    import numpy as np

    try:
        return np.dtype(value).name
    except TypeError:
        return repr(value)


def seed_text(seed: Any) -> str:
    """A root seed (``seed_to_dict``) in short: ``"entropy 3"``, or every field."""
    if isinstance(seed, dict) and not seed.get("spawn_key") and set(seed) <= {
            "entropy", "spawn_key", "pool_size", "n_children_spawned"}:
        return f"entropy {seed.get('entropy')}"
    return repr(seed)


def _inclusion(q: Any) -> str:
    """A sampler's inclusion probability ``q`` and the blind-guess prior ``max(q, 1 − q)``
    it implies (a sampler's ``to_dict`` keeps ``q`` under the historical key ``prior``)."""
    if q is None:
        return "inclusion probability q not declared"
    if isinstance(q, (int, float)) and not isinstance(q, bool) and 0 <= q <= 1:
        return f"inclusion probability q {q:g}, blind-guess prior max(q, 1 - q) {max(q, 1 - q):g}"
    return f"inclusion probability q {q!r}"


def _sampler(sampler: Any) -> str:
    """A sampler's ``to_dict`` in words: its name, its parameters, and ``q`` named as the
    inclusion probability beside the blind-guess prior (never ``q`` labelled "prior")."""
    if not isinstance(sampler, dict):
        return "unknown"
    parts = []
    for k, v in sampler.items():
        if k == "name" or (k == "prior" and "inclusion_probability" in sampler):
            continue
        parts.append(_inclusion(v) if k in ("prior", "inclusion_probability") else f"{k} {v}")
    rest = ", ".join(parts)
    return f"{sampler.get('name')}" + (f" ({rest})" if rest else "")


def _quoted(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _QUOTE_MAX else text[:_QUOTE_MAX] + "…"


def _mechanism(old: dict, new: dict) -> list[str]:
    """Phrases for the mechanism's part of the fingerprint (the first that explains it)."""
    old_records = _RECORDS.search(str(old.get("bound")))
    new_records = _RECORDS.search(str(new.get("bound")))
    if old_records and new_records and old_records.group(1) != new_records.group(1):
        # the records change the bound arguments, the block size and the state digest too
        return [f"the audited records (`records`): checkpoint {old_records.group(1)}, now "
                f"{new_records.group(1)}"]
    if "PerRecordPairs(" in str(old.get("bound")) and not old_records:
        return ["the per-record run's audited records (`records`) or settings: the checkpoint "
                "was written by an earlier pacpriv, which does not record them"]
    if "PerRecordPairs(" in str(old.get("bound")) and old.get("bound") != new.get("bound"):
        return ["the per-record run's mechanism, data (the pool) or settings (`record_block`, "
                "`ensemble`), with the same audited records"]
    if old.get("name") != new.get("name"):
        a, b = _short_name(old.get("name")), _short_name(new.get("name"))
        if a == b:  # the same name from another file or module: say where each comes from
            return [f"the mechanism's file or module (both named {a!r}): checkpoint "
                    f"{_origin(old.get('name'))}, now {_origin(new.get('name'))}"]
        return [f"the mechanism: checkpoint {a!r}{_file_note(old.get('name'))}, now "
                f"{b!r}{_file_note(new.get('name'))}"]
    out = []
    if old.get("source_sha256") != new.get("source_sha256"):
        out.append(f"the mechanism {_short_name(new.get('name'))!r}: its code changed")
    if old.get("bound") != new.get("bound"):
        out.append(f"the arguments bound to the mechanism (functools.partial): checkpoint "
                   f"{_quoted(old.get('bound'))}, now {_quoted(new.get('bound'))}")
    if old.get("accepts_rng") != new.get("accepts_rng"):
        out.append("whether the mechanism takes an `rng` argument: checkpoint "
                   f"{old.get('accepts_rng')}, now {new.get('accepts_rng')}")
    if not out and old.get("state_sha256") != new.get("state_sha256"):
        who = ("the per-record run's mechanism (your function)"  # not pacpriv's own wrapper
               if str(new.get("name")).endswith("per_record._units.unit_trial") else
               f"the mechanism {_short_name(new.get('name'))!r}")
        out.append(f"{who}: its state changed "
                   "(mechanism.state_sha256: its closure values, fields, default arguments, "
                   "helper functions or module constants)")
    return out or [f"the mechanism {_short_name(new.get('name'))!r} differs"]


#: Settings of a per-record calibration kept in its fingerprint, in words (before the
#: mechanism's: a changed shape changes the wrapper's state, not the user's function).
_SETTINGS = {"shape": "the certificate's shape (`shape`)",
             "shape_fraction": "the share of shape trials (`shape_fraction`)"}


def differences_in_words(old: Any, new: Any) -> list[str]:
    """What differs between a checkpoint's fingerprint ``old`` and this call's ``new``, as
    phrases (empty when they agree). Another kind of run: that one phrase alone."""
    if old == new:
        return []
    if fingerprint_kind(old) != fingerprint_kind(new) or not isinstance(new, dict):
        return [kind_phrase(fingerprint_kind(old), fingerprint_kind(new))]
    if fingerprint_kind(old) == "pacpriv.per_record":  # an earlier pacpriv kept fewer fields
        new = {k: v for k, v in new.items() if k in old}
    out: list[str] = []
    if old.get("records") != new.get("records"):
        out.append(f"the audited records (`records`): checkpoint {old.get('records')}, now "
                   f"{new.get('records')}")
    settings = [key for key in _SETTINGS if key in old and old.get(key) != new.get(key)]
    if old.get("mechanism") != new.get("mechanism") and not settings:
        out += _mechanism(old.get("mechanism") or {}, new.get("mechanism") or {})
    op, np_ = old.get("pool"), new.get("pool")
    if op != np_:
        a, b = _arrays(op), _arrays(np_)
        out.append(f"the pool (the dataset): checkpoint {a}, now {b}" if a != b else
                   f"the pool's content (the dataset; same shape {a}) differs")
    if old.get("sampler") != new.get("sampler"):
        out.append(f"the sampler: checkpoint {_sampler(old.get('sampler'))}, now "
                   f"{_sampler(new.get('sampler'))}")
    if old.get("output_dtype") != new.get("output_dtype"):
        out.append(f"`output_dtype`: checkpoint {_dtype(old.get('output_dtype'))}, now "
                   f"{_dtype(new.get('output_dtype'))}")
    for key, words in _SETTINGS.items():
        if key in old and old.get(key) != new.get(key):
            out.append(f"{words}: checkpoint {_quoted(old.get(key))}, now "
                       f"{_quoted(new.get(key))}")
    known = {"run", "records", "mechanism", "pool", "sampler", "output_dtype", *_SETTINGS}
    for key in sorted((set(old) | set(new)) - known):
        if old.get(key) != new.get(key):
            out.append(f"{key}: checkpoint {_quoted(old.get(key))}, now {_quoted(new.get(key))}")
    return out
