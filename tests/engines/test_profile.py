from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from specsim.engines.profile import NUMBERS, available, engines_dir, load_engine, parse_engine
from specsim.errors import SpecsimError


@pytest.mark.parametrize("name", available())
def test_every_bundled_engine_loads_and_names_a_source_for_every_number(name: str) -> None:
    e = load_engine(name)
    for key in NUMBERS:
        assert e.sources.get(key, "").strip(), f"{name}: {key} has no source"
    assert e.graph_sizes == tuple(sorted(e.graph_sizes))


def test_the_four_engines_of_the_issue_are_bundled() -> None:
    assert {"vllm", "sglang", "trtllm", "hf"} <= set(available())


def test_a_version_profile_inherits_from_its_base_and_overrides() -> None:
    base, old = load_engine("vllm"), load_engine("vllm-0.10")
    assert base.async_scheduling and not old.async_scheduling
    assert old.graph_sizes == base.graph_sizes and old.step_host_us == base.step_host_us
    assert "PR #31998" in old.sources["spec_sync"]


def test_base_chain_that_loops_is_refused(tmp_path: Path) -> None:
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(f"base: {b}\nname: a\n")
    b.write_text(f"base: {a}\nname: b\n")
    with pytest.raises(SpecsimError, match="loops"):
        load_engine(a)


def test_a_number_without_a_source_is_refused() -> None:
    data = yaml.safe_load((engines_dir() / "sglang.yaml").read_text())
    del data["sources"]["step_host_us"]
    with pytest.raises(SpecsimError, match="missing sources for \\['step_host_us'\\]"):
        parse_engine(data, "x.yaml")


@pytest.mark.parametrize(("field", "value", "message"), [
    ("eager_op_us", -1, "must be a number >= 0"),
    ("cuda_graphs", "yes", "must be true or false"),
    ("allreduce", "mpi", "must be one of custom, nccl_graph, nccl"),
    ("graph_sizes", [8, 4], "ascending list"),
    ("alltoall", "pplx", "field 'alltoall' must be one of deepep, vllm, trtllm"),
])
def test_bad_fields_name_the_field(field: str, value: object, message: str) -> None:
    data = yaml.safe_load((engines_dir() / "sglang.yaml").read_text())
    data[field] = value
    with pytest.raises(SpecsimError, match=message):
        parse_engine(data, "x.yaml")


def test_unknown_engine_lists_the_known_ones() -> None:
    with pytest.raises(SpecsimError, match=r"unknown engine 'tgi'.*vllm"):
        load_engine("tgi")


def test_alltoall_implementation_per_engine_is_sourced() -> None:
    """Who runs the MoE all-to-all (specsim/cost/alltoall.py): vLLM's and TensorRT-LLM's own DeepEP
    paths, DeepEP's kernels alone elsewhere (the default for engines without EP)."""
    expected = {"vllm": "vllm", "vllm-0.10": "vllm", "trtllm": "trtllm", "sglang": "deepep", "sglang-0.4": "deepep",
                "atom": "deepep", "hf": "deepep"}
    for name, impl in expected.items():
        engine = load_engine(name)
        assert engine.alltoall == impl, name
        assert name == "hf" or engine.sources["alltoall"].strip(), name
    data = yaml.safe_load((engines_dir() / "vllm.yaml").read_text())
    del data["sources"]["alltoall"]
    with pytest.raises(SpecsimError, match="missing sources for \\['alltoall'\\]"):
        parse_engine(data, "x.yaml")
