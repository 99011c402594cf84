"""Questions answered by running the engine more than once: speculation on against off on identical
traffic, and the replicas a target rate needs under an SLO.

Replicas: a load balancer that sends each request to one of n replicas at random thins the arrivals to
rate / n (a thinned Poisson process is Poisson; Ross, Stochastic Processes, sec. 2.3). The smallest n
whose one-replica share meets the SLO percentiles is found by doubling then bisection, re-simulating the
thinned requests each time (the thinning uniforms are fixed, so larger n keeps nested subsets).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from specsim.errors import SpecsimError
from specsim.scenario.serving import SLO, EngineConfig, Pricing, cost_per_mtok_usd
from specsim.scenario.traffic import Requests
from specsim.scenario.workload import AcceptanceMix
from specsim.simulate.cost import StepCost, StepTable, rows_of
from specsim.simulate.engine import SimResult, simulate
from specsim.simulate.metrics import ServingMetrics, meets_slo, slo_percentiles, summarize
from specsim.step.policy import SpecPolicy


def table_for(cost: StepCost, engines: list[EngineConfig], requests: list[Requests]) -> StepTable:
    """One StepTable holding every engine's (k, batch) rows and every request's context."""
    if isinstance(cost, StepTable):
        return cost
    rows = rows_of([e.k_by_batch() for e in engines])
    kmax = max(e.policy.max_k for e in engines)
    longest = max([float((r.prompt_tokens + r.output_tokens).max()) for r in requests if r.n] or [1.0])
    return StepTable.build(cost, max(e.max_num_seqs for e in engines), rows, longest + kmax + 1,
                           max(e.max_num_batched_tokens for e in engines), rows=rows)


@dataclass(frozen=True, eq=False)
class Comparison:
    """Speculation off and on over the same seeded requests."""

    off: ServingMetrics
    on: ServingMetrics

    def to_dict(self) -> dict[str, Any]:
        def ratio(a: float | None, b: float | None) -> float | None:
            return None if a is None or b is None or not b or math.isnan(a) or math.isnan(b) else a / b

        return {
            "off": self.off.to_dict(), "on": self.on.to_dict(),
            "tpot_p50_speedup": ratio(self.off.tpot_s.p50, self.on.tpot_s.p50),
            "tpot_p99_speedup": ratio(self.off.tpot_s.p99, self.on.tpot_s.p99),
            "ttft_p99_ratio": ratio(self.on.ttft_s.p99, self.off.ttft_s.p99),
            "e2e_mean_speedup": ratio(self.off.e2e_s.mean, self.on.e2e_s.mean),
            "goodput_ratio": ratio(self.on.goodput_rps, self.off.goodput_rps),
        }


def compare_speculation(requests: Requests, engine: EngineConfig, cost: StepCost, acceptance: AcceptanceMix,
                        policy: SpecPolicy, seed: int = 0, slo: SLO | None = None, pricing: Pricing | None = None,
                        bins: int | None = 200) -> Comparison:
    """Simulate `requests` with speculation off and with `policy` (same requests, classes and seed)."""
    off_engine, on_engine = engine.with_policy(SpecPolicy.off()), engine.with_policy(policy)
    table = table_for(cost, [off_engine, on_engine], [requests])
    off = simulate(requests, off_engine, table, acceptance, seed)
    on = simulate(requests, on_engine, table, acceptance, seed)
    return Comparison(summarize(off, slo, pricing, bins), summarize(on, slo, pricing, bins))


@dataclass(frozen=True, eq=False)
class ReplicaPlan:
    """Replicas for a target rate, and the one-replica metrics at that count."""

    target_rate_rps: float
    replicas: int
    meets_slo: bool  # False: even max_replicas missed the SLO
    per_replica: ServingMetrics
    gpus: int | None
    cost_per_mtok_usd: float | None
    tried: tuple[tuple[int, bool, float, float], ...]  # (replicas, meets, ttft at percentile, tpot at percentile)

    def to_dict(self) -> dict[str, Any]:
        return {"target_rate_rps": self.target_rate_rps, "replicas": self.replicas, "meets_slo": self.meets_slo,
                "gpus": self.gpus, "cost_per_mtok_usd": self.cost_per_mtok_usd,
                "tried": [{"replicas": n, "meets": ok, "ttft_s": a, "tpot_s": b} for n, ok, a, b in self.tried],
                "per_replica": self.per_replica.to_dict()}


def replicas_needed(requests: Requests, engine: EngineConfig, cost: StepCost, slo: SLO,
                    acceptance: AcceptanceMix | None = None, seed: int = 0, pricing: Pricing | None = None,
                    max_replicas: int = 4096) -> ReplicaPlan:
    """Smallest n such that one replica given 1/n of `requests` (random thinning) meets `slo`."""
    if requests.n == 0:
        raise SpecsimError("replicas: no requests to plan for")
    table = table_for(cost, [engine], [requests])
    runs: dict[int, SimResult] = {}
    tried: list[tuple[int, bool, float, float]] = []

    def ok(n: int) -> bool:
        share = requests if n == 1 else requests.thin(1.0 / n, seed)
        res = simulate(share, engine, table, acceptance, seed)
        runs[n] = res
        good = meets_slo(res, slo)
        tried.append((n, good, *slo_percentiles(res, slo.percentile)))
        return good

    lo, hi = 0, 1  # lo fails (0 = none tried), hi to test
    while not ok(hi):
        lo = hi
        if hi >= max_replicas:
            break
        hi = min(2 * hi, max_replicas)
    found = tried[-1][1]
    while found and hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    per = summarize(runs[hi], slo, pricing, bins=None)
    gpus = hi * pricing.gpus_per_replica if pricing else None
    price = None
    if pricing is not None:
        price = cost_per_mtok_usd(hi * pricing.gpus_per_replica, pricing.gpu_hour_usd, per.output_tok_s * hi)
    return ReplicaPlan(requests.mean_rate_rps, hi, found, per, gpus, price, tuple(sorted(tried)))
