"""The measured-table cost model: measured kernels interpolated where a shape is covered, the roofline
outside, as Vidur and NVIDIA's aiconfigurator do, plus the analytic fallback. It interpolates the ratio
measured / roofline (in log space) over the measured grid and multiplies the roofline by it: at a
measured shape under the benchmark's own conditions it returns the measurement; between measured
shapes it corrects the roofline by its neighbours' errors; outside the grid (another head count, a
shape beyond the sweep, eager NCCL) the ratio is 1 and the roofline answers. Because the roofline
also models the benchmark's L2-warm replays (buffer_sets), the ratio carries the kernel's
efficiency, not the benchmark's cache state, into a forward pass where weights are cold.

Coverage: GEMMs (per weight format: tokens x N x K grid; block-scaled fp8 apart from per-tensor fp8),
decode attention (batch x KV length per per-GPU head count, head size and KV dtype), prefill
attention (batch x prompt length), MLA decode (batch x KV length per heads per GPU and KV dtype),
fused MoE (tokens, per model shape, expert split and expert-parallel degree), all-reduce (message
size per GPU count and implementation). Verification attention (1 < q < L) has no table: it is the
roofline's verification form scaled by the measured decode ratio at the same batch and KV length
(the measured fixed and per-sequence costs of the decode kernel carry over; the tensor-core padding
of q x group query rows is the roofline's). Grouped GEMMs (MLA's absorbed projections), the MoE
all-to-all (alltoall.py, fitted to NVIDIA's DeepEP tables) and element-wise kernels are the
roofline's; `covered` says, per kernel, whether a table priced it (table_coverage.py sums it).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import numpy as np
from numpy.typing import ArrayLike

from specsim.cost.costmodel import RooflineCostModel
from specsim.cost.hardware_profile import HardwareProfile
from specsim.cost.measured_tables import MeasuredTables
from specsim.cost.ratio_grid import RatioGrid
from specsim.cost.roofline import Array
from specsim.cost.table_grids import MLA_QK_DIM, MLA_V_DIM, compute_key, kv_bytes_key, row_roofline_ms, table_key

if TYPE_CHECKING:  # pandas only where measured tables are read
    import pandas as pd


#: Up to these sizes the table model prices a kernel of token-count work (GEMM rows, fused-MoE tokens, all-reduce
#: bytes) at its monotone envelope, min over larger sizes x' >= x of its time: measured tables are noisy (NVIDIA's fp8
#: GEMM on B200 timed at 1 token slower than at 2) and the roofline corrected between two measured sizes can dip, but
#: a kernel over fewer rows could always run padded as the cheaper larger one, as engines pad to their CUDA graphs'
#: sizes (issue 22: a pass over more tokens never costs less than one over fewer). Sizes are rounded up to the grid's
#: unit; beyond the grid a kernel costs at least the envelope's last value.
ENVELOPE_TOKENS = 4096
ENVELOPE_BYTE_UNIT = 128.0
ENVELOPE_BYTES = 2.0**26


def monotone_envelope(price: Callable[[Array], Array], x: ArrayLike, raw: ArrayLike, unit: float, points: int,
                      memo: dict[Hashable, Array] | None = None, key: Hashable = None) -> Array:
    """`raw` (= price(x)) at the envelope E(ceil(x / unit)), E(i) = min over j >= i of price(j x unit) for i <= points
    (one call of `price` over the grid, kept in `memo` under `key`); above the grid max(raw, E(points))."""
    env = None if memo is None else memo.get(key)
    if env is None:
        grid = unit * np.arange(1.0, points + 1.0)
        env = np.minimum.accumulate(np.asarray(price(grid), dtype=float)[::-1])[::-1]
        if memo is not None:
            memo[key] = env
    xs = np.asarray(x, dtype=float)
    i = np.clip(np.ceil(xs / unit), 1.0, float(points)).astype(np.intp) - 1
    return np.where(xs <= unit * points, env[i], np.maximum(raw, env[-1]))


def _log_ratio(grid: RatioGrid | None, *coords: ArrayLike) -> Array:
    """The interpolated log(measured / roofline), NaN where the grid does not cover the point (or there is none)."""
    if grid is None:
        return np.full(np.broadcast(*coords).shape, np.nan)
    return np.asarray(grid.lookup(*coords), dtype=float)


def _ratio(grid: RatioGrid | None, *coords: ArrayLike) -> Array:
    """exp(interpolated log-ratio), 1 where the grid does not cover the point."""
    return np.exp(np.nan_to_num(_log_ratio(grid, *coords), nan=0.0))


@dataclass
class TableCostModel:
    """Measured tables where they cover a shape, the roofline outside (module docstring). Each kernel family picks
    its grid in one place (`_gemm_grid`, `_attention_log_ratio`, `_moe_grid`, `_allreduce_log_ratio`), which both
    prices the kernel and says whether a table priced it (`*_covered`)."""

    hw: HardwareProfile
    tables: MeasuredTables
    name: str = "table"
    _envelopes: dict[Hashable, Array] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.roofline = RooflineCostModel(self.hw)

    def describe(self) -> str:
        if self.tables.missing:
            return f"table ({self.tables.missing}: roofline throughout)"
        return f"table ({self.tables.label}; roofline outside the measured shapes)"

    # ---------------------------------------------------------------------------------------------- grid selection

    def _gemm_grid(self, dtype: str, weight_bytes: float, groups: ArrayLike, compute_scale: float
                   ) -> RatioGrid | None:
        if compute_scale != 1.0 or np.any(np.asarray(groups) != 1.0):
            return None  # grouped GEMMs (MLA's absorbed projections): no table; the MoE tables cover the experts
        return self.tables.gemm_grid.get(str((dtype, float(weight_bytes))))

    def _attention_log_ratio(self, batch: ArrayLike, q_per_seq: ArrayLike, context_len: ArrayLike, heads: ArrayLike,
                             kv_heads: ArrayLike, qk_dim: ArrayLike, v_dim: ArrayLike, kv_bytes_per_token: ArrayLike,
                             dtype: str) -> Array:
        """log(measured / roofline) of an attention kernel, NaN where no table covers it: decode and verification
        (q < L) at the decode kernel's (batch, KV length), prefill (q >= L) at (batch, prompt length); MLA
        (one latent KV head, MLA_QK_DIM / MLA_V_DIM) at the MLA decode tables'."""
        b, q, ctx = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in (batch, q_per_seq, context_len)))
        if np.ndim(heads) or np.ndim(kv_heads) or np.ndim(qk_dim) or np.ndim(v_dim) or np.ndim(kv_bytes_per_token):
            return np.full(b.shape, np.nan)  # per-row head shapes (measurement rows): roofline
        h, kvh, dqk, dv, kvt = (float(cast(float, x)) for x in (heads, kv_heads, qk_dim, v_dim, kv_bytes_per_token))
        if kvh == 1.0 and (dqk, dv) == (MLA_QK_DIM, MLA_V_DIM):
            return _log_ratio(self.tables.mla.get((h, kvt / dqk)), b, ctx)
        if dqk != dv:
            return np.full(b.shape, np.nan)
        dec = self.tables.decode.get((h, kvh, dqk, kvt / (2.0 * kvh * dqk)))
        pre = self.tables.prefill.get((h, kvh, dqk, dtype))
        r = _log_ratio(dec, b, ctx)  # decode, and verification (1 < q < L): the decode kernel's ratio
        return r if pre is None else np.where((q > 1) & (q >= ctx), _log_ratio(pre, b, q), r)

    def _moe_grid(self, hidden: float, inter: float, n_experts: float, top_k: float, dtype: str, weight_bytes: float,
                  ep: float | None) -> RatioGrid | None:
        if ep is None:
            return None
        return self.tables.moe.get((str((dtype, float(weight_bytes))), float(hidden), float(inter), float(n_experts),
                                    float(top_k), float(ep)))

    def _allreduce_log_ratio(self, bytes_: ArrayLike, world_size: ArrayLike, impl: str) -> Array:
        b, n = np.broadcast_arrays(np.asarray(bytes_, dtype=float), np.asarray(world_size, dtype=float))
        r = np.full(b.shape, np.nan)
        for (grid_impl, size), grid in self.tables.allreduce.items():
            if grid_impl == impl:
                r = np.where(n == size, _log_ratio(grid, b), r)
        return r

    # ------------------------------------------------------------------------------------------------ the kernels

    def gemm(self, m: ArrayLike, n: ArrayLike, k: ArrayLike, dtype: str = "bf16", weight_bytes: float = 2.0,
             act_bytes: float = 2.0, groups: ArrayLike = 1.0, compute_scale: float = 1.0,
             ) -> tuple[Array, Array, Array]:
        t, c, mem = self.roofline.gemm(m, n, k, dtype, weight_bytes, act_bytes, groups, compute_scale)
        grid = self._gemm_grid(dtype, weight_bytes, groups, compute_scale)
        if grid is None:
            return t, c, mem
        t = t * _ratio(grid, m, n, k)
        if np.ndim(n) or np.ndim(k):
            return t, c, mem
        def price(rows: Array) -> Array:
            return self.roofline.gemm(rows, n, k, dtype, weight_bytes, act_bytes)[0] * _ratio(grid, rows, n, k)
        env_key = ("gemm", str((dtype, float(weight_bytes))), float(act_bytes), float(cast(float, n)),
                   float(cast(float, k)))
        return monotone_envelope(price, m, t, 1.0, ENVELOPE_TOKENS, self._envelopes, env_key), c, mem

    def attention(self, batch: ArrayLike, q_per_seq: ArrayLike, context_len: ArrayLike, heads: ArrayLike,
                  kv_heads: ArrayLike, qk_dim: ArrayLike, v_dim: ArrayLike, kv_bytes_per_token: ArrayLike,
                  dtype: str = "bf16") -> tuple[Array, Array, Array, Array, Array]:
        t, c, mem, flops, bytes_ = self.roofline.attention(batch, q_per_seq, context_len, heads, kv_heads, qk_dim,
                                                           v_dim, kv_bytes_per_token, dtype)
        lr = self._attention_log_ratio(batch, q_per_seq, context_len, heads, kv_heads, qk_dim, v_dim,
                                       kv_bytes_per_token, dtype)
        return t * np.exp(np.nan_to_num(lr, nan=0.0)), c, mem, flops, bytes_

    def moe_ratio(self, tokens: ArrayLike, hidden: float, inter: float, n_experts: float, top_k: float,
                  dtype: str, weight_bytes: float, ep: float | None = None) -> Array:
        """The measured fused-MoE layer's correction at `tokens` (every EP rank's, before routing) for a rank holding
        n_experts / ep experts of width `inter`: the table of that expert-parallel degree, 1 where none covers it.
        `ep` None (a caller that does not say): 1, the roofline; the tables' ratio changes several-fold with the
        degree (SGLang's H200 fp8 DeepSeek-V3 layer: 0.5x the roofline at EP 1, 1.1-3.1x at EP 16), so no degree is
        assumed."""
        return _ratio(self._moe_grid(hidden, inter, n_experts, top_k, dtype, weight_bytes, ep), tokens)

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
        r = np.exp(np.nan_to_num(self._allreduce_log_ratio(b, n, impl), nan=0.0))
        for (grid_impl, size), grid in self.tables.allreduce.items():
            if grid_impl == impl and np.any(n == size):
                def price(x: Array, grid: RatioGrid = grid, size: float = size) -> Array:
                    return self.roofline.allreduce(x, size, impl) * _ratio(grid, x)
                points = int(ENVELOPE_BYTES / ENVELOPE_BYTE_UNIT)
                env = monotone_envelope(price, b, t * r, ENVELOPE_BYTE_UNIT, points, self._envelopes,
                                        ("allreduce", impl, float(size)))
                r = np.where(n == size, env / np.where(t > 0, t, 1.0), r)
        return t * r

    def monotone_tokens(self, key: Hashable, price: Callable[[Array], Array], tokens: ArrayLike, raw: ArrayLike
                        ) -> Array:
        """`raw` (= price(tokens)) at its monotone envelope over tokens (`monotone_envelope`): the fused-MoE layer,
        whose measured ratio corrects several roofline parts at once."""
        return monotone_envelope(price, tokens, raw, 1.0, ENVELOPE_TOKENS, self._envelopes, ("tokens", key))

    def memory_op(self, bytes_: ArrayLike, kernels: ArrayLike = 1.0) -> Array:
        return self.roofline.memory_op(bytes_, kernels)

    # ------------------------------------------------------------------ which kernels a table priced (coverage)

    def gemm_covered(self, m: ArrayLike, n: ArrayLike, k: ArrayLike, dtype: str = "bf16", weight_bytes: float = 2.0,
                     groups: ArrayLike = 1.0, compute_scale: float = 1.0) -> Array:
        """True where `gemm` prices the GEMM from a measured table."""
        return np.isfinite(_log_ratio(self._gemm_grid(dtype, weight_bytes, groups, compute_scale), m, n, k))

    def attention_covered(self, batch: ArrayLike, q_per_seq: ArrayLike, context_len: ArrayLike, heads: ArrayLike,
                          kv_heads: ArrayLike, qk_dim: ArrayLike, v_dim: ArrayLike, kv_bytes_per_token: ArrayLike,
                          dtype: str = "bf16") -> Array:
        return np.isfinite(self._attention_log_ratio(batch, q_per_seq, context_len, heads, kv_heads, qk_dim, v_dim,
                                                     kv_bytes_per_token, dtype))

    def moe_covered(self, tokens: ArrayLike, hidden: float, inter: float, n_experts: float, top_k: float, dtype: str,
                    weight_bytes: float, ep: float | None = None) -> Array:
        return np.isfinite(_log_ratio(self._moe_grid(hidden, inter, n_experts, top_k, dtype, weight_bytes, ep),
                                      tokens))

    def allreduce_covered(self, bytes_: ArrayLike, world_size: ArrayLike, impl: str = "nccl") -> Array:
        return np.isfinite(self._allreduce_log_ratio(bytes_, world_size, impl))

    # -------------------------------------------------------------------------------------- measurement rows

    def row_ratios(self, df: pd.DataFrame) -> Array:
        """The table's correction of the roofline for each measurement row (1 where not covered)."""
        import pandas as pd

        df = df.reset_index(drop=True)
        r = np.ones(len(df))
        op = df["op"].astype(str).to_numpy()
        num = {c: pd.to_numeric(df[c], errors="coerce").to_numpy(float) if c in df else np.full(len(df), np.nan)
               for c in ("tokens", "d_in", "d_out", "batch", "q_per_seq", "context_len", "n_heads", "n_kv_heads",
                         "head_dim", "n_experts", "top_k", "bytes", "world_size", "ep")}
        text = {c: df[c].astype(object).where(df[c].notna(), "").astype(str).to_numpy() if c in df
                else np.full(len(df), "") for c in ("dtype", "kv_dtype", "impl")}
        keys = np.array([str(table_key(x)) for x in text["dtype"]])
        for key, grid in self.tables.gemm_grid.items():
            sel = (op == "gemm") & (keys == key)
            if sel.any():
                r[sel] = _ratio(grid, num["tokens"][sel], num["d_out"][sel], num["d_in"][sel])
        for i in np.flatnonzero(op == "attention"):
            hk = (num["n_heads"][i], num["n_kv_heads"][i], num["head_dim"][i])
            if num["q_per_seq"][i] == 1:
                r[i] = _ratio(self.tables.decode.get((*hk, kv_bytes_key(text["kv_dtype"][i]))), num["batch"][i],
                              num["context_len"][i])
            elif num["q_per_seq"][i] >= num["context_len"][i]:
                r[i] = _ratio(self.tables.prefill.get((*hk, compute_key(text["dtype"][i]))), num["batch"][i],
                              num["q_per_seq"][i])
        for i in np.flatnonzero(op == "mla"):
            r[i] = _ratio(self.tables.mla.get((num["n_heads"][i], kv_bytes_key(text["kv_dtype"][i]))),
                          num["batch"][i], num["context_len"][i])
        ep = np.nan_to_num(num["ep"], nan=1.0)
        for i in np.flatnonzero(op == "moe"):
            moe_grid = self.tables.moe.get((keys[i], num["d_in"][i], num["d_out"][i], num["n_experts"][i],
                                            num["top_k"][i], ep[i]))
            r[i] = _ratio(moe_grid, num["tokens"][i])
        impl = np.where(text["impl"] == "", "nccl", text["impl"])
        for (grid_impl, size), grid in self.tables.allreduce.items():
            sel = (op == "allreduce") & (impl == grid_impl) & (num["world_size"] == size)
            if sel.any():
                r[sel] = _ratio(grid, num["bytes"][sel])
        return r

    def predict_ms(self, df: pd.DataFrame) -> Array:
        """Milliseconds for measurement rows: the roofline the grids correct, under each row's benchmark conditions
        (L2-warm replays included; table_grids.row_roofline_ms), times the table's correction: the measurement
        itself at a measured shape."""
        return row_roofline_ms(df, self.hw) * self.row_ratios(df)
