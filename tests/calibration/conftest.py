from __future__ import annotations

import pytest

from specsim.cost.hardware import load_hardware


@pytest.fixture(scope="module")
def truth():
    # L2 out of the way, so the five core parameters are each identifiable
    return load_hardware("h100-sxm").with_efficiency(
        gemm_compute=0.78, memory=0.88, kernel_overhead_us=5.0, ridge_sharpness=2.0, cta_k_overhead=80.0,
        l2_bw_tb_per_s=40.0, power_throttle=0.0)
