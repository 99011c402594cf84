"""A forward pass op by op as an engine runs it, for the commands that show its parts (`specsim forward`,
`specsim ops`): the kernels `passes.pass_time_s` prices, and what the engine adds around them.

The parts follow `pass_time_s`'s own rules, through its own functions: the batch runs at the size
`passes.graph_batch` pads it to; inside a CUDA graph the layers' all-reduce is the engine's (custom /
NCCL captured), outside one eager NCCL; a padded graph's attention is charged for the real sequences only
(`passes._gpu_time_s`). The totals are not summed here but taken from `pass_time_s` and `step_time_s`, the
functions `evaluate`, `plan` and `simulate` price a step with; what they hold beyond the kernels is the
engine's launch of the pass ("overhead": a graph replay, or an eager pass's dispatch) and its exposed host
work per step ("host"), so the parts (`EnginePass.by_part`) add up to the same figures by construction.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from specsim.cost.forward import FAMILIES, breakdown
from specsim.cost.hardware_profile import HardwareProfile
from specsim.cost.layout import Layout
from specsim.cost.model import ModelSpec
from specsim.cost.ops import Op, PassShape, make_shape
from specsim.cost.roofline import Array
from specsim.engines.passes import attention_share, graph_batch, pass_time_s, step_time_s
from specsim.engines.profile import EngineProfile

#: The parts of a step running one pass: the kernels' families (cost.forward.FAMILIES less its "overhead"),
#: the engine's launch of the pass ("overhead") and its exposed host work per step ("host").
PARTS = (*FAMILIES, "host")


@dataclass(frozen=True, eq=False)
class EngineShape:
    """Where each point of a pass runs: the real shape, the batch it runs at and whether a graph replays."""

    shape: PassShape  # the real batch x tokens (validated by make_shape), tp and dtypes
    run_batch: Array  # the batch the pass runs at (padded up to a captured graph size where the engine pads)
    graphed: NDArray[np.bool_]  # whether the pass replays a CUDA graph
    graph_allreduce: str  # the layers' all-reduce inside a graph ("nccl" at tp 1, where none runs)

    @property
    def allreduce(self) -> NDArray[np.str_]:
        """The layers' all-reduce at each point: the engine's inside a graph, eager NCCL outside; "none" at tp 1."""
        if self.shape.layout.gpus == 1:
            return np.full(self.graphed.shape, "none")
        return np.where(self.graphed, self.graph_allreduce, "nccl")


def engine_shape(e: EngineProfile, batch: ArrayLike, q_per_seq: ArrayLike, context_len: ArrayLike,
                 tp: int | Layout = 1, weight_dtype: str = "bf16", kv_dtype: str = "bf16") -> EngineShape:
    """B sequences x q tokens over context L as engine e runs the pass (`passes.graph_batch`)."""
    shape = make_shape(batch, q_per_seq, context_len, tp, weight_dtype, kv_dtype)
    run, graphed = graph_batch(e, shape.batch, shape.q_per_seq)
    return EngineShape(shape, np.broadcast_to(run, shape.tokens.shape).astype(float),
                       np.broadcast_to(graphed, shape.tokens.shape).astype(bool),
                       e.allreduce if shape.layout.gpus > 1 else "nccl")


def engine_ops(es: EngineShape, build: Callable[[PassShape], list[Op]]) -> list[Op]:
    """The ops `build` lists for a pass shape (cost.ops.layer_ops, head_ops, a breakdown's), each point priced
    as the engine runs it: at the run batch, with the graph's all-reduce where it replays one and eager NCCL
    where not, attention in a padded graph charged for the real sequences (`passes.attention_share`)."""
    s = es.shape

    def at(allreduce: str) -> list[Op]:
        return build(make_shape(es.run_batch, s.q_per_seq, s.context_len, s.layout, s.weight_dtype, s.kv_dtype,
                                allreduce))

    graphed = es.graphed
    eager_ops = at("nccl") if not graphed.all() else None
    if eager_ops is not None and not graphed.any():
        return eager_ops
    # one list serves both modes when the graph runs NCCL too (as in pass_time_s)
    graph_ops = eager_ops if eager_ops is not None and es.graph_allreduce == "nccl" else at(es.graph_allreduce)
    eager = eager_ops if eager_ops is not None else graph_ops
    real = np.where(graphed, attention_share(es.run_batch, s.batch), 1.0)

    def pick(g: ArrayLike, x: ArrayLike, scale: ArrayLike = 1.0) -> Array:
        shape = graphed.shape
        return np.where(graphed, np.broadcast_to(g, shape) * np.asarray(scale, dtype=float), np.broadcast_to(x, shape))

    out = []
    for g, x in zip(graph_ops, eager, strict=True):
        sc = real if g.family == "attention" else 1.0
        out.append(dataclasses.replace(
            g, flops=pick(g.flops, x.flops, sc), bytes_=pick(g.bytes_, x.bytes_, sc),
            time_s=pick(g.time_s, x.time_s, sc), compute_s=pick(g.compute_s, x.compute_s, sc),
            memory_s=pick(g.memory_s, x.memory_s, sc), kernels=pick(g.kernels, x.kernels)))
    return out


@dataclass(frozen=True, eq=False)
class EnginePass:
    """A whole forward pass as engine e runs it, and one plain engine step running it."""

    engine: EngineProfile
    where: EngineShape
    ops: list[Op]  # every kernel of the pass (cost.forward.breakdown's), as the engine runs them
    pass_s: Array  # passes.pass_time_s: the kernels and the engine's launch
    step_s: Array  # passes.step_time_s of a plain (non-speculative) step that runs this pass

    @property
    def kernels_s(self) -> Array:
        return np.asarray(sum(op.time_s * op.count for op in self.ops), dtype=float)

    def flops(self) -> Array:
        return np.asarray(sum(op.flops * op.count for op in self.ops), dtype=float)

    def by_part(self) -> dict[str, Array]:
        """Seconds by PARTS; they add up to `step_s`."""
        out = {f: np.zeros(self.step_s.shape) for f in PARTS}
        for op in self.ops:
            out[op.family] = out[op.family] + op.time_s * op.count
        out["overhead"] = self.pass_s - self.kernels_s
        out["host"] = self.step_s - self.pass_s
        return out


def engine_pass(e: EngineProfile, hw: HardwareProfile, model: ModelSpec, where: EngineShape,
                ops: list[Op] | None = None) -> EnginePass:
    """The pass at `where` (`engine_shape`) as engine e runs it, with its parts; `step_s` is what
    `plan.evaluate.step_times` gives plain decoding at q = 1. `ops`: the pass's kernels as `engine_ops` gives
    them (by default of cost.forward.breakdown's ops)."""
    s = where.shape
    if ops is None:
        kernels = hw.for_framework(e.framework)
        ops = engine_ops(where, lambda shape: breakdown(model, kernels, shape).ops)
    total = pass_time_s(e, hw, model, s.batch, s.q_per_seq, s.context_len, s.layout, s.weight_dtype, s.kv_dtype)
    step = step_time_s(e, total, s.batch, speculative=False)
    shape = s.tokens.shape
    return EnginePass(e, where, ops, np.broadcast_to(total, shape).astype(float),
                      np.broadcast_to(step, shape).astype(float))
