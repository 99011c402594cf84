"""Measurement rows -> ratio grids (ratio_grid.py), one builder per kernel family: log(measured / roofline) of each
row against the roofline the forward pass multiplies (`row_roofline_ms`), gridded per shape key.

A family's grids are built on first use (`LazyGrids`): NVIDIA's tables hold hundreds of model shapes per family
(SGLang's H200 MoE table: 1,257 shape x expert-parallel keys) and a pass reads a handful."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterator, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar, cast

import numpy as np

from specsim.cost import roofline as rl
from specsim.cost.attention import attention_time_s
from specsim.cost.dtypes import WEIGHT_BYTES, canonical, compute_dtype
from specsim.cost.hardware_profile import HardwareProfile
from specsim.cost.ratio_grid import RatioGrid, safe_log
from specsim.errors import SpecsimError

if TYPE_CHECKING:  # pandas only where measured tables are built (start-up of the table cost model)
    import pandas as pd

#: The MLA decode kernel's shapes in NVIDIA's generation_mla tables: DeepSeek-V3's latent (kv_lora_rank 512) plus its
#: rope key (64) per token, one latent "KV head" (collector/sglang/collect_mla.py and trtllm/collect_mla.py time
#: DeepSeek-V3's MLA; the table names only the heads per GPU).
MLA_QK_DIM, MLA_V_DIM = 576.0, 512.0

GemmKey = str  # str((tensor-core dtype, weight bytes)): the key the cost model's gemm() looks up
MoeKey = tuple[str, float, float, float, float, float]  # (GemmKey, hidden, width per GPU, experts, top-k, ep)
K = TypeVar("K", bound=Hashable)


class LazyGrids(Mapping[K, RatioGrid]):
    """A family's grids by key, each built by its own builder on first lookup (None from a builder: no grid, as a
    key never measured). Iterating builds them all (the small families: GEMM dtypes, all-reduce sizes)."""

    def __init__(self, builders: dict[K, Callable[[], RatioGrid | None]]) -> None:
        self._builders = builders
        self._built: dict[K, RatioGrid | None] = {}
        self._lock = threading.Lock()

    def _grid(self, key: K) -> RatioGrid | None:
        if key not in self._built:
            build = self._builders.get(key)
            if build is None:
                return None
            with self._lock:
                if key not in self._built:
                    self._built[key] = build()
        return self._built[key]

    def __getitem__(self, key: K) -> RatioGrid:
        grid = self._grid(key)
        if grid is None:
            raise KeyError(key)
        return grid

    def __iter__(self) -> Iterator[K]:
        return (key for key in list(self._builders) if self._grid(key) is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def table_key(dtype: str) -> GemmKey | None:
    """The grid key of a measured GEMM / MoE dtype: (tensor-core dtype, weight bytes) as the forward pass asks for
    it. A weight format specsim prices (dtypes.WEIGHT_BYTES) keeps its own bytes, so block-scaled fp8 (1 + 4 /
    128^2 bytes: DeepGEMM / CUTLASS block kernels) and per-tensor fp8 (1 byte: the scaled-mm kernels) are separate
    tables; other measured kinds map through measurements.kernel_dtype. None: not predictable."""
    from specsim.cost.measurements import kernel_dtype

    kd = kernel_dtype(dtype)
    if kd is None:
        return None
    fmt = canonical(str(dtype))
    if fmt in WEIGHT_BYTES and compute_dtype(fmt) == kd[0]:
        return str((kd[0], WEIGHT_BYTES[fmt]))
    return str(kd)


def _keys(dtypes: pd.Series) -> pd.Series:
    """`table_key` of each row (evaluated once per distinct dtype)."""
    return dtypes.map({d: table_key(d) for d in dtypes.unique()})


def kv_bytes_key(dtype: str) -> float:
    return 1.0 if str(dtype).startswith("fp8") else 2.0


def compute_key(dtype: str) -> str:
    return "fp8" if str(dtype).startswith("fp8") else "bf16"


#: The columns that name a measured shape (a row's key apart from its kernel).
SHAPE_COLUMNS = ("tokens", "d_in", "d_out", "batch", "context_len", "q_per_seq", "n_heads", "n_kv_heads", "head_dim",
                 "n_experts", "top_k", "ep", "bytes", "world_size", "kv_dtype", "distribution")


def main_kernel(d: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Per group, one kernel's rows: of the version with the most rows, every kernel when they measured disjoint
    shapes (the framework's own dispatch: vLLM 0.24's block-fp8 GEMM runs FlashInfer for M <= 17, DeepGEMM from M =
    32 and CUTLASS for the small N, K it alone covers), else the kernel with the most rows (kernels timed on the same
    shapes are alternatives: FA3 or FlashInfer attention)."""
    import pandas as pd

    keep = []
    for _, g in d.groupby(by, dropna=False):
        counts = g.groupby(["framework_version", "kernel"], dropna=False).size()
        if counts.empty:
            continue
        version, kernel = counts.sort_values(kind="stable").index[-1]
        same = g[g["framework_version"] == version]
        shapes = pd.util.hash_pandas_object(same[[c for c in SHAPE_COLUMNS if c in same]], index=False)
        dispatch = shapes.groupby(same["kernel"].to_numpy()).unique().explode().duplicated().sum() == 0
        keep.append(same if dispatch else same[same["kernel"] == kernel])
    return pd.concat(keep) if keep else d.iloc[:0]


