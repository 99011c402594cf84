from __future__ import annotations

from specsim.calibration.bench_device import profile_name


def test_profile_names_of_gpus() -> None:
    assert profile_name("NVIDIA H100 80GB HBM3") == "h100-sxm"
    assert profile_name("NVIDIA H100 PCIe") == "h100-pcie"
    assert profile_name("NVIDIA A100-SXM4-40GB") == "a100-sxm-40gb"
    assert profile_name("NVIDIA H200") == "h200"
    assert profile_name("Some New GPU 9000") == "some-new-gpu-9000"
