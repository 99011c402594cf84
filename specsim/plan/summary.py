"""A plan as data people and programs read: the one-sentence recommendation, the JSON record,
the Markdown view. Reports and the CLI render from here so their numbers agree.

Headlines compare like with like: a load-bucket plan compares each bucket at its own batch; an
arrival-rate plan compares the same arrival rate (concurrency follows from Little's law) and
states the same-batch speedup beside it. Wherever a prior decided the answer the recommendation
says whether it holds across the prior's acceptance band or depends on acceptance ("measure
first").
"""

from __future__ import annotations

import math
from typing import Any

from specsim.cost.costmodel import describe as cost_model_label
from specsim.plan.engine_configs import engine_configs
from specsim.plan.result import FIELDS, Plan
from specsim.records import to_record
from specsim.step.bands import gain_band as _gain_band
from specsim.step.bands import spread_for
from specsim.step.policy import Segment

NAMES = {"none": "no speculation", "draft_model": "a draft model", "ngram": "prompt lookup (n-gram)",
         "suffix": "suffix decoding", "medusa": "Medusa", "eagle": "EAGLE", "eagle2": "EAGLE-2",
         "eagle3": "EAGLE-3", "mtp": "MTP", "lookahead": "lookahead decoding", "p_eagle": "P-EAGLE",
         "dflash": "DFlash", "dspark": "DSpark"}


#: the answer where the scenario itself turns speculation off: its setting, not a finding
OFF_BY_SETTING = ("Speculation is off by the scenario's own setting (max_k: 0): nothing was searched; raise max_k to "
                  "plan speculation")


def _draft(plan: Plan) -> Any:
    return next((d for d in plan.scenario.drafts if d.label == plan.draft_label), None)


def config_text(k: int, topk: int = 1, nodes: int | None = None) -> str:
    """'k = 4' for a chain, 'tree topk 4 x 16 nodes, depth 5' for a tree, 'off' at k = 0 and 'does not fit'
    below."""
    if k < 0:
        return "does not fit"
    if not k:
        return "off"
    return f"tree topk {topk} x {nodes} nodes, depth {k}" if nodes else f"k = {k}"


def _shape(seg: Segment) -> str:
    return config_text(seg.k, seg.topk, seg.num_draft_tokens)


def segment_label(seg: Segment) -> str:
    """One band of a policy as a user reads it: 'batch 2-6: tree topk 4 x 21 nodes, depth 5', 'batch
    36-47: k = 4', 'batch 302-512: off' or '...: does not fit'."""
    span = f"{seg.batch_from}" if seg.batch_from == seg.batch_to else f"{seg.batch_from}-{seg.batch_to}"
    return f"batch {span}: {_shape(seg)}"


def pays_phrase(ranges: list[tuple[int, int]] | list[list[int]], top: int | None) -> str:
    """Where a draft pays, as batch ranges: 'batch 3-90', 'every batch up to 512', 'never (batch 1-512)'."""
    if not ranges:
        return f"never (batch 1-{top})" if top else "never"
    if len(ranges) == 1 and ranges[0][0] == 1 and top is not None and ranges[0][1] >= top:
        return f"every batch up to {top}"
    return "batch " + ", ".join(f"{a}-{b}" if a != b else f"{a}" for a, b in ranges)


def pays_by_draft(plan: Plan) -> dict[str, str]:
    """Each draft's `pays_phrase` over the plan's batch grid."""
    top = plan.policy.top_batch
    return {label: pays_phrase(r, top) for label, r in plan.pays.items()}


def band_sentence(plan: Plan) -> str:
    """'holds across the acceptance band (+12% to +40%)' or 'depends on acceptance: ... measure first'."""
    band = plan.band
    arrival = plan.arrival is not None
    latency = arrival or plan.scenario.objective == "latency"

    def fmt(g: float) -> str:
        return f"{g:.2f}x" if latency else f"{(g - 1) * 100:+.0f}%"

    # the cost model's spread alone can reach a loss: then no acceptance measurement settles it, a run does
    low_end = gain_band(plan)[0]
    loss = plan.speculates and not arrival and plan.serving is None and low_end < 1.0
    cost = (f"; the cost model's spread on {plan.scenario.engine.name} reaches a loss at the 80% band's low end "
            f"({fmt(low_end)}): one benchmark run with and one without speculation settles it" if loss else "")
    if not band:
        return cost.removeprefix("; ")
    lo, hi = band.low, band.high
    if band.robust:
        return (f"holds across the prior's acceptance band ({fmt(lo.gain)} at its low end, {fmt(hi.gain)} at "
                f"its high end){cost}")
    if band.thresholds:
        said = []
        for th in band.thresholds:
            c = th.beyond
            what = (f"this policy loses ({fmt(c.gain)}; re-planned with the measured acceptance, "
                    f"{fmt(c.best_gain)})" if c.method == band.central.method else
                    "plain decoding would be chosen" if c.method == "none" else
                    f"{NAMES.get(c.method, c.method)} would be chosen ({fmt(c.best_gain)})")
            said.append(f"{'below' if th.end == 'low' else 'above'} {th.tau_k4:.2f}, {what}")
        return (f"depends on acceptance: measure {band.thresholds[0].draft}'s tokens per step at k = 4 (the "
                f"prior says {(band.tau_central or {}).get(band.thresholds[0].draft, float('nan')):.2f}): "
                + "; ".join(said))
    parts = []
    for name, case in (("low", lo), ("high", hi)):
        if case.method != band.central.method:
            parts.append(f"at the band's {name} end {NAMES.get(case.method, case.method)} would be chosen "
                         f"({fmt(case.best_gain)})")
        elif case.gain < 1.0 and band.central.speculates:
            parts.append(f"at the band's {name} end this policy loses ({fmt(case.gain)})")
    return "depends on acceptance: " + "; ".join(parts) + " - measure first"


