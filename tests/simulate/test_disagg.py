"""Prefill and decode pools (simulate/disagg.py) against hand calculations on a deterministic trace: TTFT =
queueing + prefill + KV transfer, the decode pool's steps, and Little's law per pool."""

from __future__ import annotations

import numpy as np
import pytest

from specsim.errors import SpecsimError
from specsim.scenario.serving import EngineConfig
from specsim.scenario.traffic import Constant, Fixed, Requests, Traffic, generate_requests
from specsim.scenario.workload import AcceptanceMix
from specsim.simulate.cost import AnalyticCost
from specsim.simulate.disagg import Pools, simulate_pools
from specsim.simulate.metrics import summarize
from specsim.step.policy import Policy

PREFILL = AnalyticCost(step_s=0.01, prefill_fixed_s=0.02, prefill_per_token_s=1e-5)  # 1000 tokens: 30 ms
DECODE = AnalyticCost(step_s=0.01, prefill_fixed_s=0.0, prefill_per_token_s=0.0)


def _pools(x: int, y: int, k: int = 0) -> Pools:
    return Pools(x, y, EngineConfig(8, 8192, 10**6, Policy.static(0)), EngineConfig(8, 8192, 10**6, Policy.static(k)),
                 transfer_s_per_token=2e-6, transfer_latency_s=0.001)


def test_ttft_is_queueing_plus_prefill_plus_transfer_by_hand() -> None:
    """Floor: three 1000-token prompts at t = 0, 0.01, 0.02 s on one prefill replica (one prompt a pass: a pass is
    30 ms, the next waits for the replica): prefill ends at 0.03, 0.06, 0.09 s; the KV (1000 tokens x 2 us + 1 ms)
    lands 3 ms later. TTFT = end - arrival + 3 ms, within 1%."""
    req = Requests(np.array([0.0, 0.01, 0.02]), np.full(3, 1000), np.full(3, 5))
    pools = Pools(1, 1, EngineConfig(8, 1000, 10**6, Policy.static(0)), EngineConfig(8, 8192, 10**6, Policy.off()),
                  2e-6, 0.001)
    res = simulate_pools(req, pools, PREFILL, DECODE, None)
    hand = np.array([0.03, 0.06, 0.09]) - req.arrival_s + 0.003
    np.testing.assert_allclose(res.ttft_s, hand, rtol=0.01)
    np.testing.assert_allclose(res.transfer_s, 0.003)


def test_decode_pool_emits_the_rest_after_the_landing() -> None:
    """One request alone: the decode pool runs the first token's forward (a one-token prefill of zero cost here)
    then 3 decode steps of 10 ms for its 5-token output (token 1 came from the prefill pool): finish = landing +
    one 1-token step (10 ms: the decode pass runs with it) + ... by hand: 4 tokens after the first, 1 a step."""
    req = Requests(np.array([0.0]), np.array([1000]), np.array([5]))
    res = simulate_pools(req, _pools(1, 1), PREFILL, DECODE, None)
    landed = 0.03 + 0.003
    # step 1: the one-token prefill emits token 2 (no decodes yet: 0 s); then tokens 3, 4, 5 one 10 ms step each
    assert res.finish_s[0] == pytest.approx(landed + 3 * 0.01, rel=1e-6)
    assert res.tpot_s[0] == pytest.approx(3 * 0.01 / 4, rel=1e-6)


def test_speculation_runs_on_the_decode_pool_only() -> None:
    req = generate_requests(Traffic(Constant(20.0), Fixed(2000), Fixed(200), 60), 0)
    off = simulate_pools(req, _pools(1, 1, 0), PREFILL, DECODE, None)
    on = simulate_pools(req, _pools(1, 1, 3), PREFILL, DECODE, AcceptanceMix.constant(0.8))
    np.testing.assert_array_equal(off.prefill_done_s, on.prefill_done_s)  # the prefill pool is the same
    assert np.nanmean(on.tpot_s) < 0.6 * np.nanmean(off.tpot_s)
    assert all(r.engine.policy.max_k == 0 for r in on.prefill_runs)


def test_littles_law_per_pool() -> None:
    """Floor: in each pool's replicas, the time-average number in the system equals the arrival rate x the mean
    time in the system (Little's law), within 1%, from the step log and the per-request times independently."""
    req = generate_requests(Traffic(Constant(8.0), Fixed(1500), Fixed(150), 400), 1)
    res = simulate_pools(req, _pools(2, 2, 2), PREFILL, AnalyticCost(step_s=0.004, per_token_context_s=1e-8),
                         AcceptanceMix.constant(0.7))
    for run in (*res.prefill_runs, *res.decode_runs):
        m = summarize(run, bins=None)
        sojourn = run.finish_s - run.requests.arrival_s
        lam = run.requests.n / m.window_s
        assert m.mean_in_system == pytest.approx(lam * float(np.mean(sojourn)), rel=0.01)


def test_closed_loop_is_refused() -> None:
    req = Requests(np.zeros(4), np.full(4, 100), np.full(4, 10), 2)
    with pytest.raises(SpecsimError, match="open-loop"):
        simulate_pools(req, _pools(1, 1), PREFILL, DECODE, None)
