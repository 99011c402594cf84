"""Capacity and cost: GPUs and cost per million output tokens with and without speculation
(buckets: GPU-equivalents at the baseline's token rate; arrival rate: replicas within the SLO)."""

from __future__ import annotations

import numpy as np

from specsim.drafts.build import make_draft
from specsim.plan.capacity import max_rate_rps, replicas_needed, solver_max_rate
from specsim.report.context import Ctx, Section, md_table, row_label
from specsim.report.figures import capacity as fg
from specsim.report.sections.policy import RateModel
from specsim.scenario.serving import cost_per_mtok_usd


def capacity_section(c: Ctx, rm: RateModel | None) -> Section:
    return _bucket_capacity(c) if rm is None else _arrival_capacity(c, rm)


def _bucket_capacity(c: Ctx) -> Section:
    """Bucket loads: GPU-equivalents at the baseline's token rate, and the price of a token."""
    s = c.s
    usd = s.gpu_hour_usd
    tp = s.gpus  # GPUs of one replica
    rows, labels, g_base, g_spec = [], [], [], []
    cost_base: list[float] = []
    cost_spec: list[float] = []
    multi = any(len(bp.bucket.contexts) > 1 for bp in c.plan.buckets)
    for r in c.data["buckets"]:
        thr, base = r["throughput_tok_s"], r["baseline_throughput_tok_s"]
        lab = row_label(r, multi)
        labels.append(lab)
        g_base.append(float(tp))
        g_spec.append(tp * base / thr)
        row = [lab, r["batch"], f"{base:,.0f}", f"{thr:,.0f}", f"{tp:g}", f"{tp * base / thr:.2f}"]
        if usd is not None:
            cb, cs = cost_per_mtok_usd(tp, usd, base), cost_per_mtok_usd(tp, usd, thr)
            cost_base.append(cb)
            cost_spec.append(cs)
            row += [f"{cb:.3f}", f"{cs:.3f}"]
        if s.slo_ms_per_token is not None:
            row += ["yes" if r["ms_per_token"] <= s.slo_ms_per_token else "**no**"]
        rows.append(row)
    header = ["bucket", "batch", "tok/s without", "tok/s with", "GPUs without", "GPUs with"]
    if usd is not None:
        header += ["$/M tokens without", "$/M tokens with"]
    if s.slo_ms_per_token is not None:
        header += [f"meets {s.slo_ms_per_token:g} ms/token"]
    w = np.array([r["weight"] for r in c.data["buckets"]])
    thr_day = float((w * [r["throughput_tok_s"] for r in c.data["buckets"]]).sum() / w.sum())
    base_day = float((w * [r["baseline_throughput_tok_s"] for r in c.data["buckets"]]).sum() / w.sum())
    text = [f"The token rate each bucket needs is taken as what plain decoding delivers there (one replica of "
            f"{tp} GPUs at the bucket's batch); with speculation the same rate takes {tp} x baseline / speculative "
            "throughput GPUs (GPU-equivalents at the same batch per replica; whole replicas come in steps of "
            f"{tp}).", "", md_table(header, rows), ""]
    if usd is not None:
        text += [f"Over the day: **${cost_per_mtok_usd(tp, usd, base_day):.3f} per million output tokens without "
                 f"speculation, ${cost_per_mtok_usd(tp, usd, thr_day):.3f} with** (at ${usd:g} per GPU-hour, "
                 f"{base_day:,.0f} vs {thr_day:,.0f} tokens/s per replica on average)."]
    else:
        text += ["The scenario gives no `gpu_hour_usd`, so there are no dollar figures; add it to get cost per "
                 "million tokens."]
    fig = fg.capacity(labels, g_base, g_spec, cost_base if usd is not None else None,
                      cost_spec if usd is not None else None, "GPUs to carry the baseline's token rate", c.title)
    return Section("Capacity and cost", "\n".join(text), fig, "capacity",
                   "GPUs and cost per million tokens with and without speculation")