def _calibrated(cal: object) -> list[str]:
    """The note of a step calibrated to a fitted deployment (scenario/deployment.py)."""
    label = getattr(cal, "label", None)
    return [f"step calibrated to a fitted deployment's runs: {label}"] if label else []


def gain_band(plan: Plan) -> tuple[float, float]:
    """The plan's gain at its 80% band's ends: the chosen policy's gain at the acceptance band's ends and the
    engine's measured speedup spread, combined (step/bands.py)."""
    band = plan.band
    engine = plan.scenario.engine.name
    return _gain_band(plan.gain, band.low.gain if band else None, band.high.gain if band else None, engine,
                      spread_for(engine, plan.scenario.calibration))


def replicas_band(plan: Plan) -> tuple[int, int] | None:
    """The simulated replicas of an SLO plan that speculates, at its gain's 80% band's ends (`gain_band`): a
    replica's capacity at the SLO moves with the speculative gain (tokens per step at the same step time), so the
    replicas scale inversely with it; None where the plan does not speculate or meets no SLO."""
    sv = plan.serving
    if sv is None or not sv.meets_slo or not sv.speculates or plan.off_by_setting or plan.gain <= 0:
        return None
    lo, hi = gain_band(plan)
    return (max(1, math.ceil(sv.replicas * plan.gain / hi - 1e-9)), math.ceil(sv.replicas * plan.gain / lo - 1e-9))


def _gain_text(plan: Plan, latency: bool) -> str:
    """'+36% tokens/s over the day (80% band +14% to +60%)' or '1.52x faster per token over the day (80% band
    1.30x-1.78x)'."""
    lo, hi = gain_band(plan)
    if latency:
        return f"{plan.gain:.2f}x faster per token over the day (80% band {lo:.2f}x-{hi:.2f}x)"
    return (f"{(plan.gain - 1) * 100:+.0f}% tokens/s over the day (80% band {(lo - 1) * 100:+.0f}% to "
            f"{(hi - 1) * 100:+.0f}%)")


def recommendation(plan: Plan) -> str:
    """E.g. 'Speculate with EAGLE-3, k = 5 up to batch 47, k = 3 up to 264; off above: +36% tokens/s over the
    day; holds across the prior's acceptance band (+20% at its low end, +48% at its high end)'."""
    band = band_sentence(plan)
    tail_band = f"; {band}" if band else ""
    if plan.serving is not None:
        return serving_sentence(plan)
    if plan.off_by_setting:
        return OFF_BY_SETTING + "."
    if plan.arrival is not None:
        a = plan.arrival
        b = plan.buckets[0]
        if b.k == 0:
            return (f"Do not speculate: at {a.rate_rps:g} requests/s nothing beats plain decoding"
                    f"{tail_band}.")
        shape = _shape(plan.policy.schedule[0]) if plan.policy.schedule else f"k = {b.k}"
        lo, hi = gain_band(plan)
        return (f"Speculate with {NAMES.get(b.method, b.method)} ({b.draft}), {shape}: at the same "
                f"{a.rate_rps:g} requests/s, {a.ms_per_token:.1f} ms/token instead of "
                f"{a.baseline_ms_per_token:.1f} ({a.gain_same_rate:.2f}x, 80% band {lo:.2f}x-{hi:.2f}x; "
                f"{a.concurrency:.0f} requests "
                f"in flight instead of {a.baseline_concurrency:.0f}); at the same batch "
                f"({b.rows[0].batch}) {a.speedup_same_batch:.2f}x{tail_band}")
    on = [seg for seg in plan.policy.schedule if seg.k > 0]
    if not plan.speculates or not on:
        return f"Do not speculate: plain decoding is best for every load bucket{tail_band}."
    d = _draft(plan)
    name = NAMES.get(plan.method, plan.method)
    if d is not None and d.model is not None:
        name += f" ({d.model.name})"
    parts = [f"{_shape(seg)} up to batch {seg.batch_to}" for seg in on]
    if len(parts) > 3:  # the lowest-load shape, then where it ends up
        parts = [parts[0], f"shrinking to {_shape(on[-1])} by batch {on[-1].batch_to}"]
    last_k = plan.policy.schedule[-1].k if plan.policy.schedule else None
    tail = "; off above" if last_k == 0 else ""
    fits_above = "; above that the KV cache does not fit" if last_k is not None and last_k < 0 else ""
    gain = _gain_text(plan, plan.scenario.objective == "latency")
    return f"Speculate with {name}, {', '.join(parts)}{tail}{fits_above}: {gain}{tail_band}"


