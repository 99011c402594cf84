"""Output helpers shared by the CLI commands: table | csv | json | markdown, and list-valued options.

Tables go through rich at the terminal's width and are never cut: too wide, they change layout; JSON turns numpy
values into plain Python (NaN/inf -> null); Markdown is a pipe table.
"""

from __future__ import annotations

import io
import json
import math
import re
import sys
import textwrap
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table

from specsim.errors import SpecsimError

if TYPE_CHECKING:
    import pandas as pd

FORMATS = ("table", "csv", "json", "markdown")
FORMAT_HELP = "table | csv | json | markdown"


def check_format(fmt: str, allowed: tuple[str, ...] = FORMATS) -> str:
    """``fmt`` itself, or SpecsimError unless it is one of ``allowed`` (table | csv | json | markdown)."""
    if fmt not in allowed:
        raise SpecsimError(f"--format must be one of {' | '.join(allowed)}, got {fmt!r}")
    return fmt


def plain(value: Any) -> Any:
    """numpy scalars/arrays -> Python numbers/lists; NaN/inf -> None (valid JSON)."""
    np = sys.modules.get("numpy")  # a value can be a numpy one only once numpy is imported (start-up)
    if np is not None and isinstance(value, np.ndarray):
        return plain(value.item()) if value.ndim == 0 else [plain(v) for v in value.tolist()]
    if np is not None and isinstance(value, np.generic):
        return plain(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def fmt_value(value: Any, digits: int = 4) -> str:
    """A compact human string for a table cell."""
    value = plain(value)
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        if value == 0:
            return "0"
        if 1e-3 <= abs(value) < 1e3:
            return f"{value:.{digits}f}".rstrip("0").rstrip(".")
        if 1e3 <= abs(value) < 1e9:
            return f"{value:,.0f}" if value.is_integer() else f"{value:,.1f}"
        return f"{value:.3e}"
    if isinstance(value, list):
        return ", ".join(fmt_value(v, digits) for v in value)
    return str(value)


def working(message: str) -> Any:
    """A transient spinner with ``message`` on stderr while a block runs, only when stderr itself is a
    terminal (nothing is written to a pipe, a file or a test's captured stream)."""
    import contextlib

    if not sys.stderr.isatty():
        return contextlib.nullcontext()
    return Console(stderr=True).status(message)


def console() -> Console:
    """A rich console on the current sys.stdout (pytest's capsys included), as wide as the terminal
    (COLUMNS, or 80 when not a terminal); tables wrap or ellipsize their cells to fit."""
    return Console(file=sys.stdout)


_console = console


def print_json(data: Any) -> None:
    """Print any mapping / list as indented JSON on stdout."""
    print(json.dumps(plain(data), indent=2))


def print_kv_table(title: str, rows: Sequence[tuple[str, Any]], note: str | None = None) -> None:
    """A two-column (quantity, value) table; a long value wraps (folded, never cut)."""
    table = Table(title=escape(title), show_header=True, header_style="bold", title_justify="left")
    table.add_column("quantity", overflow="fold")
    table.add_column("value", justify="right", overflow="fold")
    for key, value in rows:
        table.add_row(escape(str(key)), escape(fmt_value(value)))
    console = _console()
    console.print(table)
    for line in (note or "").splitlines():
        # wrapped between words, and a word wider than the terminal (a prior's id) after its hyphens (the whole id
        # is in -f json)
        for part in textwrap.wrap(line, console.width, break_on_hyphens=True) or [""]:
            console.print(part, style="dim", markup=False, soft_wrap=True)


# A table wider than the terminal is never cut: it is printed in the first of these layouts that fits
# (the full table; compact borders; text wrapped between words; transposed, one column per row; one block
# per row).
TRANSPOSE_MAX_ROWS = 8
_NUMBER = re.compile(r"[-+]?[\d,]*\.?\d+(?:e[-+]?\d+)?%?x?|-|yes|NO")  # right-aligned cells


def _whole_words(con: Console, table: Table, texts: list[str]) -> bool:
    """Whether `table` drawn at the console's width shows every word of `texts` whole (each found unbroken in
    the drawing): rich's measure of a wrapping table does not promise that, it folds words inside a column
    squeezed narrower than them."""
    probe = Console(width=con.width, file=io.StringIO(), color_system=None, legacy_windows=False)
    probe.print(table)
    drawn = probe.file.getvalue()  # type: ignore[attr-defined]
    return all(word in drawn for text in texts for word in text.split())


def _width(con: Console, table: Table) -> int:
    return Measurement.get(con, con.options.update(max_width=100_000), table).maximum


def _grid_table(title: str, columns: Sequence[str], cells: Sequence[Sequence[str]], text_columns: int,
                compact: bool, wrap_text: bool = False) -> Table:
    table = Table(title=escape(title) or None, show_header=True, header_style="bold", title_justify="left",
                  box=box.SIMPLE_HEAD if compact else box.HEAVY_HEAD, pad_edge=not compact,
                  padding=(0, 1) if not compact else (0, 0))
    for i, col in enumerate(columns):
        wraps = wrap_text and (" " in str(col) or any(" " in row[i] for row in cells))
        numeric = i >= text_columns and all(_NUMBER.fullmatch(row[i]) for row in cells)
        table.add_column(escape(str(col)), justify="right" if numeric else "left", no_wrap=not wraps,
                         overflow="fold")
    for row in cells:
        table.add_row(*(escape(c) for c in row))
    return table


def print_rows_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], text_columns: int = 1) -> None:
    """A table with a header row; values formatted with ``fmt_value``; the first ``text_columns``
    columns are left-aligned, the rest right-aligned. Never cut: wider than the terminal, it is printed
    compact, then with its text columns wrapped at spaces, then transposed (a column per row, up to
    TRANSPOSE_MAX_ROWS rows), then as one block per row."""
    con = _console()
    cells = [[fmt_value(v) for v in row] for row in rows]
    for compact in (False, True):
        table = _grid_table(title, columns, cells, text_columns, compact)
        if _width(con, table) <= con.width:
            con.print(table)
            return
    # text columns with spaces wrap at word boundaries (numbers and names never do)
    table = _grid_table(title, columns, cells, text_columns, compact=True, wrap_text=True)
    if _whole_words(con, table, [*map(str, columns), *(c for row in cells for c in row)]):
        con.print(table)
        return
    if 0 < len(cells) <= TRANSPOSE_MAX_ROWS:
        label = [cells[i][0] if text_columns else str(i + 1) for i in range(len(cells))]
        first = 1 if text_columns else 0
        flipped = [[str(col), *(row[j] for row in cells)] for j, col in enumerate(columns) if j >= first]
        head = [str(columns[0]) if text_columns else "", *label]
        table = _grid_table(title, head, flipped, 1, compact=True)
        if _width(con, table) <= con.width:
            con.print(table)
            return
    if title:
        con.print(escape(title), style="bold")
    key_w = max((len(str(c)) for c in columns), default=0)
    for i, row in enumerate(cells):
        block = Table(show_header=False, box=None, padding=(0, 1, 0, 0), pad_edge=False)
        block.add_column(no_wrap=True, style="bold")
        block.add_column(overflow="fold")
        for col, cell in zip(columns, row, strict=True):
            block.add_row(escape(str(col).ljust(key_w)), escape(cell))
        if i:
            con.print()
        con.print(block)


