"""The bands (step/bands.py) against independent routes: Monte Carlo sampling of the same parts, the normal's
closed form, the prior's own percentiles, and the identities between figures."""

from __future__ import annotations

import numpy as np
import pytest

from specsim.step.bands import (
    COVERAGE,
    Spread,
    Z,
    acceptance_nodes,
    acceptance_quantile,
    family,
    log_band,
    step_bands,
)


def _sample_tau(tau: float, low: float, high: float, scale: float, z: np.ndarray) -> np.ndarray:
    """(tau - 1) split log-normal through low / high at the 10th / 90th percentile, sampled (a second route)."""
    s = np.where(z < 0, np.log((tau - 1) / (low - 1)), np.log((high - 1) / (tau - 1))) / Z * scale
    return 1 + (tau - 1) * np.exp(s * z)


@pytest.mark.parametrize(("tau", "low", "high", "sigma", "scale"), [
    (3.2, 2.4, 4.4, 0.08, 1.0), (1.8, 1.3, 2.6, 0.2, 1.3), (2.5, 2.5, 2.5, 0.1, 1.0), (4.0, 2.0, 4.6, 0.0, 0.8)])
def test_speedup_band_matches_monte_carlo(tau: float, low: float, high: float, sigma: float, scale: float) -> None:
    rng = np.random.default_rng(7)
    z_a, z_c = rng.standard_normal(400_000), rng.standard_normal(400_000)
    t = _sample_tau(tau, low, high, scale, z_a) if high > low else np.full(z_a.shape, tau)
    log_s = np.log(t / tau) + sigma * z_c
    want = np.quantile(log_s, [0.5 - COVERAGE / 2, 0.5 + COVERAGE / 2])
    got = log_band(acceptance_nodes(np.array([tau]), np.array([low]), np.array([high]), scale), np.array([sigma]))
    assert got[0][0] == pytest.approx(want[0], abs=0.012) and got[1][0] == pytest.approx(want[1], abs=0.012)


def test_cost_alone_is_the_normal_closed_form() -> None:
    lo, hi = log_band(acceptance_nodes(np.array([2.0]), np.array([2.0]), np.array([2.0])), np.array([0.15]))
    assert lo[0] == pytest.approx(-Z * 0.15, abs=1e-6) and hi[0] == pytest.approx(Z * 0.15, abs=1e-6)


def test_acceptance_alone_gives_back_the_priors_percentiles() -> None:
    tau, low, high = np.array([3.25, 1.5]), np.array([2.43, 1.2]), np.array([4.42, 2.1])
    assert acceptance_quantile(tau, low, high, 1.0, 0.1) == pytest.approx(low)
    assert acceptance_quantile(tau, low, high, 1.0, 0.9) == pytest.approx(high)
    wider = acceptance_quantile(tau, low, high, 1.5, 0.9)
    assert (wider > high).all()


def test_every_figure_brackets_its_central_value_and_inverse_figures_mirror() -> None:
    sp = Spread({"sglang": 0.08}, {"sglang": 0.06}, 1.2)
    central = {"tokens_per_step": np.array([2.9, 1.0]), "speedup": np.array([2.2, 0.97]),
               "step_ms": np.array([9.7, 7.5]), "throughput_tok_s": np.array([4762.0, 2130.0]),
               "ms_per_token": np.array([3.36, 7.5])}
    b = step_bands(central, np.array([2.2, 1.0]), np.array([3.8, 1.0]), "sglang-0.4", sp)
    for name, value in central.items():
        assert (b.low[name] <= value + 1e-12).all() and (value <= b.high[name] + 1e-12).all(), name
    # time per token is batch / throughput: its low end is the throughput's high end
    product = central["ms_per_token"] * central["throughput_tok_s"]
    assert b.low["ms_per_token"] * b.high["throughput_tok_s"] == pytest.approx(product)
    # plain decoding (tau = 1) has no acceptance spread: its speedup band is the cost's alone
    assert b.high["speedup"][1] / central["speedup"][1] == pytest.approx(np.exp(Z * 0.08), rel=1e-6)


