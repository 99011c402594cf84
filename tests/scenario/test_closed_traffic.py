"""A scenario's closed-loop traffic as a benchmark client sends it: `process: closed` with a concurrency, random
lengths with a range ratio as each client draws them, the analytic planner's load (one bucket at the
concurrency), and bad fields (one line naming the field)."""

from __future__ import annotations

from pathlib import Path

import pytest

from specsim.errors import SpecsimError
from specsim.scenario.scenario import load_scenario
from specsim.scenario.traffic import Constant, Saturated, Uniform

HEAD = "hardware: h100-sxm\nmodel: llama-3.1-8b\ndrafts: [eagle3]\n"
TRAFFIC = """traffic:
  arrivals: {process: closed, concurrency: 32}
  num_requests: 320
  prompt: {dist: random, tokens: 1024, range_ratio: 0.8, client: atom}
  output: {dist: uniform, low: 200, high: 300}
"""


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "s.yaml"
    p.write_text(HEAD + text)
    return p


def test_closed_loop_section(tmp_path: Path) -> None:
    s = load_scenario(_write(tmp_path, TRAFFIC))
    assert s.traffic is not None
    t = s.traffic.traffic
    assert isinstance(t.arrivals, Saturated) and t.concurrency == 32 and t.num_requests == 320
    assert t.prompt == Uniform(819, 1024) and t.output == Uniform(200, 300)
    # the analytic plan's load: 32 sequences running, at the mean prompt plus half the mean output
    assert s.arrival is None and len(s.buckets) == 1
    assert s.buckets[0].batch == 32 and s.buckets[0].contexts == ((round(921.5 + 125), 1.0),)


def test_a_rate_with_a_concurrency_and_constant_arrivals(tmp_path: Path) -> None:
    s = load_scenario(_write(tmp_path, TRAFFIC.replace("{process: closed, concurrency: 32}",
                                                        "{process: constant, rate_rps: 5, concurrency: 8}")))
    assert s.traffic is not None
    t = s.traffic.traffic
    assert isinstance(t.arrivals, Constant) and t.concurrency == 8 and s.arrival is not None
    assert s.arrival.rate_rps == 5


@pytest.mark.parametrize(("old", "new", "field"), [
    ("{process: closed, concurrency: 32}", "{process: closed}", "concurrency"),
    ("concurrency: 32}", "concurrency: 0}", "concurrency"),
    ("range_ratio: 0.8, client: atom", "range_ratio: 0.8, client: trtllm", "client"),
    ("{dist: uniform, low: 200, high: 300}", "{dist: uniform, low: 300, high: 200}", "high"),
    ("num_requests: 320\n", "duration_s: 60\n", "num_requests"),
])
def test_bad_fields(tmp_path: Path, old: str, new: str, field: str) -> None:
    with pytest.raises(SpecsimError, match=field):
        load_scenario(_write(tmp_path, TRAFFIC.replace(old, new)))
