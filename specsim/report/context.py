"""The shared context of a report's sections: the scenario, its target, the plan and its JSON record
(`Ctx`), what a section returns (`Section`), and the small Markdown helpers every section uses."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from specsim.advise.plan import plan_scenario as make_plan
from specsim.drafts.draft import Draft
from specsim.plan.decide import target_of
from specsim.plan.result import Plan
from specsim.plan.summary import plan_dict
from specsim.scenario.scenario import Scenario
from specsim.step.evaluate import Target

Progress = Callable[[str], None]


GIB = float(2**30)


@dataclass
class Section:
    title: str
    body: str  # Markdown; the figure (if any) goes after it
    figure: Figure | None = None
    figure_name: str = ""
    caption: str = ""
    after: str = ""  # Markdown after the figure
    files: dict[str, str] = field(default_factory=dict)  # files beside the report: relative path -> text


@dataclass
class Ctx:
    """What every section reads: the scenario, its target, the plan and its JSON record."""

    s: Scenario
    t: Target
    plan: Plan
    data: dict[str, Any]
    draft: Draft | None  # the draft the plan chose (its label), if any
    pooled: list[tuple[int, float]]  # (context, share of the day)
    grid: np.ndarray  # batch sizes for curves over batch

    @property
    def title(self) -> str:
        return self.s.name

    @property
    def gain_label(self) -> str:
        return "per-token speed gain" if self.s.objective == "latency" else "throughput gain"

    def draft_by_label(self, label: str) -> Draft | None:
        return next((d for d in self.s.drafts if d.label == label), None)


def fmt_ms(x: float) -> str:
    return f"{x:.2f}"


def md_table(header: list[str], rows: list[list[Any]], align: str | None = None) -> str:
    align = align or "l" + "r" * (len(header) - 1)
    sep = ["---:" if a == "r" else "---" for a in align]
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(sep) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def row_label(r: dict[str, Any], multi_context: bool) -> str:
    return f"{r['bucket']} (L {r['context']:,})" if multi_context else str(r["bucket"])


def pooled_arrays(c: Ctx) -> tuple[np.ndarray, np.ndarray]:
    return np.array([x for x, _ in c.pooled], float), np.array([w for _, w in c.pooled])


def make_ctx(s: Scenario) -> Ctx:
    """The context of a report on scenario s: the scenario as its plan searched it (`Plan.scenario`: the drafts'
    trees where the engine runs them, plan/deploy.py), so that every section weighs what the plan chose among."""
    p = make_plan(s)
    s = p.scenario
    t = target_of(s)
    data = plan_dict(p)
    pooled: dict[int, float] = {}
    for bp in p.buckets:
        for c, w in bp.bucket.contexts:
            pooled[c] = pooled.get(c, 0.0) + w * bp.bucket.weight
    batches = [bp.bucket.batch for bp in p.buckets] + [int(r.batch) for bp in p.buckets for r in bp.baseline_rows]
    top = max([*batches, 64]) * 2
    grid = np.unique(np.round(np.geomspace(1, top, 40)))
    draft = next((d for d in s.drafts if d.label == p.draft_label), None)
    return Ctx(s, t, p, data, draft, sorted(pooled.items()), grid)
