"""Cost models: what times one kernel of the forward pass. One protocol, two implementations,
chosen per hardware profile (`cost_model:` in its YAML) or with `--cost-model` — the shape of Vidur's
execution-time predictors (one abstract predictor, several implementations chosen by config).

* ``RooflineCostModel``: the analytic model of roofline.py (fitted efficiencies of the profile).
* ``TableCostModel``: measured kernels interpolated where a shape is covered, the roofline outside,
  as Vidur and NVIDIA's aiconfigurator do, plus the analytic fallback. It interpolates the ratio
  measured / roofline (in log space) over the measured grid and multiplies the roofline by it:
  at a measured shape under the benchmark's own conditions it returns the measurement; between
  measured shapes it corrects the roofline by its neighbours' errors; outside the grid (another
  head count, a shape beyond the sweep, eager NCCL) the ratio is 1 and the roofline answers. Because
  the roofline also models the benchmark's L2-warm replays (buffer_sets), the ratio carries the
  kernel's efficiency, not the benchmark's cache state, into a forward pass where weights are cold.

  Coverage: GEMMs (per tensor-core dtype: tokens x N x K grid), decode attention (batch x KV length
  per per-GPU head count, head size and KV dtype), prefill attention (batch x prompt length),
  fused MoE (tokens, per model shape and expert split), all-reduce (message size per GPU count and
  implementation). Verification attention (1 < q < L) has no table: it is the roofline's
  verification form scaled by the measured decode ratio at the same batch and KV length (the
  measured fixed and per-sequence costs of the decode kernel carry over; the tensor-core padding of
  q x group query rows is the roofline's).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from specsim.cost import roofline as rl
from specsim.cost.hardware import HardwareProfile
from specsim.errors import SpecsimError

if TYPE_CHECKING:  # pandas only where measured tables are built or read (start-up of the planner)
    import pandas as pd

Array = rl.Array


class CostModel(Protocol):
    """Seconds of each kernel family of a forward pass on one profile (arrays broadcast)."""

    @property
    def name(self) -> str: ...  # read-only: RooflineCostModel is a frozen dataclass

    def describe(self) -> str: ...

    def gemm(self, m: ArrayLike, n: ArrayLike, k: ArrayLike, dtype: str = "bf16", weight_bytes: float = 2.0,
             act_bytes: float = 2.0, groups: ArrayLike = 1.0, compute_scale: float = 1.0,
             ) -> tuple[Array, Array, Array]: ...

    def attention(self, batch: ArrayLike, q_per_seq: ArrayLike, context_len: ArrayLike, heads: ArrayLike,
                  kv_heads: ArrayLike, qk_dim: ArrayLike, v_dim: ArrayLike, kv_bytes_per_token: ArrayLike,
                  dtype: str = "bf16") -> tuple[Array, Array, Array, Array, Array]: ...

    def moe_ratio(self, tokens: ArrayLike, hidden: float, inter: float, n_experts: float, top_k: float,
                  dtype: str, weight_bytes: float) -> Array: ...

    def moe_fixed(self, routing_bytes: ArrayLike, permute_bytes: ArrayLike, active_experts: ArrayLike) -> Array: ...

    def moe_gemm(self, tokens: ArrayLike, rows: ArrayLike, active: ArrayLike, n: float, k: float, n_experts: float,
                 inter: float, dtype: str = "bf16", weight_bytes: float = 2.0, act_bytes: float = 2.0,
                 ) -> tuple[Array, Array, Array]: ...

    def allreduce(self, bytes_: ArrayLike, world_size: ArrayLike, impl: str = "nccl") -> Array: ...

    def memory_op(self, bytes_: ArrayLike, kernels: ArrayLike = 1.0) -> Array: ...


@dataclass(frozen=True)
class RooflineCostModel:
    """The analytic roofline (roofline.py) on `hw`'s fitted efficiencies."""

    hw: HardwareProfile
    name: str = "roofline"

    def describe(self) -> str:
        return "roofline"

    def gemm(self, m: ArrayLike, n: ArrayLike, k: ArrayLike, dtype: str = "bf16", weight_bytes: float = 2.0,
             act_bytes: float = 2.0, groups: ArrayLike = 1.0, compute_scale: float = 1.0,
             ) -> tuple[Array, Array, Array]:
        return rl.gemm_time_s(m, n, k, self.hw, dtype, weight_bytes, act_bytes, groups, compute_scale=compute_scale)

    def attention(self, batch: ArrayLike, q_per_seq: ArrayLike, context_len: ArrayLike, heads: ArrayLike,
                  kv_heads: ArrayLike, qk_dim: ArrayLike, v_dim: ArrayLike, kv_bytes_per_token: ArrayLike,
                  dtype: str = "bf16") -> tuple[Array, Array, Array, Array, Array]:
        return rl.attention_time_s(batch, q_per_seq, context_len, heads, kv_heads, qk_dim, v_dim, kv_bytes_per_token,
                                   self.hw, dtype)

    def moe_ratio(self, tokens: ArrayLike, hidden: float, inter: float, n_experts: float, top_k: float,
                  dtype: str, weight_bytes: float) -> Array:
        """Correction of a fused-MoE layer's roofline time (1: the roofline is the answer)."""
        return np.ones(np.shape(tokens))

    def moe_fixed(self, routing_bytes: ArrayLike, permute_bytes: ArrayLike, active_experts: ArrayLike) -> Array:
        """The fused-MoE layer's time outside its GEMM tiles (roofline.moe_fixed_s)."""
        return rl.moe_fixed_s(routing_bytes, permute_bytes, active_experts, self.hw)

    def moe_gemm(self, tokens: ArrayLike, rows: ArrayLike, active: ArrayLike, n: float, k: float, n_experts: float,
                 inter: float, dtype: str = "bf16", weight_bytes: float = 2.0, act_bytes: float = 2.0,
                 ) -> tuple[Array, Array, Array]:
        """One grouped GEMM of a fused-MoE layer as the GPU's kernel family runs it (roofline.moe_gemm_s):
        T = `tokens`, `active` experts of `rows` rows each, experts of width `inter`."""
        return rl.moe_gemm_s(tokens, rows, active, n, k, n_experts, inter, self.hw, dtype, weight_bytes, act_bytes)

    def allreduce(self, bytes_: ArrayLike, world_size: ArrayLike, impl: str = "nccl") -> Array:
        return rl.allreduce_time_s(bytes_, world_size, self.hw, impl)

    def memory_op(self, bytes_: ArrayLike, kernels: ArrayLike = 1.0) -> Array:
        return rl.memory_op_time_s(bytes_, self.hw, kernels)


