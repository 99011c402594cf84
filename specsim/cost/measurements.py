"""The measurement table: one row per timed kernel, the common currency of `predict`, `bench`,
`import` and `calibrate`.

Columns (README, "Measurement tables"): op (gemm | attention | moe | memcpy | elementwise |
allreduce), device, dtype, tokens (GEMM rows M; MoE tokens before routing), d_in (K; MoE hidden),
d_out (N; MoE expert width per GPU), batch, context_len, q_per_seq, n_heads, n_kv_heads, head_dim,
bytes, world_size, time_ms, framework and kernel (what was timed: a fit never mixes kernels
silently). Optional columns the predictions read: kv_dtype (attention), n_experts, top_k, ep (MoE),
impl (all-reduce implementation, default eager nccl), buffer_sets (operand copies a benchmark cycles
through: L2 residency). Columns an op does not use may be empty; extra columns are kept.
"""

from __future__ import annotations

import csv
import dataclasses
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from specsim.cost import roofline as rl
from specsim.cost.attention import attention_time_s
from specsim.cost.dtypes import WEIGHT_BYTES, canonical, compute_dtype
from specsim.cost.hardware import load_hardware
from specsim.cost.hardware_profile import HardwareProfile
from specsim.cost.moe import moe_time_s
from specsim.errors import SpecsimError

COLUMNS = ("op", "device", "dtype", "tokens", "d_in", "d_out", "batch", "context_len", "q_per_seq",
           "n_heads", "n_kv_heads", "head_dim", "bytes", "world_size", "time_ms", "framework", "kernel")
OPS = ("gemm", "attention", "moe", "memcpy", "elementwise", "allreduce")
# Columns each op needs to be predicted.
NEEDS = {
    "gemm": ("tokens", "d_in", "d_out"),
    "attention": ("batch", "context_len", "q_per_seq", "n_heads", "n_kv_heads", "head_dim"),
    "moe": ("tokens", "d_in", "d_out", "n_experts", "top_k"),
    "memcpy": ("bytes",),
    "elementwise": ("bytes",),
    "allreduce": ("bytes", "world_size"),
}
TEXT = ("op", "device", "dtype", "framework", "kernel")
NUMERIC = tuple(c for c in COLUMNS if c not in TEXT)


def read_measurements(path: str | Path, need_time: bool = True) -> pd.DataFrame:
    """Read and check a measurement CSV; one clear SpecsimError for what is wrong."""
    from specsim.files import read_text

    path = Path(path)
    text = read_text(path)  # refuses folders, devices, binary and non-UTF-8 files
    try:
        widths = {len(r) for r in csv.reader(io.StringIO(text)) if r}
    except csv.Error as exc:
        raise SpecsimError(f"{path}: not a readable CSV ({exc})") from None
    if len(widths) > 1:
        rows = [len(r) for r in csv.reader(io.StringIO(text)) if r]
        bad = next(i for i, n in enumerate(rows) if n != rows[0])
        raise SpecsimError(f"{path}: row {bad + 1} has {rows[bad]} fields, the header {rows[0]} (a ragged CSV)")
    try:
        # "nan"/"NA" text is kept as text (and refused where a number belongs); only empty cells are missing
        df = pd.read_csv(io.StringIO(text), keep_default_na=False, na_values=[""])
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise SpecsimError(f"{path}: not a readable CSV ({first})") from None
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
                what = ("time_ms must be a positive number, got" if col == "time_ms"
                        else f"column '{col}' is not a number:")
                raise SpecsimError(f"{where}: row {row + 2}: {what} {df[col].iloc[row]!r}")
            df[col] = converted
    for col in (c for c in NUMERIC if c != "time_ms"):
        v = df[col].to_numpy(dtype=float)
        negative = ~np.isnan(v) & (~np.isfinite(v) | (v < 0))
        if negative.any():
            row = int(np.flatnonzero(negative)[0])
            raise SpecsimError(f"{where}: row {row + 2}: column '{col}' must be a finite number >= 0, got {v[row]}")
    if "time_ms" in df.columns:
        t = df["time_ms"].to_numpy(dtype=float)
        not_time = (np.isnan(t) if need_time else np.zeros(len(t), bool)) | (t <= 0) | np.isinf(t)
        if not_time.any():
            row = int(np.flatnonzero(not_time)[0])
            raise SpecsimError(f"{where}: row {row + 2}: time_ms must be a positive number, got {t[row]}")
    df["op"] = df["op"].astype(str).str.strip().str.lower()
    for col in TEXT[1:]:
        df[col] = df[col].astype(object).where(df[col].notna(), "").astype(str).str.strip()
    return df


