"""The whole forward pass: every layer, the head and the per-pass overhead, with the split by
op family. Vectorised over batch, new tokens per sequence and context length."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import cast

import numpy as np
from numpy.typing import ArrayLike

from specsim.cost.costmodel import describe
from specsim.cost.dtypes import ACT_BYTES
from specsim.cost.hardware_profile import HardwareProfile
from specsim.cost.layout import Layout
from specsim.cost.model import ModelSpec
from specsim.cost.ops import Op, PassShape, head_ops, layer_ops, make_shape
from specsim.cost.roofline import Array

FAMILIES = ("linear", "attention", "elementwise", "communication", "head", "overhead")


@dataclass(frozen=True)
class ForwardBreakdown:
    ops: list[Op]  # per-layer ops carry their layer count; head ops count once
    overhead_s: Array  # per-pass fixed host cost (hw.launch_overhead_s); engine profiles replace it
    cost_model: str = "roofline"  # which cost model timed the kernels (costmodel.describe)

    @property
    def time_s(self) -> Array:
        return sum(op.time_s * op.count for op in self.ops) + self.overhead_s

    def by_family(self) -> dict[str, Array]:
        out = {f: np.zeros_like(self.overhead_s) for f in FAMILIES}
        for op in self.ops:
            out[op.family] = out[op.family] + op.time_s * op.count
        out["overhead"] = self.overhead_s
        return out

    def flops(self) -> Array:
        return cast(Array, sum(op.flops * op.count for op in self.ops))  # ops: never empty

    def bytes_(self) -> Array:
        return cast(Array, sum(op.bytes_ * op.count for op in self.ops))

    def kernels(self) -> Array:
        """Kernel launches of the pass (what an eager engine pays host launch time for)."""
        return sum(np.asarray(op.kernels, dtype=float) * op.count for op in self.ops) + np.zeros_like(self.overhead_s)


def breakdown(model: ModelSpec, hw: HardwareProfile, shape: PassShape) -> ForwardBreakdown:
    """Every op of one pass. Under a pipeline (layout.pp > 1) the pass is one microbatch's traversal of every
    stage: the engine's B sequences split over the microbatches in flight (at least one sequence each), all
    layers' ops at that microbatch (each stage holds 1/pp of them, in sequence), and the pp - 1 hand-offs of
    the hidden states between stages (a point-to-point send: the link's latency and bandwidth)."""
    lay = shape.layout
    if lay.pp > 1:
        shape = replace(shape, batch=np.maximum(shape.batch / lay.in_flight, 1.0))
    ops = layer_ops(model, hw, shape)
    if model.is_moe and model.n_dense_layers:
        ops = layer_ops(model, hw, shape, moe=False, mixers=False) + ops
    ops = ops + head_ops(model, hw, shape)
    if lay.pp > 1:
        ops.append(_pipeline_send(model, hw, shape))
    # One host-side launch of the captured pass (CUDA graph) per forward.
    overhead = np.broadcast_to(np.asarray(hw.launch_overhead_s), shape.tokens.shape).astype(float)
    return ForwardBreakdown(ops, overhead, describe(hw))


def _pipeline_send(model: ModelSpec, hw: HardwareProfile, shape: PassShape) -> Op:
    """The pp - 1 sends of a microbatch's hidden states (and residual) from stage to stage: NCCL send/recv
    (vLLM's pipeline, accelerate's device_map `.to(device)`): the link's latency plus the bytes over its
    bandwidth (hardware profile `interconnect`)."""
    link = hw.interconnect
    bytes_ = np.ceil(shape.batch / shape.layout.dp) * shape.q_per_seq * model.hidden * ACT_BYTES * 2.0
    t = link.allreduce_latency_s + bytes_ / link.link_bw_bytes_per_s
    return Op("pipeline_send", "communication", 0.0 * bytes_, bytes_, t, 0.0 * t, t, shape.layout.pp - 1, 1.0)


def forward_time_s(
    hw: HardwareProfile, model: ModelSpec, batch: ArrayLike, q_per_seq: ArrayLike,
    context_len: ArrayLike, tp: int | Layout = 1, weight_dtype: str = "bf16", kv_dtype: str = "bf16",
    allreduce: str = "nccl",
) -> Array:
    """Seconds for one forward pass of B sequences x q new tokens over a KV cache of context_len;
    `allreduce` is the engine's all-reduce implementation (eager "nccl", "nccl_graph", "custom")."""
    shape = make_shape(batch, q_per_seq, context_len, tp, weight_dtype, kv_dtype, allreduce)
    return breakdown(model, hw, shape).time_s
