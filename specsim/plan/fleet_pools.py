"""A placement's prefill/decode pools priced analytically for the fleet search (no event simulation): x prefill
and y decode replicas of the same GPU type and layout (SGLang's non-wide-EP disaggregation requires equal TP for
the two pools, dynamo#5870 in research/serving-2026.md section 5.3), speculation on the decode pool only, as
`specsim pools` simulates them (simulate/disagg.py).

Rate matching as AIConfigurator's disaggregated mode does it [AIC picking.py, inference_session.py; serving-2026.md
section 5.3]: an x:y group serves min(x P, y D) requests/s, and the fleet is the fewest groups that serve the rate
(m x (x + y) replicas: the fewest in that ratio), with specsim's own pricing of P and D:

- P, a prefill replica's requests/s: 0.9 / its prefill of the mix's prompt (`arrival.prefill_time_s`, the pass the
  planner prices, speculation off). 0.9 is AIConfigurator's prefill factor (pipeline bubbles); it is kept because
  nothing else bounds the prefill pool: a replica taking 1 / prefill requests/s is busy all the time and its queue,
  hence TTFT, grows without bound (the aggregated model is bounded by its SLO, the prompts' share stretching TPOT).
- D, a decode replica's requests/s within the per-token SLO: the planner's Little's-law rate with the prefill
  taken out (`fleet_price.capacity` with prefill 0: N = r x output tokens x the step's time per token at N, the
  largest N within the SLO whose KV fits), with the draft and k. AIConfigurator's 0.92 (decode slots left unfilled
  by its static batch) is not applied: Little's law at the SLO's concurrency is already the steady state of a
  pool whose slots fill as requests arrive, so the factor would count the same loss twice. Like the planner the
  decode counts every output token (simulate/disagg.py samples the first on the prefill pool: 1 / output tokens).

TTFT (unqueued) = the prefill pass + the KV's transfer: prompt tokens x the target's KV bytes per token / (link
GB/s x the prefill replica's GPUs), advise.pools' model (43.5 GB/s per GPU by default); AIConfigurator has no
transfer term. The ranking is by GPUs and $/Mtok as the aggregated rows are; capacity_rps is a group's requests/s
over its x + y replicas (comparable with an aggregated replica's), speedup against plain decoding in the same pools.
"""

from __future__ import annotations

import dataclasses
from collections.abc import MutableMapping

import numpy as np

from specsim.drafts.build import make_draft
from specsim.plan.arrival import prefill_time_s
from specsim.plan.fleet_price import (
    CASES,
    FleetQuestion,
    FleetRow,
    Placement,
    capacity,
    fleet_row,
    target_for,
)
from specsim.step.evaluate import Target, fits

PREFILL_UTILIZATION = 0.9  # AIConfigurator's prefill factor (module docstring); decode: none

#: per draft label ('none' for plain decoding): one decode replica's (requests/s, concurrency, fits) per row of
#: `fleet_price.capacity` (plain: one row; a draft: q.ks once per acceptance case)
DecodeCaps = dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]


def decode_capacities(q: FleetQuestion, t: Target) -> DecodeCaps:
    """One decode replica's capacities on target t for plain decoding and every draft at every k and case: the
    planner's Little's-law rate, prefill excluded (module docstring)."""
    prompt, output = q.prompt_tokens, q.output_tokens
    none = make_draft("none", q.scenario.model)
    out = {"none": capacity(t, none, np.array([0]), np.array([1.0]), prompt, output, q.slo_ms, prefill_s=0.0)}
    ks = np.array(q.ks * len(CASES))
    for d in q.drafts:
        tps = np.concatenate([np.asarray(q.tps[d.label][c], dtype=np.float64) for c in CASES])
        out[d.label] = capacity(t, d, ks, tps, prompt, output, q.slo_ms, prefill_s=0.0)
    return out


def prefill_replica(q: FleetQuestion, t: Target) -> tuple[float, bool, float]:
    """A prefill replica on target t: (requests/s, whether the prompt's KV fits, TTFT in ms: the prefill pass and
    the KV's transfer to the decode pool)."""
    prompt = q.prompt_tokens
    prefill_s = prefill_time_s(t, prompt)
    fit = bool(np.asarray(fits(t, make_draft("none", q.scenario.model), 0, np.array([1.0]), float(prompt))).all())
    kv_bytes = q.scenario.model.kv_bytes_per_token(q.scenario.kv_dtype)
    transfer_s = prompt * kv_bytes / (q.kv_link_gb_s * 1e9 * t.gpus)
    rate = PREFILL_UTILIZATION / prefill_s if prefill_s > 0 and fit else 0.0
    return rate, fit, (prefill_s + transfer_s) * 1e3


def group_rps(pd: tuple[int, int], prefill_rps: float, decode_rps: float) -> float:
    """An x:y group's requests/s: min(x P, y D) (AIConfigurator's rate matching, without its factors on D)."""
    x, y = pd
    return min(x * prefill_rps, y * decode_rps)


def price_pools(q: FleetQuestion, p: Placement, decode: MutableMapping[Placement, DecodeCaps]) -> list[FleetRow]:
    """Plain decoding, then every draft at every k (fleet_price.price_placement's order), on placement p's pools;
    `decode` holds the decode replicas' capacities by placement without its ratio (priced once a task)."""
    assert p.pd is not None
    t = target_for(q, p)
    key = dataclasses.replace(p, pd=None)
    if key not in decode:
        decode[key] = decode_capacities(q, t)
    caps = decode[key]
    pre = prefill_replica(q, t)
    cap, conc, fit = caps["none"]
    plain = group_rps(p.pd, pre[0], float(cap[0]))
    rows = [fleet_row(q, p, t, ("none", 0), (plain, plain, plain), float(conc[0]), bool(fit[0]) and pre[1], plain,
                      pre[2])]
    m = len(q.ks)
    for d in q.drafts:
        cap, conc, fit = caps[d.label]
        for i, k in enumerate(q.ks):
            c, lo, hi = (group_rps(p.pd, pre[0], float(cap[j])) for j in (i, m + i, 2 * m + i))
            rows.append(fleet_row(q, p, t, (d.label, k), (c, lo, hi), float(conc[i]), bool(fit[i]) and pre[1], plain,
                                  pre[2]))
    return rows