# Kernel dtypes of the measured tables -> (tensor-core dtype, weight bytes); None: not predictable
# (nvfp4: no fp4 peak in the profiles). Weight-only formats (int4_wo, int8_wo, w4a16) run 16-bit MMAs
# on dequantised weights; fp8_block (128x128 block scales) and int8 SmoothQuant are W8A8.
KERNEL_DTYPES: dict[str, tuple[str, float] | None] = {
    "": ("bf16", 2.0), "bf16": ("bf16", 2.0), "fp16": ("bf16", 2.0), "fp32": ("fp32", 4.0),
    "fp8": ("fp8", 1.0), "fp8_block": ("fp8", 1.0), "int8": ("int8", 1.0), "int8_sq": ("int8", 1.0),
    "int8_wo": ("bf16", 1.0), "int4_wo": ("bf16", 0.5), "int4": ("bf16", 0.5), "w4a16_mxfp4": ("bf16", 0.53),
    "nvfp4": None, "w4a8_mxfp4_mxfp8": None,
}
KV_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "": 2.0}


def kernel_dtype(dtype: str) -> tuple[str, float] | None:
    """(tensor-core dtype, weight bytes) of a measured kernel's dtype; None when not predictable."""
    key = canonical(str(dtype)) if str(dtype) else ""
    if key in KERNEL_DTYPES:
        return KERNEL_DTYPES[key]
    return (compute_dtype(key), WEIGHT_BYTES[key]) if key in WEIGHT_BYTES else None


def _compute_dtype(dtype: str) -> str:
    kd = kernel_dtype(dtype)
    return kd[0] if kd else "bf16"


def _column(d: pd.DataFrame, name: str, default: float = np.nan) -> np.ndarray:
    if name not in d.columns:
        return np.full(len(d), default)
    return pd.to_numeric(d[name], errors="coerce").fillna(default).to_numpy(dtype=float)


def _text(d: pd.DataFrame, name: str, default: str = "") -> pd.Series:
    if name not in d.columns:
        return pd.Series(default, index=d.index)
    return d[name].fillna(default).astype(str).str.strip().replace("", default).replace("nan", default)


class RowSet:
    """The predictable rows of a measurement table as arrays, grouped by op and kernel dtype, ready
    to be predicted on any profile many times (calibration evaluates them hundreds of times)."""

    def __init__(self, df: pd.DataFrame) -> None:
        self.n = len(df)
        self.parts: list[tuple[str, np.ndarray, dict[str, object]]] = []
        for op, cols in NEEDS.items():
            if not all(c in df.columns for c in cols):
                continue
            sel = (df["op"] == op).to_numpy() & df[list(cols)].notna().all(axis=1).to_numpy()
            idx = np.flatnonzero(sel)
            if not len(idx):
                continue
            d = df.iloc[idx]
            if op in ("gemm", "moe"):
                kd = d["dtype"].map(kernel_dtype)
                ok = kd.notna().to_numpy()
                for _, g in d[ok].groupby(kd[ok].map(str)):
                    cdt, wb = kernel_dtype(str(g["dtype"].iloc[0]))  # type: ignore[misc]
                    gi = idx[np.isin(d.index, g.index)]
                    arrays: dict[str, Any] = {c: _column(g, c) for c in cols}
                    arrays.update(dtype=cdt, wb=wb, buffer_sets=_column(g, "buffer_sets"), ep=_column(g, "ep", 1.0))
                    if op == "moe":  # routing: "balanced" rows spread T*k assignments evenly; others random
                        dist = _text(g, "distribution", "")
                        for bal, gg in g.groupby(dist == "balanced"):
                            sub = np.isin(g.index, gg.index)
                            part = {k_: (v[sub] if isinstance(v, np.ndarray) else v) for k_, v in arrays.items()}
                            self.parts.append((op, gi[sub], {**part, "balanced": bool(bal)}))
                        continue
                    self.parts.append((op, gi, arrays))
            elif op == "attention":
                dtypes = _text(d, "dtype", "bf16").map(_compute_dtype)
                for cdt, g in d.groupby(dtypes):
                    gi = idx[np.isin(d.index, g.index)]
                    kvb = _text(g, "kv_dtype", "bf16").map(lambda x: KV_BYTES.get(canonical(x), 2.0)).to_numpy()
                    arrays = {c: _column(g, c) for c in cols}
                    arrays.update(dtype=str(cdt), kv_tok=2.0 * arrays["n_kv_heads"] * arrays["head_dim"] * kvb,
                                  buffer_sets=_column(g, "buffer_sets"))
                    self.parts.append((op, gi, arrays))
            elif op == "allreduce":
                impls = _text(d, "impl", "nccl")
                for impl, g in d.groupby(impls):
                    gi = idx[np.isin(d.index, g.index)]
                    self.parts.append((op, gi, {"bytes": _column(g, "bytes"), "world_size": _column(g, "world_size"),
                                                "impl": str(impl)}))
            else:
                self.parts.append((op, idx, {"bytes": _column(d, "bytes")}))

    def predict_ms(self, hw: HardwareProfile) -> np.ndarray:
        """Predicted milliseconds per row on `hw`'s roofline; NaN where the op can't be predicted."""
        out = np.full(self.n, np.nan)
        for op, idx, a in self.parts:
            out[idx] = predict_part(op, a, hw) * 1e3
        return out


