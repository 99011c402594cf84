"""Questions answered by running the engine more than once: speculation on against off on identical
traffic, and the replicas a target rate needs under an SLO.

Replicas: a load balancer that sends each request to one of n replicas at random thins the arrivals to
rate / n (a thinned Poisson process is Poisson; Ross, Stochastic Processes, sec. 2.3). The smallest n
whose one-replica share meets the SLO percentiles is found by doubling then bisection, re-simulating the
thinned requests each time (the thinning uniforms are fixed, so larger n keeps nested subsets).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from specsim.errors import SpecsimError
from specsim.scenario.serving import SLO, EngineConfig, Pricing, cost_per_mtok_usd
from specsim.scenario.traffic import Requests
from specsim.scenario.workload import AcceptanceMix
from specsim.simulate.cost import StepCost, StepTable, rows_of
from specsim.simulate.engine import SimResult, simulate
from specsim.simulate.metrics import ServingMetrics, meets_slo, slo_percentiles, summarize
from specsim.step.policy import Policy


def table_for(cost: StepCost, engines: list[EngineConfig], requests: list[Requests]) -> StepTable:
    """One StepTable holding every engine's (k, batch) rows and every request's context."""
    if isinstance(cost, StepTable):
        return cost
    rows = rows_of([e.k_by_batch() for e in engines])
    step = max(e.max_verify_tokens for e in engines)  # one step's tokens past the longest request: k + 1 (a chain)
    longest = max([float(np.max(r.prompt_tokens + r.output_tokens)) for r in requests if r.n] or [1.0])
    return StepTable.build(cost, max(e.max_num_seqs for e in engines), rows, longest + step,
                           max(e.max_num_batched_tokens for e in engines), rows=rows)


@dataclass(frozen=True)
class Ratios:
    """Speculation on against off (None where either side is missing, NaN or the divisor is zero)."""

    tpot_p50_speedup: float | None  # off / on
    tpot_p99_speedup: float | None  # off / on
    ttft_p99_ratio: float | None  # on / off
    e2e_mean_speedup: float | None  # off / on
    goodput_ratio: float | None  # on / off


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or not b or math.isnan(a) or math.isnan(b) else a / b


@dataclass(frozen=True, eq=False)
class Comparison:
    """Speculation off and on over the same seeded requests."""

    off: ServingMetrics
    on: ServingMetrics

    @property
    def ratios(self) -> Ratios:
        off, on = self.off, self.on
        return Ratios(_ratio(off.tpot_s.p50, on.tpot_s.p50), _ratio(off.tpot_s.p99, on.tpot_s.p99),
                      _ratio(on.ttft_s.p99, off.ttft_s.p99), _ratio(off.e2e_s.mean, on.e2e_s.mean),
                      _ratio(on.goodput_rps, off.goodput_rps))


def compare_speculation(requests: Requests, engine: EngineConfig, cost: StepCost, acceptance: AcceptanceMix,
                        policy: Policy, seed: int = 0, slo: SLO | None = None, pricing: Pricing | None = None,
                        bins: int | None = 200) -> Comparison:
    """Simulate `requests` with speculation off and with `policy` (same requests, classes and seed)."""
    off_engine, on_engine = engine.with_policy(Policy.off()), engine.with_policy(policy)
    table = table_for(cost, [off_engine, on_engine], [requests])
    off = simulate(requests, off_engine, table, acceptance, seed)
    on = simulate(requests, on_engine, table, acceptance, seed)
    return Comparison(summarize(off, slo, pricing, bins), summarize(on, slo, pricing, bins))


@dataclass(frozen=True, order=True)
class ReplicaTrial:
    """One replica count tried: whether one replica's share met the SLO, and its TTFT and TPOT at the SLO's
    percentile."""

    replicas: int
    meets: bool
    ttft_s: float
    tpot_s: float


@dataclass(frozen=True, eq=False)
class ReplicaPlan:
    """Replicas for a target rate, and the one-replica metrics at that count."""

    target_rate_rps: float
    replicas: int
    meets_slo: bool  # False: even max_replicas missed the SLO
    gpus: int | None
    cost_per_mtok_usd: float | None
    tried: tuple[ReplicaTrial, ...]  # by replica count
    per_replica: ServingMetrics


def fewest_meeting(meets: Callable[[int], bool], max_n: int, hopeless: Callable[[], bool] = lambda: False
                   ) -> tuple[int, bool]:
    """The fewest n in 1..max_n with meets(n), meets monotone in n: doubling from 1, then bisection; (n, found).
    `hopeless()`, asked after each failed doubling below max_n, stops early: the bound is out of reach. Without
    a passing n: (the last n tried, False)."""
    lo, hi = 0, 1  # lo fails (0 = none tried), hi to test
    while not meets(hi):
        if hi >= max_n or hopeless():
            return hi, False
        lo, hi = hi, min(2 * hi, max_n)
    return bisect_fewest(meets, lo, hi), True


def bisect_fewest(meets: Callable[[int], bool], lo: int, hi: int) -> int:
    """The fewest n in (lo, hi] with meets(n), given that lo fails (or is 0) and hi meets."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if meets(mid):
            hi = mid
        else:
            lo = mid
    return hi


def replicas_needed(requests: Requests, engine: EngineConfig, cost: StepCost, slo: SLO,
                    acceptance: AcceptanceMix | None = None, seed: int = 0, pricing: Pricing | None = None,
                    max_replicas: int = 4096) -> ReplicaPlan:
    """Smallest n such that one replica given 1/n of `requests` (random thinning) meets `slo`."""
    if requests.n == 0:
        raise SpecsimError("replicas: no requests to plan for")
    table = table_for(cost, [engine], [requests])
    runs: dict[int, SimResult] = {}
    tried: list[ReplicaTrial] = []

    def ok(n: int) -> bool:
        share = requests if n == 1 else requests.thin(1.0 / n, seed)
        res = simulate(share, engine, table, acceptance, seed)
        runs[n] = res
        good = meets_slo(res, slo)
        tried.append(ReplicaTrial(n, good, *slo_percentiles(res, slo.percentile)))
        return good

    hi, found = fewest_meeting(ok, max_replicas)
    per = summarize(runs[hi], slo, pricing, bins=None)
    gpus = hi * pricing.gpus_per_replica if pricing else None
    price = None
    if pricing is not None:
        price = cost_per_mtok_usd(hi * pricing.gpus_per_replica, pricing.gpu_hour_usd, per.output_tok_s * hi)
    return ReplicaPlan(requests.mean_rate_rps, hi, found, gpus, price, tuple(sorted(tried)), per)
