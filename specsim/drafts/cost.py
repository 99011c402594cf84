"""What a draft costs per step on the target's hardware, and the memory it takes: each draft's own
architecture through the same cost model as the target (cost.forward), never a constant ratio."""

from __future__ import annotations

import dataclasses

import numpy as np
from numpy.typing import ArrayLike

from specsim.cost import roofline as rl
from specsim.cost.dtypes import weight_bytes
from specsim.cost.hardware import HardwareProfile
from specsim.cost.model import ModelSpec
from specsim.cost.roofline import Array
from specsim.drafts.draft import METHODS, Draft
from specsim.engines.passes import US, pass_time_s
from specsim.engines.profile import EngineProfile
from specsim.errors import SpecsimError


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


def draft_time_s(d: Draft, e: EngineProfile, hw: HardwareProfile, target: ModelSpec, batch: ArrayLike,
                 k: ArrayLike, context_len: ArrayLike, tp: int = 1, weight_dtype: str = "bf16",
                 kv_dtype: str = "bf16") -> Array:
    """Seconds a step spends drafting k tokens for B sequences at context L, as engine e drafts.

    Autoregressive drafters (EAGLE family, MTP, draft models) run the engine's drafting loop: a
    draft-extend pass over the k + 1 verified positions (it consumes the target's hidden states /
    the accepted tokens), then one pass per further draft step over `topk` tokens per sequence
    (1 for a chain): k - 1 more in vLLM, SGLang and TensorRT-LLM (extend_then_decode), k more in the
    EAGLE repository's loop (extend_then_depth). Each pass pays its kernels as the engine runs the
    drafter (graph replay or eager launches), a per-pass overhead, and, in eager loops, the host
    launches that build the tree. Medusa heads run once on the verified hidden states; n-gram
    lookup runs on the host; lookahead needs no draft pass.
    """
    b, kk, ctx = (np.asarray(a, dtype=float) for a in np.broadcast_arrays(batch, k, context_len))
    zero = np.zeros(b.shape)
    on = kk > 0
    if d.method in ("none", "lookahead"):
        return zero
    if d.method in ("ngram", "suffix"):
        # Host scan of every running sequence's context, over up to 8 threads (vllm PR #24986, #56732).
        scan_us = e.ngram_ns_per_context_token * 1e-3 * b * ctx / np.minimum(8.0, b)
        return np.where(on, (e.ngram_fixed_us + scan_us) * US, 0.0)
    eager_op_s = e.eager_op_us * US
    if d.method == "medusa":
        # k heads, each a residual block (h x h) and its own LM head (h x V), over the B verified
        # positions' hidden states; eager loops also launch ~4 kernels per head and the candidates.
        h, v = target.hidden, target.vocab
        wb = weight_bytes(weight_dtype)
        per_head = rl.gemm_time_s(b, h, h, hw, "bf16", wb)[0] + rl.gemm_time_s(b, v / tp, h, hw, "bf16", wb)[0]
        gpu = kk * per_head + rl.memory_op_time_s(b * kk * v * 4.0, hw)
        host = 0.0 if e.draft_graphs else (4.0 * kk + e.draft_tree_ops) * eager_op_s
        return np.where(on, np.maximum(gpu, host) + e.draft_pass_overhead_us * US, 0.0)
    if d.method == "draft_model":
        assert d.model is not None
        drafter, dtp, width, fuse_in, tree_ops = d.model, d.draft_tp or tp, 1.0, 0, 0.0
    elif d.method in ("eagle", "eagle2", "eagle3", "mtp"):
        if d.method == "mtp" and not target.mtp_layers:
            raise SpecsimError(f"{target.name} ships no MTP module (num_nextn_predict_layers = 0)")
        drafter = head_model(target, d.draft_vocab if d.method == "eagle3" else None, moe=d.method == "mtp")
        dtp, width = tp, float(d.topk if d.is_tree else 1)
        # Fuse target features into the draft input: 2h -> h (EAGLE-1/2, MTP's projection), 3h -> h (EAGLE-3).
        fuse_in = (3 if d.method == "eagle3" else 2) * target.hidden
        tree_ops = e.draft_tree_ops
    elif d.method in ("p_eagle", "dflash", "dspark"):
        # --- parallel drafters (acceptance issue #10) ---
        # P-EAGLE / DFlash / DSpark draft all k tokens in ONE pass of a `draft_layers`-deep drafter at
        # the target's width, over the verified positions and the k-token block, on the target's fused
        # features (2h -> h): "drafting cost stays flat as the block deepens" (vLLM P-EAGLE post).
        drafter = dataclasses.replace(head_model(target), n_layers=d.draft_layers or 1,
                                      name=f"{target.name}-{d.method}")
        dtp, width, fuse_in, tree_ops = tp, 1.0, 2 * target.hidden, 0.0
    else:
        raise SpecsimError(f"unknown draft method '{d.method}' (known: {', '.join(METHODS)})")

    def one_pass(q: ArrayLike) -> Array:
        t = pass_time_s(e, hw, drafter, b, q, ctx, dtp, weight_dtype, kv_dtype, graphs=e.draft_graphs)
        if fuse_in:
            t = t + rl.gemm_time_s(b * np.asarray(q, dtype=float), target.hidden, fuse_in, hw, "bf16",
                                   weight_bytes(weight_dtype))[0]
        return t + (e.draft_pass_overhead_us * US + tree_ops * eager_op_s)

    extend = one_pass(kk + 1.0)
    rest = kk - 1.0 if e.draft_loop == "extend_then_decode" else kk
    if e.draft_loop == "one_pass" or d.is_parallel:  # parallel drafters: the one pass above is all
        rest = np.zeros(b.shape)
    more = np.where(rest > 0, rest * one_pass(width), 0.0)
    return np.where(on, extend + more, 0.0)


