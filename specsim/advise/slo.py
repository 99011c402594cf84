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

from specsim.advise.planner import analytic_schedule, chain, with_depth
from specsim.advise.simulation import Setup, make_setup
from specsim.advise.traffic import requests_at
from specsim.drafts.draft import Draft
from specsim.errors import SpecsimError
from specsim.plan.result import Plan, ServingBaseline, ServingChoice, ServingTrial, SloBounds
from specsim.plan.under_policy import under_policy
from specsim.scenario.scenario import Scenario
from specsim.scenario.serving import SLO, cost_per_mtok_usd
from specsim.scenario.traffic import Requests
from specsim.simulate.capacity import bisect_fewest, fewest_meeting
from specsim.simulate.cost import StepTable
from specsim.simulate.engine import SimResult, simulate
from specsim.simulate.metrics import meets_slo, slo_percentiles, summarize
from specsim.step.policy import Policy

MAX_REPLICAS = 1024
#: Doubling the replicas stops when it leaves the SLO's worse ratio above this share of what it was: the
#: bound is out of reach (a TPOT below what one sequence alone achieves), not a matter of capacity.
SATURATED = 0.98


@dataclass(frozen=True)
class Candidate:
    draft: Draft  # a chain with its acceptance to the depth needed
    policy: Policy
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
    out = [Candidate(chain(s.drafts[0]), Policy.off(), "plain decoding")]
    seen = {tuple(Policy.off().k_table(limits.max_num_seqs).tolist())}

    def add(d: Draft, policy: Policy, origin: str) -> None:
        key = (d.label, tuple(policy.k_table(limits.max_num_seqs).tolist()))
        if policy.enabled and key not in seen:
            seen.add(key)
            out.append(Candidate(with_depth(chain(d), max(depth, policy.max_k)), policy, origin))

    for d in s.drafts:
        if not d.speculates:
            continue
        if analytic.speculates and analytic.draft_label == d.label:
            add(d, (analytic.chain_policy or analytic.policy).as_run(), "the analytic plan's policy")
        sched = analytic_schedule(setup.target, d, s.max_k, limits.max_num_seqs, ctx)
        add(d, sched, "analytic per-batch schedule")
        k_low = sched.k_for_batch(1)
        if k_low > 0:
            table = sched.k_table(limits.max_num_seqs)
            off = [b for b in range(1, limits.max_num_seqs + 1) if table[b] == 0]
            if off:
                add(d, Policy.static(k_low, off[0] - 1), f"static k={k_low}, off above the crossover")
            add(d, Policy.static(k_low), f"static k={k_low}")
    return out


def optimise_slo(s: Scenario, analytic: Plan, progress: Callable[[str], None] | None = None) -> Plan:
    """The analytic plan with its draft, policy and engine configs replaced by the SLO choice by simulation
    (`Plan.serving` records the search)."""
    assert s.serving is not None and s.serving.slo is not None
    setup = make_setup(s, policy=Policy.off(), analytic=lambda: analytic)
    rate = s.serving.target_rate_rps or setup.traffic.mean_rate_rps
    if not (rate > 0 and math.isfinite(rate)):
        raise SpecsimError(f"{s.path}: no target rate to size replicas for (serving.target_rate_rps)")
    req = requests_at(setup.traffic, rate, setup.seed)
    if req.n == 0:
        raise SpecsimError(f"{s.path}: the traffic generated no requests")
    search = _Search(setup, candidates(setup, analytic), req, s.serving.slo, progress or (lambda _m: None))
    best, baseline = search.best()
    chosen = search.cands[best.candidate]
    on = chosen.policy.enabled
    bands = chosen.policy.as_bands(setup.limits.max_num_seqs)
    decided = dataclasses.replace(
        analytic, method=chosen.draft.method if on else "none", draft_label=chosen.draft.label if on else
        analytic.draft_label, policy=bands, chain_policy=bands, dynamic_profile=None,
        serving=search.choice(best, baseline, rate),
        notes=analytic.notes + (() if best.meets else (
            f"no candidate meets the SLO even with {best.replicas} replicas: relax it, or shorten prompts/outputs",)))
    # the table's rows, the gain and the arrival figures follow the policy deployed (one configuration per batch)
    return under_policy(decided, chosen.draft, bands)


