"""Scenarios with `traffic:` and `serving:` sections: parsed into the scenario (errors name file, line and
field), planned at a load derived from the traffic, and the SLO objective met by simulation."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from specsim.advise.plan import plan_scenario as plan
from specsim.advise.simulation import make_setup
from specsim.advise.traffic import requests_at
from specsim.errors import SpecsimError
from specsim.plan.summary import plan_dict
from specsim.scenario.scenario import load_scenario, parse_scenario
from specsim.scenario.traffic import Gamma, Lognormal
from specsim.simulate.engine import simulate
from specsim.simulate.metrics import meets_slo
from specsim.step.policy import Policy
from tests._cli import run

BASE = """\
name: t
hardware: h100-sxm
model: llama-3.1-8b
objective: throughput
max_k: 4
drafts:
  - {method: eagle3, acceptance: {alphas: [0.8, 0.75, 0.7, 0.65]}}
traffic:
  arrivals: {process: gamma, rate_rps: 6, cv: 1.5}
  num_requests: 600
  prompt: {dist: lognormal, median: 500, sigma: 0.6, max: 4000}
  output: {dist: lognormal, median: 150, sigma: 0.5, max: 1000}
  seed: 3
serving:
  max_num_seqs: 128
  slo: {ttft_ms: 1500, tpot_ms: 25, percentile: 95}
"""


def _write(tmp_path: Path, text: str, name: str = "t.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_sections_parse_into_the_scenario(tmp_path: Path) -> None:
    s = load_scenario(_write(tmp_path, BASE))
    assert s.traffic is not None and s.serving is not None
    assert s.traffic.traffic.arrivals == Gamma(6.0, 1.5) and s.traffic.seed == 3
    assert s.traffic.traffic.prompt == Lognormal(500.0, 0.6, 1, 4000)
    assert s.serving.max_num_seqs == 128 and s.serving.plan_policy  # no speculation given: the plan's
    # no load: an arrival load derived from the traffic (its rate and mean lengths, as Lognormal defines them)
    assert s.arrival is not None and s.arrival.rate_rps == 6.0
    assert s.arrival.prompt_tokens == round(500 * np.exp(0.6**2 / 2))
    assert s.arrival.output_tokens == round(150 * np.exp(0.5**2 / 2))
    assert s.slo_ms_per_token == pytest.approx(25.0)  # the analytic per-token bound: the TPOT bound


def test_traffic_without_load_plans(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "plan", str(_write(tmp_path, BASE)), "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    assert data["arrival"]["rate_rps"] == 6.0 and data["buckets"][0]["bucket"] == "arrival"
    assert data["serving"] is None  # not an SLO objective: nothing simulated


@pytest.mark.parametrize(("old", "new", "message"), [
    ("sigma: 0.6", "sigma: -1", "t.yaml line 11: traffic.prompt: field 'sigma' must be a number >= 0, got -1"),
    ("cv: 1.5", "cv: 0", "t.yaml line 9: traffic.arrivals: field 'cv' must be a number > 0, got 0"),
    ("max_num_seqs: 128", "max_num_seqs: 128\n  draft: medusa",
     "t.yaml line 16: serving: field 'draft' must be one of the scenario's drafts (eagle3), got 'medusa'"),
    ("seed: 3", "seed: 3\n  workloads: [{name: c, share: 1, task: poetry}]",
     "t.yaml line 14: traffic.workloads.0: field 'task' must be one of chat, code"),
    ("  slo:", "  speculation: sometimes\n  slo:", "t.yaml line 16: serving.speculation: "),  # the value's words vary
])
def test_errors_name_file_line_and_field(tmp_path: Path, old: str, new: str, message: str) -> None:
    text = BASE.replace(old, new, 1)
    assert text != BASE
    with pytest.raises(SpecsimError) as exc:
        load_scenario(_write(tmp_path, text))
    msg = str(exc.value)
    assert message in msg and msg.startswith(str(tmp_path)), msg
    assert "\n" not in msg


def test_no_load_and_no_traffic_is_refused() -> None:
    with pytest.raises(SpecsimError, match=r"missing field 'load' \(or a 'traffic' section"):
        parse_scenario({"hardware": "h100-sxm", "model": "llama-3.1-8b", "drafts": ["eagle3"]}, "x.yaml")


def test_slo_objective_takes_its_bound_from_serving(tmp_path: Path) -> None:
    s = load_scenario(_write(tmp_path, BASE.replace("objective: throughput", "objective: slo")))
    assert s.slo_ms_per_token == pytest.approx(25.0)
    given = load_scenario(_write(tmp_path, BASE.replace("objective: throughput",
                                                        "objective: slo\nslo_ms_per_token: 12")))
    assert given.slo_ms_per_token == pytest.approx(12.0)  # a bound given in the file wins
    with pytest.raises(SpecsimError, match=r"objective 'slo' needs field 'slo_ms_per_token' \(or serving.slo\)"):
        load_scenario(_write(tmp_path, BASE.replace("objective: throughput", "objective: slo")
                             .replace("  slo: {ttft_ms: 1500, tpot_ms: 25, percentile: 95}\n", "")))


def _slo_scenario(tmp_path: Path, tpot_ms: float) -> Path:
    text = (BASE.replace("objective: throughput", "objective: slo")
            .replace("slo: {ttft_ms: 1500, tpot_ms: 25, percentile: 95}",
                     f"slo: {{ttft_ms: 1500, tpot_ms: {tpot_ms:g}, percentile: 95}}\n  target_rate_rps: 24"))
    return _write(tmp_path, text, f"slo{tpot_ms:g}.yaml")


def test_tighter_slo_needs_more_replicas_and_the_configs_follow(tmp_path: Path) -> None:
    loose = plan(load_scenario(_slo_scenario(tmp_path, 40)))
    tight_s = load_scenario(_slo_scenario(tmp_path, 5))
    tight = plan(tight_s)
    assert loose.serving is not None and tight.serving is not None
    assert loose.serving.meets_slo and tight.serving.meets_slo
    assert tight.serving.replicas > loose.serving.replicas
    # the choice holds up on its own, re-simulated here: the SLO met at n replicas and missed at n - 1
    sv = tight.serving
    policy = Policy.parse(sv.policy)
    setup = make_setup(tight_s, policy=policy, draft=None if sv.method == "none" else sv.draft)
    req = requests_at(setup.traffic, sv.target_rate_rps, setup.seed, sv.requests)
    assert req.n == sv.requests
    eng = setup.engine(policy)
    mix = setup.mix()[0] if policy.enabled else None
    slo = setup.slo
    assert slo is not None
    n = sv.replicas
    at_n = simulate(req.thin(1 / n, setup.seed), eng, setup.cost(), mix, setup.seed)
    assert meets_slo(at_n, slo)
    if n > 1:
        fewer = simulate(req.thin(1 / (n - 1), setup.seed), eng, setup.cost(), mix, setup.seed)
        assert not meets_slo(fewer, slo)
    # plain decoding cannot go below one sequence's step time per token: out of reach at any count
    assert not sv.baseline.meets_slo and "no number of replicas" in plan_dict(tight)["recommendation"]
    # the engine configs follow the simulated choice
    data = plan_dict(tight)
    assert data["policy"] == tight.policy.records() and data["serving"]["policy"] == sv.policy
    if policy.enabled:
        cfg = data["engine_configs"]["vllm"]["--speculative-config"]
        assert cfg["num_speculative_tokens"] == policy.max_k
        assert "replicas" in data["recommendation"] and str(n) in data["recommendation"]
