"""A forward pass as a list of ops, each with FLOPs, bytes and time on a profile.

One layer of a dense or MoE transformer under tensor parallelism (Megatron-LM column/row split,
Shoeybi et al. 2019), for B sequences with q new tokens each attending to a KV cache of L tokens.
Every quantity broadcasts over numpy arrays of B, q and L.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from specsim.cost import roofline as rl
from specsim.cost.dtypes import ACT_BYTES, LOGIT_BYTES, compute_dtype, kv_bytes, weight_bytes
from specsim.cost.hardware import HardwareProfile
from specsim.cost.model import ModelSpec
from specsim.cost.roofline import Array
from specsim.errors import SpecsimError


@dataclass(frozen=True)
class Op:
    """One op of the pass: `count` identical kernels' worth per pass (e.g. once per layer)."""

    name: str
    family: str  # linear | attention | elementwise | communication | head
    flops: Array
    bytes_: Array
    time_s: Array
    compute_s: Array
    memory_s: Array
    count: int = 1

    @property
    def bound(self) -> Array:
        return np.where(self.compute_s > self.memory_s, "compute", "memory")


@dataclass(frozen=True)
class PassShape:
    """B sequences x q new tokens, each attending to context_len tokens; tp GPUs; dtypes."""

    batch: Array
    q_per_seq: Array
    context_len: Array
    tp: int = 1
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"

    @property
    def tokens(self) -> Array:
        return self.batch * self.q_per_seq

    @property
    def compute_dtype(self) -> str:
        return compute_dtype(self.weight_dtype)


def make_shape(batch: ArrayLike, q_per_seq: ArrayLike, context_len: ArrayLike, tp: int = 1,
               weight_dtype: str = "bf16", kv_dtype: str = "bf16") -> PassShape:
    b, q, ctx = (np.array(a, dtype=float) for a in np.broadcast_arrays(batch, q_per_seq, context_len))
    if tp < 1 or tp > 64:
        raise SpecsimError(f"tensor parallelism must be 1..64, got {tp}")
    for label, arr in (("batch", b), ("tokens per sequence", q), ("context", ctx)):
        if np.any(arr < (0 if label == "context" else 1)) or not np.all(np.isfinite(arr)):
            raise SpecsimError(f"{label} must be {'>= 0' if label == 'context' else '>= 1'}")
    weight_bytes(weight_dtype)
    kv_bytes(kv_dtype)
    return PassShape(b, q, ctx, tp, weight_dtype, kv_dtype)


def _gemm(name: str, m: Array, n: float, k: float, hw: HardwareProfile, s: PassShape,
          groups: ArrayLike = 1.0, count: int = 1, family: str = "linear") -> Op:
    g = np.asarray(groups, dtype=float)
    t, c, mem = rl.gemm_time_s(m, n, k, hw, s.compute_dtype, weight_bytes(s.weight_dtype), ACT_BYTES, g)
    flops = 2.0 * m * n * k * g
    bytes_ = g * (n * k * weight_bytes(s.weight_dtype) + m * (k + n) * ACT_BYTES)
    return Op(name, family, flops, bytes_, t, c, mem, count)


def _sum(name: str, parts: list[Op]) -> Op:
    """Several kernels reported as one op (e.g. MLA's four projections as `qkv`)."""
    return Op(name, parts[0].family, sum(p.flops for p in parts), sum(p.bytes_ for p in parts),
              sum(p.time_s for p in parts), sum(p.compute_s for p in parts),
              sum(p.memory_s for p in parts), parts[0].count)


def _attention_ops(model: ModelSpec, hw: HardwareProfile, s: PassShape, count: int) -> list[Op]:
    t_ = s.tokens
    tp, h = s.tp, model.hidden
    heads = model.n_heads / tp
    if model.is_mla:
        # DeepSeek-V2/V3 MLA with weight absorption for decode (DeepSeek-V2 §2.1; FlashMLA):
        # queries go through the low-rank q path, keys/values live in a shared 512+64 latent.
        qk = model.qk_nope_head_dim + model.qk_rope_head_dim
        lat = model.kv_lora_rank
        parts = [
            _gemm("q_a", t_, model.q_lora_rank, h, hw, s, count=count),
            _gemm("q_b", t_, heads * qk, model.q_lora_rank, hw, s, count=count),
            _gemm("kv_a", t_, lat + model.qk_rope_head_dim, h, hw, s, count=count),
            _gemm("absorb_k", t_, lat, model.qk_nope_head_dim, hw, s, groups=heads, count=count),
        ]
        qkv = _sum("qkv", parts)
        o = _sum("o", [_gemm("absorb_v", t_, model.v_head_dim, lat, hw, s, groups=heads, count=count),
                       _gemm("o", t_, h, heads * model.v_head_dim, hw, s, count=count)])
        kv_tok = model.kv_bytes_per_token(s.kv_dtype, tp) / model.n_layers
        at, ac, am, af, ab = rl.attention_time_s(s.batch, s.q_per_seq, s.context_len, heads, 1,
                                                 lat + model.qk_rope_head_dim, lat, kv_tok, hw)
        write_bytes = t_ * kv_tok * 2.0
    else:
        kvh = model.kv_heads_per_gpu(tp)
        hd = model.head_dim
        qkv = _gemm("qkv", t_, (heads + 2 * kvh) * hd, h, hw, s, count=count)
        o = _gemm("o", t_, h, heads * hd, hw, s, count=count)
        kv_tok = model.kv_bytes_per_token(s.kv_dtype, tp) / model.n_layers
        at, ac, am, af, ab = rl.attention_time_s(s.batch, s.q_per_seq, s.context_len, heads, kvh,
                                                 hd, hd, kv_tok, hw)
        write_bytes = t_ * kv_tok * 2.0
    attention = Op("attention", "attention", af, ab, at, ac, am, count)
    kv_write = Op("kv_write", "attention", np.zeros_like(t_), write_bytes,
                  rl.memory_op_time_s(write_bytes, hw), np.zeros_like(t_), rl.memory_s(write_bytes, hw), count)
    return [qkv, attention, kv_write, o]


