"""A profile's YAML form (specsim/cost/hardware_yaml.py): the schema's keys in its order, defaults left
out, and it loads back into the same profile."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from specsim.cost.hardware import available, load_hardware, parse_hardware

ORDER = ["name", "description", "vendor", "sm_count", "clock_mhz", "memory_gb", "memory_gib", "mem_bw_tb_per_s",
         "l2_mb", "peak_tflops", "interconnect", "launch_overhead_us", "attention_kernel", "moe_kernel",
         "moe_tuned_configs", "gemm_dispatch", "efficiency", "provenance", "cost_model", "frameworks"]


def _close(a: object, b: object) -> bool:
    """Equal, floats to 12 digits (GB/s, us and TFLOPS figures are scaled on the way out and back)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return a == pytest.approx(b, rel=1e-12)
    return a == b


@pytest.mark.parametrize("name", available())
def test_yaml_form_loads_back_to_the_same_profile(name: str) -> None:
    hw = load_hardware(name)
    data = hw.to_yaml_dict()
    assert list(data) == [k for k in ORDER if k in data]
    back = parse_hardware(yaml.safe_load(yaml.safe_dump(data, sort_keys=False)), hw.source_path)
    assert _close(dataclasses.asdict(back), dataclasses.asdict(hw))


def test_defaults_left_out() -> None:
    h100, a100 = load_hardware("h100-sxm"), load_hardware("a100-sxm-80gb")
    data = h100.to_yaml_dict()
    assert not {"attention_kernel", "moe_kernel", "moe_tuned_configs", "cost_model"} & set(data)
    assert a100.to_yaml_dict()["moe_kernel"] == "triton_sglang" and a100.to_yaml_dict()["attention_kernel"] == "fa2"
    table = h100.with_cost_model("table").to_yaml_dict()
    assert table["cost_model"] == {"backend": "table", "framework": "vllm", "measurements": None}