def serving_sentence(plan: Plan) -> str:
    """The recommendation of an SLO plan chosen by simulation (`Plan.serving`, advise/slo.py): the policy, the
    replicas that meet the percentile bounds at the target rate, against plain decoding's."""
    sv = plan.serving
    assert sv is not None
    slo = sv.slo
    bounds = (f"the {slo.percentile:g}th-percentile SLOs (TTFT <= {slo.ttft_ms:g} ms, TPOT <= "
              f"{slo.tpot_ms:g} ms) at {sv.target_rate_rps:g} requests/s")
    base = sv.baseline
    if not sv.meets_slo:
        return (f"Nothing tried meets {bounds}, even with {sv.replicas} replicas: relax the SLO, shorten prompts "
                "or outputs, or use faster GPUs (simulated)")

    def gpus(n: int) -> str:
        return f"{n} replica{'s' if n != 1 else ''} ({n * sv.gpus_per_replica} GPUs)"

    price = ""
    if sv.cost_per_mtok_usd is not None and base.cost_per_mtok_usd is not None:
        price = (f"; ${sv.cost_per_mtok_usd:.3f} instead of ${base.cost_per_mtok_usd:.3f} per million output "
                 "tokens")
    if plan.off_by_setting:
        return f"{OFF_BY_SETTING}; {gpus(sv.replicas)} meet {bounds} without it (simulated)"
    if not sv.speculates:
        return (f"Do not speculate: {gpus(sv.replicas)} meet {bounds}, and no draft or policy tried needs fewer "
                "(simulated)")
    on = [seg for seg in plan.policy.schedule if seg.k > 0]
    parts = [f"{_shape(seg)} up to batch {seg.batch_to}" for seg in on]
    if len(parts) > 3:
        parts = [parts[0], f"shrinking to {_shape(on[-1])} by batch {on[-1].batch_to}"]
    tail = "; off above" if plan.policy.schedule and plan.policy.schedule[-1].k == 0 else ""
    against = (f"against {base.replicas} without speculation" if base.meets_slo else
               "which plain decoding meets with no number of replicas")
    band = replicas_band(plan)
    spread = f" (80% band {band[0]}-{band[1]})" if band and band[0] != band[1] else ""
    return (f"Speculate with {NAMES.get(sv.method, sv.method)} ({sv.draft}), {', '.join(parts)}{tail}: "
            f"{gpus(sv.replicas)}{spread} meet {bounds}, {against} (simulated{price if base.meets_slo else ''})")