# --------------------------------------------------------------------------------------------------
# Measured tables: log(measured / roofline) on regular grids


def _log(x: ArrayLike) -> Array:
    return np.log(np.maximum(np.asarray(x, dtype=float), 1e-30))


def _fill_holes(values: Array) -> Array:
    """Unmeasured grid points with measured neighbours on both sides along some axis get the mean of
    those pairs (one pass, interior only: a hole between measured shapes, never an extrapolation)."""
    filled = values.copy()
    holes = np.argwhere(np.isnan(values))
    for idx in holes:
        got = []
        for axis in range(values.ndim):
            lo, hi = idx.copy(), idx.copy()
            lo[axis] -= 1
            hi[axis] += 1
            if lo[axis] < 0 or hi[axis] >= values.shape[axis]:
                continue
            a, b = values[tuple(lo)], values[tuple(hi)]
            if np.isfinite(a) and np.isfinite(b):
                got.append(0.5 * (a + b))
        if got:
            filled[tuple(idx)] = float(np.mean(got))
    return filled


@dataclass
class RatioGrid:
    """log(measured / roofline) on a regular grid over log-axes (NaN where not measured);
    `lookup` interpolates multilinearly and returns NaN where any bracketing corner is missing."""

    axes: tuple[Array, ...]  # log of each axis' measured values, sorted
    values: Array  # shape = tuple(len(a) for a in axes)

    @classmethod
    def build(cls, coords: list[Array], log_ratio: Array) -> RatioGrid:
        axes = tuple(np.unique(_log(c)) for c in coords)
        values = np.full(tuple(len(a) for a in axes), np.nan)
        idx = tuple(np.searchsorted(a, _log(c)) for a, c in zip(axes, coords, strict=True))
        import pandas as pd

        df = pd.DataFrame({**{f"i{j}": ix for j, ix in enumerate(idx)}, "r": log_ratio})
        med = df.groupby([f"i{j}" for j in range(len(idx))])["r"].median()  # repeated keys: their median
        values[tuple(np.asarray(med.index.get_level_values(j)) if len(idx) > 1 else np.asarray(med.index)
                     for j in range(len(idx)))] = med.to_numpy()
        return cls(axes, _fill_holes(values))

    def lookup(self, *coords: ArrayLike) -> Array:
        xs = [_log(c) for c in np.broadcast_arrays(*coords)]
        shape = xs[0].shape
        xs = [x.reshape(-1) for x in xs]
        out = np.zeros(xs[0].shape)
        inside = np.ones(xs[0].shape, bool)
        corners: list[tuple[NDArray[np.intp], Array]] = []  # per axis: (lower index, weight of upper)
        for a, x in zip(self.axes, xs, strict=True):
            if len(a) == 1:
                hit = np.isclose(x, a[0])
                inside &= hit
                corners.append((np.zeros(x.shape, int), np.zeros(x.shape)))
                continue
            inside &= (x >= a[0] - 1e-12) & (x <= a[-1] + 1e-12)
            i = np.clip(np.searchsorted(a, x, side="right") - 1, 0, len(a) - 2)
            w = np.clip((x - a[i]) / (a[i + 1] - a[i]), 0.0, 1.0)
            corners.append((i, w))
        for bits in range(2 ** len(self.axes)):
            weight = np.ones(xs[0].shape)
            index = []
            for j, (i, w) in enumerate(corners):
                up = (bits >> j) & 1
                if len(self.axes[j]) == 1:
                    if up:
                        weight = weight * 0.0
                    index.append(i)
                    continue
                weight = weight * (w if up else 1.0 - w)
                index.append(i + up)
            v = self.values[tuple(index)]
            used = weight > 1e-12
            inside &= ~(used & np.isnan(v))
            out = out + np.where(used, np.nan_to_num(v), 0.0) * weight
        return np.where(inside, out, np.nan).reshape(shape)


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
        ratio = _log(gemm["time_ms"]) - _log(pred)
        for cdt, g in gemm.assign(r=ratio).groupby("cdt"):
            g = g[np.isfinite(g["r"])]
            tables.gemm_grid[str(cdt)] = RatioGrid.build([g["tokens"].to_numpy(float), g["d_out"].to_numpy(float),
                                                          g["d_in"].to_numpy(float)], g["r"].to_numpy())
    att = df[df["op"] == "attention"]
    if len(att):
        att = _main_kernel(att, ["phase", "dtype", "kv_dtype"])
        pred = RowSet(att).predict_ms(hw)
        att = att.assign(r=_log(att["time_ms"]) - _log(pred))
        att = att[np.isfinite(att["r"])]
        dec = att[att["q_per_seq"] == 1]
        for key, g in dec.groupby(["n_heads", "n_kv_heads", "head_dim", dec["kv_dtype"].map(_kv_bytes)]):
            tables.decode[(float(key[0]), float(key[1]), float(key[2]), float(key[3]))] = RatioGrid.build(
                [g["batch"].to_numpy(float), g["context_len"].to_numpy(float)], g["r"].to_numpy())
        pre = att[(att["q_per_seq"] > 1) & (att["q_per_seq"] == att["context_len"])]
        for key, g in pre.groupby(["n_heads", "n_kv_heads", "head_dim", pre["dtype"].map(_compute)]):
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
            moe = moe.assign(r=_log(moe["time_ms"]) - _log(pred), ep=pd.to_numeric(moe.get("ep", 1), errors="coerce"))
            moe = moe[np.isfinite(moe["r"]) & (moe["ep"].fillna(1) == 1)]
            for key, g in moe.groupby(["cdt", "d_in", "d_out", "n_experts", "top_k"]):
                tables.moe[(key[0], *(float(x) for x in key[1:]))] = RatioGrid.build(
                    [g["tokens"].to_numpy(float)], g["r"].to_numpy())
    ar = df[df["op"] == "allreduce"]
    if len(ar):
        ar = ar.assign(impl=ar["impl"].replace("", "nccl"))
        ar = ar[ar["impl"].isin(["nccl", "nccl_graph", "custom"])]
        if "dtype" in ar:
            ar = ar[~ar["dtype"].isin(["int8"])]
        ar = _main_kernel(ar, ["impl"])
        pred = RowSet(ar).predict_ms(hw)
        ar = ar.assign(r=_log(ar["time_ms"]) - _log(pred))
        ar = ar[np.isfinite(ar["r"])]
        for key, g in ar.groupby(["impl", "world_size"]):
            tables.allreduce[(str(key[0]), float(key[1]))] = RatioGrid.build([g["bytes"].to_numpy(float)],
                                                                             g["r"].to_numpy())
    tables.rows = len(df)
    return tables


