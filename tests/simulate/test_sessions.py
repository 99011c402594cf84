"""Cached prefixes, multi-turn sessions and the host KV tier (simulate/sessions.py) against independent routes:
`evaluate`'s step time for a fully cached context, hand counts of cache hits at block granularity, hand-computed
send times, LRU eviction and reload seconds worked by hand, and the fast path stepping identically."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from specsim.scenario.serving import EngineConfig
from specsim.scenario.traffic import Fixed, Requests, SessionShape, Traffic, generate_requests
from specsim.scenario.workload import AcceptanceMix
from specsim.simulate.engine import simulate
from specsim.simulate.metrics import summarize
from specsim.simulate.sessions import PrefixCache
from specsim.step.policy import Policy
from tests.corpus.harness import invoke

from .test_cost import RooflineLike

COST = RooflineLike()


def _sessions(n: int, turns: int, first: int, new: int, out: int, think: float, gap: float = 0.5) -> Requests:
    """n sessions of `turns` turns: turn i's prompt is the context so far plus `new` tokens (by hand)."""
    prompts = [first + i * (out + new) for i in range(turns)]
    return Requests(np.repeat(np.arange(n) * gap, turns), np.tile(prompts, n).astype(np.int64),
                    np.full(n * turns, out, dtype=np.int64), None, None,
                    np.repeat(np.arange(n), turns).astype(np.int64), np.full(n * turns, think))


def test_cached_context_decodes_at_evaluates_step_time() -> None:
    """Floor: a request whose whole 32k context is cached prefills one block (vLLM recomputes the last) and then
    decodes at `evaluate`'s step time for that context within 1%, with speculation off and on."""
    common = ["-H", "h100-sxm", "-m", "llama-3.1-8b", "-d", "eagle3", "--input-len", "32768", "--output-len",
              "64", "--concurrency", "1", "--requests", "3", "--cached-fraction", "1", "-f", "json"]
    ev = invoke("evaluate", "-H", "h100-sxm", "-m", "llama-3.1-8b", "-d", "eagle3", "-k", "3", "-b", "1",
                "--context", "32800", "-f", "json")
    assert ev.code == 0, ev.err
    step = json.loads(ev.out)
    off = invoke("simulate", *common, "--policy", "off")
    assert off.code == 0, off.err
    row = json.loads(off.out)["rows"][0]
    # TPOT of a lone request = its decode step (context 32768..32832, the evaluate point at the mean)
    assert row["tpot_mean_ms"] == pytest.approx(step["baseline_step_ms"], rel=0.01)
    # the first token after one 16-token block's prefill: far below a 32k prefill, about one step
    assert row["ttft_mean_ms"] < 2 * step["baseline_step_ms"]
    assert row["prefix_hit_share"] == pytest.approx((32768 - 16) / 32768)
    on = invoke("simulate", *common, "--policy", "k=3")
    assert on.code == 0, on.err
    spec = json.loads(on.out)["rows"][1]
    # speculation on: the step time is TPOT x tokens per step (acceptance length)
    step_ms = spec["tpot_mean_ms"] * spec["acceptance_length"]
    assert step_ms == pytest.approx(step["step_ms"], rel=0.03)


def test_cached_prefix_step_log_against_the_decode_cost() -> None:
    """The engine's own steps: the prefill is one block (16 tokens) at 32k context, then every step costs
    decode_s(1, context) exactly as the step cost prices it (fast and step-by-step paths alike)."""
    req = Requests(np.zeros(1), np.array([32768]), np.array([50]), None, np.array([32768]))
    for fast in (True, False):
        res = simulate(req, EngineConfig(8, 8192, 10**6, Policy.static(0)), COST, None, fast=fast)
        st = res.steps
        assert st.prefill_tokens[0] == 16 and res.hit_tokens is not None and res.hit_tokens[0] == 32752
        ctx = 32768 + np.arange(st.n - 1)
        expected = COST.decode_s(np.ones(st.n - 1), ctx.astype(float), np.zeros(st.n - 1))
        np.testing.assert_allclose(st.duration_s[1:], expected, rtol=1e-3)