class _Search:
    """The replica search over the candidates (module docstring), every simulation kept as a Trial."""

    def __init__(self, setup: Setup, cands: list[Candidate], req: Requests, slo: SLO,
                 tick: Callable[[str], None]) -> None:
        self.setup, self.cands, self.req, self.slo, self.tick = setup, cands, req, slo, tick
        self.engines = [setup.engine(c.policy, c.draft) for c in cands]
        depth = max(1, setup.scenario.max_k, *(c.policy.max_k for c in cands))
        self.mixes = {c.draft.label: setup.mix(c.draft, depth)[0] for c in cands if c.policy.enabled}
        self.tables: dict[str, StepTable] = {}
        for c in cands:
            key = c.draft.label
            if key not in self.tables:
                mine = [c2.policy for c2 in cands if c2.draft.label == key or not c2.policy.enabled]
                tick(f"tabulating step costs of {key}")
                self.tables[key] = setup.table(mine, [req], c.draft)
        self.shares: dict[int, Requests] = {}
        self.results: dict[tuple[int, int], SimResult] = {}
        self.trials: list[Trial] = []

    def run(self, i: int, n: int) -> Trial:
        """Candidate i on n replicas: the seeded requests thinned to 1/n, simulated once."""
        if n not in self.shares:
            self.shares[n] = self.req if n == 1 else self.req.thin(1.0 / n, self.setup.seed)
        c = self.cands[i]
        self.tick(f"{c.label} {c.policy.label} on {n} replica{'s' if n > 1 else ''}")
        share = self.shares[n]
        if share.n == 0:
            tr = Trial(i, n, True, math.nan, 0.0)
        else:
            res = simulate(share, self.engines[i], self.tables[c.draft.label], self.mixes.get(c.draft.label),
                           self.setup.seed)
            self.results[(i, n)] = res
            tr = Trial(i, n, meets_slo(res, self.slo), *slo_percentiles(res, self.slo.percentile))
        self.trials.append(tr)
        return tr

    def search(self, i: int) -> Trial:
        """Candidate i's fewest replicas: doubling (stopped when doubling no longer helps: the SLO is out of
        reach of this configuration at any count), then bisection; its trial there."""
        def hopeless() -> bool:
            mine = [t for t in self.trials if t.candidate == i]
            return len(mine) > 1 and mine[-1].headroom(self.slo) > SATURATED * mine[-2].headroom(self.slo)

        n, _ = fewest_meeting(lambda m: self.run(i, m).meets, MAX_REPLICAS, hopeless)
        return _last(self.trials, i, n)

    def bisect(self, i: int, lo: int, hi: int) -> Trial:
        """Candidate i's fewest replicas between lo (fails, or 0) and hi (meets): its trial there."""
        return _last(self.trials, i, bisect_fewest(lambda m: self.run(i, m).meets, lo, hi))

    def best(self) -> tuple[Trial, Trial]:
        """(the chosen trial, plain decoding's)."""
        best = baseline = self.search(0)
        for i in range(1, len(self.cands)):
            if not best.meets:  # nothing meets the SLO yet: this candidate's own search
                tr = self.search(i)
                best = tr if _key(tr, self.slo) < _key(best, self.slo) else best
                continue
            n = best.replicas
            if n > 1 and self.run(i, n - 1).meets:  # fewer replicas: look further down
                best = self.bisect(i, 0, n - 1)
                continue
            at = self.run(i, n)  # as many replicas: the more headroom wins
            if _key(at, self.slo) < _key(best, self.slo):
                best = at
        return best, baseline

    def price(self, tr: Trial) -> float | None:
        usd = self.setup.scenario.gpu_hour_usd
        res = self.results.get((tr.candidate, tr.replicas))
        if usd is None or res is None:
            return None
        m = summarize(res, self.slo, None, bins=None)
        return cost_per_mtok_usd(tr.replicas * self.setup.gpus_per_replica, usd, m.output_tok_s * tr.replicas)

    def trial(self, tr: Trial) -> ServingTrial:
        c = self.cands[tr.candidate]
        return ServingTrial(c.label, c.policy.label, c.origin, tr.replicas, tr.meets, tr.ttft_s * 1e3,
                            tr.tpot_s * 1e3, tr.headroom(self.slo))

    def choice(self, best: Trial, baseline: Trial, rate: float) -> ServingChoice:
        """The search as the plan records it."""
        chosen, gpus, limits, slo = self.cands[best.candidate], self.setup.gpus_per_replica, self.setup.limits, self.slo
        base = ServingBaseline(**vars(self.trial(baseline)), gpus=baseline.replicas * gpus,
                               cost_per_mtok_usd=self.price(baseline))
        return ServingChoice(
            "simulation", SloBounds(slo.ttft_s * 1e3, slo.tpot_s * 1e3, slo.percentile), float(rate),
            int(self.req.n), self.setup.seed, chosen.label,
            chosen.draft.method if chosen.policy.enabled else "none", chosen.policy.label, chosen.origin,
            best.replicas, gpus, best.replicas * gpus, best.meets, best.ttft_s * 1e3, best.tpot_s * 1e3,
            self.price(best), limits.max_num_seqs, limits.max_num_batched_tokens,
            self.engines[best.candidate].kv_capacity_tokens, base, tuple(self.trial(t) for t in self.trials))


def _key(t: Trial, slo: SLO) -> tuple[int, int, float]:
    """Order of preference: meeting the SLO, then fewer replicas, then more headroom."""
    return (0, t.replicas, t.headroom(slo)) if t.meets else (1, 0, t.headroom(slo))


def _last(trials: list[Trial], i: int, n: int) -> Trial:
    return next(t for t in reversed(trials) if t.candidate == i and t.replicas == n)
