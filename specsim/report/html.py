"""A small Markdown-to-HTML converter for exactly the Markdown that report.py writes: headings,
paragraphs, lists, pipe tables, block quotes, code, links to files beside the report (relative paths
only) and images (inlined as base64 PNG), so a report is one self-contained page with no external CSS,
JS or fonts."""

from __future__ import annotations

import base64
import html
import re
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
    lines = md.split("\n")
    out: list[str] = []
    i = 0
    para: list[str] = []

    def flush() -> None:
        if para:
            out.append("<p>" + _inline(" ".join(para)) + "</p>")
            para.clear()

    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            flush()
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            out.append("<pre><code>" + html.escape("\n".join(lines[i + 1:j])) + "</code></pre>")
            i = j + 1
            continue
        m = re.match(r"^(#{1,4}) (.*)$", line)
        img = re.match(r"^!\[(.*)\]\((.+\.png)\)$", line)
        if m:
            flush()
            n = len(m.group(1))
            out.append(f'<h{n} id="{_slug(m.group(2))}">{_inline(m.group(2))}</h{n}>')
        elif img:
            flush()
            data = base64.b64encode((base / img.group(2)).read_bytes()).decode("ascii")
            alt = html.escape(img.group(1))
            out.append(f'<figure><img alt="{alt}" src="data:image/png;base64,{data}"><figcaption>{alt}</figcaption>'
                       "</figure>")
        elif line.startswith("|"):
            flush()
            block = []
            while i < len(lines) and lines[i].startswith("|"):
                block.append(lines[i])
                i += 1
            head, align, body = _cells(block[0]), _cells(block[1]), [_cells(b) for b in block[2:]]
            cls = ['class="r"' if a.endswith(":") else "" for a in align]
            rows = ["<tr>" + "".join(f"<th {k}>{_inline(h)}</th>" for h, k in zip(head, cls, strict=False)) + "</tr>"]
            rows += ["<tr>" + "".join(f"<td {k}>{_inline(v)}</td>" for v, k in zip(r, cls, strict=False)) + "</tr>"
                     for r in body]
            out.append("<table>" + "".join(rows) + "</table>")
            continue
        elif line.startswith("> "):
            flush()
            quote = []
            while i < len(lines) and lines[i].startswith("> "):
                quote.append(lines[i][2:])
                i += 1
            out.append("<blockquote>" + _inline(" ".join(quote)) + "</blockquote>")
            continue
        elif line.startswith("- "):
            flush()
            items = []
            while i < len(lines) and lines[i].startswith("- "):
                items.append(f"<li>{_inline(lines[i][2:])}</li>")
                i += 1
            out.append("<ul>" + "".join(items) + "</ul>")
            continue
        elif line.startswith("Contents: "):
            flush()
            links = [f'<a href="#{_slug(x)}">{html.escape(x)}</a>' for x in line[len("Contents: "):].split(" · ")]
            out.append("<nav><p>Contents: " + " · ".join(links) + "</p></nav>")
        elif line.strip() == "---":
            flush()
            out.append("<hr>")
        elif not line.strip():
            flush()
        else:
            para.append(line)
        i += 1
    flush()
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
            f"<title>{html.escape(title)}</title>"
            f"<style>{CSS}</style></head><body>\n" + "\n".join(out) + "\n</body></html>\n")