def predict_part(op: str, a: dict, hw: HardwareProfile) -> np.ndarray:
    """Seconds of one RowSet part on the roofline (the GPU lacking a dtype: NaN)."""
    from specsim.errors import SpecsimError as _Err

    try:
        if op == "gemm":
            sets = None if np.all(np.isnan(a["buffer_sets"])) else a["buffer_sets"]
            return rl.gemm_time_s(a["tokens"], a["d_out"], a["d_in"], hw, a["dtype"], a["wb"], buffer_sets=sets)[0]
        if op == "attention":
            sets = None if np.all(np.isnan(a["buffer_sets"])) else a["buffer_sets"]
            return attention_time_s(a["batch"], a["q_per_seq"], a["context_len"], a["n_heads"], a["n_kv_heads"],
                                    a["head_dim"], a["head_dim"], a["kv_tok"], hw, a["dtype"], buffer_sets=sets)[0]
        if op == "moe":
            sets = None if np.all(np.isnan(a["buffer_sets"])) else a["buffer_sets"]
            return moe_time_s(a["tokens"], a["d_in"], a["d_out"], a["n_experts"], a["top_k"], hw, a["dtype"],
                              a["wb"], ep=a["ep"], balanced=a.get("balanced", False), buffer_sets=sets)[0]
        if op == "allreduce":
            return rl.allreduce_time_s(a["bytes"], a["world_size"], hw, a["impl"])
        return rl.memory_op_time_s(a["bytes"], hw)
    except _Err:
        n = len(next(v for v in a.values() if isinstance(v, np.ndarray)))
        return np.full(n, np.nan)


def predict_rows(df: pd.DataFrame, hw: HardwareProfile) -> np.ndarray:
    """Predicted milliseconds for each row on one profile; NaN where the op can't be predicted."""
    return RowSet(df).predict_ms(hw)


#: Kernel names (the `kernel` column, matched case-insensitively as substrings) that name a kernel family: the row is
#: priced with that family whatever its framework's default (NVIDIA's tables: vllm_flash_attn_fa2 / _fa3, SGLang's fa3,
#: TensorRT-LLM's xqa; vLLM's CutlassFP8ScaledMM and SGLang's sgl_kernel_fp8_scaled_mm run their fixed fp8 dispatch on
#: Hopper, cuBLAS / DeepGEMM / torch-flow GEMMs the best configuration).
KERNEL_FAMILIES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("xqa", {"attention_kernel": "xqa"}), ("fa2", {"attention_kernel": "fa2"}), ("fa3", {"attention_kernel": "fa3"}),
    ("flashinfer", {"attention_kernel": "fa3"}),
    ("cutlassfp8scaledmm", {"fp8": "vllm_sm90_fp8"}), ("sgl_kernel_fp8_scaled_mm", {"fp8": "sglang_sm90_fp8"}),
    ("cublas", {"fp8": ""}), ("deepgemm", {"fp8": ""}),
)


def with_kernel(hw: HardwareProfile, kernel: str) -> HardwareProfile:
    """`hw` running the kernel family a row's `kernel` names (KERNEL_FAMILIES), else `hw` itself; a fixed fp8 dispatch
    only on the GPUs it is written for (Hopper)."""
    name = kernel.strip().lower().replace("-", "_")
    for key, family in KERNEL_FAMILIES:
        if key in name:
            if "attention_kernel" in family:
                return dataclasses.replace(hw, attention_kernel=family["attention_kernel"])
            dispatch = family["fp8"] if hw.is_hopper else ""
            return dataclasses.replace(hw, gemm_dispatch={"fp8": dispatch} if dispatch else {})
    return hw


def predict_table(df: pd.DataFrame, resolve: Callable[[str], HardwareProfile]) -> pd.DataFrame:
    """Copy of the table with `predicted_ms`; `resolve(device)` gives each row's profile, priced with the kernels of
    the row's `framework` where the profile holds them (`HardwareProfile.for_framework`) and the family its `kernel`
    names (`with_kernel`)."""
    out = df.copy()
    pred = np.full(len(df), np.nan)
    known = df["op"].isin(list(NEEDS)).to_numpy()

    def text(column: str) -> pd.Series:
        return (df[column].fillna("").astype(str).str.strip().str.lower() if column in df
                else pd.Series("", index=df.index))

    fw, kernel = text("framework"), text("kernel")
    keys = [df["device"][known], fw[known], kernel[known]]
    for (device, framework, name), g in df[known].groupby(keys):
        idx = np.flatnonzero(known & (df["device"].to_numpy() == device) & (fw.to_numpy() == framework)
                             & (kernel.to_numpy() == name))
        pred[idx] = predict_rows(g, with_kernel(resolve(str(device)).for_framework(str(framework)), str(name)))
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
