"""What a draft costs per step on the target's hardware, and the memory it takes: each draft's own
architecture through the same cost model as the target (cost.forward), never a constant ratio. Each
family (drafts/families/) prices its own drafter; these are the entry points."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from numpy.typing import ArrayLike

from specsim.cost.hardware_profile import HardwareProfile
from specsim.cost.layout import Layout, as_layout
from specsim.cost.model import ModelSpec
from specsim.cost.roofline import Array
from specsim.drafts.draft import Draft
from specsim.engines.profile import EngineProfile


def draft_time_s(d: Draft, e: EngineProfile, hw: HardwareProfile, target: ModelSpec, batch: ArrayLike,
                 k: ArrayLike, context_len: ArrayLike, tp: int | Layout = 1, weight_dtype: str = "bf16",
                 kv_dtype: str = "bf16") -> Array:
    """Seconds a step spends drafting k tokens for B sequences at context L, as engine e drafts (0 at k = 0).

    Autoregressive drafters (EAGLE family, MTP, draft models) run the engine's drafting loop
    (drafts/loop.py), parallel drafters its extend pass alone; Medusa heads run once on the verified
    hidden states; n-gram lookup runs on the host; lookahead needs no draft pass.

    A drafter runs beside the target on its GPUs (a head in the target's layout: MTP's MoE layer under the
    target's EP and DP attention) but outside its pipeline: once per step, on the last stage.
    """
    b, kk, ctx = (np.asarray(a, dtype=float) for a in np.broadcast_arrays(batch, k, context_len))
    lay = as_layout(tp)
    run: int | Layout = lay.tp if lay.simple else replace(lay, pp=1, microbatches=0)
    t = d.family.draft_time_s(d, e, hw, target, b, kk, ctx, run, weight_dtype, kv_dtype)
    return np.where(kk > 0, t, 0.0)


def memory_bytes_per_gpu(d: Draft, target: ModelSpec, batch: ArrayLike, context_len: ArrayLike,
                         tp: int | Layout = 1, weight_dtype: str = "bf16", kv_dtype: str = "bf16"
                         ) -> tuple[Array, Array]:
    """(draft weights, draft KV cache) bytes on each GPU: the draft split as the target's attention (tp), its
    KV cache for the sequences of one DP-attention group."""
    lay = as_layout(tp)
    b, ctx = np.broadcast_arrays(np.ceil(np.asarray(batch, dtype=float) / lay.dp), np.asarray(context_len, dtype=float))
    return d.family.memory_bytes_per_gpu(d, target, b, ctx, lay.tp if lay.simple else lay, weight_dtype, kv_dtype)
