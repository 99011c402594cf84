"""A forward pass as a list of ops, each with FLOPs, bytes, time and kernel launches on a profile.

One layer of a dense or MoE transformer under tensor parallelism (Megatron-LM column/row split,
Shoeybi et al. 2019), for B sequences with q new tokens each attending to a KV cache of L tokens.
Every quantity broadcasts over numpy arrays of B, q and L. Kernel times come from the profile's cost
model (costmodel.py: the roofline, or measured tables with the roofline outside them). Ops that
depend only on the token count T = B x q (GEMMs, MoE, element-wise, collectives) are timed once per
distinct T and broadcast back, so a sweep over batch, draft length and context stays cheap.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from specsim.cost.attention import attention_num_splits
from specsim.cost.costmodel import CostModel, cost_model
from specsim.cost.dtypes import ACT_BYTES, LOGIT_BYTES, compute_dtype, kv_bytes, weight_bytes
from specsim.cost.hardware_profile import ALLREDUCE_IMPLEMENTATIONS, HardwareProfile
from specsim.cost.memo import ArrayMemo
from specsim.cost.model import ModelSpec
from specsim.cost.moe import distinct_experts, moe_routing_bytes
from specsim.cost.roofline import Array
from specsim.errors import SpecsimError

__all__ = ["ACT_BYTES", "Op", "PassShape", "head_ops", "layer_ops", "make_shape"]


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
    """B sequences x q new tokens, each attending to context_len tokens; tp GPUs; dtypes; and the
    all-reduce implementation the engine runs (hardware_profile.ALLREDUCE_IMPLEMENTATIONS)."""

    batch: Array
    q_per_seq: Array
    context_len: Array
    tp: int = 1
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    allreduce: str = "nccl"

    @property
    def tokens(self) -> Array:
        return self.batch * self.q_per_seq

    @property
    def compute_dtype(self) -> str:
        return compute_dtype(self.weight_dtype)


def make_shape(batch: ArrayLike, q_per_seq: ArrayLike, context_len: ArrayLike, tp: int = 1,
               weight_dtype: str = "bf16", kv_dtype: str = "bf16", allreduce: str = "nccl") -> PassShape:
    b, q, ctx = (np.array(a, dtype=float) for a in np.broadcast_arrays(batch, q_per_seq, context_len))
    if tp < 1 or tp > 64:
        raise SpecsimError(f"tensor parallelism must be 1..64, got {tp}")
    for label, arr in (("batch", b), ("tokens per sequence", q), ("context", ctx)):
        if np.any(arr < (0 if label == "context" else 1)) or not np.all(np.isfinite(arr)):
            raise SpecsimError(f"{label} must be {'>= 0' if label == 'context' else '>= 1'}")
    if allreduce not in ALLREDUCE_IMPLEMENTATIONS:
        raise SpecsimError(f"unknown all-reduce implementation '{allreduce}' "
                           f"(known: {', '.join(ALLREDUCE_IMPLEMENTATIONS)})")
    weight_bytes(weight_dtype)
    kv_bytes(kv_dtype)
    return PassShape(b, q, ctx, tp, weight_dtype, kv_dtype, allreduce)


@dataclass(frozen=True)
class _Ctx:
    """What every op builder needs: the model, profile, cost model, shape and the distinct token
    counts (`tokens` = the unique values of B x q, `inv` maps them back to the pass's shape)."""

    model: ModelSpec
    hw: HardwareProfile
    cm: CostModel
    s: PassShape
    tokens: Array
    inv: NDArray[np.intp]

    @property
    def gemm_dtype(self) -> str:
        """Tensor-core dtype of the linear layers: fp8 weights on a GPU without fp8 tensor cores run
        weight-only (FP8-Marlin: dequantised to bf16 MMAs), as int4 weights always do."""
        cdt = self.s.compute_dtype
        return cdt if self.hw.peak_flops_per_s.get(cdt) else "bf16"

    def expand(self, a: ArrayLike) -> Array:
        """Per-distinct-token values back to the pass's shape."""
        return np.asarray(a, dtype=float).reshape(-1)[self.inv].reshape(self.s.tokens.shape) \
            if np.ndim(a) else np.full(self.s.tokens.shape, float(cast(float, a)))  # a scalar here


def _context(model: ModelSpec, hw: HardwareProfile, s: PassShape) -> _Ctx:
    tokens, inv = np.unique(s.tokens, return_inverse=True)
    return _Ctx(model, hw, cost_model(hw), s, tokens, inv.reshape(-1))


def _op(c: _Ctx, name: str, family: str, flops: ArrayLike, bytes_: ArrayLike, time: ArrayLike, compute: ArrayLike,
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


def _gemm_times(c: _Ctx, m: Array, n: float, k: float, dtype: str, wb: float, g: Array, compute_scale: float
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


def _gemm(c: _Ctx, name: str, m: Array, n: float, k: float, groups: ArrayLike = 1.0, count: int = 1,
          family: str = "linear", compute_scale: float = 1.0) -> Op:
    """A (grouped) linear layer over m rows (per distinct token count); W8A8 adds its activation
    quantisation kernel (two launches)."""
    g = np.asarray(groups, dtype=float)
    wb = weight_bytes(c.s.weight_dtype)
    dtype = c.gemm_dtype
    t, comp, mem = _gemm_times(c, np.asarray(m), n, k, dtype, wb, g, compute_scale)
    flops = 2.0 * m * n * k * g
    bytes_ = g * (n * k * wb + m * (k + n) * ACT_BYTES)
    return _op(c, name, family, flops, bytes_, t, comp, mem, count, 2.0 if dtype in ("fp8", "int8") else 1.0)


def _moe_gemm(c: _Ctx, name: str, rows: Array, active: Array, n: float, k: float, n_experts: float, inter: float,
              count: int) -> Op:
    """One grouped GEMM of a fused-MoE layer over `active` experts of `rows` rows each (per distinct token
    count), priced as the GPU's fused-MoE kernel runs it (moe.moe_gemm_s, as moe_time_s does)."""
    wb = weight_bytes(c.s.weight_dtype)
    dtype = c.gemm_dtype
    t, comp, mem = c.cm.moe_gemm(c.tokens, rows, active, n, k, n_experts, inter, dtype, wb, ACT_BYTES)
    flops = 2.0 * rows * n * k * active
    bytes_ = active * (n * k * wb + rows * (k + n) * ACT_BYTES)
    return _op(c, name, "linear", flops, bytes_, t, comp, mem, count, 2.0 if dtype in ("fp8", "int8") else 1.0)


def _sum(name: str, parts: list[Op]) -> Op:
    """Several kernels reported as one op (e.g. MLA's four projections as `qkv`)."""
    return Op(name, parts[0].family, _total(p.flops for p in parts), _total(p.bytes_ for p in parts),
              _total(p.time_s for p in parts), _total(p.compute_s for p in parts),
              _total(p.memory_s for p in parts), parts[0].count, sum(p.kernels for p in parts))


def _total(arrays: Iterable[Array]) -> Array:
    """sum() of arrays (its start, 0, adds nothing: the result is an array)."""
    return cast(Array, sum(arrays))


def _attention_ops(c: _Ctx, count: int) -> list[Op]:
    model, s = c.model, c.s
    t_ = c.tokens
    tp, h = s.tp, model.hidden
    heads = model.n_heads / tp
    kv_tok = model.kv_bytes_per_token(s.kv_dtype, tp) / model.n_layers
    dqk: float
    if model.is_mla:
        # DeepSeek-V2/V3 MLA with weight absorption for decode (DeepSeek-V2 §2.1; FlashMLA):
        # queries go through the low-rank q path, keys/values live in a shared 512+64 latent.
        qk = model.qk_nope_head_dim + model.qk_rope_head_dim
        lat = model.kv_lora_rank
        qkv = _sum("qkv", [
            _gemm(c, "q_a", t_, model.q_lora_rank, h, count=count),
            _gemm(c, "q_b", t_, heads * qk, model.q_lora_rank, count=count),
            _gemm(c, "kv_a", t_, lat + model.qk_rope_head_dim, h, count=count),
            _gemm(c, "absorb_k", t_, lat, model.qk_nope_head_dim, groups=heads, count=count),
        ])
        o = _sum("o", [_gemm(c, "absorb_v", t_, model.v_head_dim, lat, groups=heads, count=count),
                       _gemm(c, "o", t_, h, heads * model.v_head_dim, count=count)])
        kvh, dqk, dv = 1.0, lat + model.qk_rope_head_dim, float(lat)
    else:
        kvh = model.kv_heads_per_gpu(tp)
        hd = model.head_dim
        qkv = _gemm(c, "qkv", t_, (heads + 2 * kvh) * hd, h, count=count)
        o = _gemm(c, "o", t_, h, heads * hd, count=count)
        dqk = dv = float(hd)
    at, ac, am, af, ab = c.cm.attention(s.batch, s.q_per_seq, s.context_len, heads, kvh, dqk, dv, kv_tok)
    # Split-KV decode (flash-decoding) adds a combine kernel when the GPU's kernel splits the KV
    # (attention.attention_num_splits: units that do not fill the SMs; FA2 only for GQA decode).
    _, splits, _ = attention_num_splits(s.batch, s.q_per_seq, s.context_len, heads, kvh, dqk, c.hw)
    attention = Op("attention", "attention", af, ab, at, ac, am, count, np.where(splits > 1, 2.0, 1.0))
    write_bytes = t_ * kv_tok * 2.0  # KV-cache write (reshape_and_cache): read the new K/V, write the cache
    kv_write = _op(c, "kv_write", "attention", 0.0 * t_, write_bytes, c.cm.memory_op(write_bytes), 0.0 * t_,
                   c.cm.memory_op(write_bytes, 0.0), count)
    return [qkv, attention, kv_write, o]


def _mlp_ops(c: _Ctx, moe: bool, count: int) -> list[Op]:
    model, s = c.model, c.s
    t_ = c.tokens
    tp, h = s.tp, model.hidden
    branches = 2 if model.gated_mlp else 1
    if not moe:
        inter = model.intermediate / tp
        return [_gemm(c, "up", t_, branches * inter, h, count=count),
                _gemm(c, "down", t_, h, inter, count=count)]
    e, k = float(model.n_experts), float(model.top_k)
    # Expected number of distinct experts T tokens route to (moe.distinct_experts): the
    # "expert tax" that makes verification of B(k+1) tokens read more expert weights than decode.
    distinct = distinct_experts(t_, e, k)
    rows = t_ * k / distinct
    inter = model.moe_intermediate / tp
    act_bytes = moe_routing_bytes(t_, h, inter, k, 1.0, model.gated_mlp, ACT_BYTES)
    fixed = c.cm.moe_fixed(act_bytes, t_ * k * h * ACT_BYTES, distinct)
    # the fused-MoE grouped GEMMs as moe.moe_time_s prices them (the GPU's MoE kernel family)
    up = _moe_gemm(c, "up", rows, distinct, branches * inter, h, e, inter, count)
    down = _moe_gemm(c, "down", rows, distinct, h, inter, e, inter, count)
    # token sort / block alignment, activation and weighted combine (vLLM / SGLang fused_moe)
    routing = _op(c, "moe_routing", "linear", 0.0 * t_, act_bytes, fixed, 0.0 * t_, c.cm.memory_op(act_bytes, 0.0),
                  count, 4.0)
    # measured fused-MoE kernels (table cost model) correct the three parts alike
    ratio = c.expand(c.cm.moe_ratio(t_, h, inter, e, k, c.gemm_dtype, weight_bytes(s.weight_dtype)))
    ops = [_gemm(c, "router", t_, e, h, count=count),
           *(replace(op, time_s=op.time_s * ratio) for op in (up, down, routing))]
    if model.n_shared_experts:
        shared = model.n_shared_experts * inter
        ops += [_gemm(c, "shared_up", t_, branches * shared, h, count=count),
                _gemm(c, "shared_down", t_, h, shared, count=count)]
    return ops


def _elementwise(c: _Ctx, moe: bool, count: int) -> list[Op]:
    model, s = c.model, c.s
    t_ = c.tokens
    h = model.hidden
    rope = t_ * (model.n_heads + model.n_kv_heads) / s.tp * model.head_dim * ACT_BYTES * 2
    norms = 2 * t_ * h * ACT_BYTES * 3  # two fused residual-add + RMSNorm kernels: read x, r; write
    if moe:  # the MoE activation runs inside the fused-MoE kernels (moe_routing)
        bytes_, kernels = norms + rope, 3.0
    else:
        act = t_ * model.intermediate / s.tp * ACT_BYTES * (3 if model.gated_mlp else 2)
        bytes_, kernels = norms + rope + act, 4.0  # add+norm x2, rope, activation
    ops = [_op(c, "elementwise", "elementwise", 0.0 * t_, bytes_, c.cm.memory_op(bytes_, kernels), 0.0 * t_,
               c.cm.memory_op(bytes_, 0.0), count, kernels)]
    comm = t_ * h * ACT_BYTES  # row-parallel outputs of attention and MLP are all-reduced
    ar = c.cm.allreduce(comm, s.tp, s.allreduce)
    on = 1.0 if s.tp > 1 else 0.0
    ops.append(_op(c, "allreduce", "communication", 0.0 * t_, comm * on, 2 * ar, 0.0 * t_, 2 * ar, count, 2.0 * on))
    return ops


def layer_ops(model: ModelSpec, hw: HardwareProfile, s: PassShape, moe: bool | None = None) -> list[Op]:
    """The ops of one transformer layer (an MoE layer if the model has experts, unless moe=False)."""
    moe = model.is_moe if moe is None else moe
    count = model.n_moe_layers if moe else (model.n_dense_layers if model.is_moe else model.n_layers)
    c = _context(model, hw, s)
    return _attention_ops(c, count) + _mlp_ops(c, moe, count) + _elementwise(c, moe, count)


def head_ops(model: ModelSpec, hw: HardwareProfile, s: PassShape) -> list[Op]:
    """Embedding, final norm, LM head over every new token, logits gather and sampling."""
    c = _context(model, hw, s)
    t_ = c.tokens
    h, v = model.hidden, model.vocab
    # Collectives outside the layers: the embedding's all-reduce and the logits gather run as the
    # engine runs NCCL (a custom all-reduce handles only the layers' all-reduces).
    impl = "nccl" if s.allreduce == "nccl" else "nccl_graph"
    on = 1.0 if s.tp > 1 else 0.0
    embed_bytes = t_ * h * ACT_BYTES * 2 + t_ * h * ACT_BYTES * 3
    embed = _op(c, "embedding", "head", 0.0 * t_, embed_bytes,
                c.cm.memory_op(embed_bytes, 2.0) + c.cm.allreduce(t_ * h * ACT_BYTES, s.tp, impl), 0.0 * t_,
                c.cm.memory_op(embed_bytes, 0.0), 1, 2.0 + on)
    lm = _gemm(c, "lm_head", t_, v / s.tp, h, family="head")
    # Logits are gathered to one rank (vLLM's LogitsProcessor) and sampled there: softmax,
    # top-k/p and the draw read the T x V fp32 logits about three times.
    logit_bytes = t_ * v * LOGIT_BYTES
    gather = c.cm.allreduce(logit_bytes / 2, s.tp, impl)
    sample_bytes = 3 * logit_bytes
    sample = _op(c, "sampling", "head", 5.0 * t_ * v, sample_bytes, c.cm.memory_op(sample_bytes, 3.0) + gather,
                 0.0 * t_, c.cm.memory_op(sample_bytes, 0.0), 1, 3.0 + on)
    return [embed, lm, sample]
