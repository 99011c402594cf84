"""Published acceptance priors per draft method (used when a scenario gives no measured acceptance)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specsim.acceptance.chain import AcceptanceProfile, alpha_from_mean_tokens


@dataclass(frozen=True)
class Prior:
    """A published mean acceptance length (tokens per step, bonus included) at a draft depth."""

    mean_tokens: float
    depth: int
    decay: float  # per-position multiplicative decay of the conditional rate (1 = i.i.d.)
    source: str


# Published acceptance priors. Spec-Bench leaderboard (hemingkx/Spec-Bench Leaderboard.md; A100,
# Vicuna-7B, greedy, batch 1) mean accepted tokens per step; depths are each method's default
# draft depth in that benchmark (an assumption where the leaderboard does not state it). Tree
# methods reached their mean with a tree: treating it as a chain of that depth is optimistic, so
# measure and override (`acceptance:` in a scenario, or a /metrics scrape) before trusting a plan.
PRIORS: dict[str, Prior] = {
    "draft_model": Prior(2.28, 4, 1.0, "Spec-Bench SpS 2.28 tokens/step (Vicuna-68M draft), assumed k=4"),
    "ngram": Prior(1.75, 4, 1.0, "Spec-Bench PLD 1.75 tokens/step, assumed k=4; a workload property"),
    "suffix": Prior(1.75, 4, 1.0, "as prompt lookup (Spec-Bench PLD 1.75); a workload property"),
    "medusa": Prior(2.31, 5, 0.85, "Spec-Bench Medusa 2.31 tokens/step, 5 heads, rates decaying x0.85 per head"),
    "eagle": Prior(3.58, 5, 1.0, "Spec-Bench EAGLE 3.58 tokens/step at tree depth 5"),
    "eagle2": Prior(4.34, 6, 1.0, "Spec-Bench EAGLE-2 4.34 tokens/step at tree depth 6"),
    "eagle3": Prior(5.6, 7, 1.0, "EAGLE-3 paper: ~1.3x EAGLE-2's acceptance length (5.6 at depth 7 assumed)"),
    "mtp": Prior(1.875, 1, 0.9, "DeepSeek-V3 report: second-token acceptance 85-90% (0.875), x0.9 per reuse"),
    "lookahead": Prior(1.64, 4, 1.0, "Spec-Bench Lookahead 1.64 tokens/step, n-gram size 5 (k=4)"),
}

def prior_profile(method: str) -> AcceptanceProfile:
    """The documented default acceptance of a method: decaying conditional rates fitted to the prior."""
    p = PRIORS[method]
    if p.decay == 1.0:
        return AcceptanceProfile((), float(alpha_from_mean_tokens(p.mean_tokens, p.depth)), p.source)
    # solve a1 so that 1 + sum_i prod_{j<=i} a1 decay^(j-1) = mean at depth (bisection; monotone in a1)
    lo, hi = 0.0, 1.0
    for _ in range(60):
        a1 = (lo + hi) / 2
        rates = a1 * p.decay ** np.arange(p.depth)
        lo, hi = (a1, hi) if 1 + np.cumprod(rates).sum() < p.mean_tokens else (lo, a1)
    rates = tuple(float(a1 * p.decay**i) for i in range(32))
    return AcceptanceProfile(rates, float(rates[-1]), p.source)