def test_session_hits_equal_a_hand_count_at_block_granularity() -> None:
    """Floor: each later turn finds its session's previous context (prompt + output) cached in whole 16-token
    blocks; the first turn finds nothing. Hand count: contexts 600, 800, 1000 -> 592, 800, 992 tokens."""
    req = _sessions(3, 4, 500, 100, 100, 1.0)
    res = simulate(req, EngineConfig(8, 8192, 10**6, Policy.static(2)), COST, AcceptanceMix.constant(0.7))
    assert res.hit_tokens is not None
    np.testing.assert_array_equal(res.hit_tokens.reshape(3, 4), [[0, 592, 800, 992]] * 3)
    # a turn is sent its think time after the previous turn finished
    send = res.requests.arrival_s.reshape(3, 4)
    fin = res.finish_s.reshape(3, 4)
    np.testing.assert_allclose(send[:, 1:], fin[:, :-1] + 1.0)
    m = summarize(res, bins=None)
    hits = 3 * (592 + 800 + 992)
    assert m.prefix_hit_share == pytest.approx(hits / req.prompt_tokens.sum())


def test_block_size_and_eagle_drop_change_the_hit() -> None:
    """SGLang's radix cache (block 1) serves the whole previous context; vLLM with an EAGLE / MTP draft drops one
    more matched block (hand count: 600 -> 592 - 16 = 576)."""
    req = _sessions(1, 2, 500, 100, 100, 0.0)
    radix = simulate(req, EngineConfig(8, 8192, 10**6, Policy.static(0), kv_block_tokens=1), COST, None)
    eagle = simulate(req, EngineConfig(8, 8192, 10**6, Policy.static(0), cache_drop_blocks=1), COST, None)
    assert radix.hit_tokens is not None and eagle.hit_tokens is not None
    assert list(radix.hit_tokens) == [0, 600] and list(eagle.hit_tokens) == [0, 576]


def test_closed_loop_sessions_run_one_session_per_client() -> None:
    """With concurrency N, N sessions run at once; a client takes the next session when its last turn finishes."""
    req = _sessions(6, 3, 400, 50, 40, 0.2, gap=0.0)
    req = Requests(req.arrival_s, req.prompt_tokens, req.output_tokens, 2, None, req.session, req.think_s)
    res = simulate(req, EngineConfig(8, 8192, 10**6, Policy.static(0)), COST, None)
    send = res.requests.arrival_s.reshape(6, 3)
    fin = res.finish_s.reshape(6, 3)
    assert (send[:2, 0] == 0).all() and (send[2:, 0] > 0).all()
    # at every moment at most 2 sessions are between their first send and their last finish
    starts, ends = send[:, 0], fin[:, -1]
    for t in np.linspace(0, ends.max(), 200):
        assert ((starts <= t) & (ends > t)).sum() <= 2
    # each later session starts when an earlier one ended
    for g in range(2, 6):
        assert np.isclose(ends[:g], starts[g]).any()


@pytest.mark.parametrize("seed", [0, 1])
def test_sessions_fast_path_is_exact(seed: int) -> None:
    traffic = Traffic(__import__("specsim.scenario.traffic", fromlist=["Poisson"]).Poisson(2.0), Fixed(800),
                      Fixed(120), 12, sessions=SessionShape(4, 300, 0.5), cached_fraction=0.25)
    req = generate_requests(traffic, seed)
    eng = EngineConfig(16, 4096, 12_000, Policy.static(3))
    a = simulate(req, eng, COST, AcceptanceMix.constant(0.8), seed, fast=True)
    b = simulate(req, eng, COST, AcceptanceMix.constant(0.8), seed, fast=False)
    np.testing.assert_array_equal(a.finish_s, b.finish_s)
    np.testing.assert_array_equal(a.hit_tokens, b.hit_tokens)  # type: ignore[arg-type]
    assert a.completed.all()


