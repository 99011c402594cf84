"""Speculation on/off side by side and replicas for a target rate."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specsim.scenario.serving import SLO, EngineConfig, Pricing
from specsim.scenario.traffic import Fixed, Poisson, Traffic, generate_requests
from specsim.scenario.workload import AcceptanceMix
from specsim.simulate.capacity import compare_speculation, replicas_needed
from specsim.simulate.cost import AnalyticCost
from specsim.simulate.engine import simulate
from specsim.simulate.metrics import meets_slo
from specsim.step.policy import Policy


def test_on_off_tpot_ratio_is_k_plus_one_with_free_drafts_and_full_acceptance() -> None:
    # A step costs 20 ms whatever the batch and k; with every draft accepted a step emits k + 1 = 4 tokens,
    # and 33-token outputs need 32 steps off, 8 on: TPOT off = 20 ms, on = 5 ms.
    req = generate_requests(Traffic(Poisson(5.0), Fixed(50), Fixed(33), num_requests=400), seed=1)
    cmp = compare_speculation(req, EngineConfig(64, 4096, 10**6), AnalyticCost(step_s=0.02),
                              AcceptanceMix.constant(1.0), Policy.static(3), seed=1)
    assert cmp.off.tpot_s.p50 == pytest.approx(0.02) and cmp.on.tpot_s.p99 == pytest.approx(0.005)
    assert cmp.ratios.tpot_p50_speedup == pytest.approx(4.0)
    assert cmp.off.requests == cmp.on.requests == 400
    assert cmp.off.policy == "off" and cmp.on.policy == "k=3"


def test_replicas_for_an_md1_service() -> None:
    # One sequence at a time, service D = 2 x 50 ms; 25 requests/s need n >= 25 x 0.1 = 2.5 replicas to be
    # stable at all (utilisation law); a TTFT bound of 10 D at p99 needs some headroom beyond that.
    step, rate = 0.05, 25.0
    req = generate_requests(Traffic(Poisson(rate), Fixed(1), Fixed(3), num_requests=30_000), seed=3)
    eng = EngineConfig(1, 64, 10**6)
    slo = SLO(ttft_s=1.0, tpot_s=0.06, percentile=99)
    plan = replicas_needed(req, eng, AnalyticCost(step_s=step), slo, seed=3, pricing=Pricing(2.0, 4))
    assert plan.meets_slo
    assert math.ceil(rate * 2 * step) <= plan.replicas <= 2 * math.ceil(rate * 2 * step)
    tried = {t.replicas: t.meets for t in plan.tried}
    assert tried[plan.replicas] and not tried[plan.replicas - 1]  # the smallest that meets it
    assert plan.per_replica.requests_per_s == pytest.approx(rate / plan.replicas, rel=0.05)
    assert plan.gpus == 4 * plan.replicas
    # Re-simulating the chosen share independently agrees.
    share = req.thin(1 / plan.replicas, seed=3)
    assert meets_slo(simulate(share, eng, AnalyticCost(step_s=step), seed=3), slo)


def test_replicas_stop_at_the_cap() -> None:
    req = generate_requests(Traffic(Poisson(50.0), Fixed(1), Fixed(3), num_requests=2000), seed=0)
    plan = replicas_needed(req, EngineConfig(1, 64, 10**6), AnalyticCost(step_s=0.05), SLO(1.0, 0.01),
                           max_replicas=4)
    assert not plan.meets_slo and plan.replicas == 4  # TPOT 50 ms never meets 10 ms
    assert np.isfinite(plan.per_replica.tpot_s.p50)


def test_fewest_meeting_matches_a_linear_scan() -> None:
    """Doubling then bisection finds the same n as trying every count in turn, in few calls; without a passing
    count it stops at max_n, or early when hopeless."""
    from specsim.simulate.capacity import fewest_meeting

    for need in (1, 2, 3, 7, 8, 9, 100, 255, 256):
        calls: list[int] = []

        def meets(n: int, need: int = need, calls: list[int] = calls) -> bool:
            calls.append(n)
            return n >= need

        n, found = fewest_meeting(meets, 256)
        assert found and n == next(m for m in range(1, 257) if m >= need)
        assert len(calls) <= 2 * 8 + 1
    assert fewest_meeting(lambda n: False, 100) == (100, False)
    tried: list[int] = []
    assert fewest_meeting(lambda n: bool(tried.append(n)), 1024, lambda: len(tried) >= 3) == (4, False)