def _num(x: object) -> float:
    """A groupby key's part as a float (pandas types group keys as Hashable)."""
    return float(cast(Any, x))


def _key_parts(key: GemmKey) -> tuple[str, float]:
    dtype, wb = key.strip("()").split(", ")
    return dtype.strip("'"), float(wb)


def _sets(d: pd.DataFrame) -> np.ndarray | None:
    """The rows' operand copies (aiconfigurator.py: the collector's L2 working set), None when unknown."""
    import pandas as pd

    sets = pd.to_numeric(d["buffer_sets"], errors="coerce") if "buffer_sets" in d else None
    return None if sets is None or sets.isna().all() else sets.to_numpy(float)


def _roof_s(op: str, g: pd.DataFrame, hw: HardwareProfile) -> np.ndarray:
    """Seconds of rows of one op and `table_key` (column "key") on the roofline the grids correct, under the rows'
    benchmark conditions (buffer_sets): GEMMs and MoE with the key's weight bytes (as the forward pass prices that
    format), MoE at the rows' routing and expert parallelism, MLA in its latent form."""
    from specsim.cost.moe import moe_time_s

    col = {c: g[c].to_numpy(float) for c in ("tokens", "d_in", "d_out", "n_experts", "top_k", "ep", "batch",
                                              "context_len", "n_heads") if c in g}
    if op == "mla":
        kvb = g["kv_dtype"].map(kv_bytes_key).to_numpy(float)
        return attention_time_s(col["batch"], 1.0, col["context_len"], col["n_heads"], 1.0, MLA_QK_DIM, MLA_V_DIM,
                                MLA_QK_DIM * kvb, hw, compute_key(str(g["dtype"].iloc[0])), buffer_sets=1.0)[0]
    dtype, wb = _key_parts(str(g["key"].iloc[0]))
    if op == "gemm":
        return rl.gemm_time_s(col["tokens"], col["d_out"], col["d_in"], hw, dtype, wb, buffer_sets=_sets(g))[0]
    balanced = bool((g["distribution"] == "balanced").all())
    return moe_time_s(col["tokens"], col["d_in"], col["d_out"], col["n_experts"], col["top_k"], hw, dtype, wb,
                      ep=np.nan_to_num(col["ep"], nan=1.0), balanced=balanced, buffer_sets=_sets(g))[0]


def text_columns(df: pd.DataFrame) -> pd.DataFrame:
    """The rows with every column the builders read (text columns as strings, "" for missing)."""
    df = df.copy()
    for col in ("framework_version", "kernel", "phase", "kv_dtype", "impl", "distribution", "dtype", "op"):
        if col not in df.columns:
            df[col] = ""
        df[col] = df[col].astype(object).where(df[col].notna(), "").astype(str)
    for col in ("tokens", "d_in", "d_out", "batch", "context_len", "q_per_seq", "n_heads", "n_kv_heads", "head_dim",
                "bytes", "world_size", "n_experts", "top_k", "ep", "buffer_sets", "time_ms"):
        if col not in df.columns:
            df[col] = np.nan
    return df


