"""Closed-loop clients (a benchmark client's --max-concurrency N --request-rate inf) through the event loop:
never more than N requests sent and unfinished, each sent when another finishes, Little's law, the fast path
bit for bit, and at concurrency 1 the TPOT of the step's own time per token."""

from __future__ import annotations

import numpy as np
import pytest

from specsim.scenario.serving import EngineConfig
from specsim.scenario.traffic import (
    Fixed,
    Poisson,
    Saturated,
    Traffic,
    Uniform,
    generate_requests,
    range_ratio_lengths,
)
from specsim.scenario.workload import AcceptanceMix, WorkloadClass
from specsim.simulate.cost import AnalyticCost
from specsim.simulate.engine import SimResult, simulate
from specsim.simulate.metrics import summarize
from specsim.step.policy import Policy
from tests.simulate.test_fast_path import assert_identical

COST = AnalyticCost(step_s=0.008, per_token_s=2e-5, per_token_context_s=1e-8, prefill_fixed_s=0.004,
                    prefill_per_token_s=5e-5)
MIX = AcceptanceMix((WorkloadClass("chat", 0.6, (0.8, 0.7, 0.6)), WorkloadClass("code", 0.4, (0.9, 0.85, 0.8))))


def _closed(clients: int, n: int, ratio: float = 0.8) -> Traffic:
    return Traffic(Saturated(), range_ratio_lengths(512, ratio), range_ratio_lengths(256, ratio), num_requests=n,
                   concurrency=clients)


def _in_flight(res: SimResult, t: np.ndarray) -> np.ndarray:
    sent, done = res.requests.arrival_s, res.finish_s
    return ((sent[None, :] <= t[:, None]) & (done[None, :] > t[:, None])).sum(axis=1)


@pytest.mark.parametrize("clients", [1, 3, 16])
@pytest.mark.parametrize("policy", [Policy.off(), Policy.static(3)])
def test_clients_keep_exactly_n_requests_in_flight(clients: int, policy: Policy) -> None:
    req = generate_requests(_closed(clients, 12 * clients), seed=1)
    res = simulate(req, EngineConfig(256, 8192, 10**7, policy), COST, MIX, seed=1)
    sent, done = res.requests.arrival_s, res.finish_s
    assert (sent[:clients] == 0).all()  # the first N go at once
    # every later request is sent at the moment of the (j - N)-th finish (`--request-rate inf`)
    assert np.array_equal(sent[clients:], np.sort(done)[:len(sent) - clients])
    probe = np.linspace(0.0, float(sent.max()), 400)[1:-1]
    assert (_in_flight(res, probe) == clients).all()  # until the last send, all N clients are busy


def test_little_and_the_drain() -> None:
    """Whole run: time-average in system = throughput x mean latency (Little) to 1e-9; that average falls short of
    N only by the drain after the last send, so with many requests per client it is N within 1%."""
    clients = 8
    req = generate_requests(_closed(clients, 200 * clients), seed=0)
    m = summarize(simulate(req, EngineConfig(256, 8192, 10**7, Policy.static(3)), COST, MIX, seed=0), bins=None)
    assert m.requests_per_s * m.e2e_s.mean == pytest.approx(m.mean_in_system, rel=1e-9)
    assert m.mean_in_system == pytest.approx(clients, rel=0.01)
    assert m.mean_in_system < clients  # the drain is real: the last requests finish with fewer in flight


@pytest.mark.parametrize("clients", [1, 4, 24])
def test_fast_path_is_bit_identical_in_closed_loop(clients: int) -> None:
    req = generate_requests(_closed(clients, 10 * clients + 5), seed=2)
    eng = EngineConfig(16, 2048, 60_000, Policy.static(3))  # seats and KV small enough to queue and preempt
    assert_identical(simulate(req, eng, COST, MIX, seed=2), simulate(req, eng, COST, MIX, seed=2, fast=False))


def test_concurrency_one_tpot_is_the_step_time_per_token() -> None:
    """One client: nothing else runs, so each request's TPOT is its decode steps' time over its tokens; for
    plain decoding the mean step at the request's mean context (the cost is linear in context): hand-computed."""
    out, prompt = 300, 700
    req = generate_requests(Traffic(Saturated(), Fixed(prompt), Fixed(out), num_requests=5, concurrency=1), 0)
    m = summarize(simulate(req, EngineConfig(256, 8192, 10**7, Policy.off()), COST, None, seed=0), bins=None)
    # the first token comes from the prefill; the out - 1 decode steps read contexts prompt .. prompt + out - 2
    ctx = prompt + np.arange(0, out - 1)
    expected = float(np.mean(COST.step_s + COST.per_token_s + COST.per_token_context_s * ctx))
    assert m.tpot_s.mean == pytest.approx(expected, rel=1e-9)
    assert m.ttft_s.mean == pytest.approx(COST.prefill_fixed_s + COST.prefill_per_token_s * prompt, rel=1e-9)


def test_a_rate_with_a_concurrency_cap_waits_for_a_free_client() -> None:
    """--request-rate R --max-concurrency N: a request is sent at its arrival, or later when a client frees."""
    t = Traffic(Poisson(50.0), Fixed(256), Fixed(400), num_requests=300, concurrency=4)
    req = generate_requests(t, seed=3)
    res = simulate(req, EngineConfig(256, 8192, 10**7, Policy.off()), COST, None, seed=3)
    sent = res.requests.arrival_s
    assert (sent >= req.arrival_s).all() and (sent > req.arrival_s).any()
    assert _in_flight(res, np.linspace(0, float(sent.max()), 300)).max() <= 4


@pytest.mark.parametrize(("client", "low", "high"), [("sglang", 819, 1024), ("atom", 819, 1024),
                                                     ("vllm", 204, 1844)])
def test_range_ratio_as_each_client_draws_it(client: str, low: int, high: int) -> None:
    """SGLang and ATOM: randint(int(L r), L + 1); vLLM from 0.9: [floor(L (1 - r)), ceil(L (1 + r))] (r = 0.8)."""
    dist = range_ratio_lengths(1024, 0.8, client)
    assert isinstance(dist, Uniform) and (dist.low, dist.high) == (low, high)
    draws = dist.sample(20_000, np.random.default_rng(0))
    assert draws.min() == low and draws.max() == high
    assert draws.mean() == pytest.approx((low + high) / 2, rel=0.01)
    # ratio 0: vLLM's lengths are fixed; SGLang's and ATOM's run from 1 token to L (their own default ranges)
    assert range_ratio_lengths(1024, 0.0, client) == (Fixed(1024) if client == "vllm" else Uniform(1, 1024))
