"""The measured tables of one GPU and framework as ratio grids (ratio_grid.py): built from measurement
rows and the roofline, the rows read from a CSV or NVIDIA's aiconfigurator tables, cached per profile."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from specsim.cost import roofline as rl
from specsim.cost.hardware_profile import HardwareProfile
from specsim.cost.ratio_grid import RatioGrid, safe_log
from specsim.errors import SpecsimError

if TYPE_CHECKING:  # pandas only where measured tables are built or read (start-up of the planner)
    import pandas as pd


@dataclass
class MeasuredTables:
    """Ratio grids of one GPU and framework, built from measurement rows and the roofline."""

    source: str
    gemm_grid: dict[str, RatioGrid] = field(default_factory=dict)
    decode: dict[tuple[float, float, float, float], RatioGrid] = field(default_factory=dict)
    prefill: dict[tuple[float, float, float, str], RatioGrid] = field(default_factory=dict)
    moe: dict[tuple[str, float, float, float, float], RatioGrid] = field(default_factory=dict)
    allreduce: dict[tuple[str, float], RatioGrid] = field(default_factory=dict)
    rows: int = 0


def _main_kernel(d: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Per group, the rows of the kernel with the most rows (newest version first): one kernel each."""
    import pandas as pd

    keep = []
    for _, g in d.groupby(by, dropna=False):
        counts = g.groupby(["framework_version", "kernel"], dropna=False).size()
        if counts.empty:
            continue
        best = counts.sort_values(kind="stable").index[-1]
        keep.append(g[(g["framework_version"] == best[0]) & (g["kernel"] == best[1])])
    return pd.concat(keep) if keep else d.iloc[:0]


def build_tables(df: pd.DataFrame, hw: HardwareProfile, source: str) -> MeasuredTables:
    """Ratio grids from measurement rows of one GPU (one framework's kernels; see `_main_kernel`)."""
    import pandas as pd

    from specsim.cost.measurements import RowSet, kernel_dtype
    from specsim.cost.moe import moe_time_s

    df = df.copy()
    for col in ("framework_version", "kernel", "phase", "kv_dtype", "impl", "distribution"):
        if col not in df.columns:
            df[col] = ""
        df[col] = df[col].astype(object).where(df[col].notna(), "").astype(str)
    tables = MeasuredTables(source)
    gemm = df[df["op"] == "gemm"]
    if len(gemm):
        gemm = gemm.assign(cdt=gemm["dtype"].map(lambda x: str(kernel_dtype(x))))
        gemm = _main_kernel(gemm[gemm["cdt"] != "None"], ["cdt"])
        pred = RowSet(gemm).predict_ms(hw)
        ratio = safe_log(gemm["time_ms"]) - safe_log(pred)
        for cdt, g in gemm.assign(r=ratio).groupby("cdt"):
            g = g[np.isfinite(g["r"])]
            grid = RatioGrid.build([g["tokens"].to_numpy(float), g["d_out"].to_numpy(float),
                                    g["d_in"].to_numpy(float)], g["r"].to_numpy())
            kd = kernel_dtype(str(g["dtype"].iloc[0])) if len(g) else None
            if kd is not None:  # a GEMM over more tokens never costs less than one over fewer (padding)
                dtype, wb = kd
                grid = grid.padded(lambda m, n, k, dtype=dtype, wb=wb: rl.gemm_time_s(m, n, k, hw, dtype, wb)[0])
            tables.gemm_grid[str(cdt)] = grid
    att = df[df["op"] == "attention"]
    if len(att):
        att = _main_kernel(att, ["phase", "dtype", "kv_dtype"])
        pred = RowSet(att).predict_ms(hw)
        att = att.assign(r=safe_log(att["time_ms"]) - safe_log(pred))
        att = att[np.isfinite(att["r"])]
        dec = att[att["q_per_seq"] == 1]
        for key, g in dec.groupby(["n_heads", "n_kv_heads", "head_dim", dec["kv_dtype"].map(kv_bytes_key)]):
            tables.decode[(float(key[0]), float(key[1]), float(key[2]), float(key[3]))] = RatioGrid.build(
                [g["batch"].to_numpy(float), g["context_len"].to_numpy(float)], g["r"].to_numpy())
        pre = att[(att["q_per_seq"] > 1) & (att["q_per_seq"] == att["context_len"])]
        for key, g in pre.groupby(["n_heads", "n_kv_heads", "head_dim", pre["dtype"].map(compute_key)]):
            tables.prefill[(float(key[0]), float(key[1]), float(key[2]), str(key[3]))] = RatioGrid.build(
                [g["batch"].to_numpy(float), g["q_per_seq"].to_numpy(float)], g["r"].to_numpy())
    moe = df[df["op"] == "moe"]
    if len(moe):
        if "distribution" in moe:
            moe = moe[moe["distribution"].isin(["", "balanced"])]
        moe = moe.assign(cdt=moe["dtype"].map(lambda x: str(kernel_dtype(x))))
        moe = _main_kernel(moe[moe["cdt"] != "None"], ["cdt"])
        if len(moe):
            pred = RowSet(moe).predict_ms(hw)
            moe = moe.assign(r=safe_log(moe["time_ms"]) - safe_log(pred),
                             ep=pd.to_numeric(moe.get("ep", 1), errors="coerce"))
            moe = moe[np.isfinite(moe["r"]) & (moe["ep"].fillna(1) == 1)]
            for key, g in moe.groupby(["cdt", "d_in", "d_out", "n_experts", "top_k"]):
                grid = RatioGrid.build([g["tokens"].to_numpy(float)], g["r"].to_numpy())
                kd = kernel_dtype(str(g["dtype"].iloc[0]))
                if kd is not None:  # a layer over more tokens never costs less than one over fewer (padding)
                    hid, inter, experts, top = (float(x) for x in key[1:])
                    grid = grid.padded(lambda t, hid=hid, inter=inter, experts=experts, top=top, kd=kd: moe_time_s(
                        t, hid, inter, experts, top, hw, kd[0], kd[1])[0])
                tables.moe[(key[0], *(float(x) for x in key[1:]))] = grid
    ar = df[df["op"] == "allreduce"]
    if len(ar):
        ar = ar.assign(impl=ar["impl"].replace("", "nccl"))
        ar = ar[ar["impl"].isin(["nccl", "nccl_graph", "custom"])]
        if "dtype" in ar:
            ar = ar[~ar["dtype"].isin(["int8"])]
        ar = _main_kernel(ar, ["impl"])
        pred = RowSet(ar).predict_ms(hw)
        ar = ar.assign(r=safe_log(ar["time_ms"]) - safe_log(pred))
        ar = ar[np.isfinite(ar["r"])]
        for key, g in ar.groupby(["impl", "world_size"]):
            tables.allreduce[(str(key[0]), float(key[1]))] = RatioGrid.build([g["bytes"].to_numpy(float)],
                                                                             g["r"].to_numpy())
    tables.rows = len(df)
    return tables


