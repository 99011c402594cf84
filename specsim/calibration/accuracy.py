"""How well a profile predicts measured rows: absolute percentage errors, and their report per op,
token band, all-reduce world size (and any column), on the fitted and the held-out rows."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from specsim.calibration.allreduce import allreduce_impl
from specsim.cost.measurements import BAND_LABELS, token_band
from specsim.errors import SpecsimError


def errors_pct(df: pd.DataFrame, pred_ms: np.ndarray) -> np.ndarray:
    """Absolute percentage error of each row's prediction."""
    return np.abs(pred_ms / df["time_ms"].to_numpy(float) - 1.0) * 100.0


def error_report(df: pd.DataFrame, pred_ms: np.ndarray, held: np.ndarray, by: str | None = None) -> pd.DataFrame:
    """Mean absolute percentage error overall, per op, per token band (GEMM/attention) and per
    world size (all-reduce), on the fitted and the held-out rows; optionally per `by` column."""
    e = errors_pct(df, pred_ms)
    tokens = df["tokens"].fillna(df["batch"] * df["q_per_seq"])
    band = token_band(tokens).astype(str)
    out: list[dict[str, object]] = []
    for subset, mask in (("fitted", ~held), ("held-out", held)):
        ok = mask & np.isfinite(e)
        if not ok.any():
            continue

        def add(group: str, sel: np.ndarray, subset: str = subset, ok: np.ndarray = ok) -> None:
            s = sel & ok
            if s.any():
                out.append({"rows": subset, "group": group, "n": int(s.sum()), "mape_pct": float(e[s].mean()),
                            "p90_pct": float(np.percentile(e[s], 90)), "max_pct": float(e[s].max())})

        add("all", np.ones(len(df), bool))
        for op in sorted(df.loc[ok, "op"].unique()):
            _add_op_groups(df, op, band, ok, add)
        if by is not None:
            _add_by_groups(df, by, band, ok, add)
    return pd.DataFrame(out)


def _add_op_groups(df: pd.DataFrame, op: str, band: pd.Series, ok: np.ndarray,
                   add: Callable[[str, np.ndarray], None]) -> None:
    """One op's rows, and per token band (GEMM, attention, MoE) or implementation and world size (all-reduce)."""
    is_op = (df["op"] == op).to_numpy()
    add(f"op={op}", is_op)
    if op in ("gemm", "attention"):
        for label in BAND_LABELS:
            add(f"op={op} tokens={label}", is_op & (band == label).to_numpy())
    if op == "moe":
        for label in BAND_LABELS:
            add(f"op=moe tokens={label}", is_op & (band == label).to_numpy())
    if op == "allreduce":
        impls = allreduce_impl(df)
        for impl in sorted(impls[ok & is_op].unique()):
            tag = "" if impl == "nccl" else f" impl={impl}"
            for n in sorted(df.loc[ok & is_op & (impls == impl).to_numpy(), "world_size"].dropna().unique()):
                add(f"op=allreduce{tag} world_size={int(n)}",
                    is_op & (impls == impl).to_numpy() & (df["world_size"] == n).to_numpy())


def _add_by_groups(df: pd.DataFrame, by: str, band: pd.Series, ok: np.ndarray,
                   add: Callable[[str, np.ndarray], None]) -> None:
    """Each value of column `by`, and (unless `by` is op) its GEMM and attention rows per token band."""
    if by not in df.columns:
        raise SpecsimError(f"--by: no column {by!r} in the measurements")
    for v in sorted(df.loc[ok, by].dropna().astype(str).unique()):
        add(f"{by}={v}", (df[by].astype(str) == v).to_numpy())
        if by != "op":
            for label in BAND_LABELS:
                add(f"{by}={v} tokens={label}", (df[by].astype(str) == v).to_numpy()
                    & (band == label).to_numpy() & df["op"].isin(["gemm", "attention"]).to_numpy())
