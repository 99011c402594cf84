"""The event loop's steady-stretch fast path against stepping one iteration at a time (``fast=False``): the same
results, bit for bit, on randomized small traffic with arrivals during stretches, finishes, admissions blocked
by seats, budget and KV, preemption by recompute, rejected requests and the draw buffer's refills."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from specsim.scenario.serving import EngineConfig
from specsim.scenario.traffic import Gamma, Lognormal, Poisson, Requests, Traffic, generate_requests
from specsim.scenario.workload import AcceptanceMix, WorkloadClass
from specsim.simulate import engine as engine_mod
from specsim.simulate.cost import AnalyticCost
from specsim.simulate.engine import SimResult, simulate
from specsim.step.policy import Policy

MIX = AcceptanceMix((WorkloadClass("chat", 0.6, (0.8, 0.7, 0.6, 0.5, 0.4)),
                     WorkloadClass("code", 0.4, (0.95, 0.9, 0.85, 0.8, 0.75))))
COST = AnalyticCost(0.012, 3e-5, 3e-8, 0.004, 5e-5)

STEP_FIELDS = ("start_s", "duration_s", "decode_batch", "running", "waiting", "k", "prefill_tokens", "tokens",
               "kv_tokens", "arrival_area_s", "emitted")
RESULT_FIELDS = ("workload", "scheduled_s", "first_token_s", "finish_s", "preemptions", "rejected", "resume_gaps_s")


def assert_identical(a: SimResult, b: SimResult) -> None:
    for name in STEP_FIELDS:
        x, y = getattr(a.steps, name), getattr(b.steps, name)
        assert x.dtype == y.dtype and x.shape == y.shape, name
        assert np.array_equal(x, y, equal_nan=True), name
    for name in RESULT_FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True), name


def counting(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Count the fast path's stretches and the steps they cover."""
    seen = {"stretches": 0, "steps": 0}
    original = engine_mod._stretch

    def wrapped(lim: int, *args: Any) -> Any:
        log = args[-1].log
        before = len(log)
        out = original(lim, *args)
        seen["stretches"] += 1
        seen["steps"] += len(log) - before
        return out

    monkeypatch.setattr(engine_mod, "_stretch", wrapped)
    return seen


CASES = [
    # (traffic, engine): light load (stretches end at arrivals), heavy load (a queue blocked by seats or budget),
    # a KV cache small enough to preempt and to reject the longest requests
    (Traffic(Poisson(2.0), Lognormal(300, 0.8, max_tokens=3000), Lognormal(120, 0.8, max_tokens=1200), 150),
     EngineConfig(64, 4096, 10**6, Policy.static(3))),
    (Traffic(Gamma(30.0, 2.0), Lognormal(400, 0.8, max_tokens=3000), Lognormal(150, 0.8, max_tokens=1500), 300),
     EngineConfig(16, 256, 10**6, Policy.static(4, disable_above_batch=12))),
    (Traffic(Poisson(25.0), Lognormal(600, 0.8, max_tokens=4000), Lognormal(150, 0.8, max_tokens=1500), 400),
     EngineConfig(128, 2048, 30_000, Policy.static(3, disable_above_batch=96))),
    (Traffic(Poisson(8.0), Lognormal(200, 0.6, max_tokens=2000), Lognormal(300, 0.6, max_tokens=2000), 200),
     EngineConfig(32, 1024, 20_000, Policy.off())),
    (Traffic(Poisson(40.0), Lognormal(300, 0.8, max_tokens=6000), Lognormal(100, 0.8, max_tokens=800), 300),
     EngineConfig(64, 1024, 2_500, Policy.static(5))),
]


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fast_path_matches_step_by_step(case: int, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    traffic, eng = CASES[case]
    req = generate_requests(traffic, seed)
    slow = simulate(req, eng, COST, MIX, seed=seed, fast=False)
    seen = counting(monkeypatch)
    fast = simulate(req, eng, COST, MIX, seed=seed)
    assert seen["stretches"] > 0 and seen["steps"] > seen["stretches"]  # the fast path ran, several steps at once
    assert_identical(fast, slow)


def test_cases_cover_preemption_rejection_and_blocked_queues() -> None:
    """The randomized cases above reach what a stretch must stop at or carry on through."""
    results = [simulate(generate_requests(t, 0), e, COST, MIX, seed=0, fast=False) for t, e in CASES]
    assert any(int(r.preemptions.sum()) > 0 for r in results)
    assert any(bool(r.rejected.any()) for r in results)
    assert any(bool(((r.steps.waiting > 0) & (r.steps.prefill_tokens == 0)).any()) for r in results)
    assert any(bool((r.steps.arrival_area_s > 0).any()) for r in results)


@pytest.mark.parametrize("stretch_max", [3, 5, 17])
def test_short_stretch_limits_and_buffer_refills(stretch_max: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stretches cut by STRETCH_MAX, and runs long enough to refill the uniform draws' buffer several times."""
    monkeypatch.setattr(engine_mod, "STRETCH_MAX", stretch_max)
    req = Requests.at_once(200, 50, 4000)
    eng = EngineConfig(200, 4096, 10**7, Policy.static(4))
    slow = simulate(req, eng, COST, MIX, seed=3, fast=False)
    assert int(slow.steps.decode_batch.sum()) > 3 * (1 << 16)  # draws: the buffer holds 65,536
    fast = simulate(req, eng, COST, MIX, seed=3)
    assert_identical(fast, slow)


def test_plain_decoding_finishes_inside_a_stretch() -> None:
    """Without speculation every decode emits one token: requests of equal length finish in the same stretch step."""
    req = Requests(np.sort(np.random.default_rng(4).uniform(0.0, 2.0, 40)), np.full(40, 100, dtype=np.int64),
                   np.random.default_rng(5).integers(1, 60, 40))
    eng = EngineConfig(8, 512, 10**6)
    assert_identical(simulate(req, eng, COST, seed=0), simulate(req, eng, COST, seed=0, fast=False))
