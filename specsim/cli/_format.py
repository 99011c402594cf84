"""Output helpers shared by the CLI commands: table | csv | json, and list-valued options.

Tables go through rich; JSON turns numpy values into plain Python (NaN/inf -> null).
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from specsim.errors import SpecsimError

FORMATS = ("table", "csv", "json")


def check_format(fmt: str, allowed: tuple[str, ...] = FORMATS) -> str:
    """``fmt`` itself, or SpecsimError unless it is one of ``allowed`` (table | csv | json)."""
    if fmt not in allowed:
        raise SpecsimError(f"--format must be one of {' | '.join(allowed)}, got {fmt!r}")
    return fmt


def plain(value: Any) -> Any:
    """numpy scalars/arrays -> Python numbers/lists; NaN/inf -> None (valid JSON)."""
    if isinstance(value, np.ndarray):
        return plain(value.item()) if value.ndim == 0 else [plain(v) for v in value.tolist()]
    if isinstance(value, np.generic):
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
            return f"{value:,.1f}"
        return f"{value:.3e}"
    if isinstance(value, list):
        return ", ".join(fmt_value(v, digits) for v in value)
    return str(value)


def _console() -> Console:
    # created per call so that output goes to the current sys.stdout (pytest's capsys included)
    return Console(file=sys.stdout, width=max(120, Console().width))


def print_json(data: Any) -> None:
    """Print any mapping / list as indented JSON on stdout."""
    print(json.dumps(plain(data), indent=2))


def print_kv_table(title: str, rows: Sequence[tuple[str, Any]], note: str | None = None) -> None:
    """A two-column (quantity, value) table."""
    table = Table(title=title, show_header=True, header_style="bold")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    for key, value in rows:
        table.add_row(escape(str(key)), escape(fmt_value(value)))
    console = _console()
    console.print(table)
    if note:
        console.print(note, style="dim", markup=False)


def print_rows_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], text_columns: int = 1) -> None:
    """A table with a header row; values formatted with ``fmt_value``; the first ``text_columns``
    columns are left-aligned, the rest right-aligned."""
    table = Table(title=title, show_header=True, header_style="bold")
    for i, col in enumerate(columns):
        table.add_column(escape(str(col)), justify="left" if i < text_columns else "right")
    for row in rows:
        table.add_row(*(escape(fmt_value(v)) for v in row))
    _console().print(table)


def emit(df: pd.DataFrame, fmt: str, title: str = "") -> None:
    """A data frame as a rich table, CSV or JSON (a list of row objects) on stdout."""
    check_format(fmt)
    if fmt == "csv":
        sys.stdout.write(df.to_csv(index=False))
    elif fmt == "json":
        print_json(df.to_dict(orient="records"))
    else:
        print_rows_table(title, list(df.columns), df.itertuples(index=False, name=None))  # type: ignore[arg-type]


def emit_mapping(data: Mapping[str, Any], fmt: str, title: str = "") -> None:
    """A flat mapping as a (key, value) table, a two-column CSV or a JSON object."""
    check_format(fmt)
    if fmt == "json":
        print_json(dict(data))
    elif fmt == "csv":
        emit(pd.DataFrame({"key": list(data), "value": [plain(v) for v in data.values()]}), "csv")
    else:
        print_kv_table(title, list(data.items()))


_RANGE = re.compile(r"^(\d+)-(\d+)$")
_GEOM = re.compile(r"^(\d+):(\d+):x(\d+(?:\.\d+)?)$")
_STEP = re.compile(r"^(\d+):(\d+):(\d+)$")


def parse_int_list(text: str, option: str) -> list[int]:
    """Integers from ``1,2,4``, ``1-16`` (inclusive range), ``1:16:4`` (step) or ``1:4096:x2``
    (geometric), and comma-separated mixtures of these; SpecsimError names ``option``."""
    out: list[int] = []
    for part in (p.strip() for p in str(text).split(",")):
        if not part:
            continue
        if part.isdigit():
            out.append(int(part))
        elif m := _RANGE.match(part):
            lo, hi = int(m.group(1)), int(m.group(2))
            out.extend(range(lo, hi + 1))
        elif m := _STEP.match(part):
            lo, hi, step = (int(g) for g in m.groups())
            if step < 1:
                raise SpecsimError(f"{option}: step must be >= 1 in {part!r}")
            out.extend(range(lo, hi + 1, step))
        elif m := _GEOM.match(part):
            lo, hi, factor = int(m.group(1)), int(m.group(2)), float(m.group(3))
            if lo < 1 or factor <= 1:
                raise SpecsimError(f"{option}: geometric {part!r} needs start >= 1 and factor > 1")
            x = float(lo)
            while x <= hi + 1e-9:
                out.append(round(x))
                x *= factor
        else:
            raise SpecsimError(f"{option}: cannot read {part!r} (use 1,2,4 or 1-16 or 1:16:4 or 1:4096:x2)")
    if not out:
        raise SpecsimError(f"{option}: empty list")
    return out


def parse_float_list(text: str, option: str) -> list[float]:
    """Floats from a comma-separated list, e.g. ``0.9,0.8,0.7``; SpecsimError names ``option``."""
    try:
        values = [float(p) for p in str(text).split(",") if p.strip()]
    except ValueError:
        raise SpecsimError(f"{option}: expected comma-separated numbers, got {text!r}") from None
    if not values:
        raise SpecsimError(f"{option}: empty list")
    return values
