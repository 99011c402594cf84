"""Chain acceptance: survival products by hand, sampled frequencies against them."""

from __future__ import annotations

import numpy as np
import pytest

from specsim.errors import SpecsimError
from specsim.scenario.workload import AcceptanceMix, WorkloadClass, sample_accepted


def test_survival_is_the_product_of_conditional_rates() -> None:
    mix = AcceptanceMix((WorkloadClass("chat", 3, (0.8, 0.5)), WorkloadClass("code", 1, (0.9,))))
    s = mix.survival(3)
    np.testing.assert_allclose(s[0], [0.8, 0.4, 0.2])  # the last rate (0.5) repeats
    np.testing.assert_allclose(s[1], [0.9, 0.81, 0.729])
    np.testing.assert_allclose(mix.shares, [0.75, 0.25])


def test_expected_accepted_matches_the_geometric_series() -> None:
    alpha, k = 0.7, 6
    mix = AcceptanceMix.constant(alpha)
    assert mix.expected_accepted(k)[0] == pytest.approx(alpha * (1 - alpha**k) / (1 - alpha))


def test_sampled_acceptance_frequencies_match_the_chain() -> None:
    alphas = (0.9, 0.7, 0.6, 0.5)
    mix = AcceptanceMix((WorkloadClass("c", 1, alphas),))
    rows = np.repeat(mix.survival(4), 200_000, axis=0)
    a = sample_accepted(np.random.default_rng(3).random(200_000), rows, 4)
    expected = np.cumprod(alphas)  # P(A >= i)
    observed = [(a >= i).mean() for i in range(1, 5)]
    se = np.sqrt(expected * (1 - expected) / 200_000)
    assert np.all(np.abs(np.asarray(observed) - expected) < 5 * se)
    assert a.max() == 4 and a.min() == 0


def test_sampling_by_hand_and_truncation_at_k() -> None:
    rows = np.array([[0.8, 0.4, 0.2]] * 4)
    u = np.array([0.1, 0.3, 0.5, 0.9])
    np.testing.assert_array_equal(sample_accepted(u, rows, 3), [3, 2, 1, 0])
    np.testing.assert_array_equal(sample_accepted(u, rows, 1), [1, 1, 1, 0])
    np.testing.assert_array_equal(sample_accepted(u, rows, 0), [0, 0, 0, 0])


def test_classes_drawn_by_share() -> None:
    mix = AcceptanceMix((WorkloadClass("chat", 0.6, (0.8,)), WorkloadClass("code", 0.4, (0.9,))))
    cls = mix.assign(100_000, np.random.default_rng(0))
    assert abs((cls == 0).mean() - 0.6) < 5 * np.sqrt(0.24 / 100_000)


def test_bad_rates_are_refused() -> None:
    with pytest.raises(SpecsimError, match="alphas"):
        WorkloadClass("x", 1, (1.2,))
    with pytest.raises(SpecsimError, match="share"):
        WorkloadClass("x", 0, (0.5,))
