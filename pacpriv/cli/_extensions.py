"""Every extension point's registry, for the docs tables and the CLI (one list, read by both)."""

from __future__ import annotations

from pacpriv.registry import Registry, registry_table

__all__ = ["extension_tables", "registries"]


def registries() -> dict[str, Registry]:
    """Title -> registry of each extension point (imported lazily: torch-free)."""
    from pacpriv.audit._suite import ATTACKS
    from pacpriv.cli.predict import ESTIMATORS
    from pacpriv.pac.noise import RULE_CLASSES
    from pacpriv.pac.per_record import SHAPES
    from pacpriv.pac.samplers import SAMPLERS
    from pacpriv.prediction._noise import NOISE_RULES
    from pacpriv.registry import MECHANISMS

    return {"Samplers": SAMPLERS, "Noise rules": RULE_CLASSES, "Mechanisms": MECHANISMS,
            "Attacks": ATTACKS, "Prediction estimators": ESTIMATORS,
            "Prediction noise rules": NOISE_RULES, "Per-record noise shapes": SHAPES}


def extension_tables() -> str:
    """reStructuredText of every registry (a section and a table each), for the docs."""
    parts = []
    for title, registry in registries().items():
        parts += [title, "-" * len(title), "", registry_table(registry)]
    return "\n".join(parts)
