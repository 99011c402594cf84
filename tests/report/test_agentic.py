"""The report's agent-sessions section (report/sections/agentic.py) against independent routes: the turn table is
the generated sessions' own mean prompt per turn, and the speedup by context is (1 + E[A]) x the plain step / the
speculative step of the simulator's step cost, worked here from the parts."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from specsim.advise.simulation import make_setup
from specsim.report.context import make_ctx
from specsim.report.sections.agentic import agentic_section
from specsim.scenario.scenario import parse_scenario
from specsim.scenario.traffic import generate_requests
from tests.corpus.harness import ROOT

SCENARIO = ROOT / "examples" / "agent-sessions-h200.yaml"


@pytest.fixture(scope="module")
def small() -> dict:
    data = yaml.safe_load(SCENARIO.read_text())
    data["model"], data["hardware"] = "llama-3.1-8b", "h100-sxm"  # a quick plan; the same sessions
    data["drafts"] = ["eagle3"]
    data["traffic"]["num_requests"] = 4
    return data


def test_section_reports_the_sessions_and_the_speedup_by_context(small: dict) -> None:
    s = parse_scenario(small, "test")
    c = make_ctx(s)
    sec = agentic_section(c)
    assert sec is not None and sec.figure is not None
    setup = make_setup(s, analytic=lambda: c.plan)
    req = generate_requests(setup.traffic, setup.seed)
    first = req.prompt_tokens[np.concatenate([[True], req.session[1:] != req.session[:-1]])]  # type: ignore[index]
    assert f"| mean prompt tokens | {first.mean():,.0f} |" in sec.body
    k = int(setup.policy.k_table(8)[8])
    mix, _ = setup.mix()
    tokens = 1 + float((mix.survival(k).sum(axis=1) * mix.shares).sum())
    cost = setup.cost()
    by_hand = tokens * cost.decode_s(np.array([8]), np.array([8192.0]), np.array([0])) / cost.decode_s(
        np.array([8]), np.array([8192.0]), np.array([k]))
    cells = sec.body.split("| speedup |")[1].split("\n")[0].split("|")  # contexts 2k, 8k, ...
    assert cells[1].strip() == f"{float(by_hand[0]):.2f}"


def test_no_section_without_sessions_or_cached_prefixes(small: dict) -> None:
    data = dict(small)
    data["traffic"] = {**small["traffic"], "arrivals": {"process": "poisson", "rate_rps": 1.0},
                       "prompt": {"dist": "fixed", "tokens": 500}, "output": {"dist": "fixed", "tokens": 50}}
    data["traffic"].pop("sessions")
    assert agentic_section(make_ctx(parse_scenario(data, "test"))) is None
