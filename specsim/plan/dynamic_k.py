"""vLLM's dynamic speculative decoding profile, written from the model."""

from __future__ import annotations

import numpy as np

from specsim.drafts.draft import Draft
from specsim.plan.result import DynamicProfile
from specsim.plan.schedule import pooled_contexts
from specsim.scenario.scenario import Scenario
from specsim.step.evaluate import Target, step_arrays
from specsim.step.policy import Policy


def vllm_dynamic_profile(t: Target, d: Draft, s: Scenario, grid: np.ndarray,
                     chain_policy: Policy) -> DynamicProfile | None:
    """vLLM's dynamic speculative decoding profile (DynamicSpeculativeConfig), written from the model instead
    of its hour-long sweep: `batch_stats` = step latency in ms per batch size and number of drafts (the
    sweep's ITL; at 0 drafts the plain step), `acceptance_rate_per_pos` = unconditional P(draft i accepted)
    (vLLM's per-position convention: mean acceptance length = 1 + their sum), `max_num_speculative_tokens`.
    vLLM's manager picks k per batch by goodput = AL / ITL."""
    if not d.speculates or d.is_tree:
        return None
    # up to 8 drafts (vLLM's sweep default), and never fewer than the schedule's own largest k
    kmax = max(1, min(s.max_k, 8), *(seg.k for seg in chain_policy.schedule))
    sizes = sorted({1, 2, 4, 8, 16, 32, 64, 128, 256, *(int(b.batch) for b in s.buckets)} | {int(grid[-1])})
    ctx = float(sum(c * w for c, w in pooled_contexts(s)))
    chain = d.with_tree(1, None)
    ks = np.arange(kmax + 1, dtype=float)[:, None]
    step_ms = step_arrays(t, chain, ks, np.array(sizes, dtype=float)[None, :], ctx, 1.0).step_ms  # one call
    stats = {int(b): {int(k): round(float(step_ms[k, j]), 4) for k in range(kmax + 1)} for j, b in enumerate(sizes)}
    rates = chain.rates(kmax)
    return DynamicProfile(kmax, tuple(round(float(x), 4) for x in np.cumprod(rates)), stats, round(ctx),
                          f"specsim model ({t.engine.name} profile, {s.hardware.name}), acceptance "
                          f"{d.acceptance.source}")
