"""The policy over the load: over the day's buckets, or (arrival rate) per-token latency against
the rate for each k by Little's law (`RateModel`, also used by the capacity section)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specsim.drafts.build import make_draft
from specsim.plan.arrival import decode_tpot_s, prefill_time_s, rate_at_concurrency
from specsim.report.context import Ctx, Section, md_table
from specsim.report.figures import policy as fg
from specsim.step.evaluate import config_metrics, fits


@dataclass
class RateModel:
    """Little's-law curves for one draft (k = 0..max_k) and the capacity under a latency SLO."""

    curves: list[fg.RateCurve]
    slo_ms: float
    slo_label: str
    prefill_s: float


def rate_model(c: Ctx) -> RateModel:
    s, t = c.s, c.t
    a = s.arrival
    assert a is not None and c.plan.arrival is not None
    d = c.draft or s.drafts[0]
    none = make_draft("none", s.model)
    # As plan.arrival.solve_concurrency: prefill of the prompt, decode at the mean context, the decode's time per
    # token stretched by the prompts' share of the GPU at that rate.
    prefill_s = prefill_time_s(t, a.prompt_tokens)
    ctx = a.prompt_tokens + a.output_tokens / 2
    n = np.geomspace(1.0, 4096.0, 400)
    curves = []
    for k in range(s.max_k + 1):
        dd = d if k else none
        step_ms = np.asarray(config_metrics(t, dd, k, n, ctx).ms_per_token, float)
        rate = rate_at_concurrency(n, prefill_s, a.output_tokens, step_ms / 1e3)
        tpot_ms = np.asarray(decode_tpot_s(step_ms, rate, prefill_s), float)
        ok = np.asarray(fits(t, dd, k, n, ctx), bool)
        end = int(np.argmin(ok)) if not ok.all() else len(n)
        end = min(end, int(np.argmax(rate[:end])) + 1) if end else 0  # beyond the peak rate: unstable
        curves.append(fg.RateCurve(k, rate[:end], tpot_ms[:end]))
    if s.slo_ms_per_token is not None:
        slo, label = s.slo_ms_per_token, "SLO"
    else:
        slo, label = c.plan.arrival.baseline_ms_per_token, "assumed SLO (no speculation, one replica)"
    return RateModel(curves, float(slo), label, prefill_s)


def policy_section(c: Ctx, rm: RateModel | None) -> Section:
    s = c.s
    d = c.draft or s.drafts[0]
    if rm is not None:
        assert s.arrival is not None
        fig = fg.policy_over_load(rm.curves, s.arrival.rate_rps, rm.slo_ms, rm.slo_label, d.label, c.title)
        text = ("A rate-driven load has no day profile: the policy is laid over the arrival rate instead. Each curve "
                "is the per-token latency at the Little's-law concurrency a rate produces, for one k, with every "
                "request's prefill taking its share of the GPU from the decode steps; speculation shortens each "
                "request, which lowers the concurrency, which keeps steps cheap. The lowest curve at a rate is the "
                "best k there; the saw-teeth are GEMM tile steps as the concurrency grows.")
        return Section("The policy over the load", text, fig, "policy_over_load",
                       "Per-token latency against arrival rate for each k")
    segs = []
    for bp in c.plan.buckets:
        thr = sum(r.share * r.throughput_tok_s for r in bp.rows)
        base = sum(r.share * r.throughput_tok_s for r in bp.baseline_rows)
        segs.append(fg.DaySegment(bp.bucket.name, bp.bucket.weight * 24, bp.bucket.batch, bp.k, thr / base))
    fig = fg.policy_over_day(segs, s.max_k, d.label, c.title)
    rows = [[sg.name, f"{sg.hours:.1f}", sg.batch, sg.k, f"{sg.speedup:.2f}x"] for sg in segs]
    text = ("The day's buckets in the scenario's order, each as wide as its hours, as high as its batch; the colour is "
            "the k the plan runs there.\n\n"
            + md_table(["bucket", "hours", "batch", "k", "throughput gain"], rows, "lrrrr"))
    return Section("The policy over the day", text, fig, "policy_over_day", "The policy laid over the day's load")
