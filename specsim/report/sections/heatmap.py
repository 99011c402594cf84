"""The optimal k over (batch, i.i.d. acceptance alpha) for the chosen draft."""

from __future__ import annotations

import numpy as np

from specsim.acceptance.chain import alpha_from_mean_tokens
from specsim.drafts.draft import Draft
from specsim.plan.candidates import pick_k, score_configs
from specsim.plan.sweep import sweep_arrays
from specsim.report.context import Ctx, Section, pooled_arrays
from specsim.report.figures import heatmap as fg

HEATMAP_ALPHAS = np.round(np.arange(0.05, 0.951, 0.05), 2)


def effective_alpha(d: Draft, k: int) -> float:
    """The i.i.d. acceptance rate with the same tokens per step as the draft's profile at depth k."""
    if not d.acceptance.rates and d.acceptance.tail is not None:
        return float(d.acceptance.tail)
    kk = max(k, 1)
    return float(alpha_from_mean_tokens(d.tokens_per_step(kk), kk))


def optimal_k_grid(c: Ctx, d: Draft, alphas: np.ndarray) -> np.ndarray:
    """The best k (the plan's scoring and 1% tie rule) at each (alpha, batch); -1 where nothing fits."""
    s, t = c.s, c.t
    cvals, cw = pooled_arrays(c)
    arr = sweep_arrays(t, d, s.max_k, c.grid, cvals, alphas)
    shape = np.broadcast_shapes(*(v.shape for v in arr.values()))
    thr = np.broadcast_to(arr["throughput_tok_s"], shape)
    lat = np.broadcast_to(arr["ms_per_token"], shape)
    feas = np.broadcast_to(arr["fits_memory"], shape)
    best = np.full((len(alphas), len(c.grid)), -1)
    for i in range(len(alphas)):
        sc = score_configs({"throughput_tok_s": thr[i], "ms_per_token": lat[i]}, feas[i], cw, s.objective,
                    s.slo_ms_per_token)  # [k, batch]
        best[i] = [pick_k(sc[:, j]) for j in range(len(c.grid))]
    return best


def heatmap_section(c: Ctx) -> Section | None:
    d = c.draft or c.s.drafts[0]
    alphas = HEATMAP_ALPHAS
    best = optimal_k_grid(c, d, alphas)
    points = []
    for bp in c.plan.buckets:
        if not d.is_tree:
            points.append((bp.bucket.name, float(bp.bucket.batch), effective_alpha(d, bp.k or c.s.max_k), bp.k))
    fig = fg.optimal_k_heatmap(c.grid, alphas, best, c.s.max_k, d.label, points, c.title)
    a_eff = effective_alpha(d, c.plan.buckets[0].k or c.s.max_k)
    text = [f"The optimal k for {d.label} at each batch size and i.i.d. acceptance rate alpha (the same objective "
            f"and 1% tie rule as the plan, contexts pooled over the load). The scenario's acceptance for {d.label} "
            f"({d.acceptance.source}) is equivalent to alpha = {a_eff:.2f}: read off how much k would change "
            "if your measured acceptance differs."]
    return Section("Optimal k over batch and acceptance", "\n".join(text), fig, "optimal_k_heatmap",
                   f"Optimal k for {d.label} over (batch, alpha)")
