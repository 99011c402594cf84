"""The draft-model pair model: acceptance of a standalone draft from the target/draft size ratio."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from specsim.acceptance.priors.entries import PriorEntry
from specsim.acceptance.priors.names import method_info
from specsim.acceptance.priors.shapes import RATE_CAP


@dataclass(frozen=True)
class PairModel:
    """Draft-model acceptance from the target/draft size ratio: ``alpha = a - b log10(target / draft)``.

    Fitted on the catalogue's standalone-draft pairs (Leviathan et al. 2022 Table 3: LaMDA 137B with
    100M / 2B / 8B drafts, alpha 0.61 / 0.71 / 0.75; T5-XXL with T5-small/base/large; Vicuna-68M
    drafting for Vicuna-7B/13B) with one common slope and an intercept per series (same source,
    target, task and temperature); ``a`` is the median T=0 intercept and ``spread`` the intercepts'
    spread (the band). Same-tokenizer pairs only (specsim refuses others)."""

    slope: float
    intercept: float
    spread: float
    series: int
    points: int
    evidence: tuple[str, ...]

    def alpha(self, target_b: float, draft_b: float) -> float:
        ratio = max(target_b / max(draft_b, 1e-6), 1.0)
        return float(np.clip(self.intercept - self.slope * math.log10(ratio), 0.05, RATE_CAP))


def fit_pair_model(entries: Sequence[PriorEntry]) -> PairModel:
    """The pair model over the entries' standalone-draft pairs of known sizes."""
    pts: dict[tuple[Any, ...], list[tuple[float, float, str]]] = defaultdict(list)
    for e in entries:
        if (method_info(e.method).sized_draft and e.target_params_b and e.draft_params_b and e.rates[0] > 0.3
                and not e.synthetic and e.target_params_b > e.draft_params_b):
            x = math.log10(e.target_params_b / e.draft_params_b)
            alpha = e.rates[0]
            pts[(e.source.split(",")[0], e.target, e.task, e.temperature)].append((x, alpha, e.id))
    series = [v for v in pts.values() if v]
    # common slope from the within-series variation (series with >= 2 sizes), intercepts per series
    num = den = 0.0
    for s in series:
        if len({x for x, _, _ in s}) < 2:
            continue
        mx, ma = float(np.mean([x for x, _, _ in s])), float(np.mean([a for _, a, _ in s]))
        num += sum((x - mx) * (a - ma) for x, a, _ in s)
        den += sum((x - mx) ** 2 for x, _, _ in s)
    slope = -num / den if den > 0 else 0.07
    by_source: dict[str, list[float]] = defaultdict(list)
    for key, s in pts.items():
        if key[3] in (0.0, None):  # greedy series set the intercept; temperature is applied separately
            by_source[key[0]].append(float(np.mean([a + slope * x for x, a, _ in s])))
    per_source = [float(np.median(v)) for v in by_source.values()]
    return PairModel(slope=float(slope), intercept=float(np.median(per_source)),
                     spread=float(np.std(per_source)) if len(per_source) > 1 else 0.05, series=len(series),
                     points=sum(len(s) for s in series), evidence=tuple(i for s in series for _, _, i in s))
