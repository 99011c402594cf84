"""A plan as data people and programs read: the one-sentence recommendation, the JSON record,
the Markdown view. Reports and the CLI render from here so their numbers agree."""

from __future__ import annotations

from typing import Any

from specsim.plan.engine_configs import engine_configs
from specsim.plan.optimize import FIELDS, Plan

NAMES = {"none": "no speculation", "draft_model": "a draft model", "ngram": "prompt lookup (n-gram)",
         "suffix": "suffix decoding", "medusa": "Medusa", "eagle": "EAGLE", "eagle2": "EAGLE-2",
         "eagle3": "EAGLE-3", "mtp": "MTP", "lookahead": "lookahead decoding"}


def _draft(plan: Plan) -> Any:
    return next((d for d in plan.scenario.drafts if d.label == plan.draft_label), None)


def recommendation(plan: Plan) -> str:
    """E.g. 'Speculate with EAGLE-3, k = 7 up to batch 47, k = 4 up to 264; off above: +76% tokens/s over the day'."""
    on = [seg for seg in plan.policy if seg["k"] > 0]
    what = "tokens/s"
    if plan.arrival is not None:
        b = plan.buckets[0]
        if b.k == 0:
            return f"Do not speculate: at {plan.arrival['rate_rps']:g} requests/s nothing beats plain decoding."
        return (f"Speculate with {NAMES.get(b.method, b.method)} ({b.draft}), k = {b.k}: "
                f"{plan.arrival['ms_per_token']:.1f} ms/token instead of {plan.arrival['baseline_ms_per_token']:.1f} "
                f"at {plan.arrival['rate_rps']:g} requests/s ({plan.gain:.2f}x)")
    if plan.method == "none" or not on:
        return "Do not speculate: plain decoding is best for every load bucket."
    d = _draft(plan)
    name = NAMES.get(plan.method, plan.method)
    if d is not None and d.method == "draft_model" and d.model is not None:
        name += f" ({d.model.name})"
    parts = [f"k = {seg['k']} up to batch {seg['batch_to']}" for seg in on]
    tail = "; off above" if plan.policy and plan.policy[-1]["k"] == 0 else ""
    if plan.scenario.objective == "latency":
        return f"Speculate with {name}, {', '.join(parts)}{tail}: {plan.gain:.2f}x faster per token over the day"
    pct = (plan.gain - 1) * 100
    fits_above = "; above that the KV cache does not fit" if plan.policy and plan.policy[-1]["k"] < 0 else ""
    return f"Speculate with {name}, {', '.join(parts)}{tail}{fits_above}: {pct:+.0f}% {what} over the day"


def plan_dict(plan: Plan) -> dict[str, Any]:
    """The JSON record of `specsim plan --format json` (and report.json / plan.json)."""
    s = plan.scenario
    d = _draft(plan)
    buckets = []
    for bp in plan.buckets:
        for row, base in zip(bp.rows, bp.baseline_rows, strict=True):
            tree = d.tree(bp.k) if d is not None and bp.k else None
            buckets.append({
                "bucket": bp.bucket.name, "weight": bp.bucket.weight * row["share"], "batch": row["batch"],
                "context": row["context"], "draft": bp.draft, "method": bp.method, "k": bp.k,
                "tree_nodes": tree.num_nodes if tree is not None else 0,
                **{f: row[f] for f in FIELDS},
                "baseline_throughput_tok_s": base["throughput_tok_s"], "baseline_ms_per_token": base["ms_per_token"],
                "fits_memory": bp.fits,
            })
    return {
        "scenario": s.name, "hardware": s.hardware.name, "model": s.model.name, "tp": s.tp,
        "objective": s.objective, "recommendation": recommendation(plan), "method": plan.method,
        "draft": plan.draft_label, "gain": plan.gain, "per_draft_gain": plan.per_draft_gain,
        "buckets": buckets, "policy": plan.policy, "crossover_batch": plan.crossover,
        "arrival": plan.arrival,
        "engine_configs": engine_configs(plan.method, plan.policy,
                                         d.model.name if d is not None and d.model is not None else None,
                                         d.draft_tp if d is not None else None,
                                         d.topk if d is not None else 1,
                                         d.num_draft_tokens if d is not None else None),
        "notes": plan.notes,
    }


def plan_markdown(plan: Plan) -> str:
    """A Markdown view of a plan for pasting into a design doc."""
    data = plan_dict(plan)
    lines = [f"### {data['scenario']}: {data['model']} on {data['tp']}x {data['hardware']}", "",
             f"**{data['recommendation']}**", "",
             "| bucket | batch | context | draft | k | tokens/step | step ms | baseline ms | speedup | tok/s "
             "| ms/token |",
             "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in data["buckets"]:
        lines.append(f"| {r['bucket']} | {r['batch']:g} | {r['context']} | {r['draft']} | {r['k']} | "
                     f"{r['tokens_per_step']:.2f} | {r['step_ms']:.2f} | {r['baseline_step_ms']:.2f} | "
                     f"{r['speedup']:.2f} | {r['throughput_tok_s']:,.0f} | {r['ms_per_token']:.2f} |")
    if data["crossover_batch"]:
        lines += ["", "Crossover batch (speculation stops paying): " + ", ".join(
            f"{k}: {v if v is not None else 'never (within the grid)'}" for k, v in data["crossover_batch"].items())]
    for note in data["notes"]:
        lines += ["", f"> {note}"]
    return "\n".join(lines) + "\n"