def _arrival_capacity(c: Ctx, rm: RateModel) -> Section:
    """An arrival rate: replicas within the SLO as the rate grows, by the planner's Little's-law solver."""
    s = c.s
    usd = s.gpu_hour_usd
    a = s.arrival
    assert a is not None
    d = c.draft or s.drafts[0]
    none = make_draft("none", s.model)
    est = [max_rate_rps(cv, rm.slo_ms, rm.prefill_s, a.output_tokens) for cv in rm.curves]
    base_cap = solver_max_rate(c.t, none, 0, a, rm.slo_ms, est[0])
    # refine the two most promising k by the planner's own solver; the best of them is the fleet's k
    top = sorted(range(1, len(est)), key=lambda k: -est[k])[:2]
    spec_cap, spec_k = max(((solver_max_rate(c.t, d, k, a, rm.slo_ms, est[k]), k) for k in top),
                           key=lambda x: (x[0], -x[1]), default=(0.0, 0))
    if spec_cap <= base_cap:
        spec_cap, spec_k = base_cap, 0
    mults = (1, 2, 4, 8)
    labels = [f"{a.rate_rps * m:g} req/s" for m in mults]
    g_base = [replicas_needed(c.t, none, 0, a, rm.slo_ms, a.rate_rps * m, base_cap) * s.gpus for m in mults]
    g_spec = [replicas_needed(c.t, d if spec_k else none, spec_k, a, rm.slo_ms, a.rate_rps * m, spec_cap) * s.gpus
              for m in mults]
    tok_s = [a.rate_rps * m * a.output_tokens for m in mults]
    rows = [["requests/s one replica serves within the SLO", f"{base_cap:.3g}", f"{spec_cap:.3g}"]]
    for lab, gb, gs in zip(labels, g_base, g_spec, strict=True):
        rows.append([f"GPUs for {lab}", f"{gb:g}", f"{gs:g}"])
    c_base, c_spec = None, None
    if usd is not None:
        c_base = [cost_per_mtok_usd(g, usd, ts) for g, ts in zip(g_base, tok_s, strict=True)]
        c_spec = [cost_per_mtok_usd(g, usd, ts) for g, ts in zip(g_spec, tok_s, strict=True)]
        rows.append([f"$/M output tokens at {labels[0]}", f"{c_base[0]:.2f}", f"{c_spec[0]:.2f}"])
        if base_cap > 0 and spec_cap > 0:
            rows.append(["$/M output tokens at full SLO-bound load",
                         f"{cost_per_mtok_usd(s.gpus, usd, base_cap * a.output_tokens):.2f}",
                         f"{cost_per_mtok_usd(s.gpus, usd, spec_cap * a.output_tokens):.2f}"])
    slo_text = (f"the SLO of {rm.slo_ms:g} ms/token" if s.slo_ms_per_token is not None else
                f"an **assumed** latency target of {rm.slo_ms:.2f} ms/token: the scenario gives no "
                "`slo_ms_per_token`, so the target is what plain decoding achieves on one replica at the scenario's "
                "rate")
    gpus = f"{s.gpus} GPU{'s' if s.gpus > 1 else ''}"
    text = [f"A replica is {gpus}; requests are split evenly over replicas, and each replica's per-token latency "
            f"at its Little's-law concurrency must meet {slo_text}. With speculation the best k at the SLO-bound load "
            f"is k = {spec_k}.", "",
            md_table(["", "without speculation", f"with speculation ({d.label}, k = {spec_k})"],
                      rows, "lrr")]
    if usd is None:
        text += ["", "The scenario gives no `gpu_hour_usd`, so there are no dollar figures."]
    fig = fg.capacity(labels, g_base, g_spec, c_base, c_spec, "GPUs to serve the rate within the SLO", c.title,
                      "arrival rate, the scenario's and multiples (requests/s)")
    return Section("Capacity and cost", "\n".join(text), fig, "capacity",
                   "GPUs needed and cost per million tokens as traffic grows")