def memory_bytes_per_gpu(d: Draft, target: ModelSpec, batch: ArrayLike, context_len: ArrayLike, tp: int = 1,
                         weight_dtype: str = "bf16", kv_dtype: str = "bf16") -> tuple[Array, Array]:
    """(draft weights, draft KV cache) bytes on each GPU."""
    b, ctx = np.broadcast_arrays(np.asarray(batch, dtype=float), np.asarray(context_len, dtype=float))
    wb = weight_bytes(weight_dtype)
    if d.method == "draft_model" and d.model is not None:
        dtp = d.draft_tp or tp
        w = d.model.n_params() * wb / dtp
        kv = b * d.model.kv_bytes_per_sequence(ctx, kv_dtype, dtp)
        return np.full(b.shape, w), kv
    if d.method in ("eagle", "eagle2", "eagle3", "mtp"):
        head = head_model(target, d.draft_vocab if d.method == "eagle3" else None, moe=d.method == "mtp")
        c = head.param_counts()
        w = (c["attention"] + c["dense_mlp"] + c["experts"]) * wb / tp
        if d.method == "eagle3":
            w += c["lm_head"] * wb / tp  # its own reduced-vocabulary head
        w += (3 if d.method == "eagle3" else 2) * target.hidden**2 * wb / tp
        kv = b * head.kv_bytes_per_sequence(ctx, kv_dtype, tp)
        return np.full(b.shape, w), kv
    if d.is_parallel:  # parallel drafters (issue #10): draft_layers target-width layers + the 2h -> h fusion
        head = dataclasses.replace(head_model(target), n_layers=d.draft_layers or 1)
        c = head.param_counts()
        w = (c["attention"] + c["dense_mlp"] + c["experts"] + 2 * target.hidden**2) * wb / tp
        return np.full(b.shape, w), b * head.kv_bytes_per_sequence(ctx, kv_dtype, tp)
    if d.method == "medusa":
        w = 5 * (target.hidden**2 + target.hidden * target.vocab) * wb / tp
        return np.full(b.shape, w), np.zeros(b.shape)
    return np.zeros(b.shape), np.zeros(b.shape)
