"""The project's corpus of published speculative-decoding results (specsim/validation/data/published.csv):
one row per published configuration, each naming its source. Loading checks the columns and types."""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import pandas as pd

from specsim.errors import SpecsimError

COLUMNS = ("id", "group", "source", "hardware", "hardware_confidence", "num_gpus", "tp", "engine", "model", "draft",
           "draft_model", "shape", "k", "topk", "num_draft_tokens", "batch", "context", "temperature", "dataset",
           "acceptance_length", "acceptance_rate", "speedup", "speedup_kind", "baseline_tok_s", "spec_tok_s")
NUMERIC = ("num_gpus", "tp", "k", "topk", "num_draft_tokens", "batch", "context", "temperature", "acceptance_length",
           "acceptance_rate", "speedup", "baseline_tok_s", "spec_tok_s")
#: Hardware the source names (or names up to a variant) counts as stated.
STATED = ("stated", "assumed-variant")


def corpus_path() -> Path:
    return Path(str(resources.files("specsim.validation"))) / "data" / "published.csv"


def load_corpus(path: str | Path | None = None) -> pd.DataFrame:
    """The corpus as a DataFrame with numeric columns as floats; SpecsimError names a bad file or column."""
    return read_table(Path(path) if path is not None else corpus_path(), COLUMNS, NUMERIC)


def read_table(p: Path, columns: Sequence[str], numeric: Sequence[str]) -> pd.DataFrame:
    """A corpus CSV with its `columns` present, `numeric` ones as floats and unique ids; SpecsimError names a bad
    file, column or row (the published and the serving corpora)."""
    if not p.is_file():
        raise SpecsimError(f"{p}: no such file")
    try:
        df = pd.read_csv(p)
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        raise SpecsimError(f"{p}: not a readable CSV ({str(exc).splitlines()[0]})") from None
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise SpecsimError(f"{p}: missing column(s) {', '.join(missing)}")
    for col in numeric:
        converted = pd.to_numeric(df[col], errors="coerce")
        bad = converted.isna() & df[col].notna()
        if bad.any():
            row = int(bad.to_numpy().nonzero()[0][0])
            raise SpecsimError(f"{p}: row {row + 2}: column '{col}' is not a number: {df[col].iloc[row]!r}")
        df[col] = converted
    if df["id"].duplicated().any():
        raise SpecsimError(f"{p}: duplicate id {df['id'][df['id'].duplicated()].iloc[0]!r}")
    return df
