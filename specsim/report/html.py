"""A small Markdown-to-HTML converter for exactly the Markdown that report.py writes: headings,
paragraphs, lists, pipe tables, block quotes, code, links to files beside the report (relative paths
only) and images (inlined as base64 PNG), so a report is one self-contained page with no external CSS,
JS or fonts."""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Callable
from pathlib import Path

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;max-width:1180px;
margin:2em auto;padding:0 1.2em;color:#1d1d1f;line-height:1.5}
h1{font-size:1.7em;border-bottom:2px solid #4C72B0;padding-bottom:.2em}h2{margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.8em 0;font-size:.88em}th,td{border:1px solid #ccc;padding:.25em .55em}
th{background:#f0f3f8}td.r,th.r{text-align:right}tr:nth-child(even) td{background:#fafafa}
blockquote{margin:1em 0;padding:.6em 1em;background:#eef4ff;border-left:4px solid #4C72B0}
figure{margin:1em 0}figure img{max-width:100%;height:auto;border:1px solid #eee}figcaption{color:#666;font-size:.9em}
code{background:#f4f4f4;padding:0 .2em;border-radius:3px}pre{background:#f4f4f4;padding:.8em;white-space:pre-wrap;
overflow-wrap:anywhere;font-size:.8em;line-height:1.35;tab-size:2}pre code{background:none;padding:0}
h4{margin:1.2em 0 .3em}
""".strip()


def _inline(text: str) -> str:
    out = html.escape(text, quote=False)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    out = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", out)
    # links to files beside the report (relative paths only: the page stays self-contained)
    return re.sub(r"(?<!!)\[([^\]]+)\]\(([A-Za-z0-9_.][A-Za-z0-9_./-]*)\)",
                  lambda m: m.group(0) if ".." in m.group(2).split("/") else
                  f'<a href="{m.group(2)}" download>{m.group(1)}</a>', out)


def _cells(line: str) -> list[str]:
    return [x.strip() for x in line.strip().strip("|").split("|")]


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def markdown_to_html(md: str, base: Path, title: str) -> str:
    """The report's Markdown as one self-contained HTML page (images inlined as base64 PNG)."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
            f"<title>{html.escape(title)}</title>"
            f"<style>{CSS}</style></head><body>\n" + "\n".join(_body(md.split("\n"), base)) + "\n</body></html>\n")


def _body(lines: list[str], base: Path) -> list[str]:
    """The page's blocks, one HTML string each: consecutive lines of text join into a paragraph, ended by a blank
    line or any other block."""
    out: list[str] = []
    para: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        block: str | None
        if line.startswith("```"):
            block, i = _fenced(lines, i)
        elif prefix := next((p for p in _RUNS if line.startswith(p)), None):
            j = i
            while j < len(lines) and lines[j].startswith(prefix):
                j += 1
            block, i = _RUNS[prefix](lines[i:j]), j
        else:
            block, i = _single(line, base), i + 1
        if block is None:  # text: part of a paragraph
            para.append(line)
            continue
        if para:
            out.append("<p>" + _inline(" ".join(para)) + "</p>")
            para = []
        if block:
            out.append(block)
    if para:
        out.append("<p>" + _inline(" ".join(para)) + "</p>")
    return out


def _fenced(lines: list[str], i: int) -> tuple[str, int]:
    """The code block fenced by ``` from line i; returns its HTML and the line after its closing fence."""
    j = i + 1
    while j < len(lines) and not lines[j].startswith("```"):
        j += 1
    return "<pre><code>" + html.escape("\n".join(lines[i + 1:j])) + "</code></pre>", j + 1


def _table(block: list[str]) -> str:
    """A pipe table: header, alignment row (right-aligned columns end in ':'), body rows."""
    head, align, body = _cells(block[0]), _cells(block[1]), [_cells(b) for b in block[2:]]
    cls = ['class="r"' if a.endswith(":") else "" for a in align]
    rows = ["<tr>" + "".join(f"<th {k}>{_inline(h)}</th>" for h, k in zip(head, cls, strict=False)) + "</tr>"]
    rows += ["<tr>" + "".join(f"<td {k}>{_inline(v)}</td>" for v, k in zip(r, cls, strict=False)) + "</tr>"
             for r in body]
    return "<table>" + "".join(rows) + "</table>"


def _quote(block: list[str]) -> str:
    return "<blockquote>" + _inline(" ".join(line[2:] for line in block)) + "</blockquote>"


def _list(block: list[str]) -> str:
    return "<ul>" + "".join(f"<li>{_inline(line[2:])}</li>" for line in block) + "</ul>"


#: Blocks of consecutive lines that start alike: the prefix and the block's HTML.
_RUNS: dict[str, Callable[[list[str]], str]] = {"|": _table, "> ": _quote, "- ": _list}


def _single(line: str, base: Path) -> str | None:
    """A one-line block's HTML (heading, image, table of contents, rule); "" for a blank line, None for text."""
    m = re.match(r"^(#{1,4}) (.*)$", line)
    if m:
        n = len(m.group(1))
        return f'<h{n} id="{_slug(m.group(2))}">{_inline(m.group(2))}</h{n}>'
    img = re.match(r"^!\[(.*)\]\((.+\.png)\)$", line)
    if img:
        data = base64.b64encode((base / img.group(2)).read_bytes()).decode("ascii")
        alt = html.escape(img.group(1))
        return (f'<figure><img alt="{alt}" src="data:image/png;base64,{data}"><figcaption>{alt}</figcaption>'
                "</figure>")
    if line.startswith("Contents: "):
        links = [f'<a href="#{_slug(x)}">{html.escape(x)}</a>' for x in line[len("Contents: "):].split(" · ")]
        return "<nav><p>Contents: " + " · ".join(links) + "</p></nav>"
    if line.strip() == "---":
        return "<hr>"
    return None if line.strip() else ""
