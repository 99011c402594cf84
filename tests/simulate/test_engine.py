"""The event loop against independent routes: the step cost itself, queueing theory (Pollaczek-Khinchine,
Little's law) and hand-computed schedules (chunked prefill, preemption by recompute)."""

from __future__ import annotations

import numpy as np
import pytest

from specsim.errors import SpecsimError
from specsim.scenario.serving import EngineConfig
from specsim.scenario.traffic import Fixed, Lognormal, Poisson, Requests, Traffic, generate_requests
from specsim.scenario.workload import AcceptanceMix, WorkloadClass
from specsim.simulate.cost import AnalyticCost
from specsim.simulate.engine import simulate
from specsim.simulate.metrics import summarize
from specsim.step.policy import Policy

from .test_cost import RooflineLike


class NoPrefill(RooflineLike):
    """The roofline-like decode cost with free prefill (the constant-concurrency floor)."""

    def prefill_s(self, tokens: np.ndarray, mean_context: np.ndarray) -> np.ndarray:
        return np.zeros(np.broadcast(np.asarray(tokens), np.asarray(mean_context)).shape)


@pytest.mark.parametrize("k", [0, 4])
def test_constant_concurrency_steps_cost_decode_s(k: int) -> None:
    """Floor: N requests present at t=0, no prefill cost: every step lasts decode_s(N, ctx, k) (within 2%)."""
    n, prompt, output = 48, 3000, 401
    cost = NoPrefill()
    res = simulate(Requests.at_once(n, prompt, output), EngineConfig(64, 8192 * 32, 10**7, Policy.static(k)),
                   cost, AcceptanceMix.constant(1.0))
    st = res.steps
    full = st.decode_batch == n
    steps = np.flatnonzero(full)
    assert len(steps) == (output - 1) // (k + 1)  # acceptance 1: every step emits k + 1 tokens
    # KV after the prompt's prefill is the prompt; step j (0-based) has added j (k + 1) tokens per sequence.
    ctx = prompt + np.arange(len(steps)) * (k + 1.0)
    expected = cost.decode_s(np.full(len(steps), n), ctx, np.full(len(steps), k))
    rel = np.abs(st.duration_s[steps] / expected - 1)
    assert rel.max() < 0.02
    assert st.duration_s[0] == 0.0 and st.prefill_tokens[0] == n * prompt  # one free prefill pass


def test_mean_tokens_per_step_is_one_plus_expected_acceptance() -> None:
    alphas = (0.9, 0.8, 0.7, 0.6)
    mix = AcceptanceMix((WorkloadClass("c", 1, alphas),))
    res = simulate(Requests.at_once(64, 100, 4001), EngineConfig(64, 8192, 10**7, Policy.static(4)),
                   AnalyticCost(0.01), mix, seed=3)
    expected = 1 + np.cumprod(alphas).sum()  # E[1 + A] = 1 + sum_i P(A >= i)
    assert summarize(res, bins=None).tokens_per_decode_step == pytest.approx(expected, rel=0.01)
    # Every output token is emitted exactly once.
    assert res.steps.tokens.sum() == 64 * 4001


def test_md1_queueing_delay_matches_pollaczek_khinchine() -> None:
    """Floor: one sequence at a time, fixed output, constant step: an M/D/1 queue.
    Service D = 2 decode steps (the prefill is free); Wq = rho / (2 mu (1 - rho)) (Pollaczek-Khinchine)."""
    step, rho = 0.05, 0.7
    service = 2 * step
    lam = rho / service
    req = generate_requests(Traffic(Poisson(lam), Fixed(1), Fixed(3), num_requests=200_000), seed=7)
    res = simulate(req, EngineConfig(1, 64, 10**6), AnalyticCost(step_s=step), seed=7)
    m = summarize(res, bins=None)
    wq = rho / (2 * (1 / service) * (1 - rho))
    assert m.queue_s.mean == pytest.approx(wq, rel=0.05)
    assert np.allclose(m.ttft_s.mean, m.queue_s.mean)  # free prefill: the first token comes when served
    # Little's law: mean number in system = throughput x mean time in system.
    assert m.mean_in_system == pytest.approx(m.requests_per_s * m.e2e_s.mean, rel=0.02)
    assert m.mean_running == pytest.approx(rho, rel=0.02)  # utilisation law: busy fraction = rho


def test_mg1_queueing_delay_with_random_outputs() -> None:
    """M/G/1: outputs lognormal, service S = (output - 1) x step; Wq = lambda E[S^2] / (2 (1 - rho))."""
    step = 0.1
    req = generate_requests(Traffic(Poisson(1.0), Fixed(1), Lognormal(5, 0.6), num_requests=60_000), seed=0)
    s = (req.output_tokens - 1) * step
    lam = 1.0
    rho = lam * s.mean()  # about 0.5
    res = simulate(req, EngineConfig(1, 64, 10**6), AnalyticCost(step_s=step), seed=0)
    wq = lam * (s**2).mean() / (2 * (1 - rho))
    assert summarize(res, bins=None).queue_s.mean == pytest.approx(wq, rel=0.05)


