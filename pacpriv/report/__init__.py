"""PAC membership-privacy reports: one JSON dict, rendered as Markdown and as HTML.

:func:`build_report` builds the JSON-serialisable dict (:mod:`pacpriv.report.builder`);
:func:`to_markdown` and :func:`render_html` (:mod:`pacpriv.report.html`) render that dict, so
the JSON, the Markdown and the HTML always say the same thing; :func:`write_report` writes the
files. :mod:`pacpriv.report.markdown` is the small Markdown-to-HTML converter the HTML uses.
"""

from pacpriv.report.builder import (
    ARRAY_LIMIT,
    THREAT_MODEL_PAC,
    build_report,
    to_markdown,
    write_report,
)
from pacpriv.report.html import PLOT_KINDS, render_html

__all__ = [
    "ARRAY_LIMIT",
    "PLOT_KINDS",
    "THREAT_MODEL_PAC",
    "build_report",
    "render_html",
    "to_markdown",
    "write_report",
]