def _kv_bytes(dtype: str) -> float:
    return 1.0 if str(dtype).startswith("fp8") else 2.0


def _compute(dtype: str) -> str:
    return "fp8" if str(dtype).startswith("fp8") else "bf16"


def _ratio(grid: RatioGrid | None, *coords: ArrayLike) -> Array:
    """exp(interpolated log-ratio), 1 where the grid does not cover the point."""
    if grid is None:
        return np.ones(np.broadcast(*coords).shape)
    return np.exp(np.nan_to_num(grid.lookup(*coords), nan=0.0))


@dataclass
class TableCostModel:
    """Measured tables where they cover a shape, the roofline outside (module docstring)."""

    hw: HardwareProfile
    tables: MeasuredTables
    name: str = "table"

    def __post_init__(self) -> None:
        self.roofline = RooflineCostModel(self.hw)

    def describe(self) -> str:
        return f"table ({self.tables.source}; roofline outside the measured shapes)"

    def gemm(self, m: ArrayLike, n: ArrayLike, k: ArrayLike, dtype: str = "bf16", weight_bytes: float = 2.0,
             act_bytes: float = 2.0, groups: ArrayLike = 1.0, compute_scale: float = 1.0,
             ) -> tuple[Array, Array, Array]:
        t, c, mem = self.roofline.gemm(m, n, k, dtype, weight_bytes, act_bytes, groups, compute_scale)
        if compute_scale != 1.0 or np.any(np.asarray(groups) != 1.0):
            return t, c, mem  # grouped GEMMs: the MoE tables cover them (moe_ratio)
        key = str((dtype, float(weight_bytes)))
        return t * _ratio(self.tables.gemm_grid.get(key), m, n, k), c, mem

    def attention(self, batch: ArrayLike, q_per_seq: ArrayLike, context_len: ArrayLike, heads: ArrayLike,
                  kv_heads: ArrayLike, qk_dim: ArrayLike, v_dim: ArrayLike, kv_bytes_per_token: ArrayLike,
                  dtype: str = "bf16") -> tuple[Array, Array, Array, Array, Array]:
        t, c, mem, flops, bytes_ = self.roofline.attention(batch, q_per_seq, context_len, heads, kv_heads, qk_dim,
                                                           v_dim, kv_bytes_per_token, dtype)
        if np.ndim(heads) or np.ndim(kv_heads) or np.ndim(qk_dim) or np.ndim(kv_bytes_per_token) or qk_dim != v_dim:
            return t, c, mem, flops, bytes_  # per-row head shapes (measurement rows) or MLA: roofline
        heads, kv_heads, qk_dim, kv_bytes_per_token = cast(  # scalars from here on
            "tuple[float, float, float, float]", (heads, kv_heads, qk_dim, kv_bytes_per_token))
        kvb = float(kv_bytes_per_token) / (2.0 * float(kv_heads) * float(qk_dim))
        b, q, ctx = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in (batch, q_per_seq, context_len)))
        dec = self.tables.decode.get((float(heads), float(kv_heads), float(qk_dim), kvb))
        pre = self.tables.prefill.get((float(heads), float(kv_heads), float(qk_dim), dtype))
        r = _ratio(dec, b, ctx)  # decode, and verification (1 < q < L): the decode kernel's ratio
        if pre is not None:
            r = np.where((q > 1) & (q >= ctx), _ratio(pre, b, q), r)
        return t * r, c, mem, flops, bytes_

    def moe_ratio(self, tokens: ArrayLike, hidden: float, inter: float, n_experts: float, top_k: float,
                  dtype: str, weight_bytes: float) -> Array:
        grid = self.tables.moe.get((str((dtype, float(weight_bytes))), float(hidden), float(inter), float(n_experts),
                                    float(top_k)))
        return _ratio(grid, tokens)

    def moe_fixed(self, routing_bytes: ArrayLike, permute_bytes: ArrayLike, active_experts: ArrayLike) -> Array:
        return self.roofline.moe_fixed(routing_bytes, permute_bytes, active_experts)

    def moe_gemm(self, tokens: ArrayLike, rows: ArrayLike, active: ArrayLike, n: float, k: float, n_experts: float,
                 inter: float, dtype: str = "bf16", weight_bytes: float = 2.0, act_bytes: float = 2.0,
                 ) -> tuple[Array, Array, Array]:
        # the roofline's: the measured MoE tables correct the whole layer (moe_ratio)
        return self.roofline.moe_gemm(tokens, rows, active, n, k, n_experts, inter, dtype, weight_bytes, act_bytes)

    def allreduce(self, bytes_: ArrayLike, world_size: ArrayLike, impl: str = "nccl") -> Array:
        t = self.roofline.allreduce(bytes_, world_size, impl)
        b, n = np.broadcast_arrays(np.asarray(bytes_, dtype=float), np.asarray(world_size, dtype=float))
        r = np.ones(b.shape)
        for (grid_impl, size), grid in self.tables.allreduce.items():
            if grid_impl == impl:
                r = np.where(n == size, _ratio(grid, b), r)
        return t * r

    def memory_op(self, bytes_: ArrayLike, kernels: ArrayLike = 1.0) -> Array:
        return self.roofline.memory_op(bytes_, kernels)

    def row_ratios(self, df: pd.DataFrame) -> Array:
        """The table's correction of the roofline for each measurement row (1 where not covered)."""
        import pandas as pd

        from specsim.cost.measurements import kernel_dtype

        r = np.ones(len(df))
        op = df["op"].astype(str).to_numpy()
        num = {c: pd.to_numeric(df[c], errors="coerce").to_numpy(float) if c in df else np.full(len(df), np.nan)
               for c in ("tokens", "d_in", "d_out", "batch", "q_per_seq", "context_len", "n_heads", "n_kv_heads",
                         "head_dim", "n_experts", "top_k", "bytes", "world_size", "ep")}
        text = {c: df[c].astype(object).where(df[c].notna(), "").astype(str).to_numpy() if c in df
                else np.full(len(df), "") for c in ("dtype", "kv_dtype", "impl")}
        grid: RatioGrid | None
        for key, grid in self.tables.gemm_grid.items():
            sel = (op == "gemm") & (np.array([str(kernel_dtype(x)) for x in text["dtype"]]) == key)
            if sel.any():
                r[sel] = _ratio(grid, num["tokens"][sel], num["d_out"][sel], num["d_in"][sel])
        att = op == "attention"
        for i in np.flatnonzero(att):
            hk = (num["n_heads"][i], num["n_kv_heads"][i], num["head_dim"][i])
            if num["q_per_seq"][i] == 1:
                grid = self.tables.decode.get((*hk, _kv_bytes(text["kv_dtype"][i])))
                r[i] = _ratio(grid, num["batch"][i], num["context_len"][i])
            elif num["q_per_seq"][i] >= num["context_len"][i]:
                grid = self.tables.prefill.get((*hk, _compute(text["dtype"][i])))
                r[i] = _ratio(grid, num["batch"][i], num["q_per_seq"][i])
        for i in np.flatnonzero((op == "moe") & (np.nan_to_num(num["ep"], nan=1.0) == 1)):
            moe_key = (str(kernel_dtype(text["dtype"][i])), num["d_in"][i], num["d_out"][i], num["n_experts"][i],
                       num["top_k"][i])
            r[i] = _ratio(self.tables.moe.get(moe_key), num["tokens"][i])
        impl = np.where(text["impl"] == "", "nccl", text["impl"])
        for (grid_impl, size), grid in self.tables.allreduce.items():
            sel = (op == "allreduce") & (impl == grid_impl) & (num["world_size"] == size)
            if sel.any():
                r[sel] = _ratio(grid, num["bytes"][sel])
        return r

    def predict_ms(self, df: pd.DataFrame) -> Array:
        """Milliseconds for measurement rows: the roofline under each row's benchmark conditions
        (L2-warm replays included) times the table's correction — the measurement itself at a
        measured shape."""
        from specsim.cost.measurements import RowSet

        return RowSet(df.reset_index(drop=True)).predict_ms(self.hw) * self.row_ratios(df.reset_index(drop=True))


# --------------------------------------------------------------------------------------------------
# Choosing and loading


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


def cost_model(hw: HardwareProfile) -> RooflineCostModel | TableCostModel:
    """The cost model `hw` selects (`cost_model.backend`)."""
    if hw.cost_model.backend == "table":
        return TableCostModel(hw, tables_for(hw))
    return RooflineCostModel(hw)


def describe(hw: HardwareProfile) -> str:
    """One line naming the cost model a profile uses (for plan / evaluate / report outputs)."""
    if hw.cost_model.backend == "table":
        where = hw.cost_model.measurements or f"aiconfigurator {hw.cost_model.framework} tables"
        return f"table ({where}; roofline outside the measured shapes)"
    return "roofline"


__all__ = ["CostModel", "MeasuredTables", "RatioGrid", "RooflineCostModel", "TableCostModel", "build_tables",
           "cost_model", "describe", "tables_for"]
