"""Medusa (Cai et al. 2024): k heads on the last hidden state, all evaluated in one pass."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from specsim.cost import roofline as rl
from specsim.cost.dtypes import weight_bytes
from specsim.cost.hardware_profile import HardwareProfile
from specsim.cost.layout import Layout, as_layout
from specsim.cost.model import ModelSpec
from specsim.cost.roofline import Array
from specsim.drafts.family import Family
from specsim.engines.passes import US
from specsim.engines.profile import EngineProfile

if TYPE_CHECKING:
    from specsim.drafts.draft import Draft


@dataclass(frozen=True)
class Medusa(Family):
    """Medusa heads: each a residual block (h x h) and its own LM head (h x V)."""

    name: str = "medusa"
    can_tree: bool = True

    def draft_time_s(self, d: Draft, e: EngineProfile, hw: HardwareProfile, target: ModelSpec, b: Array, k: Array,
                     ctx: Array, tp: int | Layout, weight_dtype: str, kv_dtype: str) -> Array:
        # k heads, each a residual block (h x h) and its own LM head (h x V), over the B verified
        # positions' hidden states; eager loops also launch ~4 kernels per head and the candidates.
        h, v = target.hidden, target.vocab
        wb = weight_bytes(weight_dtype)
        per_head = rl.gemm_time_s(b, h, h, hw, "bf16", wb)[0] + rl.gemm_time_s(b, v / as_layout(tp).tp, h, hw, "bf16",
                                                                         wb)[0]
        gpu = k * per_head + rl.memory_op_time_s(b * k * v * 4.0, hw)
        host = 0.0 if e.draft_graphs else (4.0 * k + e.draft_tree_ops) * (e.eager_op_us * US)
        return np.maximum(gpu, host) + e.draft_pass_overhead_us * US

    def memory_bytes_per_gpu(self, d: Draft, target: ModelSpec, b: Array, ctx: Array, tp: int | Layout,
                             weight_dtype: str, kv_dtype: str) -> tuple[Array, Array]:
        w = 5 * (target.hidden**2 + target.hidden * target.vocab) * weight_bytes(weight_dtype) / as_layout(tp).tp
        return np.full(b.shape, w), np.zeros(b.shape)


MEDUSA = Medusa("medusa")
