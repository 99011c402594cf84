"""Agent traffic into the simulator: sessions drawn from a sourced profile (scenario/agent_sessions.py) and a
block-hash trace's shared prefixes served from the prefix cache, against hand counts."""

from __future__ import annotations

import numpy as np

from specsim.advise.simulation import make_setup
from specsim.scenario.agent_sessions import profile_requests
from specsim.scenario.agent_sources import agent_profile
from specsim.scenario.scenario import parse_scenario
from specsim.scenario.traffic import Poisson, Requests, SessionShape, Traffic, generate_requests
from specsim.simulate.engine import simulate
from tests.corpus.harness import ROOT, invoke

TRACE = ROOT / "examples" / "traces" / "agent_sessions_synthetic.jsonl"


def test_profile_sessions_grow_by_output_and_new_tokens_within_the_limit() -> None:
    first = Requests(np.arange(40, dtype=float), np.ones(40, dtype=np.int64), np.ones(40, dtype=np.int64))
    req = profile_requests(first, "coding-agent", np.random.default_rng(0))
    p = agent_profile("coding-agent")
    assert req.session is not None and req.think_s is not None and req.cached_tokens is not None
    limit = p.context_limit_tokens.value
    assert (req.prompt_tokens + req.output_tokens <= limit).all()
    for g in np.unique(req.session):
        rows = np.flatnonzero(req.session == g)
        grow = np.diff(req.prompt_tokens[rows])
        assert (grow >= req.output_tokens[rows][:-1]).all()  # each turn keeps the previous context and output
        assert req.think_s[rows[0]] == 0.0
    assert (req.cached_tokens == np.minimum(req.prompt_tokens, p.common_prefix_tokens.value)).all()
    assert len(np.unique(req.session)) == 40 and req.n > 40


def test_profile_traffic_through_generate_requests_is_seeded() -> None:
    traffic = Traffic(Poisson(1.0), None, None, 5, sessions=SessionShape(1, 0, 0.0, "vllm-multi-turn-bench"))
    a, b = generate_requests(traffic, 3), generate_requests(traffic, 3)
    np.testing.assert_array_equal(a.prompt_tokens, b.prompt_tokens)
    assert a.session is not None and 6 * 5 <= a.n <= 9 * 5  # 6..9 user turns per session (the profile)


def test_block_trace_prefixes_hit_by_the_engines_rule() -> None:
    """The trace's shared prefixes (its SOURCES.md hand count: 0, 1536, 512, 2048, 0, 700 tokens) served as vLLM
    serves them: whole 16-token blocks, at most the prompt's tokens - 1 (row 6: 700 -> 688)."""
    data = {"name": "t", "hardware": "h100-sxm", "model": "llama-3.1-8b", "drafts": [{"method": "eagle3"}],
            "traffic": {"arrivals": {"process": "trace", "path": str(TRACE)}},
            "serving": {"speculation": "off"}}
    setup = make_setup(parse_scenario(data, "test"))
    req = generate_requests(setup.traffic, setup.seed)
    assert req.cached_tokens is not None
    assert list(req.cached_tokens) == [0, 1536, 512, 2048, 0, 700]
    res = simulate(req, setup.engine(), setup.table([setup.policy], [req]), None, 0)
    assert res.hit_tokens is not None and list(res.hit_tokens) == [0, 1536, 512, 2048, 0, 688]


def test_agent_flag_end_to_end() -> None:
    r = invoke("simulate", "-H", "h100-sxm", "-m", "llama-3.1-8b", "-d", "eagle3", "--agent", "vllm-multi-turn-bench",
               "--concurrency", "2", "--requests", "3", "--policy", "k=3", "-f", "json")
    assert r.code == 0, r.err
    import json

    data = json.loads(r.out)
    assert "vllm-multi-turn-bench sessions" in data["title"]
    for row in data["rows"]:
        assert 0.5 < row["prefix_hit_share"] < 1.0  # later turns hit their context; first turns the common prefix