def test_littles_law_in_a_busy_speculative_run_with_preemption() -> None:
    mix = AcceptanceMix((WorkloadClass("chat", 0.6, (0.8, 0.7, 0.6)), WorkloadClass("code", 0.4, (0.9, 0.9))))
    tr = Traffic(Poisson(20.0), Lognormal(600, 0.8, max_tokens=4000), Lognormal(150, 0.8, max_tokens=1500),
                 num_requests=6000)
    req = generate_requests(tr, 5)
    eng = EngineConfig(128, 2048, 120_000, Policy.static(3, disable_above_batch=96))
    res = simulate(req, eng, AnalyticCost(0.012, 3e-5, 3e-8, 0.004, 5e-5), mix, seed=5)
    m = summarize(res, bins=100)
    assert m.preemptions > 0 and m.completed == 6000
    assert m.mean_in_system == pytest.approx(m.requests_per_s * m.e2e_s.mean, rel=0.02)
    # The downsampled series integrates to the same means (equal-width bins).
    ts = m.timeseries
    assert ts is not None
    assert ts.running.mean() + ts.waiting.mean() == pytest.approx(m.mean_in_system, rel=1e-6)
    # Limits hold at every step.
    st = res.steps
    assert st.running.max() <= 128 and st.kv_tokens.max() <= 120_000
    assert (st.decode_batch * (st.k + 1) + st.prefill_tokens).max() <= 2048
    # k: 3, off above batch 96, and cut so that batch x (k + 1) fits the 2048-token budget.
    busy = st.decode_batch > 0
    expected_k = np.where(st.decode_batch > 96, 0, np.minimum(3, 2048 // np.maximum(st.decode_batch, 1) - 1))
    np.testing.assert_array_equal(st.k[busy], expected_k[busy])
    assert (st.decode_batch > 96).any() and (st.k == 3).any()
    assert st.tokens.sum() == req.output_tokens.sum()


def test_chunked_prefill_by_hand() -> None:
    # 1000 prompt tokens, budget 256: chunks 256, 256, 256, 232, each d + e x chunk.
    cost = AnalyticCost(step_s=0.02, prefill_fixed_s=0.01, prefill_per_token_s=1e-4)
    res = simulate(Requests.at_once(1, 1000, 3), EngineConfig(4, 256, 10**6), cost)
    st = res.steps
    assert st.prefill_tokens[:4].tolist() == [256, 256, 256, 232]
    ttft = 4 * 0.01 + 1000 * 1e-4
    assert res.first_token_s[0] == pytest.approx(ttft)
    assert res.finish_s[0] == pytest.approx(ttft + 2 * 0.02)


def test_mixed_step_costs_decode_plus_prefill() -> None:
    cost = AnalyticCost(step_s=0.02, per_token_s=1e-3, prefill_fixed_s=0.01, prefill_per_token_s=1e-4)
    req = Requests(np.array([0.0, 0.001]), np.array([10, 500]), np.array([50, 5]))
    res = simulate(req, EngineConfig(4, 4096, 10**6), cost)
    st = res.steps
    # Step 0: prefill of request 0 alone (0.01 + 10e-4). Step 1: request 0 decodes (batch 1) while request 1
    # (arrived during step 0) prefills 500 tokens: (0.02 + 1e-3) + (0.01 + 0.05).
    assert st.duration_s[0] == pytest.approx(0.011)
    assert st.decode_batch[1] == 1 and st.prefill_tokens[1] == 500
    assert st.duration_s[1] == pytest.approx(0.021 + 0.06)
    assert res.first_token_s[1] == pytest.approx(0.011 + 0.081)


def test_preemption_by_recompute_by_hand() -> None:
    """KV for 30 tokens, two requests of prompt 10 / output 10, k = 0. After the joint prefill (0.5 s)
    and five decode steps (1 s each) the cache is full (30); the newest request is preempted, the first
    finishes in 4 more steps (t = 9.5); the second re-prefills prompt + 6 generated tokens (0.5 s),
    emitting its 7th token at t = 10, then 3 decode steps: t = 13."""
    cost = AnalyticCost(step_s=1.0, prefill_fixed_s=0.5)
    res = simulate(Requests.at_once(2, 10, 10), EngineConfig(4, 64, 30), cost)
    assert res.preemptions.tolist() == [0, 1]
    np.testing.assert_allclose(res.first_token_s, [0.5, 0.5])
    np.testing.assert_allclose(res.finish_s, [9.5, 13.0])
    np.testing.assert_allclose(res.resume_gaps_s, [4.5])
    assert res.steps.prefill_tokens.tolist().count(16) == 1
    assert res.steps.tokens.sum() == 20


def test_requests_too_large_for_the_cache_are_rejected() -> None:
    req = Requests(np.array([0.0, 0.0]), np.array([10, 90]), np.array([5, 20]))
    res = simulate(req, EngineConfig(4, 64, 100), AnalyticCost(0.01))
    assert res.rejected.tolist() == [False, True]
    assert np.isnan(res.finish_s[1]) and res.finish_s[0] > 0
    assert summarize(res, bins=None).rejected == 1


def test_speculation_needs_an_acceptance_mix() -> None:
    with pytest.raises(SpecsimError, match="acceptance"):
        simulate(Requests.at_once(1, 1, 2), EngineConfig(4, 64, 100, Policy.static(2)), AnalyticCost(0.01))


def test_deterministic_for_a_seed() -> None:
    tr = Traffic(Poisson(20.0), Lognormal(300, 0.7), Lognormal(80, 0.7), num_requests=800)
    mix = AcceptanceMix.constant(0.7)
    eng = EngineConfig(32, 1024, 40_000, Policy.static(3))
    cost = AnalyticCost(0.01, 1e-4, 1e-8, 0.003, 2e-5)
    req = generate_requests(tr, 1)
    a, b = simulate(req, eng, cost, mix, seed=9), simulate(req, eng, cost, mix, seed=9)
    c = simulate(req, eng, cost, mix, seed=10)
    np.testing.assert_array_equal(a.finish_s, b.finish_s)
    np.testing.assert_array_equal(a.steps.duration_s, b.steps.duration_s)
    assert not np.array_equal(a.finish_s, c.finish_s)