def test_an_engine_nobody_measured_gets_the_widest_measured_spread() -> None:
    sp = Spread({"sglang": 0.08, "hf": 0.2}, {"sglang": 0.06}, 1.0)
    assert family("sglang-0.4") == "sglang" and family("hf-naive") == "hf-naive" and family("vLLM-0.10") == "vllm"
    assert sp.sigma(sp.speedup_sigma, "sglang-0.4") == 0.08 and sp.sigma(sp.speedup_sigma, "atom") == 0.2
    from specsim.step.bands import UNMEASURED

    fitted = Spread({"sglang": 0.1, "hf": 0.1, UNMEASURED: 0.12}, {"sglang": 0.06}, 1.0)
    assert fitted.sigma(fitted.speedup_sigma, "hf") == 0.1 and fitted.sigma(fitted.speedup_sigma, "atom") == 0.12


def test_unscaled_gives_back_the_priors_own_ends() -> None:
    from specsim.step.bands import unscaled

    tau, low, high = np.array([3.25, 1.5]), np.array([2.43, 1.2]), np.array([4.42, 2.1])
    for scale in (0.7, 1.0, 1.6):
        assert unscaled(tau, acceptance_quantile(tau, low, high, scale, 0.1), scale) == pytest.approx(low)
        assert unscaled(tau, acceptance_quantile(tau, low, high, scale, 0.9), scale) == pytest.approx(high)


def test_a_plans_gain_band_is_its_acceptance_ends_and_its_cost_spread() -> None:
    from specsim.step.bands import gain_band

    no_cost = Spread({"vllm": 0.0}, {"vllm": 0.0}, 1.0)
    lo, hi = gain_band(1.36, 1.21, 1.52, "vllm", no_cost)
    assert lo == pytest.approx(1.21, rel=2e-3) and hi == pytest.approx(1.52, rel=2e-3)
    cost_only = Spread({"vllm": 0.1}, {"vllm": 0.0}, 1.0)
    lo, hi = gain_band(1.36, None, None, "vllm", cost_only)
    assert lo == pytest.approx(1.36 * np.exp(-Z * 0.1), rel=1e-5) and hi == pytest.approx(1.36 * np.exp(Z * 0.1),
                                                                                          rel=1e-5)
    both_lo, both_hi = gain_band(1.36, 1.21, 1.52, "vllm", cost_only)
    assert both_lo < min(1.21, lo) and both_hi > max(1.52, hi)  # two independent spreads widen each other


def test_a_speedup_band_leans_by_the_cost_bias_only_where_the_acceptance_was_given() -> None:
    """Hand calculation: acceptance given (low = high = tau) the band is exp(-bias -/+ Z sigma) around the central
    value; from a prior (a band on tau) no lean; a fitted deployment's spread carries none."""
    from specsim.step.bands import gain_band

    sp = Spread({"vllm": 0.1}, {"vllm": 0.05}, 1.0, speedup_bias=0.08)
    central = {"tokens_per_step": np.array([3.0, 3.0]), "speedup": np.array([2.0, 2.0])}
    b = step_bands(central, np.array([3.0, 2.5]), np.array([3.0, 3.6]), "vllm", sp)
    assert b.low["speedup"][0] == pytest.approx(2.0 * np.exp(-0.08 - Z * 0.1), rel=1e-6)
    assert b.high["speedup"][0] == pytest.approx(2.0 * np.exp(-0.08 + Z * 0.1), rel=1e-6)
    unleant = step_bands(central, np.array([3.0, 2.5]), np.array([3.0, 3.6]), "vllm",
                         Spread({"vllm": 0.1}, {"vllm": 0.05}, 1.0))
    assert b.low["speedup"][1] == unleant.low["speedup"][1] and b.high["speedup"][1] == unleant.high["speedup"][1]
    assert gain_band(1.5, None, None, "vllm", sp) == pytest.approx((1.5 * np.exp(-0.08 - Z * 0.1),
                                                                    1.5 * np.exp(-0.08 + Z * 0.1)), rel=1e-5)
    assert sp.fitted("vllm", 0.03).speedup_bias == 0.0