def row_roofline_ms(df: pd.DataFrame, hw: HardwareProfile) -> np.ndarray:
    """Milliseconds of each measurement row on the roofline its grid corrects (`_roof_s` for GEMM, MoE and MLA rows,
    measurements.RowSet otherwise); NaN where a row is not predictable (nvfp4, a dtype the GPU lacks)."""
    from specsim.cost.measurements import RowSet

    df = text_columns(df.reset_index(drop=True))
    op = df["op"].to_numpy(str)
    out = np.full(len(df), np.nan)
    rest = ~np.isin(op, ["gemm", "moe", "mla"])
    if rest.any():
        out[rest] = RowSet(df[rest].reset_index(drop=True)).predict_ms(hw)
    keyed = df.assign(key=_keys(df["dtype"]), bal=df["distribution"] == "balanced")
    for (name, _, _), g in keyed[np.isin(op, ["gemm", "moe", "mla"])].groupby(["op", "key", "bal"], dropna=False):
        if name != "mla" and not isinstance(g["key"].iloc[0], str):
            out[g.index] = np.nan
            continue
        try:
            out[g.index] = _roof_s(str(name), g, hw) * 1e3
        except SpecsimError:  # the GPU lacks the dtype's tensor cores
            out[g.index] = np.nan
    return out


def _ratios(d: pd.DataFrame, hw: HardwareProfile) -> pd.DataFrame:
    """The rows with `r` = log(measured / roofline) (`row_roofline_ms`), unpredictable rows dropped."""
    d = d.reset_index(drop=True)
    r = safe_log(d["time_ms"].to_numpy(float)) - safe_log(row_roofline_ms(d, hw))
    return d.assign(r=r)[np.isfinite(r)]


def _grid(g: pd.DataFrame, hw: HardwareProfile, axes: tuple[str, ...],
          padded: Callable[..., np.ndarray] | None = None) -> RatioGrid | None:
    """The grid of one key's rows over `axes`, made non-decreasing along the first (tokens) against `padded`, the
    cold-weight roofline the forward pass multiplies (an engine pads a smaller problem into a larger one's cost)."""
    g = _ratios(g, hw)
    if g.empty:
        return None
    grid = RatioGrid.build([g[c].to_numpy(float) for c in axes], g["r"].to_numpy())
    return grid if padded is None else grid.padded(padded)


def gemm_grids(gemm: pd.DataFrame, hw: HardwareProfile) -> LazyGrids[GemmKey]:
    """One grid per GEMM key over tokens x N x K (one kernel per key: `main_kernel`), from rows timed in CUDA graphs
    as engines run them (a row with `graph` False, timed eagerly, holds host work the graph does not)."""
    eager = gemm["graph"].astype(str).str.lower().isin(["false", "0", "0.0"]) if "graph" in gemm else False
    gemm = gemm[~np.asarray(eager, dtype=bool)] if "graph" in gemm else gemm
    gemm = main_kernel(gemm.assign(key=_keys(gemm["dtype"])).dropna(subset=["key"]), ["key"])
    builders: dict[GemmKey, Callable[[], RatioGrid | None]] = {}
    for key, g in gemm.groupby("key"):
        dtype, wb = _key_parts(str(key))
        builders[str(key)] = partial(_grid, g, hw, ("tokens", "d_out", "d_in"),
                                     partial(_gemm_cold_s, hw=hw, dtype=dtype, weight_bytes=wb))
    return LazyGrids(builders)


def _gemm_cold_s(m: np.ndarray, n: np.ndarray, k: np.ndarray, hw: HardwareProfile, dtype: str, weight_bytes: float
                 ) -> np.ndarray:
    """The forward pass's GEMM (cold weights), what a GEMM grid's ratio multiplies."""
    return rl.gemm_time_s(m, n, k, hw, dtype, weight_bytes)[0]


DecodeKey = tuple[float, float, float, float]  # (heads, KV heads, head size, KV bytes per element)
PrefillKey = tuple[float, float, float, str]  # (heads, KV heads, head size, compute dtype)


