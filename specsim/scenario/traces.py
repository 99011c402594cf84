"""Request traces: arrival time, prompt tokens and output tokens per request, read from CSV.

Layouts (the header decides under layout="auto"):
- azure: ``TIMESTAMP, ContextTokens, GeneratedTokens`` (Azure LLM inference traces 2023/2024,
  github.com/Azure/AzurePublicDataset; TIMESTAMP is a date-time such as 2023-11-16 18:15:46.6805900);
- burstgpt: ``Timestamp, Model, Request tokens, Response tokens, Total tokens, Log Type`` (BurstGPT,
  github.com/HPMLL/BurstGPT; Timestamp in seconds from the trace's start);
- generic: ``time_s, prompt_tokens, output_tokens`` (seconds).

Line numbers assume one CSV record per line (no quoted line breaks), as in all three layouts.

Rows whose output is 0 tokens (BurstGPT logs failed requests that way) are dropped and counted. A bad
value raises SpecsimError naming the file, the line (the header is line 1) and the column.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from specsim.errors import SpecsimError

if TYPE_CHECKING:  # pandas is imported when a trace is read (the planner starts without it)
    import pandas as pd

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

# layout -> (time column, prompt column, output column)
LAYOUTS: dict[str, tuple[str, str, str]] = {
    "azure": ("TIMESTAMP", "ContextTokens", "GeneratedTokens"),
    "burstgpt": ("Timestamp", "Request tokens", "Response tokens"),
    "generic": ("time_s", "prompt_tokens", "output_tokens"),
}


@dataclass(frozen=True, eq=False)
class Trace:
    """Requests sorted by arrival; time_s counts from the first request."""

    source: str
    layout: str
    time_s: FloatArray
    prompt_tokens: IntArray
    output_tokens: IntArray
    dropped: int = 0  # rows with 0 output tokens (failed requests)
    #: leading prompt tokens in blocks an earlier request began with (block-hash traces; None: not recorded)
    shared_prefix_tokens: IntArray | None = None

    @property
    def n(self) -> int:
        return len(self.time_s)

    @property
    def span_s(self) -> float:
        return float(self.time_s[-1] - self.time_s[0]) if self.n else 0.0

    @property
    def mean_rate_rps(self) -> float:
        """Requests per second over the trace (n - 1 gaps over the span)."""
        return (self.n - 1) / self.span_s if self.span_s > 0 else float("inf")


def _fail(path: Path, line: int, column: str, must: str, value: object) -> SpecsimError:
    return SpecsimError(f"{path.name} line {line}: field '{column}' must be {must}, got {value!r}")


def _integers(path: Path, frame: pd.DataFrame, column: str) -> IntArray:
    import pandas as pd

    raw = frame[column]
    num = pd.to_numeric(raw.str.strip(), errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(num) | (num < 0) | (num != np.floor(num))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise _fail(path, int(raw.index[i]) + 2, column, "an integer >= 0", raw.iloc[i])
    return num.astype(np.int64)


def _times(path: Path, frame: pd.DataFrame, column: str, layout: str) -> FloatArray:
    import pandas as pd

    raw = frame[column]
    if layout == "azure":
        stamps = pd.to_datetime(raw.str.strip(), errors="coerce", format="ISO8601", utc=True)
        bad = stamps.isna().to_numpy()
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise _fail(path, int(raw.index[i]) + 2, column, "a date-time such as 2023-11-16 18:15:46.68", raw.iloc[i])
        ns = np.asarray(stamps.astype("int64").to_numpy(), dtype=np.int64)
        secs: FloatArray = (ns - np.min(ns)).astype(np.float64) / 1e9
        return secs
    num = pd.to_numeric(raw.str.strip(), errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(num)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise _fail(path, int(raw.index[i]) + 2, column, "a number of seconds", raw.iloc[i])
    return num


def detect_layout(columns: list[str]) -> str | None:
    """The layout whose three columns the header holds (None if none does)."""
    names = {c.strip() for c in columns}
    for layout, cols in LAYOUTS.items():
        if set(cols) <= names:
            return layout
    return None


def read_trace(path: str | Path, layout: str = "auto", model: str | None = None) -> Trace:
    """Read a trace CSV. layout: auto | azure | burstgpt | generic. model: keep only BurstGPT rows of this Model."""
    import pandas as pd

    p = Path(path)
    if not p.is_file():
        raise SpecsimError(f"{p}: no such trace file")
    if p.suffix.lower() == ".jsonl" and layout in ("auto", "mooncake"):
        return _block_trace(p)
    if layout != "auto" and layout not in LAYOUTS:
        raise SpecsimError(f"{p.name}: unknown trace layout '{layout}' (allowed: auto, {', '.join(LAYOUTS)})")
    try:
        frame = pd.read_csv(p, dtype=str, keep_default_na=False, skip_blank_lines=False, skipinitialspace=True)
    except pd.errors.ParserError as exc:
        first = str(exc).strip().splitlines()[0]
        raise SpecsimError(f"{p.name}: not a readable CSV: {first}") from None
    except pd.errors.EmptyDataError:
        raise SpecsimError(f"{p.name}: empty trace file") from None
    except UnicodeDecodeError as exc:
        raise SpecsimError(f"{p.name}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})"
                           ) from None
    frame.columns = [str(c).strip() for c in frame.columns]
    found = detect_layout(list(frame.columns)) if layout == "auto" else layout
    if found is None:
        expected = "; ".join(f"{k}: {', '.join(v)}" for k, v in LAYOUTS.items())
        raise SpecsimError(f"{p.name} line 1: header {list(frame.columns)} matches no trace layout ({expected})")
    t_col, p_col, o_col = LAYOUTS[found]
    for col in (t_col, p_col, o_col):
        if col not in frame.columns:
            raise SpecsimError(f"{p.name} line 1: missing column '{col}' (layout {found}: {', '.join(LAYOUTS[found])})")
    if model is not None:
        if "Model" not in frame.columns:
            raise SpecsimError(f"{p.name} line 1: no 'Model' column to filter on model '{model}'")
        frame = frame[frame["Model"].str.strip() == model]
    if frame.empty:
        raise SpecsimError(f"{p.name}: no requests" + (f" for model '{model}'" if model else ""))
    time_s = _times(p, frame, t_col, found)
    prompt = _integers(p, frame, p_col)
    output = _integers(p, frame, o_col)
    keep = output > 0
    order = np.argsort(time_s[keep], kind="stable")
    t = time_s[keep][order]
    if len(t) == 0:
        raise SpecsimError(f"{p.name}: every request has 0 output tokens")
    return Trace(str(p), found, t - t[0], prompt[keep][order], output[keep][order], int((~keep).sum()))


def _block_trace(path: Path) -> Trace:
    """A block-hash trace (Mooncake's JSONL: timestamp, input_length, output_length, hash_ids of 512-token blocks;
    scenario/agent_trace.py) as a Trace with each request's prefix shared with an earlier one."""
    from specsim.scenario.agent_trace import read_agent_trace

    t = read_agent_trace(path)
    keep = t.output_tokens > 0
    return Trace(str(path), "mooncake", t.arrival_s[keep], t.prompt_tokens[keep], t.output_tokens[keep],
                 int((~keep).sum()), t.shared_prefix_tokens[keep])
