"""Speedup against batch for every draft and k, and each draft's gain and crossover batch."""

from __future__ import annotations

import numpy as np

from specsim.plan.summary import NAMES
from specsim.plan.sweep import sweep_arrays
from specsim.report import figures as fg
from specsim.report.context import Ctx, Section, md_table, pooled_arrays


def speedup_section(c: Ctx) -> Section:
    s, t = c.s, c.t
    cvals, cw = pooled_arrays(c)
    cw = cw / cw.sum()
    panels = []
    for d in s.drafts:
        arr = sweep_arrays(t, d, s.max_k, c.grid, cvals)
        shape = np.broadcast_shapes(arr["speedup"].shape, arr["fits_memory"].shape)
        sp = (np.broadcast_to(arr["speedup"], shape)[0] * cw).sum(-1)  # [k, batch], weighted over contexts
        ok = np.broadcast_to(arr["fits_memory"], shape)[0].all(-1)
        pts = [(bp.bucket.name, float(bp.bucket.batch), sum(r["share"] * r["speedup"] for r in bp.rows))
               for bp in c.plan.buckets if bp.draft == d.label and bp.k]
        panels.append(fg.SpeedupPanel(f"{d.label} ({NAMES.get(d.method, d.method)})", c.grid,
                                      np.where(ok, sp, np.nan), pts))
    fig = fg.speedup_vs_batch(panels, c.title)
    data = c.data
    text = ["Each line is one draft depth k; the dashed line is the best k at each batch, and red dots are the plan's "
            "buckets (speedup weighted over the load's contexts; lines stop where the KV cache no longer fits).", ""]
    if data["per_draft_gain"]:
        cross = data["crossover_batch"]
        rows = [[lab, f"{g:.2f}x", (cross.get(lab) if cross.get(lab) is not None else "never (within the grid)")]
                for lab, g in data["per_draft_gain"].items()]
        text += [md_table(["draft", f"{c.gain_label} over the day (best k per bucket)",
                            "speculation stops paying at batch"], rows, "lrr")]
    return Section("Speedup by draft and k", "\n".join(text), fig, "speedup_vs_batch",
                   "Speedup against batch for each draft method and k")