def markdown_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], text_columns: int = 1) -> str:
    """A pipe table; cells formatted with ``fmt_value`` (pipes escaped)."""
    def cell(v: Any) -> str:
        return fmt_value(v).replace("|", "\\|").replace("\n", " ")

    head = "| " + " | ".join(str(c) for c in columns) + " |"
    sep = "|" + "|".join("---" if i < text_columns else "---:" for i in range(len(columns))) + "|"
    return "\n".join([head, sep, *("| " + " | ".join(cell(v) for v in r) + " |" for r in rows)]) + "\n"


def emit(df: pd.DataFrame, fmt: str, title: str = "") -> None:
    """A data frame as a rich table, CSV, JSON (a list of row objects) or a Markdown table on stdout."""
    check_format(fmt)
    if fmt == "csv":
        sys.stdout.write(df.to_csv(index=False))
    elif fmt == "json":
        print_json(df.to_dict(orient="records"))
    elif fmt == "markdown":
        sys.stdout.write((f"**{title}**\n\n" if title else "")
                         + markdown_table(list(df.columns), list(df.itertuples(index=False, name=None))))
    else:
        print_rows_table(title, list(df.columns), df.itertuples(index=False, name=None))  # type: ignore[arg-type]


def emit_records(records: Sequence[Mapping[str, Any]], fmt: str, title: str = "", text_columns: int = 1) -> None:
    """A list of rows (same keys) as `emit` prints a data frame, without importing pandas for a table or
    JSON (the list commands start in a fraction of a second)."""
    check_format(fmt)
    columns = list(records[0]) if records else []
    if fmt == "json":
        print_json([dict(r) for r in records])
    elif fmt == "table":
        print_rows_table(title, columns, [[r[c] for c in columns] for r in records], text_columns)
    else:
        import pandas as pd

        emit(pd.DataFrame(list(records), columns=columns), fmt, title)


