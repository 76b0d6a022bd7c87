"""Every noise rule by name: the registry :data:`RULE_CLASSES`, :func:`as_rule`, :func:`rule_with`.

A name is a shorthand for the rule with its default parameters (``"certified"`` is
``Certified()``); a rule whose parameters have no defaults (Algorithm 1) is given as an object.
The 0.2 keyword form (``rule="...", confidence=..., c=...``) was removed in 0.4: each keyword is
a ``TypeError`` naming the rule object that takes it (:func:`rule_hints`).
"""

from __future__ import annotations

from typing import Any

from pacpriv.pac.noise._algorithm1 import Algorithm1
from pacpriv.pac.noise._certified import AsymptoticT, Certified
from pacpriv.pac.noise._plugin import Anisotropic, ExactMI, Isotropic, VarianceOnly
from pacpriv.pac.noise._rule import NoiseRule
from pacpriv.registry import Registry

__all__ = [
    "DEFAULT_RULE",
    "REMOVED_RULE_KEYWORDS",
    "RULES",
    "RULE_CLASSES",
    "SHORTHANDS",
    "SPECTRUM_RULES",
    "as_rule",
    "rule_hints",
    "rule_with",
    "shorthands",
]

#: The registry of rules: name -> rule class, the default first (the order of ``--rule``
#: choices). A new rule is one ``RULE_CLASSES.register(cls.name, cls)`` line.
RULE_CLASSES: Registry[type[NoiseRule]] = Registry(
    "noise rule", argument="rule", key="rule", callable_entries=True)
for _cls in (Certified, Anisotropic, Isotropic, VarianceOnly, ExactMI, Algorithm1, AsymptoticT):
    RULE_CLASSES.register(_cls.name, _cls)

#: The built-in rule names (the default first); ``RULE_CLASSES.names()`` includes later ones.
RULES = RULE_CLASSES.names()

#: Built-in rules whose plan is computed from an :class:`~pacpriv.pac.spectrum.OutputSpectrum`.
SPECTRUM_RULES = tuple(k for k, cls in RULE_CLASSES.items() if cls.source == "spectrum")

#: The default rule of run_pac, the wrapper, the CLI and the comparison.
DEFAULT_RULE = Certified.name


def shorthands() -> tuple[str, ...]:
    """Registered rule names usable alone as ``rule=`` (every parameter has a default)."""
    out = []
    for name, cls in RULE_CLASSES.items():
        try:
            cls()
        except (TypeError, ValueError):
            continue
        out.append(name)
    return tuple(out)


#: The built-in names usable alone as ``rule=`` (see :func:`shorthands`).
SHORTHANDS = shorthands()


def _refuse(rule: Any, allowed: tuple[str, ...] | None = None) -> ValueError:
    alone = shorthands()
    names = allowed if allowed is not None else alone
    needing = [n for n in RULE_CLASSES if n not in alone
               and (allowed is None or n in allowed)]
    hint = "".join(
        f"; {n!r} needs its parameters: rule={RULE_CLASSES[n].__name__}("
        + ", ".join(f"{p}=..." for p in RULE_CLASSES[n].parameter_names()[:3]) + ")"
        for n in needing if isinstance(rule, str) and rule == n)
    return ValueError(f"`rule` must be one of {', '.join(names)} or a rule object "
                      f"(pacpriv.pac.noise){hint}; got {rule!r}.")


def as_rule(rule: Any, *, allowed: tuple[str, ...] | None = None) -> NoiseRule:
    """The rule object of ``rule``: a :class:`NoiseRule` as is, a name with its defaults.

    Parameters
    ----------
    rule : NoiseRule or str
        A rule object, or one of the names of :data:`RULES` whose parameters all have
        defaults (e.g. ``"certified"``, ``"anisotropic"``).
    allowed : tuple of str, optional
        Rule names the caller accepts (e.g. only the spectrum rules); default all.

    Raises
    ------
    ValueError
        For an unknown name, a name whose rule needs parameters (give the object), or a rule
        outside ``allowed``; the message lists the accepted names.
    TypeError
        If ``rule`` is neither a string nor a rule object.
    """
    if isinstance(rule, NoiseRule):
        if allowed is not None and rule.name not in allowed:
            raise _refuse(rule.name, allowed)
        return rule
    if not isinstance(rule, str):
        raise TypeError(f"`rule` must be a rule name or a rule object (pacpriv.pac.noise); got "
                        f"{type(rule).__name__}.")
    if rule not in RULE_CLASSES or (allowed is not None and rule not in allowed):
        raise _refuse(rule, allowed)
    try:
        return RULE_CLASSES[rule]()
    except (TypeError, ValueError):
        raise _refuse(rule, allowed) from None


def rule_with(rule: Any, **parameters: Any) -> NoiseRule:
    """``rule`` (a name or an object) with extra ``parameters`` (None values are dropped).

    A parameter the rule does not take is a ``ValueError`` naming the rules that take it; a
    parameter that a rule object already carries is a ``TypeError`` (given twice).
    """
    given = {k: v for k, v in parameters.items() if v is not None}
    if isinstance(rule, NoiseRule):
        clash = sorted(k for k in given if k in rule.parameter_names())
        if clash:
            raise TypeError(f"{clash} are given twice: by the {type(rule).__name__} rule object "
                            "and as keywords; give them once.")
        cls, base = type(rule), rule.parameters()
    else:
        if not isinstance(rule, str) or rule not in RULE_CLASSES:
            raise _refuse(rule)
        cls, base = RULE_CLASSES[rule], {}
    refused = [k for k in given if k not in cls.parameter_names()]
    if refused:
        owners = [n for n, c in RULE_CLASSES.items() if set(refused) <= set(c.parameter_names())]
        takes = list(cls.parameter_names()) or "no parameters"
        where = (f": {refused} only apply to rule={owners[0]!r}" if len(owners) == 1
                 else f": rules taking them: {owners}" if owners else "")
        raise ValueError(f"{refused} do not apply to rule={cls.name!r} (it takes {takes})"
                         f"{where}.")
    return cls(**{**base, **given})


#: The 0.2 keywords that travelled beside a rule name, removed in 0.4 (a rule object carries
#: its parameters).
REMOVED_RULE_KEYWORDS = ("confidence", "c", "beta", "output_bound", "target_inflation")


def rule_hints(names: tuple[str, ...] = REMOVED_RULE_KEYWORDS) -> dict[str, str]:
    """The replacement of each removed 0.2 rule keyword: the first registered rule taking it,
    as an object (``c=`` -> ``rule=Algorithm1(c=...)``), for
    :func:`~pacpriv.pac.engine._options.refuses_removed`."""
    out = {}
    for k in names:
        owner = next(cls for cls in RULE_CLASSES.values() if k in cls.parameter_names())
        out[k] = f"rule={owner.__name__}({k}=...)"
    return out