def attention_grids(att: pd.DataFrame, hw: HardwareProfile) -> tuple[LazyGrids[DecodeKey], LazyGrids[PrefillKey]]:
    """(decode, prefill) grids per head shape: decode rows (q = 1) over batch x KV length per KV bytes, prefill rows
    (q = L) over batch x prompt length per compute dtype."""
    att = main_kernel(att, ["phase", "dtype", "kv_dtype"])
    dec = att[att["q_per_seq"] == 1]
    decode: dict[DecodeKey, Callable[[], RatioGrid | None]] = {
        (_num(key[0]), _num(key[1]), _num(key[2]), _num(key[3])): partial(_grid, g, hw, ("batch", "context_len"))
        for key, g in dec.groupby(["n_heads", "n_kv_heads", "head_dim", dec["kv_dtype"].map(kv_bytes_key)])}
    pre = att[(att["q_per_seq"] > 1) & (att["q_per_seq"] == att["context_len"])]
    prefill: dict[PrefillKey, Callable[[], RatioGrid | None]] = {
        (_num(key[0]), _num(key[1]), _num(key[2]), str(key[3])): partial(_grid, g, hw, ("batch", "q_per_seq"))
        for key, g in pre.groupby(["n_heads", "n_kv_heads", "head_dim", pre["dtype"].map(compute_key)])}
    return LazyGrids(decode), LazyGrids(prefill)


def moe_grids(moe: pd.DataFrame, hw: HardwareProfile) -> LazyGrids[MoeKey]:
    """One grid over tokens per `MoeKey`: balanced routing (the forward pass spreads a layer's T x k assignments
    over its distinct experts), every expert-parallel degree the tables hold, made non-decreasing in tokens against
    what the ratio multiplies (the forward pass's layer: random routing, cold weights; moe.moe_time_s)."""
    import pandas as pd

    from specsim.cost.moe import moe_time_s

    moe = moe[moe["distribution"].isin(["", "balanced"])]
    moe = moe.assign(key=_keys(moe["dtype"]), ep=pd.to_numeric(moe["ep"], errors="coerce").fillna(1.0))
    moe = main_kernel(moe.dropna(subset=["key"]), ["key"])
    builders: dict[MoeKey, Callable[[], RatioGrid | None]] = {}
    for key, g in moe.groupby(["key", "d_in", "d_out", "n_experts", "top_k", "ep"]):
        dtype, wb = _key_parts(str(key[0]))
        hid, inter, experts, top, ep = (_num(x) for x in key[1:])

        def layer_s(t: np.ndarray, hid: float = hid, inter: float = inter, experts: float = experts,
                    top: float = top, dtype: str = dtype, wb: float = wb, ep: float = ep) -> np.ndarray:
            return moe_time_s(t, hid, inter, experts, top, hw, dtype, wb, ep=ep)[0]

        builders[(str(key[0]), hid, inter, experts, top, ep)] = partial(_grid, g, hw, ("tokens",), layer_s)
    return LazyGrids(builders)


def allreduce_grids(ar: pd.DataFrame, hw: HardwareProfile) -> LazyGrids[tuple[str, float]]:
    """One grid over message bytes per (implementation, GPUs): NCCL (nccl-tests) and the framework's graph-captured
    custom all-reduce; eager custom all-reduce and int8 rows are not what an engine runs in its graphs."""
    ar = ar.assign(impl=ar["impl"].replace("", "nccl"))
    ar = main_kernel(ar[ar["impl"].isin(["nccl", "nccl_graph", "custom"]) & ~ar["dtype"].isin(["int8"])], ["impl"])
    return LazyGrids({(str(key[0]), _num(key[1])): partial(_grid, g, hw, ("bytes",))
                      for key, g in ar.groupby(["impl", "world_size"])})


def mla_grids(mla: pd.DataFrame, hw: HardwareProfile) -> LazyGrids[tuple[float, float]]:
    """MLA decode (NVIDIA's generation_mla tables, SGLang and TensorRT-LLM: the attention kernel alone) per (heads per
    GPU, KV bytes per element) over batch x KV length, against the roofline's MLA form: one latent KV head of
    MLA_QK_DIM read per token, values MLA_V_DIM wide (attention.attention_time_s, as cost/ops.py prices MLA)."""
    mla = main_kernel(mla[mla["q_per_seq"] == 1], ["kv_dtype"])
    return LazyGrids({(_num(key[0]), _num(key[1])): partial(_grid, g, hw, ("batch", "context_len"))
                      for key, g in mla.groupby(["n_heads", mla["kv_dtype"].map(kv_bytes_key)])})


__all__ = ["MLA_QK_DIM", "MLA_V_DIM", "GemmKey", "LazyGrids", "MoeKey", "allreduce_grids", "attention_grids",
           "compute_key", "gemm_grids", "kv_bytes_key", "main_kernel", "mla_grids", "moe_grids", "row_roofline_ms",
           "table_key", "text_columns"]
