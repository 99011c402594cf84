"""Arrival processes and length distributions against their defining moments."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specsim.errors import SpecsimError
from specsim.scenario.traces import Trace
from specsim.scenario.traffic import (
    Empirical,
    Fixed,
    Gamma,
    Lognormal,
    Poisson,
    RateCurve,
    Requests,
    TraceArrivals,
    Traffic,
    generate_requests,
)


def _cv(x: np.ndarray) -> float:
    return float(np.std(x) / np.mean(x))


def test_poisson_gaps_are_exponential() -> None:
    t = Poisson(5.0).times(np.random.default_rng(0), 200_000, None)
    gaps = np.diff(np.concatenate([[0.0], t]))
    assert np.mean(gaps) == pytest.approx(0.2, rel=0.01)
    assert _cv(gaps) == pytest.approx(1.0, rel=0.01)
    # P(gap > 1/rate) = e^-1 for an exponential.
    assert (gaps > 0.2).mean() == pytest.approx(math.exp(-1), abs=0.005)


@pytest.mark.parametrize("cv", [0.5, 2.0, 4.0])
def test_gamma_gaps_have_the_requested_burstiness(cv: float) -> None:
    t = Gamma(10.0, cv).times(np.random.default_rng(1), 400_000, None)
    gaps = np.diff(t)
    assert np.mean(gaps) == pytest.approx(0.1, rel=0.02)
    assert _cv(gaps) == pytest.approx(cv, rel=0.03)


def test_duration_gives_rate_times_duration_requests() -> None:
    t = Poisson(50.0).times(np.random.default_rng(2), None, 2000.0)
    assert t.max() <= 2000.0
    assert abs(len(t) - 100_000) < 4 * math.sqrt(100_000)


def test_hourly_curve_puts_arrivals_where_the_rate_is() -> None:
    rates = [1.0] * 8 + [4.0] * 10 + [2.0] * 6
    curve = RateCurve.hourly(rates)
    assert curve.mean_rate_rps == pytest.approx(sum(rates) / 24)
    t = curve.times(np.random.default_rng(3), None, 2 * 86_400.0)
    per_hour = np.bincount((t // 3600).astype(int) % 24, minlength=24) / 2  # mean over the two days
    expected = np.asarray(rates) * 3600
    assert np.all(np.abs(per_hour - expected) < 5 * np.sqrt(expected / 2))


def test_curve_start_hour_shifts_the_clock() -> None:
    curve = RateCurve.hourly([0.0] * 12 + [10.0] * 12, start_hour=12)
    t = curve.times(np.random.default_rng(4), None, 3600.0 * 12)
    assert abs(len(t) - 432_000) < 5 * math.sqrt(432_000)  # the busy half of the day comes first


def test_linear_curve_mean_rate_is_the_trapezoid_average() -> None:
    curve = RateCurve((0.0, 12.0), (2.0, 6.0), "linear")
    # Rate climbs 2 -> 6 over 12 h then falls back over 12 h: mean 4.
    assert curve.mean_rate_rps == pytest.approx(4.0, rel=1e-6)
    assert float(curve.rate_at(np.array(6.0))) == pytest.approx(4.0)
    assert float(curve.rate_at(np.array(18.0))) == pytest.approx(4.0)
    t = curve.times(np.random.default_rng(5), None, 86_400.0)
    first_six = (t < 6 * 3600).sum()
    expected = (2 + 4) / 2 * 6 * 3600
    assert abs(first_six - expected) < 5 * math.sqrt(expected)


def test_lognormal_median_sigma_and_mean_cv() -> None:
    rng = np.random.default_rng(6)
    x = Lognormal(1000, 0.8).sample(200_000, rng)
    assert np.median(x) == pytest.approx(1000, rel=0.01)
    assert np.std(np.log(x)) == pytest.approx(0.8, rel=0.01)
    y = Lognormal.from_mean_cv(500, 1.5).sample(400_000, rng)
    assert np.mean(y) == pytest.approx(500, rel=0.02)
    z = Lognormal(1000, 2.0, min_tokens=10, max_tokens=4000).sample(10_000, rng)
    assert z.min() == 10 and z.max() == 4000


def test_empirical_resamples_observed_values() -> None:
    values = np.array([3, 30, 300])
    x = Empirical(values).sample(30_000, np.random.default_rng(7))
    assert set(np.unique(x)) == {3, 30, 300}
    assert np.mean(x) == pytest.approx(111, rel=0.03)


def test_bad_distributions_name_the_field() -> None:
    with pytest.raises(SpecsimError, match="field 'sigma'"):
        Lognormal(100, -1.0)
    with pytest.raises(SpecsimError, match="field 'median'"):
        Lognormal(0, 1.0)
    with pytest.raises(SpecsimError, match="field 'tokens'"):
        Fixed(0)
    with pytest.raises(SpecsimError, match="field 'cv'"):
        Gamma(1.0, 0.0)


def test_same_seed_same_requests() -> None:
    tr = Traffic(Gamma(3.0, 2.0), Lognormal(800, 1.0), Lognormal(200, 0.7), num_requests=1000)
    a, b, c = generate_requests(tr, 11), generate_requests(tr, 11), generate_requests(tr, 12)
    np.testing.assert_array_equal(a.arrival_s, b.arrival_s)
    np.testing.assert_array_equal(a.output_tokens, b.output_tokens)
    assert not np.array_equal(a.arrival_s, c.arrival_s)


def test_with_rate_scales_the_process() -> None:
    tr = Traffic(RateCurve.hourly([1.0] * 12 + [3.0] * 12), Fixed(10), Fixed(10), duration_s=86_400.0)
    assert tr.with_rate(20.0).mean_rate_rps == pytest.approx(20.0)
    assert Traffic(Poisson(2.0), Fixed(1), Fixed(1), num_requests=5).with_rate(7.0).arrivals == Poisson(7.0)


def test_thinning_keeps_the_fraction_in_nested_subsets() -> None:
    req = generate_requests(Traffic(Poisson(10.0), Fixed(5), Fixed(5), num_requests=100_000), 0)
    half, quarter = req.thin(0.5, seed=1), req.thin(0.25, seed=1)
    assert abs(half.n - 50_000) < 5 * math.sqrt(25_000)
    assert half.mean_rate_rps == pytest.approx(5.0, rel=0.02)
    assert set(quarter.arrival_s.tolist()) <= set(half.arrival_s.tolist())


def test_trace_replay_with_speedup() -> None:
    trace = Trace("t.csv", "generic", np.array([0.0, 1.0, 2.0, 4.0]), np.array([5, 6, 7, 8]),
                  np.array([1, 2, 3, 4]))
    tr = Traffic(TraceArrivals(trace, speedup=2.0, start_s=1.0))
    req = generate_requests(tr)
    np.testing.assert_allclose(req.arrival_s, [0.0, 0.5, 1.5])
    np.testing.assert_array_equal(req.prompt_tokens, [6, 7, 8])
    np.testing.assert_array_equal(req.output_tokens, [2, 3, 4])
    assert TraceArrivals(trace).mean_rate_rps == pytest.approx(0.75)


def test_requests_validate() -> None:
    with pytest.raises(SpecsimError, match="sorted"):
        Requests(np.array([1.0, 0.5]), np.array([1, 1]), np.array([1, 1]))
    with pytest.raises(SpecsimError, match=">= 1"):
        Requests(np.array([0.0]), np.array([0]), np.array([1]))
