"""A forward pass and a step as an engine runs them (vectorised over batch, tokens and context).

A pass: its kernels' GPU time (cost.forward), with the batch padded to the engine's captured CUDA-graph
size and the all-reduce the engine runs, plus the host cost of launching it: one graph replay, or,
outside a graph, one dispatch per kernel; an eager pass is bound by whichever of the GPU and the host
is slower (the host enqueues ahead of the GPU until it is the bottleneck: PyTorch's asynchronous
execution model, the gpt-fast blog's "overhead-bound" regime).

A step: the passes (and host proposers) on the critical path, and the engine's host work (scheduling,
input preparation, sampling, per-sequence bookkeeping): hidden behind the GPU by an async / overlap
scheduler (vLLM async scheduling, SGLang's zero-overhead scheduler, TRT-LLM's overlap scheduler) except
a small exposed part, or added in full where the step runs synchronously (research loops; SGLang's
spec-v1 EAGLE worker).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from specsim.cost.forward import ForwardBreakdown, breakdown
from specsim.cost.hardware_profile import HardwareProfile
from specsim.cost.layout import Layout, as_layout
from specsim.cost.memo import ArrayMemo, unique_rows
from specsim.cost.model import ModelSpec
from specsim.cost.ops import make_shape
from specsim.cost.roofline import Array
from specsim.engines.mla import mla_single_query
from specsim.engines.profile import EngineProfile

US = 1e-6


def graph_batch(e: EngineProfile, batch: ArrayLike, q_per_seq: ArrayLike) -> tuple[Array, Array]:
    """(batch the pass runs at, whether it replays a graph) for B sequences x q tokens.

    Sizes count tokens (vLLM: the capture sizes rounded up to multiples of q = k + 1, those above the
    largest dropped: `adjust_cudagraph_sizes_for_spec_decode`) or requests (SGLang, TensorRT-LLM: a
    graph per request count, each request verifying q tokens). A batch pads up to the next size when
    the engine pads, else only an exact size replays a graph; larger batches run without one.
    """
    b, q = np.broadcast_arrays(np.asarray(batch, dtype=float), np.asarray(q_per_seq, dtype=float))
    out = b.copy()
    graphed = np.zeros(b.shape, dtype=bool)
    if not e.cuda_graphs or not e.graph_sizes:
        return out, graphed
    sizes = np.asarray(e.graph_sizes, dtype=float)
    for uq in np.unique(q):
        rows = q == uq
        if e.graph_unit == "tokens":
            cand = np.unique(np.ceil(sizes / uq) * uq)
            cand = cand[cand <= sizes[-1]] / uq  # in requests
        else:
            cand = sizes
        if not cand.size:
            continue
        pos = np.searchsorted(cand, b[rows], side="left")
        hit = pos < cand.size
        padded = np.where(hit, cand[np.minimum(pos, cand.size - 1)], b[rows])
        if not e.graph_padding:
            hit &= padded == b[rows]
        out[rows] = np.where(hit, padded, b[rows])
        graphed[rows] = hit
    return out, graphed


def eager_launches(e: EngineProfile, model: ModelSpec) -> float:
    """Kernel launches of one eager pass of `model` (the engine's per-layer count x layers + extras)."""
    return model.n_layers * e.eager_kernels_per_layer + e.eager_kernels_extra


#: Passes `pass_time_s` remembers (cost.memo): a plan, its sensitivity re-plans and the capacity solver price the
#: same passes many times over (the plain pass of every configuration, the same concurrency grid for every draft).
PASS_CACHE_SIZE = 1024
PASS_CACHE_MAX_POINTS = 4096
_PASSES = ArrayMemo(PASS_CACHE_SIZE, PASS_CACHE_MAX_POINTS)


def pass_time_s(e: EngineProfile, hw: HardwareProfile, model: ModelSpec, batch: ArrayLike, q_per_seq: ArrayLike,
                context_len: ArrayLike, tp: int | Layout = 1, weight_dtype: str = "bf16", kv_dtype: str = "bf16",
                graphs: bool = True) -> Array:
    """Seconds of one forward pass of B sequences x q tokens over context L as engine e runs it.

    Inside a graph the all-reduce is the engine's (custom / NCCL captured in the graph); outside one it
    is eager NCCL and every kernel pays a host dispatch (`eager_op_us` per kernel the cost model counts,
    or the eager loop's measured op count). `graphs=False` prices the pass outside CUDA graphs whatever
    the batch (e.g. a drafter the engine does not capture).

    The kernels are the engine's framework's on this GPU (`HardwareProfile.for_framework`: fitted to that
    framework's tables where the profile holds them). Memoised (`_PASSES`, cost.memo) on everything the result
    depends on: the engine and hardware profiles by
    identity, the model and scalars by value, the arrays by bytes."""
    b, q, ctx = (np.asarray(a, dtype=float) for a in (batch, q_per_seq, context_len))
    hw = hw.for_framework(e.framework)  # the engine's own kernels on this GPU, where the profile holds them
    owners = (e, hw)
    key = _PASSES.key(owners, (model, tp, weight_dtype, kv_dtype, bool(graphs)), (b, q, ctx))
    if (hit := _PASSES.get(key, owners)) is not None:
        return hit[0]
    out = _on_unique_points(lambda bb, qq, cc: _pass_time_s(e, hw, model, bb, qq, cc, tp, weight_dtype, kv_dtype,
                                                            graphs), b, q, ctx)
    _PASSES.put(key, owners, (out,))
    return out


def _on_unique_points(fn: Callable[[Array, Array, Array], Array], b: Array, q: Array, ctx: Array) -> Array:
    """fn (elementwise in its points) evaluated once per distinct (batch, tokens, context) point and spread
    back: a plan's grids repeat points across configurations (a draft's passes over k, trees of one depth)
    and contexts, 2.7x on the 70B scenario's sensitivity re-plans."""
    bb, qq, cc = np.broadcast_arrays(b, q, ctx)
    if bb.size < 64:
        return fn(b, q, ctx)
    unique, inverse = unique_rows(bb.ravel(), qq.ravel(), cc.ravel())
    if len(unique) > 0.8 * bb.size:
        return fn(b, q, ctx)
    out = np.asarray(fn(unique[:, 0], unique[:, 1], unique[:, 2]), dtype=float)
    return out[inverse].reshape(bb.shape)


def clear_pass_cache() -> None:
    _PASSES.clear()


def _pass_time_s(e: EngineProfile, hw: HardwareProfile, model: ModelSpec, b: Array, q: Array, ctx: Array,
                 tp: int | Layout,
                 weight_dtype: str, kv_dtype: str, graphs: bool) -> Array:
    """`pass_time_s` evaluated (float arrays)."""
    b_run, graphed = graph_batch(e, b, q)
    single = mla_single_query(e.mla_backend, hw) if model.is_mla else False
    if not graphs:
        b_run, graphed = np.broadcast_to(b, b_run.shape).astype(float), np.zeros(b_run.shape, dtype=bool)
    shape_args = (tp, weight_dtype, kv_dtype)
    # one cost-model call per execution mode present (graphed, eager), each over the whole array; one in all
    # when both modes run the same all-reduce (one GPU): the same breakdown serves both
    gpu = kernels = np.zeros(np.broadcast_shapes(b_run.shape, q.shape, ctx.shape))
    eager_br = None
    if not graphed.all():
        eager_br = _breakdown(hw, model, b_run, q, ctx, *shape_args, "nccl", e.alltoall, single)
        gpu, kernels = _gpu_time_s(eager_br)
    if graphed.any():
        impl = e.allreduce if as_layout(tp).gpus > 1 else "nccl"
        # inside a graph the framework's host-side all-to-all work is gone: DeepEP's kernels alone (NVIDIA's vLLM
        # and TRT-LLM all-to-all tables time the framework's call eagerly)
        same = impl == "nccl" and e.alltoall == "deepep"
        br = eager_br if eager_br is not None and same else _breakdown(hw, model, b_run, q, ctx, *shape_args, impl,
                                                                       single_query=single)
        graph_gpu, _ = _gpu_time_s(br, b_run, real_batch=b)
        gpu = np.where(graphed, graph_gpu, gpu)
    launches: float | Array
    if e.eager_loop is not None:
        launches = e.eager_loop.plain_ops(model.n_layers, model.n_kv_heads < model.n_heads)
    else:
        launches = kernels
    eager = np.maximum(gpu, launches * e.eager_op_us * US) + e.eager_op_us * US
    return np.where(graphed, gpu + e.graph_launch_us * US, eager)


def gpu_only(e: EngineProfile) -> EngineProfile:
    """The engine with free host launches: its passes cost their kernels only (for eager loops, whose host
    side is priced per cycle from measured op counts)."""
    return dataclasses.replace(e, eager_op_us=0.0, draft_pass_overhead_us=0.0, draft_tree_ops=0.0,
                               verify_host_ops=0.0)


def eager_cycle_host_s(e: EngineProfile, method: str, model: ModelSpec, k: ArrayLike,
                       drafter: ModelSpec | None = None) -> Array:
    """Host dispatch time of one speculative cycle of an eager loop (NaN where the method was not measured)."""
    assert e.eager_loop is not None
    kk = np.asarray(k, dtype=float)
    gqa = model.n_kv_heads < model.n_heads
    layers = drafter.n_layers if drafter is not None else 0.0
    ops = np.vectorize(lambda x: e.eager_loop.cycle_ops(method, model.n_layers, gqa, x, layers))(kk)  # type: ignore[union-attr]
    return ops * e.eager_op_us * US


def _breakdown(hw: HardwareProfile, model: ModelSpec, batch: Array, q: Array, ctx: Array, tp: int | Layout,
               weight_dtype: str, kv_dtype: str, allreduce: str = "nccl", alltoall: str = "deepep",
               single_query: bool = False) -> ForwardBreakdown:
    """The forward pass's kernels at (batch, q, context) with the given all-reduce and all-to-all (and MLA
    verification on the prefill path where the engine's MLA backend takes one-token queries only)."""
    return breakdown(model, hw, make_shape(batch, q, ctx, tp, weight_dtype, kv_dtype, allreduce, alltoall,
                                           single_query))


def _gpu_time_s(br: ForwardBreakdown, batch: Array | None = None, real_batch: Array | None = None
                ) -> tuple[Array, Array]:
    """(the kernels' time on the GPU, the kernels launched) of a breakdown: the forward pass without the
    profile's per-pass host cost.

    A graph padded from `real_batch` to `batch` runs its GEMMs at the padded batch, but the padding
    slots carry no KV cache (engines give them a zero sequence length), so attention is charged for
    the real sequences only: attention scales with the sequences it reads (its fixed cost aside)."""
    gpu = br.time_s - br.overhead_s
    kernels = br.kernels()
    if real_batch is None:
        return gpu, kernels
    assert batch is not None
    attention = br.by_family()["attention"]
    return gpu - attention * (1.0 - attention_share(batch, real_batch)), kernels


def attention_share(batch: ArrayLike, real_batch: ArrayLike) -> Array:
    """The share of a padded graph's attention that is paid: its padding slots carry no KV cache (engines give
    them a zero sequence length), so attention scales with the real sequences it reads."""
    return np.asarray(real_batch, dtype=float) / np.maximum(batch, 1.0)


def host_step_s(e: EngineProfile, batch: ArrayLike, speculative: bool) -> Array:
    """Host work of one engine step: per step, per running sequence, and a speculative step's extra."""
    b = np.asarray(batch, dtype=float)
    spec = (e.spec_step_host_us + e.spec_per_seq_host_us * b) if speculative else 0.0
    return (e.step_host_us + e.per_seq_host_us * b + spec) * US


def step_time_s(e: EngineProfile, device_s: ArrayLike, batch: ArrayLike, speculative: bool,
                sync: bool = False) -> Array:
    """Seconds of one engine step whose passes take `device_s` on the critical path.

    Async / overlap scheduling: max(device + the exposed host part, host work) — the host prepares
    step n + 1 while the GPU runs step n. Synchronous (no async scheduler, a speculative step the
    engine runs without overlap, or `sync`): device + host."""
    dev = np.asarray(device_s, dtype=float)
    host = host_step_s(e, batch, speculative)
    synchronous = sync or not e.async_scheduling or (speculative and e.spec_sync)
    if synchronous:
        return dev + host
    return np.maximum(dev + e.step_exposed_us * US, host)
