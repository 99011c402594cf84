"""A profile's `frameworks` block (each engine's own kernels): read, written back, and refused when malformed."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from specsim.cost.hardware import load_hardware, profiles_dir
from specsim.cost.hardware_yaml import profile_yaml_dict
from specsim.errors import SpecsimError


def _with(tmp_path: Path, frameworks: object) -> Path:
    data = yaml.safe_load((profiles_dir() / "h100-sxm.yaml").read_text())
    data["frameworks"] = frameworks
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_block_replaces_the_efficiencies_and_merges_the_all_reduce(tmp_path: Path) -> None:
    base = load_hardware("h100-sxm")
    eff = {"gemm_compute": 0.5, "memory": 0.6}
    path = _with(tmp_path, {"sglang": {"efficiency": eff, "allreduce_by_implementation": {
        "custom": {8: {"latency_us": 9.0, "busbw_gb_per_s": 100.0, "sharpness": 1.0}}}, "source": "mine"}})
    hw = load_hardware(str(path))
    sg = hw.for_framework("sglang")
    assert (sg.efficiency.gemm_compute, sg.efficiency.memory) == (0.5, 0.6)
    assert sg.interconnect.allreduce_by_implementation["custom"][8] == pytest.approx((9e-6, 100e9, 1.0))
    # counts the block does not name keep the profile's own figures
    assert sg.interconnect.allreduce_by_implementation["custom"][2] == base.interconnect.allreduce_by_implementation[
        "custom"][2]
    assert hw.for_framework("trtllm") is hw  # no block: the profile's own kernels
    again = tmp_path / "again.yaml"
    again.write_text(yaml.safe_dump(profile_yaml_dict(hw)))
    assert load_hardware(str(again)).for_framework("sglang").efficiency == sg.efficiency


@pytest.mark.parametrize(("block", "expect"), [
    ({"tensorflow": {"efficiency": {}}}, "unknown framework 'tensorflow'"),
    ({"sglang": {"source": "x"}}, "frameworks.sglang must be a mapping with an 'efficiency' block"),
    ({"sglang": {"efficiency": {"gemm_compute": 1.5}}}, "efficiency.gemm_compute must be in (0, 1]"),
    ({"sglang": {"efficiency": {}, "kernels": 1}}, "unknown field(s) ['kernels']"),
    (["sglang"], "field 'frameworks' must be a mapping"),
])
def test_a_malformed_block_names_the_file_and_field(tmp_path: Path, block: object, expect: str) -> None:
    path = _with(tmp_path, block)
    with pytest.raises(SpecsimError) as exc:
        load_hardware(str(path))
    assert "mine.yaml" in str(exc.value) and expect in str(exc.value)


def test_a_block_may_name_its_frameworks_attention_kernel(tmp_path: Path) -> None:
    """TensorRT-LLM's block names XQA (its decode kernel): for_framework prices that framework's attention with it,
    the profile's own stays FlashAttention-3; the name is checked like the profile's own."""
    hw = load_hardware("h200")
    assert hw.attention_kernel == "fa3" and hw.for_framework("trtllm").attention_kernel == "xqa"
    assert hw.for_framework("sglang").attention_kernel == "fa3"
    path = _with(tmp_path, {"trtllm": {"attention_kernel": "xqa", "efficiency": {}}})
    assert load_hardware(str(path)).for_framework("trtllm").attention_kernel == "xqa"
    again = tmp_path / "again.yaml"
    again.write_text(yaml.safe_dump(profile_yaml_dict(load_hardware(str(path)))))
    assert load_hardware(str(again)).for_framework("trtllm").attention_kernel == "xqa"
    with pytest.raises(SpecsimError, match="attention_kernel must be one of fa2, fa3, xqa, got 'fa4'"):
        load_hardware(str(_with(tmp_path, {"trtllm": {"attention_kernel": "fa4", "efficiency": {}}})))