def emit_mapping(data: Mapping[str, Any], fmt: str, title: str = "", note: str | None = None) -> None:
    """A flat mapping as a (key, value) table, a two-column CSV or Markdown table, or a JSON object."""
    check_format(fmt)
    if fmt == "json":
        print_json(dict(data))
    elif fmt in ("csv", "markdown"):
        import pandas as pd

        emit(pd.DataFrame({"key": list(data), "value": [plain(v) if not isinstance(plain(v), list | dict)
                                                         else json.dumps(plain(v)) for v in data.values()]}),
             fmt, title if fmt == "markdown" else "")
    else:
        print_kv_table(title, list(data.items()), note)


def emit_summary(fmt: str, line: str, data: Mapping[str, Any]) -> None:
    """What a command that writes files reports: ``line`` for a table, else ``data`` in that format."""
    check_format(fmt)
    if fmt == "table":
        print(line)
    else:
        emit_mapping(data, fmt)


MAX_LIST = 100_000  # values one list option may expand to
_RANGE = re.compile(r"^(\d+)-(\d+)$")
_GEOM = re.compile(r"^(\d+):(\d+):x(\d+(?:\.\d+)?)$")
_STEP = re.compile(r"^(\d+):(\d+):(\d+)$")


def parse_int_list(text: str, option: str) -> list[int]:
    """Integers from ``1,2,4``, ``1-16`` (inclusive range), ``1:16:4`` (step) or ``1:4096:x2``
    (geometric), and comma-separated mixtures of these; SpecsimError names ``option``."""
    out: list[int] = []
    parts = [p.strip() for p in str(text).split(",")]
    if any(not p for p in parts):
        raise SpecsimError(f"{option}: empty item in {text!r} (use 1,2,4 or 1-16 or 1:16:4 or 1:4096:x2)")
    for part in parts:
        if part.isascii() and part.isdigit():
            out.append(int(part))
        elif m := _RANGE.match(part):
            lo, hi = int(m.group(1)), int(m.group(2))
            if hi < lo:
                raise SpecsimError(f"{option}: empty range {part!r} (end before start)")
            if hi - lo >= MAX_LIST:
                raise SpecsimError(f"{option}: more than {MAX_LIST:,} values in {part!r}")
            out.extend(range(lo, hi + 1))
        elif m := _STEP.match(part):
            lo, hi, step = (int(g) for g in m.groups())
            if step < 1:
                raise SpecsimError(f"{option}: step must be >= 1 in {part!r}")
            if len(range(lo, hi + 1, step)) > MAX_LIST:
                raise SpecsimError(f"{option}: more than {MAX_LIST:,} values in {part!r}")
            out.extend(range(lo, hi + 1, step))
        elif m := _GEOM.match(part):
            lo, hi, factor = int(m.group(1)), int(m.group(2)), float(m.group(3))
            if lo < 1 or factor <= 1:
                raise SpecsimError(f"{option}: geometric {part!r} needs start >= 1 and factor > 1")
            x = float(lo)
            while x <= hi + 1e-9 and len(out) <= MAX_LIST:
                out.append(round(x))
                x *= factor
        else:
            raise SpecsimError(f"{option}: cannot read {part!r} (use 1,2,4 or 1-16 or 1:16:4 or 1:4096:x2)")
        if len(out) > MAX_LIST:
            raise SpecsimError(f"{option}: more than {MAX_LIST:,} values in {text!r}")
    if not out:
        raise SpecsimError(f"{option}: empty list")
    return out


def parse_float_list(text: str, option: str) -> list[float]:
    """Floats from a comma-separated list, e.g. ``0.9,0.8,0.7``; SpecsimError names ``option``."""
    parts = [p.strip() for p in str(text).split(",")]
    if any(not p for p in parts):
        raise SpecsimError(f"{option}: empty item in {text!r} (expected comma-separated numbers)")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise SpecsimError(f"{option}: expected comma-separated numbers, got {text!r}") from None
    if not all(math.isfinite(v) for v in values):
        raise SpecsimError(f"{option}: values must be finite numbers, got {text!r}")
    return values
