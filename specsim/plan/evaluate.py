"""One speculative configuration on real costs: the join of drafts, the cost model and step
economics. `specsim evaluate --hardware ... --draft ...` and `specsim plan` both call
`config_metrics`, so the two routes agree by construction.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from specsim.cost import roofline as rl
from specsim.cost.dtypes import weight_bytes
from specsim.cost.forward import forward_time_s
from specsim.cost.hardware import HardwareProfile
from specsim.cost.model import ModelSpec
from specsim.cost.roofline import Array
from specsim.drafts.cost import draft_time_s, memory_bytes_per_gpu
from specsim.drafts.draft import Draft
from specsim.plan.step import StepMetrics, step_metrics


@dataclass(frozen=True)
class Target:
    """The serving setup a draft is judged on."""

    hardware: HardwareProfile
    model: ModelSpec
    tp: int = 1
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    memory_utilization: float = 0.9


def overhead_time_s(t: Target, batch: ArrayLike, k: ArrayLike) -> Array:
    """Per-step cost of speculation beyond draft and verification: rejection sampling reads the
    draft's and target's fp32 probabilities over the vocabulary for every drafted token (vLLM
    RejectionSampler), and the KV rollback is a length update (paged KV: free). Zero at k = 0;
    broadcasts over batch and k."""
    b, kk = np.asarray(batch, dtype=float), np.asarray(k, dtype=float)
    return np.where(kk > 0, rl.memory_op_time_s(b * kk * t.model.vocab * 4.0 * 2.0, t.hardware, 2.0), 0.0)


def config_metrics(t: Target, d: Draft, k: int, batch: ArrayLike, context_len: ArrayLike,
                   alpha_scale: float = 1.0, tokens_per_step: float | None = None,
                   verify_tokens_per_seq: float | None = None, extra_overhead_s: float = 0.0) -> StepMetrics:
    """Step economics of draft d at depth k, for arrays of batch and context (k = 0: plain decoding).

    `tokens_per_step` / `verify_tokens_per_seq` override the draft's own (a user's tree file)."""
    b, ctx = (np.asarray(a, dtype=float) for a in np.broadcast_arrays(batch, context_len))
    hw, m = t.hardware, t.model
    baseline = forward_time_s(hw, m, b, 1, ctx, t.tp, t.weight_dtype, t.kv_dtype)
    if k == 0 or d.method == "none":
        return step_metrics(1.0, 0.0, baseline, baseline, b)
    q = float(d.verify_tokens_per_seq(k)) if verify_tokens_per_seq is None else verify_tokens_per_seq
    verify = forward_time_s(hw, m, b, q, ctx, t.tp, t.weight_dtype, t.kv_dtype)
    draft = draft_time_s(d, hw, m, b, k, ctx, t.tp, t.weight_dtype, t.kv_dtype)
    tokens = d.tokens_per_step(k, alpha_scale) if tokens_per_step is None else tokens_per_step
    return step_metrics(tokens, draft, verify, baseline, b, overhead_time_s(t, b, k) + extra_overhead_s)


def memory_per_gpu(t: Target, d: Draft, k: int, batch: ArrayLike, context_len: ArrayLike) -> dict[str, Array]:
    """Bytes on each GPU: target weights, target KV for B x (L + verify tokens), draft weights and KV."""
    b, ctx = (np.asarray(a, dtype=float) for a in np.broadcast_arrays(batch, context_len))
    m = t.model
    q = float(d.verify_tokens_per_seq(k)) if k else 1.0
    weights = m.n_params() * weight_bytes(t.weight_dtype) / t.tp
    # Each GPU caches its share of the KV heads (replicated when tp > KV heads); MLA's latent is
    # replicated on every GPU.
    share = 1.0 if m.is_mla else max(m.n_kv_heads / t.tp, 1.0) / m.n_kv_heads
    kv = b * (ctx + q) * m.kv_bytes_per_token(t.kv_dtype) * share
    dw, dkv = memory_bytes_per_gpu(d, m, b, ctx + q, t.tp, t.weight_dtype, t.kv_dtype) if k else (0 * b, 0 * b)
    total = weights + kv + dw + dkv
    return {"weights": np.full(b.shape, weights), "kv_cache": kv, "draft_weights": dw, "draft_kv": dkv,
            "total": total, "capacity": np.full(b.shape, t.hardware.memory_bytes * t.memory_utilization)}


def fits(t: Target, d: Draft, k: int, batch: ArrayLike, context_len: ArrayLike) -> Array:
    mem = memory_per_gpu(t, d, k, batch, context_len)
    return mem["total"] <= mem["capacity"]
