"""The measurement table: one row per timed kernel, the common currency of `predict`, `bench`,
`import` and `calibrate`.

Columns (README, "Measurement tables"): op (gemm | attention | memcpy | allreduce), device,
dtype, tokens (GEMM rows M), d_in (K), d_out (N), batch, context_len, q_per_seq, n_heads,
n_kv_heads, head_dim, bytes, world_size, time_ms. Columns an op does not use may be empty;
extra columns are kept.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from specsim.cost import roofline as rl
from specsim.cost.dtypes import WEIGHT_BYTES, canonical, compute_dtype
from specsim.cost.hardware import HardwareProfile, load_hardware
from specsim.errors import SpecsimError

COLUMNS = ("op", "device", "dtype", "tokens", "d_in", "d_out", "batch", "context_len", "q_per_seq",
           "n_heads", "n_kv_heads", "head_dim", "bytes", "world_size", "time_ms")
OPS = ("gemm", "attention", "memcpy", "allreduce")
# Columns each op needs to be predicted.
NEEDS = {
    "gemm": ("tokens", "d_in", "d_out"),
    "attention": ("batch", "context_len", "q_per_seq", "n_heads", "n_kv_heads", "head_dim"),
    "memcpy": ("bytes",),
    "allreduce": ("bytes", "world_size"),
}
NUMERIC = tuple(c for c in COLUMNS if c not in ("op", "device", "dtype"))


def read_measurements(path: str | Path, need_time: bool = True) -> pd.DataFrame:
    """Read and check a measurement CSV; one clear SpecsimError for what is wrong."""
    path = Path(path)
    if not path.is_file():
        raise SpecsimError(f"{path}: no such file")
    try:
        df = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise SpecsimError(f"{path}: not a readable CSV ({str(exc).splitlines()[0]})") from None
    return check_measurements(df, str(path), need_time)


def check_measurements(df: pd.DataFrame, where: str, need_time: bool = True) -> pd.DataFrame:
    required = ["op", *(["time_ms"] if need_time else [])]
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise SpecsimError(f"{where}: missing column(s) {', '.join(missing)} (schema: {', '.join(COLUMNS)})")
    if df.empty:
        raise SpecsimError(f"{where}: no rows")
    df = df.copy()
    for col in COLUMNS:
        if col not in df.columns:
            df[col] = np.nan if col in NUMERIC else ""
    for col in NUMERIC:
        if not pd.api.types.is_numeric_dtype(df[col]):
            converted = pd.to_numeric(df[col], errors="coerce")
            bad = converted.isna() & df[col].notna() & (df[col].astype(str).str.strip() != "")
            if bad.any():
                row = int(np.flatnonzero(bad.to_numpy())[0])
                raise SpecsimError(f"{where}: row {row + 2}: column '{col}' is not a number: {df[col].iloc[row]!r}")
            df[col] = converted
    if need_time:
        t = df["time_ms"].to_numpy(dtype=float)
        bad = ~np.isfinite(t) | (t <= 0)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise SpecsimError(f"{where}: row {row + 2}: time_ms must be a positive number, got {t[row]}")
    df["op"] = df["op"].astype(str).str.strip().str.lower()
    for col in ("device", "dtype"):
        df[col] = df[col].fillna("").astype(str).str.strip()
    return df


def _compute_dtype(dtype: str) -> str:
    return compute_dtype(str(dtype)) if str(dtype) else "bf16"


def predict_rows(df: pd.DataFrame, hw: HardwareProfile) -> np.ndarray:
    """Predicted milliseconds for each row on one profile; NaN where the op can't be predicted."""
    out = np.full(len(df), np.nan)
    for op, cols in NEEDS.items():
        sel = (df["op"] == op).to_numpy() & df[list(cols)].notna().all(axis=1).to_numpy()
        if not sel.any():
            continue
        d = df.loc[sel]
        if op == "gemm":
            for dtype, g in d.groupby(d["dtype"].map(_compute_dtype)):
                idx = np.flatnonzero(sel)[np.isin(d.index, g.index)]
                wb = WEIGHT_BYTES.get(canonical(str(g["dtype"].iloc[0])), 2.0)
                out[idx] = rl.gemm_time_s(g["tokens"], g["d_out"], g["d_in"], hw, dtype, wb)[0] * 1e3
        elif op == "attention":
            kv_tok = 2.0 * d["n_kv_heads"] * d["head_dim"] * 2.0
            t = rl.attention_time_s(d["batch"], d["q_per_seq"], d["context_len"], d["n_heads"].to_numpy(),
                                    d["n_kv_heads"].to_numpy(), d["head_dim"].to_numpy(),
                                    d["head_dim"].to_numpy(), kv_tok.to_numpy(), hw)[0]
            out[sel] = t * 1e3
        elif op == "memcpy":
            out[sel] = rl.memory_op_time_s(d["bytes"], hw) * 1e3
        else:
            out[sel] = rl.allreduce_time_s(d["bytes"], d["world_size"], hw) * 1e3
    return out


def predict_table(df: pd.DataFrame, resolve: Callable[[str], HardwareProfile]) -> pd.DataFrame:
    """Copy of the table with `predicted_ms`; `resolve(device)` gives each row's profile."""
    out = df.copy()
    pred = np.full(len(df), np.nan)
    known = df["op"].isin(list(NEEDS)).to_numpy()
    for device, g in df[known].groupby("device"):
        idx = np.flatnonzero(known & (df["device"].to_numpy() == device))
        pred[idx] = predict_rows(g, resolve(str(device)))
    out["predicted_ms"] = pred
    return out


def resolver(hardware: str | None) -> Callable[[str], HardwareProfile]:
    """--hardware wins; otherwise each row's device names a profile."""
    cache: dict[str, HardwareProfile] = {}

    def resolve(device: str) -> HardwareProfile:
        key = hardware or device
        if not key:
            raise SpecsimError("rows have no 'device' and no --hardware was given")
        if key not in cache:
            cache[key] = load_hardware(key)
        return cache[key]

    return resolve


def mape_by(df: pd.DataFrame, by: str | list[str] | None = None) -> pd.Series | float:
    """Mean absolute percentage error of predicted_ms against time_ms (in %)."""
    err = (df["predicted_ms"] / df["time_ms"] - 1.0).abs() * 100.0
    return float(err.mean()) if by is None else err.groupby([df[b] for b in ([by] if isinstance(by, str) else by)],
                                                           observed=True).mean()


TOKEN_BANDS = (0, 16, 128, 512, 2048, np.inf)
BAND_LABELS = ("1-16", "17-128", "129-512", "513-2048", ">2048")


def token_band(tokens: pd.Series) -> pd.Series:
    return pd.cut(tokens, TOKEN_BANDS, labels=BAND_LABELS)
