"""An engine's own cap on running requests under speculation (SGLang 0.5.9 resets max_running_requests to 48 for
EAGLE / NGRAM unless set): the profile carries it with a source, the simulator applies it to the speculating arm
only, and a max_num_seqs the user sets wins."""

from __future__ import annotations

import dataclasses

import pytest

from specsim.advise.benchmark import BenchmarkFlags, benchmark_scenario
from specsim.advise.simulation import make_setup
from specsim.engines.profile import load_engine, parse_engine
from specsim.errors import SpecsimError
from specsim.step.policy import Policy


def test_sglang_caps_speculation_at_48_running_requests() -> None:
    assert load_engine("sglang").spec_max_running == 48
    assert "server_args.py" in load_engine("sglang").sources["spec_max_running"]
    assert load_engine("vllm").spec_max_running == 0 and load_engine("sglang-0.4").spec_max_running == 0


@pytest.mark.parametrize(("engine", "given", "expected_on"), [("sglang", None, 48), ("sglang", 64, 64),
                                                              ("vllm", None, 256)])
def test_the_cap_applies_to_the_speculating_arm_unless_set(engine: str, given: int | None, expected_on: int) -> None:
    flags = BenchmarkFlags("h100-sxm", "llama-3.1-8b", ("eagle3",), engine=engine, k=3, max_num_seqs=given,
                           concurrency=(64,))
    setup = make_setup(benchmark_scenario(flags), policy=Policy.static(3))
    assert setup.engine(Policy.static(3)).max_num_seqs == expected_on
    assert setup.engine(Policy.off()).max_num_seqs == (given or 256)


def test_a_cap_needs_a_source() -> None:
    raw = dataclasses.asdict(load_engine("sglang"))
    raw.pop("source_path")
    raw["graph_sizes"] = list(raw["graph_sizes"])
    raw["sources"] = {k: v for k, v in raw["sources"].items() if k != "spec_max_running"}
    with pytest.raises(SpecsimError, match="spec_max_running"):
        parse_engine(raw, "test")
