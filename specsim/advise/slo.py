"""The SLO objective by simulation: the draft, speculation policy and replica count that meet percentile
bounds on TTFT and TPOT (`serving.slo`) at the target rate with the fewest replicas.

Candidates (few, to keep `specsim plan` fast): plain decoding; for each draft, the analytic plan's chain
policy (when the plan chose that draft), the draft's analytic per-batch schedule (`planner.analytic_schedule`),
its low-load k as a static k switched off above the schedule's crossover batch, and that k static at every
batch. Every candidate runs the same seeded requests at the target rate, thinned at random to 1/n for n
replicas (`Requests.thin`, nested subsets), with the KV capacity of its own draft and k.

Search: plain decoding's replica count by doubling (stopped once doubling stops helping: a bound out of
reach at any count) then bisection; each speculative candidate is tried at one replica fewer than the best
so far (bisection further down when it passes) and otherwise at the best count (its own search while
nothing meets the SLO), where ties are broken by headroom, the larger of (TTFT at the percentile / its
bound) and (TPOT at the percentile / its bound): fewer replicas first, then the more headroom, then the
earlier candidate (plain decoding first: speculation has to earn its complexity).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from specsim.advise.planner import analytic_schedule, chain, policy_from_segments, policy_segments, with_depth
from specsim.advise.simulation import Setup, make_setup, requests_at
from specsim.drafts.draft import Draft
from specsim.errors import SpecsimError
from specsim.plan.optimize import Plan
from specsim.scenario.scenario import Scenario
from specsim.scenario.serving import SLO, cost_per_mtok_usd
from specsim.scenario.traffic import Requests
from specsim.simulate.cost import StepTable
from specsim.simulate.engine import SimResult, simulate
from specsim.simulate.metrics import meets_slo, slo_percentiles, summarize
from specsim.step.policy import SpecPolicy

MAX_REPLICAS = 1024
#: Doubling the replicas stops when it leaves the SLO's worse ratio above this share of what it was: the
#: bound is out of reach (a TPOT below what one sequence alone achieves), not a matter of capacity.
SATURATED = 0.98


@dataclass(frozen=True)
class Candidate:
    draft: Draft  # a chain with its acceptance to the depth needed
    policy: SpecPolicy
    origin: str

    @property
    def label(self) -> str:
        return self.draft.label if self.policy.enabled else "none"


@dataclass(frozen=True)
class Trial:
    candidate: int
    replicas: int
    meets: bool
    ttft_s: float
    tpot_s: float

    def headroom(self, slo: SLO) -> float:
        """The larger of the two percentiles over their bounds (< 1: within the SLO)."""
        ttft = 0.0 if math.isnan(self.ttft_s) else self.ttft_s / slo.ttft_s
        return max(ttft, self.tpot_s / slo.tpot_s)


def candidates(setup: Setup, analytic: Plan) -> list[Candidate]:
    """Plain decoding and a handful of policies per draft (module docstring), without duplicates."""
    s = setup.scenario
    limits = setup.limits
    ctx = setup.context_hint
    depth = max(1, s.max_k)
    out = [Candidate(chain(s.drafts[0]), SpecPolicy.off(), "plain decoding")]
    seen = {tuple(SpecPolicy.off().k_table(limits.max_num_seqs).tolist())}

    def add(d: Draft, policy: SpecPolicy, origin: str) -> None:
        key = (d.label, tuple(policy.k_table(limits.max_num_seqs).tolist()))
        if policy.enabled and key not in seen:
            seen.add(key)
            out.append(Candidate(with_depth(chain(d), max(depth, policy.max_k)), policy, origin))

    for d in s.drafts:
        if d.method == "none":
            continue
        if analytic.method != "none" and analytic.draft_label == d.label:
            add(d, policy_from_segments(analytic.chain_policy or analytic.policy), "the analytic plan's policy")
        sched = analytic_schedule(setup.target, d, s.max_k, limits.max_num_seqs, ctx)
        add(d, sched, "analytic per-batch schedule")
        k_low = sched.k_for_batch(1)
        if k_low > 0:
            table = sched.k_table(limits.max_num_seqs)
            off = [b for b in range(1, limits.max_num_seqs + 1) if table[b] == 0]
            if off:
                add(d, SpecPolicy.static(k_low, off[0] - 1), f"static k={k_low}, off above the crossover")
            add(d, SpecPolicy.static(k_low), f"static k={k_low}")
    return out


def optimise_slo(s: Scenario, analytic: Plan, progress: Callable[[str], None] | None = None) -> Plan:
    """The analytic plan with its draft, policy and engine configs replaced by the SLO choice by simulation
    (`Plan.serving` records the search)."""
    assert s.serving is not None and s.serving.slo is not None
    slo = s.serving.slo
    tick = progress or (lambda _m: None)
    setup = make_setup(s, policy=SpecPolicy.off(), analytic=lambda: analytic)
    rate = s.serving.target_rate_rps or setup.traffic.mean_rate_rps
    if not (rate > 0 and math.isfinite(rate)):
        raise SpecsimError(f"{s.path}: no target rate to size replicas for (serving.target_rate_rps)")
    req = requests_at(setup.traffic, rate, setup.seed)
    if req.n == 0:
        raise SpecsimError(f"{s.path}: the traffic generated no requests")
    cands = candidates(setup, analytic)
    engines = [setup.engine(c.policy, c.draft) for c in cands]
    depth = max(1, s.max_k, *(c.policy.max_k for c in cands))
    mixes = {c.draft.label: setup.mix(c.draft, depth)[0] for c in cands if c.policy.enabled}
    tables: dict[str, StepTable] = {}
    for c in cands:
        key = c.draft.label
        if key not in tables:
            mine = [c2.policy for c2 in cands if c2.draft.label == key or not c2.policy.enabled]
            tick(f"tabulating step costs of {key}")
            tables[key] = setup.table(mine, [req], c.draft)
    shares: dict[int, Requests] = {}
    results: dict[tuple[int, int], SimResult] = {}
    trials: list[Trial] = []

    def run(i: int, n: int) -> Trial:
        if n not in shares:
            shares[n] = req if n == 1 else req.thin(1.0 / n, setup.seed)
        c = cands[i]
        tick(f"{c.label} {c.policy.label} on {n} replica{'s' if n > 1 else ''}")
        share = shares[n]
        if share.n == 0:
            tr = Trial(i, n, True, math.nan, 0.0)
        else:
            res = simulate(share, engines[i], tables[c.draft.label], mixes.get(c.draft.label), setup.seed)
            results[(i, n)] = res
            tr = Trial(i, n, meets_slo(res, slo), *slo_percentiles(res, slo.percentile))
        trials.append(tr)
        return tr

    def search(i: int) -> Trial:
        """Candidate i's fewest replicas: doubling (stopped when doubling no longer helps: the SLO is out of
        reach of this configuration at any count), then bisection."""
        lo, hi = 0, 1
        prev = None
        while not (tr := run(i, hi)).meets and hi < MAX_REPLICAS:
            if prev is not None and tr.headroom(slo) > SATURATED * prev.headroom(slo):
                return tr
            prev, lo, hi = tr, hi, min(2 * hi, MAX_REPLICAS)
        return bisect(i, lo, hi) if tr.meets else tr

    def bisect(i: int, lo: int, hi: int) -> Trial:
        """Candidate i's fewest replicas between lo (fails, or 0) and hi (meets): its trial there."""
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if run(i, mid).meets:
                hi = mid
            else:
                lo = mid
        return _last(trials, i, hi)

    best = baseline = search(0)
    for i in range(1, len(cands)):
        if not best.meets:  # nothing meets the SLO yet: this candidate's own search
            tr = search(i)
            best = tr if _key(tr, slo) < _key(best, slo) else best
            continue
        n = best.replicas
        if n > 1 and run(i, n - 1).meets:  # fewer replicas: look further down
            best = bisect(i, 0, n - 1)
            continue
        at = run(i, n)  # as many replicas: the more headroom wins
        if _key(at, slo) < _key(best, slo):
            best = at
    chosen = cands[best.candidate]
    gpus = setup.gpus_per_replica
    usd = s.gpu_hour_usd

    def price(tr: Trial) -> float | None:
        res = results.get((tr.candidate, tr.replicas))
        if usd is None or res is None:
            return None
        m = summarize(res, slo, None, bins=None)
        return cost_per_mtok_usd(tr.replicas * gpus, usd, m.output_tok_s * tr.replicas)

    def record(tr: Trial) -> dict[str, Any]:
        c = cands[tr.candidate]
        return {"draft": c.label, "policy": c.policy.label, "origin": c.origin, "replicas": tr.replicas,
                "meets_slo": tr.meets, "ttft_ms": tr.ttft_s * 1e3, "tpot_ms": tr.tpot_s * 1e3,
                "headroom": tr.headroom(slo)}

    limits = setup.limits
    serving = {
        "by": "simulation", "slo": {"ttft_ms": slo.ttft_s * 1e3, "tpot_ms": slo.tpot_s * 1e3,
                                    "percentile": slo.percentile},
        "target_rate_rps": float(rate), "requests": int(req.n), "seed": setup.seed,
        "draft": chosen.label, "method": chosen.draft.method if chosen.policy.enabled else "none",
        "policy": chosen.policy.label, "origin": chosen.origin, "replicas": best.replicas,
        "gpus_per_replica": gpus, "gpus": best.replicas * gpus, "meets_slo": best.meets,
        "ttft_ms": best.ttft_s * 1e3, "tpot_ms": best.tpot_s * 1e3, "cost_per_mtok_usd": price(best),
        "max_num_seqs": limits.max_num_seqs, "max_num_batched_tokens": limits.max_num_batched_tokens,
        "kv_capacity_tokens": engines[best.candidate].kv_capacity_tokens,
        "baseline": {**record(baseline), "gpus": baseline.replicas * gpus, "cost_per_mtok_usd": price(baseline)},
        "trials": [record(t) for t in trials],
    }
    segs = policy_segments(chosen.policy, limits.max_num_seqs)
    on = chosen.policy.enabled
    note = (f"SLO by simulation at {rate:g} requests/s ({slo.percentile:g}th percentile TTFT <= "
            f"{slo.ttft_s * 1e3:g} ms, TPOT <= {slo.tpot_s * 1e3:g} ms): {best.replicas} replica(s) with "
            f"{chosen.label + ' ' + chosen.policy.label if on else 'plain decoding'} against "
            f"{baseline.replicas} without speculation; {len(cands)} candidates, {len(trials)} simulations")
    return dataclasses.replace(
        analytic, method=chosen.draft.method if on else "none", draft_label=chosen.draft.label if on else
        analytic.draft_label, policy=segs, chain_policy=segs, dynamic_profile=None, serving=serving,
        notes=[*analytic.notes, note] + ([] if best.meets else [
            f"no candidate meets the SLO even with {best.replicas} replicas: relax it, or shorten prompts/outputs"]))


def _key(t: Trial, slo: SLO) -> tuple[int, int, float]:
    """Order of preference: meeting the SLO, then fewer replicas, then more headroom."""
    return (0, t.replicas, t.headroom(slo)) if t.meets else (1, 0, t.headroom(slo))


def _last(trials: list[Trial], i: int, n: int) -> Trial:
    return next(t for t in reversed(trials) if t.candidate == i and t.replicas == n)
