"""A small, safe Markdown-to-HTML converter for report sections (private).

Only the subset the report sections use: paragraphs, ``#`` headings, ``-``/``*`` lists, pipe
tables, fenced code blocks, inline code, ``**bold**`` and ``_italic_``. Every piece of text is
passed through :func:`html.escape` *before* any markup is added, so no input can inject tags or
attributes; links and raw HTML are shown as text.
"""

from __future__ import annotations

import html
import re

__all__ = ["inline", "markdown_to_html"]

_BOLD = re.compile(r"\*\*(.+?)\*\*")
_ITALIC = re.compile(r"(?<![\w*])_(?=\S)(.+?)(?<=\S)_(?!\w)")
_HEADING = re.compile(r"^(#{1,4})\s+(.*)$")
_LIST = re.compile(r"^\s*[-*]\s+(.*)$")


def inline(text: str) -> str:
    """Escape ``text`` and render inline code, bold and italic."""
    parts = str(text).split("`")
    out = []
    for i, part in enumerate(parts):
        esc = html.escape(part, quote=True)
        if i % 2 == 1 and i < len(parts) - 1:  # inside a matched pair of backticks
            out.append(f"<code>{esc}</code>")
        else:
            if i % 2 == 1:  # unmatched trailing backtick: keep it literally
                esc = "`" + esc
            esc = _BOLD.sub(r"<strong>\1</strong>", esc)
            out.append(_ITALIC.sub(r"<em>\1</em>", esc))
    return "".join(out)


def _cells(line: str) -> list[str]:
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|"):
        line = line[:-1]
    return [c.strip() for c in line.split("|")]


def _is_separator(line: str) -> bool:
    return all(re.fullmatch(r":?-{1,}:?", c) for c in _cells(line) if c) and "-" in line


def _table(lines: list[str]) -> str:
    rows = [ln for ln in lines]
    head, body = None, rows
    if len(rows) >= 2 and _is_separator(rows[1]):
        head, body = rows[0], rows[2:]
    out = ["<table>"]
    if head is not None:
        out.append("<thead><tr>" + "".join(f"<th>{inline(c)}</th>" for c in _cells(head))
                   + "</tr></thead>")
    out.append("<tbody>")
    out += ["<tr>" + "".join(f"<td>{inline(c)}</td>" for c in _cells(r)) + "</tr>" for r in body]
    out.append("</tbody></table>")
    return "\n".join(out)


def markdown_to_html(text: str, *, heading_offset: int = 2) -> str:
    """Convert the Markdown subset to HTML (headings shifted down by ``heading_offset``)."""
    lines = str(text).replace("\r\n", "\n").split("\n")
    out: list[str] = []
    para: list[str] = []

    def flush() -> None:
        if para:
            out.append("<p>" + inline(" ".join(para)) + "</p>")
            para.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped.startswith("```"):
            flush()
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith("```"):
                j += 1
            code = "\n".join(lines[i + 1 : j])
            out.append(f"<pre><code>{html.escape(code)}</code></pre>")
            i = j + 1
            continue
        if stripped.startswith("|"):
            flush()
            j = i
            while j < len(lines) and lines[j].strip().startswith("|"):
                j += 1
            out.append(_table(lines[i:j]))
            i = j
            continue
        if _LIST.match(line):
            flush()
            items = []
            while i < len(lines) and (item := _LIST.match(lines[i])):
                items.append(f"<li>{inline(item.group(1))}</li>")
                i += 1
            out.append("<ul>" + "".join(items) + "</ul>")
            continue
        m = _HEADING.match(stripped)
        if m:
            flush()
            level = min(len(m.group(1)) + heading_offset, 6)
            out.append(f"<h{level}>{inline(m.group(2))}</h{level}>")
        elif not stripped:
            flush()
        else:
            para.append(stripped)
        i += 1
    flush()
    return "\n".join(out)
