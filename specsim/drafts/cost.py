"""What a draft costs per step on the target's hardware, and the memory it takes: each draft's own
architecture through the same cost model as the target (cost.forward), never a constant ratio."""

from __future__ import annotations

import dataclasses

import numpy as np
from numpy.typing import ArrayLike

from specsim.cost import roofline as rl
from specsim.cost.dtypes import weight_bytes
from specsim.cost.forward import forward_time_s
from specsim.cost.hardware import HardwareProfile
from specsim.cost.model import ModelSpec
from specsim.cost.roofline import Array
from specsim.drafts.draft import METHODS, Draft
from specsim.errors import SpecsimError

# Host-side n-gram matching per step: a fixed cost plus a per-sequence scan (vLLM's numba
# NgramProposer, order of microseconds per request; an estimate, not a measurement).
NGRAM_FIXED_US = 20.0
NGRAM_PER_SEQ_US = 3.0


def head_model(target: ModelSpec, vocab: int | None = None, moe: bool = False) -> ModelSpec:
    """A one-layer model at the target's width: EAGLE's draft layer (dense) or an MTP module (as
    the target's layer, MoE for DeepSeek-V3)."""
    return dataclasses.replace(
        target, name=f"{target.name}-head", n_layers=1, vocab=vocab or target.vocab,
        n_dense_layers=0,
        n_experts=target.n_experts if moe else 0, top_k=target.top_k if moe else 0,
        n_shared_experts=target.n_shared_experts if moe else 0,
        kv_lora_rank=target.kv_lora_rank if moe else 0, q_lora_rank=target.q_lora_rank if moe else 0,
        mtp_layers=0,
    )


def draft_time_s(d: Draft, hw: HardwareProfile, target: ModelSpec, batch: ArrayLike, k: ArrayLike,
                 context_len: ArrayLike, tp: int = 1, weight_dtype: str = "bf16", kv_dtype: str = "bf16") -> Array:
    """Seconds a step spends drafting k tokens for B sequences at context L (broadcasting)."""
    b, kk, ctx = (np.asarray(a, dtype=float) for a in np.broadcast_arrays(batch, k, context_len))
    zero = np.zeros(np.broadcast_shapes(b.shape, kk.shape, ctx.shape))
    if d.method in ("none", "lookahead"):
        return zero
    if d.method in ("ngram", "suffix"):
        return np.where(kk > 0, (NGRAM_FIXED_US + NGRAM_PER_SEQ_US * b) * 1e-6, 0.0) + zero
    if d.method == "draft_model":
        assert d.model is not None
        one = forward_time_s(hw, d.model, b, 1, ctx, d.draft_tp or tp, weight_dtype, kv_dtype)
        return kk * one
    if d.method == "medusa":
        # k heads, each a residual block (h x h) and its own LM head (h x V), one pass over B tokens.
        h, v = target.hidden, target.vocab
        wb = weight_bytes(weight_dtype)
        per_head = rl.gemm_time_s(b, h, h, hw, "bf16", wb)[0] + rl.gemm_time_s(b, v / tp, h, hw, "bf16", wb)[0]
        return np.where(kk > 0, kk * per_head + rl.memory_op_time_s(b * kk * v * 4.0, hw), 0.0)
    if d.method in ("eagle", "eagle2", "eagle3"):
        head = head_model(target, d.draft_vocab if d.method == "eagle3" else None)
        width = float(d.topk if d.is_tree else 1)  # tokens per sequence each draft pass expands
        # Fuse target features into the draft input: 2h -> h (EAGLE-1/2), 3h -> h (EAGLE-3).
        fuse_in = (3 if d.method == "eagle3" else 2) * target.hidden
        fuse = rl.gemm_time_s(b, target.hidden, fuse_in, hw, "bf16", weight_bytes(weight_dtype))[0]
        layer = forward_time_s(hw, head, b, width, ctx, tp, weight_dtype, kv_dtype)
        return np.where(kk > 0, fuse + kk * layer, 0.0)
    if d.method == "mtp":
        if not target.mtp_layers:
            raise SpecsimError(f"{target.name} ships no MTP module (num_nextn_predict_layers = 0)")
        module = head_model(target, moe=target.is_moe)
        proj = rl.gemm_time_s(b, target.hidden, 2 * target.hidden, hw, "bf16", weight_bytes(weight_dtype))[0]
        return kk * (proj + forward_time_s(hw, module, b, 1, ctx, tp, weight_dtype, kv_dtype))
    raise SpecsimError(f"unknown draft method '{d.method}' (known: {', '.join(METHODS)})")


def memory_bytes_per_gpu(d: Draft, target: ModelSpec, batch: ArrayLike, context_len: ArrayLike, tp: int = 1,
                         weight_dtype: str = "bf16", kv_dtype: str = "bf16") -> tuple[Array, Array]:
    """(draft weights, draft KV cache) bytes on each GPU."""
    b, ctx = np.broadcast_arrays(np.asarray(batch, dtype=float), np.asarray(context_len, dtype=float))
    wb = weight_bytes(weight_dtype)
    if d.method == "draft_model" and d.model is not None:
        dtp = d.draft_tp or tp
        w = d.model.n_params() * wb / dtp
        kv = b * ctx * d.model.kv_bytes_per_token(kv_dtype) / dtp
        return np.full(b.shape, w), kv
    if d.method in ("eagle", "eagle2", "eagle3", "mtp"):
        head = head_model(target, d.draft_vocab if d.method == "eagle3" else None, moe=d.method == "mtp")
        c = head.param_counts()
        w = (c["attention"] + c["dense_mlp"] + c["experts"]) * wb / tp
        if d.method == "eagle3":
            w += c["lm_head"] * wb / tp  # its own reduced-vocabulary head
        w += (3 if d.method == "eagle3" else 2) * target.hidden**2 * wb / tp
        kv = b * ctx * head.kv_bytes_per_token(kv_dtype) / tp
        return np.full(b.shape, w), kv
    if d.method == "medusa":
        w = 5 * (target.hidden**2 + target.hidden * target.vocab) * wb / tp
        return np.full(b.shape, w), np.zeros(b.shape)
    return np.zeros(b.shape), np.zeros(b.shape)
