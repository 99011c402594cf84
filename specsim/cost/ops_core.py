"""The pieces every op builder uses: an op (FLOPs, bytes, time, launches), the pass's shape, the context of
one pricing (model, profile, cost model, distinct token counts) and the (grouped) GEMM priced per part's
weight format.

One layer of a dense or MoE transformer under tensor parallelism (Megatron-LM column/row split,
Shoeybi et al. 2019), for B sequences with q new tokens each attending to a KV cache of L tokens.
Every quantity broadcasts over numpy arrays of B, q and L. Kernel times come from the profile's cost
model (costmodel.py: the roofline, or measured tables with the roofline outside them). Ops that
depend only on the token count T = B x q (GEMMs, MoE, element-wise, collectives) are timed once per
distinct T and broadcast back, so a sweep over batch, draft length and context stays cheap.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from specsim.cost.costmodel import CostModel, cost_model
from specsim.cost.dtypes import ACT_BYTES, check_precision, compute_dtype, kv_bytes, part_dtype, weight_bytes
from specsim.cost.hardware_profile import ALLREDUCE_IMPLEMENTATIONS, HardwareProfile
from specsim.cost.layout import Layout, as_layout
from specsim.cost.memo import ArrayMemo
from specsim.cost.model_spec import ModelSpec
from specsim.cost.roofline import Array
from specsim.errors import SpecsimError


@dataclass(frozen=True)
class Op:
    """One op of the pass: `count` instances per pass (e.g. once per layer), each standing for
    `kernels` kernel launches (what an eager engine pays host launch time for: fused element-wise
    ops 4 per layer, all-reduce 2 per layer under TP, attention 1 or 2 with a split-KV combine)."""

    name: str
    family: str  # linear | attention | elementwise | communication | head
    flops: Array
    bytes_: Array
    time_s: Array
    compute_s: Array
    memory_s: Array
    count: int = 1
    kernels: Array | float = 1.0

    @property
    def bound(self) -> Array:
        return np.where(self.compute_s > self.memory_s, "compute", "memory")


@dataclass(frozen=True)
class PassShape:
    """B sequences x q new tokens, each attending to context_len tokens; the parallel layout (layout.py:
    tp, DP attention, EP, pipeline, context parallelism); dtypes; and the all-reduce implementation the
    engine runs (hardware_profile.ALLREDUCE_IMPLEMENTATIONS). `batch` counts the sequences of one pipeline
    microbatch over every DP-attention group."""

    batch: Array
    q_per_seq: Array
    context_len: Array
    layout: Layout = field(default_factory=Layout)
    weight_dtype: str = "bf16"  # a format, or a precision per part (dtypes.Precision)
    kv_dtype: str = "bf16"
    allreduce: str = "nccl"
    alltoall: str = "deepep"  # who runs the MoE all-to-all (alltoall.ALLTOALL_IMPLEMENTATIONS)
    #: the engine's MLA decode kernel takes one-token queries only (vLLM's QueryLenSupport.SINGLE_ONLY backends:
    #: engines/mla.py), so a sequence with q > 1 new tokens runs MLA's prefill path (ops._mla_prefill_form)
    mla_single_query: bool = False

    @property
    def tp(self) -> int:
        """Tensor parallelism of attention."""
        return self.layout.tp

    @property
    def tokens(self) -> Array:
        return self.batch * self.q_per_seq

    def local(self) -> PassShape:
        """The shape one DP-attention group runs its attention (and everything outside the MoE) at: its share
        of the batch (balanced, as the engines' DP schedulers aim for; the busiest group sets the pace)."""
        dp = self.layout.dp
        return self if dp == 1 else replace(self, batch=np.ceil(self.batch / dp))

    def compute_dtype(self, part: str = "dense") -> str:
        return compute_dtype(part_dtype(self.weight_dtype, part))


def make_shape(batch: ArrayLike, q_per_seq: ArrayLike, context_len: ArrayLike, tp: int | Layout = 1,
               weight_dtype: str = "bf16", kv_dtype: str = "bf16", allreduce: str = "nccl",
               alltoall: str = "deepep", mla_single_query: bool = False) -> PassShape:
    """A validated shape; `tp` is a tensor-parallel degree or a whole layout."""
    b, q, ctx = (np.array(a, dtype=float) for a in np.broadcast_arrays(batch, q_per_seq, context_len))
    if not isinstance(tp, Layout) and (tp < 1 or tp > 64):
        raise SpecsimError(f"tensor parallelism must be 1..64, got {tp}")
    layout = as_layout(tp)
    for label, arr in (("batch", b), ("tokens per sequence", q), ("context", ctx)):
        if np.any(arr < (0 if label == "context" else 1)) or not np.all(np.isfinite(arr)):
            raise SpecsimError(f"{label} must be {'>= 0' if label == 'context' else '>= 1'}")
    if allreduce not in ALLREDUCE_IMPLEMENTATIONS:
        raise SpecsimError(f"unknown all-reduce implementation '{allreduce}' "
                           f"(known: {', '.join(ALLREDUCE_IMPLEMENTATIONS)})")
    if weight_dtype.strip().lower() == "native":
        raise SpecsimError("weight precision 'native' must be resolved against the model first")
    check_precision(weight_dtype)
    kv_bytes(kv_dtype)
    return PassShape(b, q, ctx, layout, weight_dtype, kv_dtype, allreduce, alltoall, mla_single_query)


@dataclass(frozen=True)
class Ctx:
    """What every op builder needs: the model, profile, cost model, shape and the distinct token
    counts (`tokens` = the unique values of B x q, `inv` maps them back to the pass's shape)."""

    model: ModelSpec
    hw: HardwareProfile
    cm: CostModel
    s: PassShape
    tokens: Array
    inv: NDArray[np.intp]

    def gemm_dtype(self, part: str = "dense") -> str:
        """Tensor-core dtype of a part's linear layers: fp8 (fp4) weights on a GPU without fp8 (fp4) tensor
        cores run weight-only (FP8- / FP4-Marlin: dequantised to bf16 MMAs), as int4 weights always do."""
        cdt = self.s.compute_dtype(part)
        return cdt if self.hw.peak_flops_per_s.get(cdt) else "bf16"

    def weight_bytes(self, part: str = "dense") -> float:
        return weight_bytes(self.s.weight_dtype, part)

    def expand(self, a: ArrayLike) -> Array:
        """Per-distinct-token values back to the pass's shape."""
        return np.asarray(a, dtype=float).reshape(-1)[self.inv].reshape(self.s.tokens.shape) \
            if np.ndim(a) else np.full(self.s.tokens.shape, float(cast(float, a)))  # a scalar here


def context(model: ModelSpec, hw: HardwareProfile, s: PassShape) -> Ctx:
    tokens, inv = np.unique(s.tokens, return_inverse=True)
    return Ctx(model, hw, cost_model(hw), s, tokens, inv.reshape(-1))


def op(c: Ctx, name: str, family: str, flops: ArrayLike, bytes_: ArrayLike, time: ArrayLike, compute: ArrayLike,
        memory: ArrayLike, count: int = 1, kernels: ArrayLike = 1.0) -> Op:
    """An op whose arrays are per distinct token count, expanded to the pass's shape."""
    k = c.expand(kernels) if np.ndim(kernels) else float(cast(float, kernels))
    return Op(name, family, c.expand(flops), c.expand(bytes_), c.expand(time), c.expand(compute), c.expand(memory),
              count, k)


#: GEMM timings `_gemm` remembers (cost.memo): passes at other contexts, other draft lengths or in another plan of
#: the same profile run the same linear layers over the same token counts.
GEMM_CACHE_SIZE = 4096
GEMM_CACHE_MAX_POINTS = 4096
_GEMMS = ArrayMemo(GEMM_CACHE_SIZE, GEMM_CACHE_MAX_POINTS)


def _gemm_times(c: Ctx, m: Array, n: float, k: float, dtype: str, wb: float, g: Array, compute_scale: float
                ) -> tuple[Array, Array, Array]:
    """`c.cm.gemm(m, n, k, dtype, wb, ACT_BYTES, g, compute_scale)`, memoised (`_GEMMS`): the cost model is a
    function of the profile (`cost_model(hw)`), keyed by identity, and of the scalars and arrays."""
    owners = (c.hw,)
    key = _GEMMS.key(owners, (type(c.cm), dtype, wb, n, k, compute_scale), (m, g))
    if (hit := _GEMMS.get(key, owners)) is not None:
        t, comp, mem = hit
        return t, comp, mem
    out = c.cm.gemm(m, n, k, dtype, wb, ACT_BYTES, g, compute_scale=compute_scale)
    _GEMMS.put(key, owners, out)
    return out


def clear_gemm_cache() -> None:
    _GEMMS.clear()


#: Tensor-core dtypes whose GEMMs quantise their activations first (one more kernel).
QUANTISED = ("fp8", "int8", "fp4")


def gemm(c: Ctx, name: str, m: Array, n: float, k: float, groups: ArrayLike = 1.0, count: int = 1,
         family: str = "linear", compute_scale: float = 1.0, part: str = "dense") -> Op:
    """A (grouped) linear layer over m rows (per distinct token count) with `part`'s weights; W8A8 / W4A4
    add their activation quantisation kernel (two launches)."""
    g = np.asarray(groups, dtype=float)
    wb = c.weight_bytes(part)
    dtype = c.gemm_dtype(part)
    t, comp, mem = _gemm_times(c, np.asarray(m), n, k, dtype, wb, g, compute_scale)
    flops = 2.0 * m * n * k * g
    bytes_ = g * (n * k * wb + m * (k + n) * ACT_BYTES)
    return op(c, name, family, flops, bytes_, t, comp, mem, count, 2.0 if dtype in QUANTISED else 1.0)


def moe_gemm(c: Ctx, name: str, rows: Array, active: Array, n: float, k: float, n_experts: float, inter: float,
             count: int) -> Op:
    """One grouped GEMM of a fused-MoE layer over `active` experts of `rows` rows each (per distinct token
    count), priced as the GPU's fused-MoE kernel runs it (moe.moe_gemm_s, as moe_time_s does)."""
    wb = c.weight_bytes("experts")
    dtype = c.gemm_dtype("experts")
    t, comp, mem = c.cm.moe_gemm(c.tokens, rows, active, n, k, n_experts, inter, dtype, wb, ACT_BYTES)
    flops = 2.0 * rows * n * k * active
    bytes_ = active * (n * k * wb + rows * (k + n) * ACT_BYTES)
    return op(c, name, "linear", flops, bytes_, t, comp, mem, count, 2.0 if dtype in QUANTISED else 1.0)


def sum_ops(name: str, parts: list[Op]) -> Op:
    """Several kernels reported as one op (e.g. MLA's four projections as `qkv`)."""
    return Op(name, parts[0].family, total(p.flops for p in parts), total(p.bytes_ for p in parts),
              total(p.time_s for p in parts), total(p.compute_s for p in parts),
              total(p.memory_s for p in parts), parts[0].count, sum(p.kernels for p in parts))


def total(arrays: Iterable[Array]) -> Array:
    """sum() of arrays (its start, 0, adds nothing: the result is an array)."""
    return cast(Array, sum(arrays))