def plan_dict(plan: Plan) -> dict[str, Any]:
    """The JSON record of `specsim plan --format json` (and report.json / plan.json)."""
    s = plan.scenario
    d = _draft(plan)
    buckets = []
    for bp in plan.buckets:
        for row, base in zip(bp.rows, bp.baseline_rows, strict=True):
            buckets.append({
                "bucket": bp.bucket.name, "weight": bp.bucket.weight * row.share, "batch": row.batch,
                "context": row.context, "draft": bp.draft, "method": bp.method, "k": bp.k,
                "topk": bp.topk, "num_draft_tokens": bp.num_draft_tokens,
                "tree_nodes": bp.num_draft_tokens if bp.num_draft_tokens else 0,
                **{f: getattr(row, f) for f in FIELDS},
                "baseline_batch": base.batch,
                "baseline_throughput_tok_s": base.throughput_tok_s, "baseline_ms_per_token": base.ms_per_token,
                "fits_memory": bp.fits,
            })
    acceptance = {}
    for dr in s.drafts:
        entry: dict[str, Any] = {"source": dr.acceptance.source, "prior": dr.acceptance.prior,
                                 "note": dr.acceptance.note}
        if dr.prior is not None:
            lo, mid, hi = dr.prior.tau_band(dr.prior.reference)
            entry.update({"entry": dr.prior.entry_id, "reference": dr.prior.reference.label(),
                          "tau_low": lo, "tau_central": mid, "tau_high": hi})
        acceptance[dr.label] = entry
    return {
        "scenario": s.name, "hardware": s.hardware.name, "model": s.model.name, "tp": s.tp,
        "engine": s.engine.name, "cost_model": cost_model_label(s.hardware),
        "objective": s.objective, "recommendation": recommendation(plan), "method": plan.method,
        "draft": plan.draft_label, "gain": plan.gain,
        **dict(zip(("gain_low", "gain_high"), gain_band(plan) if plan.speculates else (plan.gain, plan.gain),
                   strict=True)),
        "per_draft_gain": plan.per_draft_gain,
        "buckets": buckets, "policy": plan.policy.records(), "crossover_batch": plan.crossover,
        "crossover_batch_band": {label: list(b) for label, b in plan.crossover_band.items()},
        "pays_at_batch": {label: [list(r) for r in ranges] for label, ranges in plan.pays.items()},
        "arrival": to_record(plan.arrival), "acceptance": acceptance, "acceptance_band": to_record(plan.band),
        "serving": to_record(plan.serving),
        **dict(zip(("replicas_low", "replicas_high"), replicas_band(plan) or (None, None), strict=True)),
        "engine_configs": engine_configs(plan.method, plan.policy.records(),
                                         d.model.name if d is not None and d.model is not None else None,
                                         d.draft_tp if d is not None else None,
                                         dynamic_profile=to_record(plan.dynamic_profile),
                                         chain_policy=plan.chain_policy.records() if plan.chain_policy else None,
                                         hopper_fa3=s.hardware.is_hopper),
        "notes": [*plan.notes, *_calibrated(plan.scenario.calibration)],
        "details": list(plan.details),
    }


def plan_markdown(plan: Plan) -> str:
    """A Markdown view of a plan for pasting into a design doc."""
    data = plan_dict(plan)
    lines = [f"### {data['scenario']}: {data['model']} on {data['tp']}x {data['hardware']} ({data['engine']})", "",
             f"**{data['recommendation']}**", "",
             "| bucket | batch | context | draft | k | tree | tokens/step | step ms | baseline ms | speedup | tok/s "
             "| ms/token |",
             "|---|---:|---:|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r in data["buckets"]:
        tree = f"top{r['topk']} x {r['num_draft_tokens']}" if r["num_draft_tokens"] else "chain"
        lines.append(f"| {r['bucket']} | {r['batch']:g} | {r['context']} | {r['draft']} | {r['k']} | {tree} | "
                     f"{r['tokens_per_step']:.2f} | {r['step_ms']:.2f} | {r['baseline_step_ms']:.2f} | "
                     f"{r['speedup']:.2f} | {r['throughput_tok_s']:,.0f} | {r['ms_per_token']:.2f} |")
    if plan.arrival is not None:
        a = plan.arrival
        lines += ["", f"Same arrival rate ({a.rate_rps:g} requests/s, each request's prefill included): "
                  f"{a.ms_per_token:.2f} ms/token at {a.concurrency:.1f} in flight against "
                  f"{a.baseline_ms_per_token:.2f} at {a.baseline_concurrency:.1f} without speculation "
                  f"({a.gain_same_rate:.2f}x); the table is the decode step at the nearest batch (its speedup, "
                  f"{a.speedup_same_batch:.2f}x, compares the same batch)."]
    band = plan.band
    if band is not None:
        lines += ["", "| acceptance | tokens/step at k = 4 | gain of this policy | optimiser's choice |",
                  "|---|---:|---:|---|"]
        for which, case in (("low", band.low), ("central", band.central), ("high", band.high)):
            taus = (band.tau_central if which == "central" else getattr(case, "tau", None)) or {}
            tau = ", ".join(f"{k} {v:.2f}" for k, v in taus.items()) or "-"
            lines.append(f"| {which} | {tau} | {case.gain:.2f}x | {case.method} |")
    if plan.pays:
        lines += ["", "Where each draft pays (beats plain decoding, contexts pooled over the load): " + "; ".join(
            f"{k}: {v}" for k, v in pays_by_draft(plan).items())]
    if plan.serving is not None:
        sv = plan.serving
        lines += ["", f"Chosen by simulation at {sv.target_rate_rps:g} requests/s ({sv.requests:,} seeded "
                  "requests, thinned to each replica's share):", "",
                  "| draft | policy | origin | replicas | meets SLO | TTFT ms | TPOT ms |",
                  "|---|---|---|---:|---|---:|---:|"]
        for t in sv.trials:
            lines.append(f"| {t.draft} | {t.policy} | {t.origin} | {t.replicas} | "
                         f"{'yes' if t.meets_slo else 'no'} | {t.ttft_ms:.0f} | {t.tpot_ms:.1f} |")
    for note in (*data["notes"], *data["details"]):
        lines += ["", f"> {note}"]
    return "\n".join(lines) + "\n"