def test_generated_turns_grow_by_output_and_new_tokens() -> None:
    traffic = Traffic(__import__("specsim.scenario.traffic", fromlist=["Poisson"]).Poisson(1.0), Fixed(1000),
                      Fixed(200), 3, sessions=SessionShape(3, 50, 2.0))
    req = generate_requests(traffic, 0)
    assert req.n == 9 and req.session is not None
    np.testing.assert_array_equal(req.prompt_tokens.reshape(3, 3), [[1000, 1250, 1500]] * 3)


def test_lru_eviction_and_host_reload_by_hand() -> None:
    """A 100-token GPU pool: two 64-token contexts cannot both stay; the least recently used moves to a host tier
    and its hit there reloads at the given seconds per token."""
    cache = PrefixCache(100, block_tokens=16, host_tokens=1000, reload_s_per_token=1e-4)
    cache.put(1, 64)
    cache.put(2, 64)
    assert cache.peek(2, 0, 200) == 64 and cache.peek(1, 0, 200) == 0  # 64 + 64 > 100: session 1 not resident
    hit, reload = cache.claim(2, 0, 200, 10, 64)  # session 2 admitted: session 1 evicted to the host
    assert (hit, reload) == (64, 0.0) and 1 in cache.host and 1 not in cache.gpu
    assert cache.peek(1, 0, 200) == 64
    hit, reload = cache.claim(1, 0, 200, 10, cache.peek(1, 0, 200))
    assert hit == 64 and reload == pytest.approx(64 * 1e-4) and cache.hit_tokens == [64, 64]


def test_bad_session_and_cache_input_is_one_line() -> None:
    base = ["simulate", "-H", "h100-sxm", "-m", "llama-3.1-8b", "-d", "eagle3"]
    for extra, words in ((["--think", "3"], "turns"), (["--host-bw", "40"], "offload_gb"),
                         (["--cached-fraction", "1.5"], "cached-fraction"), (["--kv-offload", "10", "-H", "l4"],
                                                                              "--host-bw")):
        r = invoke(*base, *extra)
        assert r.code == 2 and words in r.err and len(r.err.strip().splitlines()) == 1, r.err


def test_a_host_tier_keeps_what_the_gpu_evicts_and_charges_its_reload() -> None:
    """Eight sessions whose contexts cannot all stay in a 12,000-token KV cache: without a host tier the evicted
    contexts are prefilled again; with one, they come back as hits, each reload priced at the given seconds per
    token (at most every hit's tokens x that price) and spent in the steps that admit them."""
    req = _sessions(8, 4, 1500, 200, 100, 0.5, gap=0.05)
    base = EngineConfig(8, 4096, 12_000, Policy.static(0))
    gpu_only = simulate(req, base, COST, None)
    host = simulate(req, replace(base, host_kv_tokens=100_000, host_reload_s_per_token=1e-6), COST, None)
    assert gpu_only.hit_tokens is not None and host.hit_tokens is not None
    assert host.hit_tokens.sum() > gpu_only.hit_tokens.sum()  # evicted contexts come back from the host
    assert host.reload_s > 0 and gpu_only.reload_s == 0
    extra = host.hit_tokens.sum() - gpu_only.hit_tokens.sum()
    assert host.reload_s <= host.hit_tokens.sum() * 1e-6 * (1 + 1e-9) and host.reload_s >= 0.5 * extra * 1e-6
    fast = simulate(req, replace(base, host_kv_tokens=100_000, host_reload_s_per_token=0.0), COST, None)
    np.testing.assert_array_equal(fast.hit_tokens, host.hit_tokens)  # type: ignore[arg-type]
    assert (np.nansum(host.finish_s) > np.nansum(fast.finish_s))  # the reload's seconds are spent in the steps
