"""One speculative configuration on real costs: the join of drafts, the cost model and step
economics, and the one implementation of it. `specsim evaluate`, `plan`, `sweep` and reports all go
through `step_arrays`, so every route agrees by construction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike

from specsim.cost import roofline as rl
from specsim.cost.dtypes import resolve_native
from specsim.cost.hardware_profile import HardwareProfile
from specsim.cost.layout import Layout, Placed
from specsim.cost.model import ModelSpec
from specsim.cost.roofline import Array
from specsim.drafts.cost import draft_time_s
from specsim.drafts.draft import Draft
from specsim.drafts.families.lookup import ngram_drafted_tokens
from specsim.engines.passes import US, eager_cycle_host_s, gpu_only, pass_time_s, step_time_s
from specsim.engines.profile import EngineProfile, load_engine
from specsim.step.economics import StepMetrics, step_metrics
from specsim.step.memory import PROFILE_SEQS, Memory
from specsim.step.memory import memory_per_gpu as _memory

DEFAULT_ENGINE = "vllm"


@lru_cache(maxsize=16)
def bundled_engine(name: str = DEFAULT_ENGINE) -> EngineProfile:
    """A bundled engine profile (cached: profiles are immutable)."""
    return load_engine(name)


@dataclass(frozen=True)
class StepCalibration:
    """What a deployment's own benchmark runs say about its steps beyond the engine's profile
    (`specsim fit-runs`, advise/fit_runs.py): from the spec-off arm, a host cost every decode step pays on top of
    the profile's and a scale on the target's decode passes (the drafting loop's too: the same GPU and engine);
    from the spec-on arm, a host cost a speculative step pays beyond that and a scale on the verification pass
    beyond the passes' (its B x (k + 1) tokens). The defaults price the profile as it stands. Prefill passes are
    not scaled (decode runs do not identify them)."""

    host_ms: float = 0.0
    pass_scale: float = 1.0
    verify_scale: float = 1.0
    spec_host_ms: float = 0.0
    #: the 1-sd log error of a figure priced with it (the fit's; the bands take it for the engine's cost spread)
    sigma_log: float | None = None

    @property
    def label(self) -> str:
        spec = (f", speculative step {self.spec_host_ms:+.3g} ms, verification x{self.verify_scale:.3g}"
                if (self.spec_host_ms, self.verify_scale) != (0.0, 1.0) else "")
        return f"host {self.host_ms:+.3g} ms, decode passes x{self.pass_scale:.3g}" + spec


@dataclass(frozen=True)
class Target(Placed):
    """The serving setup a draft is judged on: hardware, model, parallelism, dtypes and the engine
    that runs it (vLLM unless said otherwise)."""

    hardware: HardwareProfile
    model: ModelSpec
    tp: int = 1
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    memory_utilization: float = 0.9
    engine: EngineProfile = field(default_factory=bundled_engine)
    #: the whole parallel layout (cost/layout.py) where it is more than tensor parallelism; `tp` is its tp
    layout: Layout | None = None
    #: a fitted deployment's step calibration (StepCalibration), None: the profile as it stands
    calibration: StepCalibration | None = None

    def __post_init__(self) -> None:
        # `native`: the checkpoint's own formats (its quantization_config), resolved once here
        object.__setattr__(self, "weight_dtype", resolve_native(self.weight_dtype, self.model.native_precision))
        if self.layout is not None:
            object.__setattr__(self, "tp", self.layout.tp)
            if self.layout.simple:
                object.__setattr__(self, "layout", None)

    @property
    def par(self) -> int | Layout:
        """What the cost model takes for parallelism: the tp degree, or the whole layout."""
        return self.tp if self.layout is None else self.layout


def overhead_time_s(t: Target, batch: ArrayLike, k: ArrayLike) -> Array:
    """Per-step cost of speculation beyond draft and verification: rejection sampling reads the
    draft's and target's fp32 probabilities over the vocabulary for every drafted token (vLLM
    RejectionSampler), and the KV rollback is a length update (paged KV: free). Zero at k = 0;
    broadcasts over batch and k."""
    b, kk = np.asarray(batch, dtype=float), np.asarray(k, dtype=float)
    return np.where(kk > 0, rl.memory_op_time_s(b * kk * t.model.vocab * 4.0 * 2.0, t.hardware, 2.0), 0.0)


@dataclass(frozen=True, eq=False)
class StepTimes:
    """Seconds of a step's parts, broadcast over (k, batch, context)."""

    draft_s: Array
    verify_s: Array
    overhead_s: Array
    baseline_s: Array


def step_times(t: Target, d: Draft, k: ArrayLike, batch: ArrayLike, context_len: ArrayLike,
               verify_tokens_per_seq: ArrayLike | None = None) -> StepTimes:
    """Draft, verification, overhead and plain-decoding step times for arrays of k, batch and context,
    as the target's engine runs them (engines/passes.py).

    Plain decoding (k = 0 or a draft that does not speculate): one target pass of B tokens plus the engine's step
    overhead. A speculative step: the drafting loop, the verification pass of B x q tokens (graph-
    padded), the rejection sampler's memory traffic and the host launches that accept the path, all on
    the critical path, plus the engine's host work (overlapped or not: `step_time_s`); `overhead_s` is
    the step less draft and verification. Host-side drafters (the CPU n-gram proposer) run without async
    scheduling (vllm PR #31998). `verify_tokens_per_seq` overrides the draft's own (a user's tree file)."""
    kk, b, ctx = (np.asarray(a, dtype=float) for a in (k, batch, context_len))
    hw, m, e = t.hardware, t.model, t.engine
    cal = t.calibration or StepCalibration()
    run = (hw, m)
    base_pass = pass_time_s(e, *run, b, 1.0, ctx, t.par, t.weight_dtype, t.kv_dtype) * cal.pass_scale
    # a fitted host cost may be negative (the profile's host work overstated), never below the kernels' own time
    base = np.maximum(step_time_s(e, base_pass, b, speculative=False) + cal.host_ms * 1e-3, base_pass)
    plain = (kk <= 0) | (not d.speculates)
    if not d.speculates or not np.any(~plain):
        zero = np.zeros(np.broadcast_shapes(kk.shape, np.shape(base)))
        return StepTimes(zero, base_pass + zero, base - base_pass + zero, base + zero)
    q = d.verify_tokens_per_seq(kk) if verify_tokens_per_seq is None else np.asarray(verify_tokens_per_seq, float)
    q = np.where(plain, 1.0, q)
    loop = e.eager_loop is not None and d.method in e.eager_loop.methods
    run_e = gpu_only(e) if loop else e  # eager loops: kernels here, the host side per cycle below
    verify = _verify_time_s(run_e, t, b, q, ctx) * (cal.pass_scale * cal.verify_scale)
    draft = draft_time_s(d, run_e, *run, b, np.maximum(kk, 1.0), ctx, t.par, t.weight_dtype, t.kv_dtype) \
        * cal.pass_scale
    # the rejection sampler reads the tokens actually drafted (an n-gram request without a match drafts none)
    drafted = np.where(plain, 0.0, q - 1.0) if d.family.drafts_on_match else kk
    device = draft + verify + overhead_time_s(t, b, drafted) + e.verify_host_ops * e.eager_op_us * US
    if loop:
        # an eager loop's cycle: the slower of its kernels and its host dispatch (measured op counts)
        device = np.maximum(device, eager_cycle_host_s(e, d.method, m, np.maximum(kk, 1.0), d.model))
    step = np.maximum(step_time_s(e, device, b, speculative=True, sync=d.family.host_drafter)
                      + (cal.host_ms + cal.spec_host_ms) * 1e-3, device)
    draft = np.where(plain, 0.0, draft)
    verify = np.where(plain, base_pass, verify)
    over = np.where(plain, base - base_pass, step - draft - verify)
    return StepTimes(draft, verify, over, np.broadcast_to(base, np.shape(verify)))


def _verify_time_s(e: EngineProfile, t: Target, b: Array, q: Array, ctx: Array) -> Array:
    """The verification pass of B sequences x q tokens. A fractional q (a mean over sequences that verify
    different counts: vLLM's n-gram batch mixes 1 and k + 1) is priced linearly between the neighbouring
    whole counts, each pass evaluated once per whole count rather than once per acceptance value."""
    args = (t.hardware, t.model)
    lo = np.floor(q)
    if np.all(lo == q):
        return pass_time_s(e, *args, b, q, ctx, t.par, t.weight_dtype, t.kv_dtype)
    whole = np.unique(np.concatenate([lo.ravel(), lo.ravel() + 1.0]))
    out_shape = np.broadcast_shapes(q.shape, b.shape, ctx.shape)
    nd = len(out_shape)
    b_, ctx_ = (x.reshape((1,) * (nd - x.ndim) + x.shape) for x in (b, ctx))
    grid = pass_time_s(e, *args, b_[None], whole.reshape((-1,) + (1,) * nd), ctx_[None], t.par, t.weight_dtype,
                       t.kv_dtype)
    full = np.broadcast_to(grid, (whole.size, *out_shape))
    i = np.broadcast_to(np.searchsorted(whole, lo), out_shape)[None]
    v_lo = np.take_along_axis(full, i, axis=0)[0]
    v_hi = np.take_along_axis(full, i + 1, axis=0)[0]
    out: Array = v_lo + np.broadcast_to(q - lo, out_shape) * (v_hi - v_lo)
    return out


def step_arrays(t: Target, d: Draft, k: ArrayLike, batch: ArrayLike, context_len: ArrayLike,
                tokens_per_step: ArrayLike, verify_tokens_per_seq: ArrayLike | None = None,
                extra_overhead_s: float = 0.0) -> StepMetrics:
    """The step economics (step/economics.py) of draft d for arrays of k, batch, context and tokens per step.

    An n-gram draft on an engine that skips requests without a match (`Draft.verifies_drafted_only`,
    vLLM V1) verifies 1 + the tokens actually drafted per sequence (`families.lookup.ngram_drafted_tokens`,
    from the tokens per step), not k + 1.

    Tokens per step may be NaN where acceptance is unknown (k past a measured profile): the derived
    figures are then NaN too, never extrapolated."""
    if d.verifies_drafted_only(t.engine):
        # engines that verify only what the n-gram proposer found (vLLM V1): B x (1 + drafted) tokens (an
        # n-gram draft is a chain: a given verify_tokens_per_seq can only be its k + 1, which this refines)
        verify_tokens_per_seq = 1.0 + ngram_drafted_tokens(k, tokens_per_step)
    times = step_times(t, d, k, batch, context_len, verify_tokens_per_seq)
    # Fields keep their own (broadcast-compatible) shapes: a sweep's step times are [k, batch, context]
    # while tokens per step carry the alpha axis; derived figures broadcast when asked for.
    return StepMetrics(np.asarray(tokens_per_step, dtype=float), times.draft_s, times.verify_s,
                       times.overhead_s + extra_overhead_s, times.baseline_s, np.asarray(batch, dtype=float))


def config_metrics(t: Target, d: Draft, k: int, batch: ArrayLike, context_len: ArrayLike,
                   alpha_scale: float = 1.0, tokens_per_step: float | None = None,
                   verify_tokens_per_seq: float | None = None, extra_overhead_s: float = 0.0) -> StepMetrics:
    """Step economics of draft d at one depth k, for arrays of batch and context (k = 0: plain decoding).

    `tokens_per_step` / `verify_tokens_per_seq` override the draft's own (a user's tree file)."""
    b, ctx = (np.asarray(a, dtype=float) for a in np.broadcast_arrays(batch, context_len))
    if k == 0 or not d.speculates:
        tokens = 1.0
    else:
        tokens = d.tokens_per_step(k, alpha_scale) if tokens_per_step is None else tokens_per_step
    m = step_arrays(t, d, k, b, ctx, tokens, verify_tokens_per_seq, extra_overhead_s if k else 0.0)
    return step_metrics(m.tokens_per_step, m.draft_time_s, m.verify_time_s, m.baseline_step_time_s, m.batch,
                        m.overhead_time_s)


def memory_per_gpu(t: Target, d: Draft, k: int, batch: ArrayLike, context_len: ArrayLike,
                   max_num_seqs: int | None = None) -> Memory:
    """Memory on each GPU (step/memory.py) for this target running draft d at depth k; `max_num_seqs`: the
    engine's limit where known (its profiling pass materialises that many sequences' logits)."""
    q = float(d.verify_tokens_per_seq(k)) if k and d.speculates else 1.0
    return _memory(t.hardware.total_memory_bytes, t.memory_utilization, t.model, d, k if d.speculates else 0,
                   batch, context_len, t.par, t.weight_dtype, t.kv_dtype, q, max_num_seqs or PROFILE_SEQS)


def fits(t: Target, d: Draft, k: int, batch: ArrayLike, context_len: ArrayLike) -> Array:
    return memory_per_gpu(t, d, k, batch, context_len).fits
