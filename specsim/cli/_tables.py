"""Rendering DataFrames for people (rich) or programs (csv, json), and parsing list options."""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np
import pandas as pd

from specsim.errors import SpecsimError

FORMATS = ("table", "csv", "json")


def check_format(fmt: str, allowed: tuple[str, ...] = FORMATS) -> str:
    if fmt not in allowed:
        raise SpecsimError(f"--format must be one of {', '.join(allowed)}, got '{fmt}'")
    return fmt


def _cell(v: Any) -> str:
    if isinstance(v, float | np.floating):
        if not np.isfinite(v):
            return ""
        a = abs(v)
        if a == 0:
            return "0"
        if a >= 1e6 or a < 1e-3:
            return f"{v:.3g}"
        return f"{v:.4g}" if a < 1000 else f"{v:,.0f}"
    return str(v)


def emit(df: pd.DataFrame, fmt: str, title: str | None = None) -> None:
    """Print a DataFrame as a rich table, CSV or JSON records."""
    check_format(fmt)
    if fmt == "csv":
        df.to_csv(sys.stdout, index=False)
    elif fmt == "json":
        print(json.dumps(df.to_dict(orient="records"), indent=2, default=float))
    else:
        from rich.console import Console
        from rich.table import Table

        table = Table(title=title)
        for col in df.columns:
            table.add_column(str(col), justify="right" if pd.api.types.is_numeric_dtype(df[col]) else "left")
        for row in df.itertuples(index=False):
            table.add_row(*(_cell(v) for v in row))
        Console(width=max(120, Console().width)).print(table)


def emit_mapping(data: dict[str, Any], fmt: str, title: str | None = None) -> None:
    """Print one record: key/value table, or JSON object (csv: one row)."""
    check_format(fmt)
    if fmt == "json":
        print(json.dumps(data, indent=2, default=float))
    elif fmt == "csv":
        pd.DataFrame([data]).to_csv(sys.stdout, index=False)
    else:
        emit(pd.DataFrame({"field": list(data), "value": [_cell(v) for v in data.values()]}), "table", title)


def parse_int_list(text: str, what: str) -> list[int]:
    """'1,2,4,8' or '1-64' (all integers) or '1:4096:x2' (powers) -> list of ints."""
    out: list[int] = []
    try:
        for part in text.split(","):
            part = part.strip()
            if ":x" in part:
                lo, rest = part.split(":", 1)
                hi, factor = rest.split(":x")
                v = int(lo)
                if v < 1 or int(factor) < 2:
                    raise ValueError
                while v <= int(hi):
                    out.append(v)
                    v *= int(factor)
            elif "-" in part[1:]:
                lo, hi = part.split("-", 1)
                out.extend(range(int(lo), int(hi) + 1))
            else:
                out.append(int(part))
    except ValueError:
        raise SpecsimError(f"{what}: expected integers like 1,2,4 or 1-16 or 1:4096:x2, got '{text}'") from None
    if not out:
        raise SpecsimError(f"{what}: empty list")
    return out