def kv_bytes_key(dtype: str) -> float:
    return 1.0 if str(dtype).startswith("fp8") else 2.0


def compute_key(dtype: str) -> str:
    return "fp8" if str(dtype).startswith("fp8") else "bf16"


_TABLES: dict[tuple[str, str, str | None, str], MeasuredTables] = {}
_LOCK = threading.Lock()
TableLoader = Callable[[HardwareProfile], "tuple[pd.DataFrame, str]"]


def _load_rows(hw: HardwareProfile) -> tuple[pd.DataFrame, str]:
    """Measurement rows for `hw`'s table backend: its CSV, or NVIDIA's tables for this GPU."""
    choice = hw.cost_model
    if choice.measurements:
        from specsim.cost.measurements import read_measurements

        df = read_measurements(choice.measurements)
        df = df[df["device"].isin(["", hw.name])]
        if (df["framework"] == choice.framework).any():  # a CSV of several frameworks: the chosen one's
            df = df[df["framework"].isin([choice.framework, "nccl", ""])]
        return df, f"measured tables {choice.measurements}"
    from specsim.cost import aiconfigurator as aic

    system = aic.system_name(hw.name)
    try:
        df = aic.import_aiconfigurator([system], [choice.framework, "nccl"])
    except SpecsimError as exc:
        raise SpecsimError(f"{hw.name}: the table cost model needs measured tables: {exc}") from None
    return df, f"aiconfigurator-core {aic.installed_version()} {choice.framework} tables"


def tables_for(hw: HardwareProfile, loader: TableLoader = _load_rows) -> MeasuredTables:
    """The (cached) ratio grids for `hw`'s table backend."""
    choice = hw.cost_model
    key = (hw.name, choice.framework, choice.measurements, repr(hw.efficiency))
    with _LOCK:
        if key not in _TABLES:
            df, source = loader(hw)
            if df.empty:
                raise SpecsimError(f"{hw.name}: no measured rows for the table cost model ({source})")
            _TABLES[key] = build_tables(df, hw, source)
        return _TABLES[key]
