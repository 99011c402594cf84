"""What the README's figure sources share: where things are, running specsim for its JSON, and how a figure is
written (tools/readme_figures.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
RECORDS = ROOT / "benchmarks" / "results.json"
WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")


class SourceError(RuntimeError):
    """A source could not give its figures (a command failed, or its output lacks what a figure reads)."""


class Figures(dict[str, str]):
    """Figure name -> its text as the README shows it, and the claims in the README's words that no longer hold
    (a figure whose sign or kind turned: the sentence around it needs rewording by hand)."""

    def __init__(self) -> None:
        super().__init__()
        self.problems: list[str] = []

    def claim(self, holds: bool, message: str) -> None:
        if not holds:
            self.problems.append(message)


def run(argv: Sequence[str], timeout_s: float = 900, check: bool = True) -> str:
    """stdout of `argv` (a command line; `python` means this interpreter) run from the repository root; unless
    `check` is false, SourceError if it exits non-zero."""
    cmd = [sys.executable if a == "python" else a for a in argv]
    env = {**os.environ, "COLUMNS": "200"}
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired as e:
        raise SourceError(f"{' '.join(argv)}: no answer in {timeout_s:g} s") from e
    if check and proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise SourceError(f"{' '.join(argv)} exited {proc.returncode}: {' / '.join(tail)}")
    return proc.stdout


def specsim_json(*args: str, timeout_s: float = 900) -> Any:
    """The JSON a `specsim ... -f json` command prints."""
    out = run(["python", "-m", "specsim", *args, "-f", "json"], timeout_s)
    try:
        return json.loads(out)
    except json.JSONDecodeError as e:
        raise SourceError(f"specsim {' '.join(args)} -f json printed no JSON ({e})") from e


def count(n: int) -> str:
    """1,137."""
    return f"{n:,}"


def word(n: int) -> str:
    """six (a count the README spells out), or 13 beyond twelve."""
    return WORDS[n] if 0 <= n < len(WORDS) else f"{n:,}"


def pct(x: float, digits: int = 1, sign: bool = False) -> str:
    """0.123 -> 12.3% (sign: +12.3%)."""
    return f"{100 * x:{'+' if sign else ''}.{digits}f}%"


def num(x: float, digits: int = 1) -> str:
    """A figure without its unit: 12.3 (digits 0: 12)."""
    return f"{x:.{digits}f}"


def span(values: Iterable[float], digits: int = 1, unit: str = "") -> str:
    """The range of `values` as the README writes it: 3.5–9.7 (one value when both ends print the same)."""
    vals = sorted(values)
    if not vals:
        raise SourceError("a range over no values")
    lo, hi = f"{vals[0]:.{digits}f}", f"{vals[-1]:.{digits}f}"
    return f"{lo}{unit}" if lo == hi else f"{lo}–{hi}{unit}"


def cell(n: int, abs_err: float | None, bias: float | None) -> str:
    """A table cell `n: median |error| / bias` (— without rows)."""
    if not n or abs_err is None or bias is None:
        return "—"
    return f"{n}: {pct(abs_err)} / {pct(bias, sign=True)}"


def escape(text: str) -> str:
    """Text for a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")
