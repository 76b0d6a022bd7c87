"""Sphinx configuration: the pacpriv documentation (API reference from the numpydoc docstrings,
user guide, CLI reference generated from the argparse parsers, the math with citations)."""

from __future__ import annotations

import os
import re
import sys

sys.path.insert(0, os.path.abspath(".."))  # a source checkout builds without installing

import pacpriv

project = "pacpriv"
author = "pacpriv developers"
copyright = "2026, pacpriv developers"
release = pacpriv.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "sphinxarg.ext",
    "myst_parser",
]

autosummary_generate = True
autosummary_imported_members = False
# a room (pacpriv.pac.noise, ...) re-exports its private modules' names: document its __all__
autosummary_ignore_module_all = False
autodoc_typehints = "none"  # numpydoc sections carry the types
autodoc_default_options = {"show-inheritance": False}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
numpydoc_validation_checks: set[str] = set()

templates_path = ["_templates"]
exclude_patterns = ["_build"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
myst_heading_anchors = 3
html_theme = "pydata_sphinx_theme"
html_title = f"pacpriv {release}"
html_theme_options = {"navigation_with_keys": False}
suppress_warnings = ["autosummary.import_cycle"]

# Summaries (autosummary tables) and some class docstrings cite a reference ``[1]_`` defined in
# the enclosing module's docstring; on a page of their own the target is missing. Keep the label
# as plain text there, and in every summary line; unused citations (the module's list on a
# class page) are not errors.
suppress_warnings.append("ref.citation")

_CITE = re.compile(r"\[(\w+)\]_")
_DEFINED = re.compile(r"^\s*\.\. \[(\w+)\]", re.MULTILINE)


def _unlink_missing_citations(app, what, name, obj, options, lines) -> None:
    text = "\n".join(lines)
    defined = set(_DEFINED.findall(text))
    summary_end = next((i for i, line in enumerate(lines) if not line.strip()), len(lines))
    for i, line in enumerate(lines):
        # the summary line also appears in autosummary tables, away from the References
        lines[i] = _CITE.sub(
            lambda m, i=i: m.group(0) if m.group(1) in defined and i >= summary_end
            else f"[{m.group(1)}]", line)


def _write_extension_tables(app) -> None:
    """docs/generated/extension_points.inc from the registries (the one list of names)."""
    from pacpriv.cli._extensions import extension_tables

    out = os.path.join(app.srcdir, "generated", "extension_points.inc")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    text = extension_tables()
    if not os.path.exists(out) or open(out).read() != text:
        with open(out, "w") as fh:
            fh.write(text)


def setup(app) -> None:
    app.connect("builder-inited", _write_extension_tables)
    app.connect("autodoc-process-docstring", _unlink_missing_citations, priority=400)
