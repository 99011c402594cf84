"""Speedup against batch for every draft and k, and each draft's gain and the batches where it pays.

The curves are the plan's own evaluation (`optimize.evaluate_draft`, every configuration the plan
considers: chains and, for drafts that can tree, trees) at the report's batch grid plus the buckets'
batches, with contexts pooled over the load; a configuration that does not fit in memory is a gap, never
a drop to plain decoding."""

from __future__ import annotations

from typing import Any

import numpy as np

from specsim.plan.bands import best_curve_band
from specsim.plan.candidates import evaluate_draft
from specsim.plan.summary import NAMES
from specsim.report.context import Ctx, Section, md_table, pooled_arrays
from specsim.report.figures import speedup as fg
from specsim.step.policy import Config


def config_name(k: int, topk: int, nodes: int | None) -> str:
    """'k = 3' or 'tree 2 x 5 (depth 3)', as the plan's configuration reads."""
    cfg = Config(k, topk, nodes)
    return f"tree {topk} x {nodes} (depth {k})" if cfg.is_tree else f"k = {k}"


def _span(a: int, b: int) -> str:
    return f"{a}" if a == b else f"{a}-{b}"


def pays_text(ranges: list[tuple[int, int]] | None, crossover: int | None, top: int | None) -> str:
    """Where a draft pays, as a user reads it: 'pays at batch 3-90', 'pays at every batch up to 512',
    'never pays'. `ranges` are the plan's inclusive batch ranges where speculation beats plain decoding
    (`Plan.pays`); without them (an older plan) the first batch where plain decoding wins stands in."""
    if ranges is not None:
        spans = [(int(a), int(b)) for a, b in ranges]
        if not spans:
            return "never pays" + (f" (batch 1-{top})" if top else "")
        if len(spans) == 1 and spans[0][0] <= 1 and top is not None and spans[0][1] >= top:
            return f"pays at every batch up to {top}"
        return "pays at batch " + ", ".join(_span(a, b) for a, b in spans)
    if crossover is None:
        return f"pays at every batch up to {top}" if top else "pays at every batch (within the grid)"
    if crossover <= 1:
        return "plain decoding wins at batch 1 (where it pays above that is not known)"
    return f"pays at batch {_span(1, crossover - 1)}"


def _pays_column(c: Ctx) -> dict[str, str]:
    pays: dict[str, Any] | None = getattr(c.plan, "pays", None)
    top = c.plan.policy.top_batch
    cross = c.plan.crossover
    labels = list(c.data["per_draft_gain"])
    return {lab: pays_text(None if pays is None or lab not in pays else pays[lab], cross.get(lab), top)
            for lab in labels}


def _mix(pairs: Any) -> dict[float, float]:
    """A context mix {context: share}, shares summing to 1."""
    items = [(float(x), float(w)) for x, w in pairs]
    total = sum(w for _, w in items)
    return {x: w / total for x, w in items}


def _same_mix(a: dict[float, float], b: dict[float, float]) -> bool:
    return a.keys() == b.keys() and all(abs(a[x] - b[x]) < 1e-9 for x in a)


def speedup_panels(c: Ctx) -> tuple[list[fg.SpeedupPanel], bool]:
    """One panel per draft; and whether some bucket's contexts differ from the load's pooled contexts (then
    its dot is at its own contexts, off the pooled curves)."""
    s, t = c.s, c.t
    cvals, cw = pooled_arrays(c)
    cw = cw / cw.sum()
    grid = np.unique(np.concatenate([c.grid, [float(bp.bucket.batch) for bp in c.plan.buckets]]))
    nb, nc = len(grid), len(cvals)
    pooled = _mix(zip(cvals.tolist(), cw.tolist(), strict=True))
    own_contexts = any(not _same_mix(_mix(bp.bucket.contexts), pooled) for bp in c.plan.buckets)
    panels = []
    for d in s.drafts:
        ev = evaluate_draft(t, d, s.max_k, np.repeat(grid, nc), np.tile(cvals, nb))
        sp = ev.values["speedup"].reshape(len(ev.configs), nb, nc)
        ok = ev.feasible.reshape(len(ev.configs), nb, nc).all(-1)
        with np.errstate(invalid="ignore"):
            speed = np.where(ok, (sp * cw).sum(-1), np.nan)  # [config, batch]; NaN: does not fit
        # one line per depth k: the chain (or, for a draft whose scenario fixed its tree, that tree)
        rows = np.full((s.max_k + 1, nb), np.nan)
        rows[0] = 1.0
        for k in range(1, s.max_k + 1):
            idx = [i for i, cfg in enumerate(ev.configs) if cfg.k == k]
            chain = [i for i in idx if not ev.configs[i].is_tree]
            if idx:
                rows[k] = speed[(chain or idx)[0]]
        spec = [i for i, cfg in enumerate(ev.configs) if cfg.k > 0]
        trees = any(ev.configs[i].is_tree for i in spec)
        tau = ev.values["tokens_per_step"].reshape(len(ev.configs), -1)[:, 0]
        band: tuple[np.ndarray, np.ndarray] | None = None
        best = np.full(nb, np.nan)
        if spec:
            best, low, high = best_curve_band(d, ev.configs, speed, tau, spec, s.engine.name, s.calibration)
            band = (low, high)
        pts = [fg.BucketPoint(bp.bucket.name, float(bp.bucket.batch),
                              float(sum(r.share * r.speedup for r in bp.rows)),
                              config_name(bp.k, bp.topk, bp.num_draft_tokens),
                              Config(bp.k, bp.topk, bp.num_draft_tokens).is_tree)
               for bp in c.plan.buckets if bp.draft == d.label and bp.k]
        panels.append(fg.SpeedupPanel(f"{d.label} ({NAMES.get(d.method, d.method)})", grid, rows, pts, best,
                                      "best k (chains and trees)" if trees else "best k",
                                      "tree" if d.is_tree else "chain", own_contexts, band))
    if any(p.best_label != "best k" for p in panels):  # one legend for every panel: one name for the line
        for p in panels:
            p.best_label = "best configuration (chain, or tree where the draft builds trees)"
    return panels, own_contexts


def speedup_section(c: Ctx) -> Section:
    panels, own_contexts = speedup_panels(c)
    fig = fg.speedup_vs_batch(panels, c.title)
    data = c.data
    trees = any(p.best_label != "best k" for p in panels)  # some draft's best line includes trees
    kind = "a chain of k draft tokens" if not any(p.line_kind == "tree" for p in panels) else \
        "a chain, or the scenario's fixed tree"
    with_trees = ", trees included (the plan considers trees for drafts that can build them)" if trees else ""
    text = [f"Each line is one draft depth k ({kind}); the dashed line is the best configuration at each batch"
            f"{with_trees}, shaded over its 80% band (the acceptance's band and the engine's measured cost spread), "
            "and red marks are the plan's buckets (circles: chains, diamonds: trees). Speedup is weighted over the "
            "load's contexts; lines stop where the configuration does not fit in memory."
            + (" A bucket whose contexts differ from the whole load's mix is drawn at its own contexts, so it may "
               "sit off the pooled curves." if own_contexts else ""), ""]
    if data["per_draft_gain"]:
        pays = _pays_column(c)
        rows = [[lab, f"{g:.2f}x", pays[lab]] for lab, g in data["per_draft_gain"].items()]
        text += [md_table(["draft", f"{c.gain_label} over the day (best k per bucket)",
                           "where speculation pays (batch range)"], rows, "lrl")]
    return Section("Speedup by draft and k", "\n".join(text), fig, "speedup_vs_batch",
                   "Speedup against batch for each draft method and k")
