"""Flags from fields: a spec dataclass's fields carry their CLI flag and help.

A field of a spec object (``ExecutionOptions``, a sampler, a noise rule, ``DPSGDSpec``) that the
CLI exposes declares ``dataclasses.field(metadata={"flag": "--n-jobs", "help": "..."})``
(optional keys: ``"type"``, ``"choices"``, ``"metavar"``, ``"negate"`` for a ``--no-x`` flag that
sets a bool field to False, ``"sweep"`` -- the help of the flag where a command takes several
values of the field, e.g. ``--noise-multiplier 1 2 4``). :func:`add_spec_flags` adds the flags
to a parser (default None: "not given"), :func:`spec_from_args` builds the spec from the
parsed flags, and an error of the spec names the flag the user typed, because the spec's
fields know it.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from collections.abc import Iterable, Mapping
from typing import Any

from pacpriv.cli._args import UsageError, integer, number

__all__ = ["add_spec_flags", "flag_of", "flagged_fields", "given_fields", "spec_from_args"]


def flagged_fields(cls: Any, only: Iterable[str] | None = None) -> list[dataclasses.Field]:
    """The fields of the spec class ``cls`` that declare a CLI flag (optionally ``only`` these)."""
    keep = None if only is None else set(only)
    return [f for f in dataclasses.fields(cls) if "flag" in f.metadata
            and (keep is None or f.name in keep)]


def flag_of(cls: Any, name: str) -> str:
    """The flag of field ``name`` of ``cls`` (``--name`` if it declares none)."""
    for f in dataclasses.fields(cls):
        if f.name == name:
            return f.metadata.get("flag", "--" + name.replace("_", "-"))
    return "--" + name.replace("_", "-")


def _type(field: dataclasses.Field) -> Any:
    if "type" in field.metadata:
        return field.metadata["type"]
    text = field.type if isinstance(field.type, str) else getattr(field.type, "__name__",
                                                                   str(field.type))
    return (number if text.startswith("float") else integer if text.startswith("int")
            else bool if text.startswith("bool") else str)


def add_spec_flags(parser: argparse.ArgumentParser, *classes: Any,
                   only: Iterable[str] | None = None, notes: dict[str, str] | None = None,
                   helps: dict[str, str] | None = None, required: Iterable[str] = (),
                   sweep: bool = False, defaults: bool | Mapping[str, Any] = False) -> None:
    """Add the flags of the spec classes' fields to ``parser`` (each flag once, default None).

    ``only`` limits the fields (by name); ``notes`` adds a text to a field's help (by name),
    e.g. which rules take it; ``helps`` replaces a field's help for this command; the fields
    in ``required`` must be given; with ``sweep`` a field whose metadata has ``"sweep"`` takes
    one or more values (a list); with ``defaults`` a flag not given holds the field's default
    (a ``--x``/``--no-x`` switch always defaults to None: the field's default applies);
    ``defaults`` as ``{field: value}`` gives this command's own defaults instead (shown in the
    help as ``(default value)``), the other fields keeping theirs.
    """
    seen: set[str] = set()
    must = set(required)
    for cls in classes:
        # which fields this command exposes: spec_from_args reads only these
        parser.set_defaults(**{_exposed(cls): tuple(f.name for f in flagged_fields(cls, only))})
        for f in flagged_fields(cls, only):
            flag = f.metadata["flag"]
            if flag in seen:
                continue
            seen.add(flag)
            many = sweep and "sweep" in f.metadata
            text = ((helps or {}).get(f.name) or f.metadata["sweep" if many else "help"]) \
                + (notes or {}).get(f.name, "")
            default = f.default if defaults and f.default is not dataclasses.MISSING else None
            if isinstance(defaults, Mapping) and f.name in defaults:
                default = defaults[f.name]
                text += f" (default {default:g})" if _type(f) is not bool else ""
            if f.metadata.get("negate") or _type(f) is bool:  # --no-x sets False, --x True
                parser.add_argument(flag, dest=f.name, action="store_const", default=None,
                                    const=not f.metadata.get("negate"), help=text)
                continue
            extra = {k: f.metadata[k] for k in ("choices", "metavar") if k in f.metadata}
            parser.add_argument(flag, dest=f.name, type=_type(f), default=default, help=text,
                                required=f.name in must, **extra,
                                **({"nargs": "+"} if many else {}))


def _exposed(cls: Any) -> str:
    return f"_spec_fields_{cls.__module__}.{cls.__qualname__}"


def given_fields(cls: Any, args: argparse.Namespace) -> dict[str, Any]:
    """``{field: value}`` of the flags of ``cls`` that the command has and the user gave."""
    exposed = getattr(args, _exposed(cls), ())
    return {f.name: getattr(args, f.name) for f in flagged_fields(cls, exposed)
            if getattr(args, f.name, None) is not None}


def _flag_text(cls: Any, text: str) -> str:
    """The spec's message with its fields (```name``` or ```name=value```) as their flags."""
    for f in dataclasses.fields(cls):
        text = re.sub(rf"`{f.name}(=[^`]*)?`", flag_of(cls, f.name), text)
    return text


def spec_from_args(cls: Any, args: argparse.Namespace, *, among: Iterable[Any] = (),
                   selector: str = "", **values: Any) -> Any:
    """The spec ``cls(**values, **flags given)``; errors name the flags (``UsageError``).

    Parameters
    ----------
    cls : dataclass type
        The spec class.
    args : argparse.Namespace
        Parsed flags (added by :func:`add_spec_flags`).
    among : iterable of classes
        The alternatives of ``cls`` chosen by ``selector`` (e.g. every sampler for
        ``--sampler poisson``): a flag of theirs that ``cls`` does not take is refused.
    selector : str
        The flag and value that chose ``cls`` (``"--sampler fixed"``), for the messages.
    **values
        Fields set by the caller (not flags).

    Raises
    ------
    UsageError
        A flag ``cls`` does not take, a required field's flag missing, or a value the spec
        refuses (its message, with the flag for the field name).
    """
    mine = {f.name for f in flagged_fields(cls)}
    other = {f.metadata["flag"]: [c for c in among if f.name in given_fields(c, args)]
             for c in among for f in flagged_fields(c)
             if f.name not in mine and f.name in given_fields(c, args)}
    if other:
        key = selector.split(" ")[0] if selector else "this command"
        owners = sorted({getattr(c, "name", c.__name__) for cs in other.values() for c in cs})
        verb = "applies" if len(other) == 1 else "apply"
        raise UsageError(f"{', '.join(sorted(other))} {verb} to {key} {'/'.join(owners)} only; "
                         f"got {selector}")
    given = {**given_fields(cls, args), **values}
    missing = [flag_of(cls, f.name) for f in dataclasses.fields(cls) if f.init
               and f.name not in given and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING]
    if missing:
        raise UsageError(f"{selector or cls.__name__} needs {', '.join(missing)}")
    try:
        return cls(**given)
    except (TypeError, ValueError) as err:
        raise UsageError(_flag_text(cls, str(err)).rstrip(".")) from None
