"""Host-side lookup drafters: n-gram prompt lookup and suffix decoding. They draft on the host, take no
GPU memory, and run no draft pass on the GPU.

  ngram   prompt lookup: host-side n-gram matching against the prompt and output; a request without a
          match proposes nothing (vLLM V1)
  suffix  suffix decoding (Oliaro et al. 2025, Arctic Inference): host-side suffix trees over this
          request and earlier outputs; its own acceptance, not prompt lookup's
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from specsim.cost.hardware_profile import HardwareProfile
from specsim.cost.layout import Layout
from specsim.cost.model import ModelSpec
from specsim.cost.roofline import Array
from specsim.drafts.family import Family
from specsim.engines.passes import US
from specsim.engines.profile import EngineProfile

if TYPE_CHECKING:
    from specsim.drafts.draft import Draft


@dataclass(frozen=True)
class Lookup(Family):
    """A host-side lookup drafter."""

    name: str = "lookup"
    host_drafter: bool = True

    def draft_time_s(self, d: Draft, e: EngineProfile, hw: HardwareProfile, target: ModelSpec, b: Array, k: Array,
                     ctx: Array, tp: int | Layout, weight_dtype: str, kv_dtype: str) -> Array:
        # Host scan of every running sequence's context, over up to 8 threads (vllm PR #24986, #56732).
        scan_us = e.ngram_ns_per_context_token * 1e-3 * b * ctx / np.minimum(8.0, b)
        return (e.ngram_fixed_us + scan_us) * US


NGRAM = Lookup("ngram", drafts_on_match=True)
SUFFIX = Lookup("suffix")

#: Cumulative acceptance of an n-gram draft *given that a draft was proposed*, by position: vLLM V1's
#: n-gram proposer on InstructCoder, k = 5, prompt_lookup 2..5 (vllm PR #24344 spec_decode.py logs; the
#: acceptance prior vllm-pr24344-ngram-instructcoder-k5). The only per-proposal measurement read.
NGRAM_PER_PROPOSAL = (0.69, 0.57, 0.50, 0.45, 0.42)


def ngram_drafted_tokens(k: ArrayLike, tokens_per_step: ArrayLike) -> Array:
    """Draft tokens an n-gram proposer actually proposes per sequence per step, where a request without a
    match proposes none (vLLM V1: vllm/v1/spec_decode/ngram_proposer.py returns []).

    A step yields 1 + (accepted) tokens; with proposal coverage m (the share of steps with a match) and
    per-proposal cumulative acceptance c_i, tokens per step = 1 + m sum_{i<=k} c_i, so m = (tau - 1) /
    sum c_i and the drafted tokens are m k. c_i is NGRAM_PER_PROPOSAL (extended past 5 positions by its
    last ratio); m is capped at 1. Check on the source: InstructCoder's sequence-normalised tau 1.95
    (163,128 tokens, 53,327 without a draft) gives m = 0.95 / 2.63 = 0.36, the logs' 30,248 drafted
    steps of 83,575. Where tau is unknown (NaN) or 1 (no acceptance information) every step drafts k."""
    kk, tau = np.broadcast_arrays(np.asarray(k, dtype=float), np.asarray(tokens_per_step, dtype=float))
    c = np.asarray(NGRAM_PER_PROPOSAL)
    n = int(np.nanmax(kk, initial=0.0))
    if n > c.size:
        c = np.concatenate([c, c[-1] * (c[-1] / c[-2]) ** np.arange(1, n - c.size + 1)])
    cum = np.concatenate([[0.0], np.cumsum(c)])
    gain = cum[np.clip(np.nan_to_num(kk), 0, cum.size - 1).astype(int)]
    known = np.isfinite(tau) & (tau > 1.0) & (gain > 0)
    cover = np.where(known, np.minimum((tau - 1.0) / np.where(gain > 0, gain, 1.0), 1.0), 1.0)
    return np.asarray(np.where(kk > 0, kk * cover, 0.0), dtype=float)
