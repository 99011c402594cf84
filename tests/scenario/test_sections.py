"""The scenario file's traffic/serving sections: typed values, and errors naming file, line and field."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from specsim.errors import SpecsimError
from specsim.scenario.sections import load_simulation, yaml_lines
from specsim.scenario.traffic import Empirical, Gamma, Lognormal, RateCurve, TraceArrivals

SCENARIO = """\
name: chat
traffic:
  arrivals: {process: gamma, rate_rps: 12, cv: 2.5}
  num_requests: 5000
  prompt: {dist: lognormal, median: 1024, sigma: 0.9, max: 32768}
  output:
    dist: lognormal
    mean: 300
    cv: 1.2
  workloads:
    - {name: chat, share: 0.6, alphas: [0.8, 0.75, 0.7]}
    - {name: code, share: 0.4, alphas: [0.9, 0.88]}
  seed: 4
serving:
  max_num_seqs: 128
  max_num_batched_tokens: 4096
  kv_capacity_tokens: 400000
  speculation: {schedule: [[1, 16, 4], [17, 64, 2]], disable_above_batch: 96}
  slo: {ttft_ms: 500, tpot_ms: 40, percentile: 95}
  target_rate_rps: 40
  gpus_per_replica: 8
"""


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "chat.yaml"
    p.write_text(text)
    return p


def test_full_sections_parse(tmp_path: Path) -> None:
    spec = load_simulation(_write(tmp_path, SCENARIO))
    t = spec.traffic
    assert t.traffic.arrivals == Gamma(12.0, 2.5) and t.traffic.num_requests == 5000 and t.seed == 4
    assert t.traffic.prompt == Lognormal(1024.0, 0.9, 1, 32768)
    out = t.traffic.output
    assert isinstance(out, Lognormal) and out.mean_tokens == pytest.approx(300.0)
    assert t.acceptance is not None and [c.name for c in t.acceptance.classes] == ["chat", "code"]
    s = spec.serving
    eng = s.engine()
    assert (eng.max_num_seqs, eng.max_num_batched_tokens, eng.kv_capacity_tokens) == (128, 4096, 400_000)
    assert eng.policy.k_table(100)[[1, 16, 17, 64, 65, 97]].tolist() == [4, 4, 2, 2, 0, 0]
    assert s.slo is not None and (s.slo.ttft_s, s.slo.tpot_s, s.slo.percentile) == (0.5, 0.04, 95.0)
    assert s.target_rate_rps == 40.0 and s.gpus_per_replica == 8


def test_curve_trace_and_off(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("time_s,prompt_tokens,output_tokens\n0,10,5\n1.5,20,6\n3,30,7\n")
    text = """\
traffic:
  arrivals: {process: trace, path: t.csv, speedup: 2}
  output: {dist: trace}
serving:
  kv_capacity_tokens: 1000
  speculation: off
"""
    spec = load_simulation(_write(tmp_path, text))
    arr = spec.traffic.traffic.arrivals
    assert isinstance(arr, TraceArrivals) and arr.mean_rate_rps == pytest.approx(4 / 3)
    assert spec.traffic.traffic.prompt is None  # the trace's own prompts
    assert isinstance(spec.traffic.traffic.output, Empirical)
    assert not spec.serving.policy.enabled
    curve = load_simulation(_write(tmp_path, """\
traffic:
  arrivals: {process: curve, points: [[0, 2], [12, 6]], start_hour: 6}
  duration_s: 3600
  prompt: 100
  output: {dist: fixed, tokens: 20}
""")).traffic.traffic.arrivals
    assert isinstance(curve, RateCurve) and curve.mean_rate_rps == pytest.approx(4.0)
    assert float(curve.rate_at(np.array(6.0))) == pytest.approx(4.0)


@pytest.mark.parametrize(("old", "new", "message"), [
    ("sigma: 0.9", "sigma: -1", "chat.yaml line 5: traffic.prompt: field 'sigma' must be a number >= 0, got -1"),
    ("    cv: 1.2", "    cv: lots", "chat.yaml line 9: traffic.output: field 'cv' must be a number >= 0, got 'lots'"),
    ("alphas: [0.9, 0.88]", "alphas: [0.9, 1.5]",
     "chat.yaml line 12: traffic.workloads.1: field 'alphas' must be a list of acceptance rates in [0, 1], "
     "got [0.9, 1.5]"),
    ("max_num_seqs: 128", "max_num_seqs: 12.5",
     "chat.yaml line 15: serving: field 'max_num_seqs' must be an integer >= 1, got 12.5"),
    ("[17, 64, 2]", "[10, 64, 2]", "chat.yaml line 18: serving.speculation: speculation: schedule ranges"),
    ("process: gamma", "process: weibull", "chat.yaml line 3: traffic.arrivals: field 'process' must be one of"),
    ("ttft_ms: 500", "ttft_ms: 500, tbt_ms: 3", "chat.yaml line 19: serving.slo: unknown field 'tbt_ms'"),
    ("dist: lognormal\n", "dist: gauss\n", "chat.yaml line 7: traffic.output: field 'dist' must be one of"),
])
def test_errors_name_file_line_and_field(tmp_path: Path, old: str, new: str, message: str) -> None:
    text = SCENARIO.replace(old, new, 1)
    assert text != SCENARIO
    with pytest.raises(SpecsimError) as exc:
        load_simulation(_write(tmp_path, text))
    assert str(exc.value).startswith(message), str(exc.value)
    assert "\n" not in str(exc.value)


def test_a_bad_trace_through_the_scenario(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("time_s,prompt_tokens,output_tokens\n0,10,5\n1.5,abc,6\n")
    with pytest.raises(SpecsimError) as exc:
        load_simulation(_write(tmp_path, "traffic:\n  arrivals: {process: trace, path: t.csv}\n"))
    assert str(exc.value) == "t.csv line 3: field 'prompt_tokens' must be an integer >= 0, got 'abc'"


def test_yaml_lines() -> None:
    lines = yaml_lines(SCENARIO)
    assert lines["traffic.prompt.sigma"] == 5 and lines["traffic.output.cv"] == 9
    assert lines["traffic.workloads.1"] == 12 and lines["serving.slo"] == 19
