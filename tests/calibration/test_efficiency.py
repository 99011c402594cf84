from __future__ import annotations

import numpy as np
import pytest

from specsim.calibration.efficiency import fit_efficiency, fit_efficiency_params
from specsim.calibration.params import BOUNDS, GEMM_PARAMS, fitted_values
from specsim.cost import roofline as rl
from specsim.cost.hardware import load_hardware
from specsim.errors import SpecsimError
from tests.calibration._synthetic import gemm_rows


def test_fit_recovers_known_parameters_from_noisy_synthetic_rows(truth) -> None:
    df = gemm_rows(truth, noise=0.015)
    params = ["gemm_compute", "memory", "kernel_overhead_us", "ridge_sharpness", "cta_k_overhead"]
    start = truth.with_efficiency(gemm_compute=0.9, memory=0.75, kernel_overhead_us=6.5, ridge_sharpness=1.6,
                                  cta_k_overhead=112.0)
    fitted = fit_efficiency(df, start, params)
    got = fitted_values(fitted)
    for p, tol in (("gemm_compute", 0.02), ("memory", 0.02), ("kernel_overhead_us", 0.05),
                   ("ridge_sharpness", 0.05), ("cta_k_overhead", 0.15)):
        assert got[p] == pytest.approx(getattr(truth.efficiency, p), rel=tol), p
    assert got["attention_compute"] == truth.efficiency.attention_compute  # not fitted, not touched


def test_fit_of_every_gemm_parameter_reproduces_the_timings(truth) -> None:
    """The full tile model has trade-offs between parameters; what must come back is the timings."""
    hw = truth.with_efficiency(l2_bw_tb_per_s=10.0, small_tile_efficiency=0.7, power_throttle=0.2)
    df = gemm_rows(hw, noise=0.01, seed=3)
    start = load_hardware("h100-sxm")
    # bf16 rows of cold weights: the L2-residency, fp8, quantisation and dequantisation parameters move nothing
    params = [p for p in GEMM_PARAMS if p not in ("l2_resident_frac", "l2_stream_tb_per_s", "fp8_compute",
                                                     "dequant_tera_per_s", "splitk_overhead_us", "quant_overhead_us",
                                                     "quant_row_ns")]
    fitted = fit_efficiency(df, start, params, starts=2)
    pred = rl.gemm_time_s(df["tokens"], df["d_out"], df["d_in"], fitted)[0] * 1e3
    assert float(np.mean(np.abs(pred / df["true_ms"] - 1))) < 0.03  # 1% noise; 14 parameters trade off
    assert float(np.mean(np.abs(rl.gemm_time_s(df["tokens"], df["d_out"], df["d_in"], start)[0] * 1e3
                                / df["true_ms"] - 1))) > 0.05  # the start was really off


def test_refuses_parameters_the_rows_cannot_determine(truth) -> None:
    df = gemm_rows(truth, noise=0.0)
    with pytest.raises(SpecsimError, match="cannot determine attention_compute"):
        fit_efficiency(df, truth, ["gemm_compute", "attention_compute"])
    short = df[df["tokens"] <= 64]  # memory-bound rows only: nothing throttles, L2 never binds
    with pytest.raises(SpecsimError, match=r"cannot determine power_throttle \(moves predictions by at most"):
        fit_efficiency(short, truth, ["memory", "power_throttle"])
    # the same parameter among the defaults is left at the base value instead of failing
    fitted, kept = fit_efficiency_params(short, truth, ["memory", "power_throttle"], lenient=["power_throttle"])
    assert kept == ["memory"] and fitted.efficiency.power_throttle == truth.efficiency.power_throttle
    with pytest.raises(SpecsimError, match="unknown efficiency parameter"):
        fit_efficiency(df, truth, ["warp_speed"])


def test_a_parameter_fitted_onto_its_bound_is_kept(truth) -> None:
    """Rows made with kernel_overhead_us at its lower bound: the fit drives it there from 5 us, and the
    check that the rows determine it (moving it must move predictions) steps inwards from the bound
    rather than scaling a value that scaling cannot move, so the fitted value is kept, not the start."""
    lo = BOUNDS["kernel_overhead_us"][0]
    df = gemm_rows(truth.with_efficiency(kernel_overhead_us=lo), noise=0.0)
    start = truth.with_efficiency(kernel_overhead_us=5.0)
    fitted, kept = fit_efficiency_params(df, start, ["memory", "kernel_overhead_us"])
    assert "kernel_overhead_us" in kept
    assert fitted.efficiency.kernel_overhead_us < 0.5
