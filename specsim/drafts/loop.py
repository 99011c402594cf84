"""The engines' drafting loop for drafters that run as a network on the GPU (EAGLE-family and MTP heads,
draft models, parallel drafters): each drafter's own architecture through the same cost model as the
target (engines.passes), never a constant ratio."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from specsim.cost import roofline as rl
from specsim.cost.dtypes import weight_bytes
from specsim.cost.hardware_profile import HardwareProfile
from specsim.cost.layout import Layout
from specsim.cost.model import ModelSpec
from specsim.cost.roofline import Array
from specsim.engines.passes import US, pass_time_s
from specsim.engines.profile import EngineProfile


@dataclass(frozen=True)
class Drafter:
    """A drafter network as the loop runs it."""

    model: ModelSpec
    tp: int | Layout  # the target's layout for heads that run beside it (MTP, EAGLE), a draft model's own tp
    width: float = 1.0  # tokens per sequence of each further pass: topk for a tree, 1 for a chain
    fuse_in: int = 0  # input width of the GEMM fusing target features into the draft input (0: none)
    tree_ops: float = 0.0  # host launches per pass that build the tree, in eager loops
    one_pass: bool = False  # parallel drafters: the extend pass drafts all k tokens


def drafting_loop_s(drafter: Drafter, e: EngineProfile, hw: HardwareProfile, target: ModelSpec, b: Array, k: Array,
                    ctx: Array, weight_dtype: str, kv_dtype: str) -> Array:
    """Seconds of the engine's drafting loop for k >= 1 draft tokens of b sequences at context ctx.

    A draft-extend pass over the k + 1 verified positions (it consumes the target's hidden states /
    the accepted tokens), then one pass per further draft step over `width` tokens per sequence
    (1 for a chain): k - 1 more in vLLM, SGLang and TensorRT-LLM (extend_then_decode), k more in the
    EAGLE repository's loop (extend_then_depth). Each pass pays its kernels as the engine runs the
    drafter (graph replay or eager launches), a per-pass overhead, and, in eager loops, the host
    launches that build the tree."""
    eager_op_s = e.eager_op_us * US

    def one_pass(q: ArrayLike) -> Array:
        t = pass_time_s(e, hw, drafter.model, b, q, ctx, drafter.tp, weight_dtype, kv_dtype, graphs=e.draft_graphs)
        if drafter.fuse_in:
            t = t + rl.gemm_time_s(b * np.asarray(q, dtype=float), target.hidden, drafter.fuse_in, hw, "bf16",
                                   weight_bytes(weight_dtype))[0]
        return t + (e.draft_pass_overhead_us * US + drafter.tree_ops * eager_op_s)

    extend = one_pass(k + 1.0)
    rest = k - 1.0 if e.draft_loop == "extend_then_decode" else k
    if e.draft_loop == "one_pass" or drafter.one_pass:  # parallel drafters: the one pass above is all
        rest = np.zeros(b.shape)
    more = np.where(rest > 0, rest * one_pass(drafter.width), 0.0)
    return extend + more
