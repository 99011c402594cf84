from __future__ import annotations

import numpy as np

from specsim.calibration.params import BOUNDS, GEMM_PARAMS
from specsim.cost import roofline as rl
from specsim.cost.hardware import load_hardware


def test_gemm_model_monotone_in_tokens_anywhere_in_the_fit_bounds() -> None:
    """The fit explores the bounds; every profile it can produce keeps time non-decreasing in M."""
    rng = np.random.default_rng(7)
    base = load_hardware("h100-sxm")
    m = np.arange(1, 4097)
    for _ in range(8):
        hw = base.with_efficiency(**{p: float(rng.uniform(*BOUNDS[p])) for p in GEMM_PARAMS})
        for n, k, g, dtype, wb in ((128, 4096, 1.0, "bf16", 2.0), (28672, 8192, 1.0, "fp8", 1.0),
                                   (1536, 7168, 8.0, "bf16", 0.5)):
            t = rl.gemm_time_s(m, n, k, hw, dtype, wb, groups=g)[0]
            assert np.all(np.diff(t) >= -1e-15), (n, k, g)