def _mlp_ops(model: ModelSpec, hw: HardwareProfile, s: PassShape, moe: bool, count: int) -> list[Op]:
    t_ = s.tokens
    tp, h = s.tp, model.hidden
    branches = 2 if model.gated_mlp else 1
    if not moe:
        inter = model.intermediate / tp
        return [_gemm("up", t_, branches * inter, h, hw, s, count=count),
                _gemm("down", t_, h, inter, hw, s, count=count)]
    e, k = float(model.n_experts), float(model.top_k)
    # Expected number of distinct experts that T tokens route to, each picking k of e uniformly:
    # e * (1 - (1 - k/e)^T) (occupancy of e bins). The "expert tax": verification of B(k+1)
    # tokens reads more expert weights than a decode step of B tokens.
    distinct = e * (1.0 - (1.0 - k / e) ** t_)
    rows = t_ * k / distinct
    inter = model.moe_intermediate / tp
    ops = [
        _gemm("router", t_, e, h, hw, s, count=count),
        _gemm("up", rows, branches * inter, h, hw, s, groups=distinct, count=count),
        _gemm("down", rows, h, inter, hw, s, groups=distinct, count=count),
    ]
    if model.n_shared_experts:
        shared = model.n_shared_experts * inter
        ops += [_gemm("shared_up", t_, branches * shared, h, hw, s, count=count),
                _gemm("shared_down", t_, h, shared, hw, s, count=count)]
    return ops


def _elementwise(model: ModelSpec, hw: HardwareProfile, s: PassShape, moe: bool, count: int) -> list[Op]:
    t_ = s.tokens
    h = model.hidden
    inter = (model.moe_intermediate * model.top_k if moe else model.intermediate) / s.tp
    rope = t_ * (model.n_heads + model.n_kv_heads) / s.tp * model.head_dim * ACT_BYTES * 2
    act = t_ * inter * ACT_BYTES * (3 if model.gated_mlp else 2)
    norms = 2 * t_ * h * ACT_BYTES * 3  # two fused residual-add + RMSNorm kernels: read x, r; write
    bytes_ = norms + rope + act
    kernels = 4.0  # add+norm x2, rope, activation
    time = rl.memory_op_time_s(bytes_, hw, kernels)
    ops = [Op("elementwise", "elementwise", 0.0 * t_, bytes_, time, 0.0 * t_, rl.memory_s(bytes_, hw), count)]
    comm = t_ * h * ACT_BYTES  # row-parallel outputs of attention and MLP are all-reduced
    ar = rl.allreduce_time_s(comm, s.tp, hw)
    ops.append(Op("allreduce", "communication", 0.0 * t_, comm * (s.tp > 1), 2 * ar, 0.0 * t_, 2 * ar, count))
    return ops


def layer_ops(model: ModelSpec, hw: HardwareProfile, s: PassShape, moe: bool | None = None) -> list[Op]:
    """The ops of one transformer layer (an MoE layer if the model has experts, unless moe=False)."""
    moe = model.is_moe if moe is None else moe
    count = model.n_moe_layers if moe else (model.n_dense_layers if model.is_moe else model.n_layers)
    attn = _attention_ops(model, hw, s, count)
    return attn + _mlp_ops(model, hw, s, moe, count) + _elementwise(model, hw, s, moe, count)


def head_ops(model: ModelSpec, hw: HardwareProfile, s: PassShape) -> list[Op]:
    """Embedding, final norm, LM head over every new token, logits gather and sampling."""
    t_ = s.tokens
    h, v = model.hidden, model.vocab
    embed_bytes = t_ * h * ACT_BYTES * 2 + t_ * h * ACT_BYTES * 3
    embed = Op("embedding", "head", 0.0 * t_, embed_bytes, rl.memory_op_time_s(embed_bytes, hw, 2.0)
               + rl.allreduce_time_s(t_ * h * ACT_BYTES, s.tp, hw), 0.0 * t_, rl.memory_s(embed_bytes, hw))
    lm = _gemm("lm_head", t_, v / s.tp, h, hw, s, family="head")
    # Logits are gathered to one rank (vLLM's LogitsProcessor) and sampled there: softmax,
    # top-k/p and the draw read the T x V fp32 logits about three times.
    logit_bytes = t_ * v * LOGIT_BYTES
    gather = rl.allreduce_time_s(logit_bytes / 2, s.tp, hw)
    sample_bytes = 3 * logit_bytes
    sample = Op("sampling", "head", 5.0 * t_ * v, sample_bytes,
                rl.memory_op_time_s(sample_bytes, hw, 3.0) + gather, 0.0 * t_, rl.memory_s(sample_bytes, hw))
    return [embed, lm, sample]
