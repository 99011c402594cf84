from __future__ import annotations

import numpy as np
import pytest

from specsim.acceptance.chain import (
    AcceptanceProfile,
    acceptance_beta,
    alpha_from_mean_tokens,
    beta_from_logits,
    conditional_from_histogram,
    conditional_from_unconditional,
    expected_tokens,
    expected_tokens_positional,
    residual_distribution,
    softmax,
    tokens_distribution,
    tokens_distribution_positional,
)
from specsim.errors import SpecsimError

# seed chapter, "Choosing k": alpha 0.8, k = 1..8, 10
SEED_K = [1, 2, 3, 4, 5, 6, 7, 8, 10]
SEED_TOKENS = [1.80, 2.44, 2.95, 3.36, 3.69, 3.95, 4.16, 4.33, 4.57]


def test_seed_worked_example_tokens_per_step() -> None:
    got = expected_tokens(0.8, np.array(SEED_K))
    assert np.round(got, 2).tolist() == SEED_TOKENS


def test_seed_check_your_understanding_alpha_06_k3() -> None:
    # (1 - 0.6^4) / 0.4 = 2.176 -> 2.18
    assert float(expected_tokens(0.6, 3)) == pytest.approx(2.176, abs=1e-12)
    assert round(float(expected_tokens(0.6, 3)), 2) == 2.18


def test_matches_geometric_sum_by_hand() -> None:
    # independent route: E = sum_{i=0}^{k} alpha^i (seed: E[A] = sum_i alpha^i, plus one token)
    rng = np.random.default_rng(1)
    for alpha in rng.uniform(0, 1, 20):
        for k in range(0, 12):
            assert float(expected_tokens(alpha, k)) == pytest.approx(sum(alpha**i for i in range(k + 1)))


def test_limits_alpha_one_and_zero() -> None:
    k = np.arange(0, 9)
    assert np.array_equal(expected_tokens(1.0, k), k + 1.0)
    assert np.array_equal(expected_tokens(0.0, k), np.ones(9))
    # continuous into the limit
    assert float(expected_tokens(1 - 1e-7, 6)) == pytest.approx(7.0, abs=1e-4)


def test_vectorised_is_one_call_and_equals_scalars() -> None:
    alphas = np.linspace(0, 1, 11)
    ks = np.array([0, 1, 3, 7])
    table = expected_tokens(alphas[:, None], ks[None, :])
    assert table.shape == (11, 4)
    for i, a in enumerate(alphas):
        for j, k in enumerate(ks):
            assert table[i, j] == pytest.approx(float(expected_tokens(a, int(k))))


def test_distribution_sums_to_one_and_has_the_mean() -> None:
    alphas = np.array([0.0, 0.3, 0.8, 1.0])
    dist = tokens_distribution(alphas, 5)
    assert dist.shape == (4, 6)
    assert np.allclose(dist.sum(axis=-1), 1.0)
    n = np.arange(1, 7)
    assert np.allclose((dist * n).sum(axis=-1), expected_tokens(alphas, 5))
    # hand: alpha 0.8, k 2 -> P(1)=0.2, P(2)=0.16, P(3)=0.64
    assert np.allclose(tokens_distribution(0.8, 2), [0.2, 0.16, 0.64])


def test_positional_by_hand_and_iid_special_case() -> None:
    # 1 + 0.9 + 0.9*0.8 + 0.9*0.8*0.5 = 2.98
    assert float(expected_tokens_positional([0.9, 0.8, 0.5], 3)) == pytest.approx(2.98)
    assert float(expected_tokens_positional([0.9, 0.8, 0.5], 1)) == pytest.approx(1.9)
    assert float(expected_tokens_positional([0.9, 0.8, 0.5], 0)) == pytest.approx(1.0)
    rates = np.full(6, 0.7)
    assert np.allclose(expected_tokens_positional(rates, np.arange(7)), expected_tokens(0.7, np.arange(7)))
    d = tokens_distribution_positional([0.9, 0.8, 0.5], 3)
    assert np.allclose(d, [0.1, 0.9 * 0.2, 0.72 * 0.5, 0.36])


def test_positional_broadcasts_over_profiles_and_k() -> None:
    rates = np.array([[0.9, 0.8, 0.5], [0.5, 0.5, 0.5]])
    out = expected_tokens_positional(rates[:, None, :], np.array([1, 2, 3])[None, :])
    assert out.shape == (2, 3)
    assert np.allclose(out[1], expected_tokens(0.5, [1, 2, 3]))


def test_unconditional_to_conditional_vllm_convention() -> None:
    # vLLM per-position rate = accepted_per_pos / drafts = P(A >= i)
    assert np.allclose(conditional_from_unconditional([0.8, 0.6, 0.3]), [0.8, 0.75, 0.5])
    assert np.allclose(conditional_from_unconditional([0.5, 0.0, 0.0]), [0.5, 0.0, 0.0])
    with pytest.raises(SpecsimError, match="non-increasing"):
        conditional_from_unconditional([0.5, 0.6])


def test_histogram_profile_reproduces_histogram_mean() -> None:
    counts = np.array([200, 200, 300, 300])  # accepted drafts 0..3
    prof = AcceptanceProfile.from_histogram(counts)
    hist_mean = 1 + (counts * np.arange(4)).sum() / counts.sum()  # tokens incl. bonus
    assert float(prof.mean_tokens(3)) == pytest.approx(hist_mean)
    assert np.allclose(prof.distribution(3), counts / counts.sum())
    assert np.allclose(conditional_from_histogram(counts), [0.8, 0.75, 0.5])
    assert np.allclose(AcceptanceProfile.from_histogram({0: 200, 1: 200, 2: 300, 3: 300}).rates, prof.rates)


def test_profile_constructors_and_limits() -> None:
    iid = AcceptanceProfile.from_alpha(0.8)
    assert np.allclose(iid.mean_tokens(SEED_K), expected_tokens(0.8, SEED_K))
    assert iid.max_k is None
    med = AcceptanceProfile.from_alphas([0.9, 0.8, 0.5])
    assert float(med.mean_tokens(3)) == pytest.approx(2.98)
    assert med.max_k == 3
    with pytest.raises(SpecsimError, match="exceeds the 3 positions"):
        med.mean_tokens(4)
    unc = AcceptanceProfile.from_unconditional([0.8, 0.6, 0.3])
    assert float(unc.mean_tokens(3)) == pytest.approx(1 + 0.8 + 0.6 + 0.3)
    # engines' "acceptance rate" is E[A]/k, not alpha
    assert iid.acceptance_rate(4) == pytest.approx((float(expected_tokens(0.8, 4)) - 1) / 4)
    assert iid.acceptance_rate(4) < 0.8


def test_fit_alpha_from_mean_length_round_trip() -> None:
    alphas = np.array([0.0, 0.2, 0.55, 0.8, 0.97, 1.0])
    ks = np.array([1, 2, 4, 8, 3, 5])
    means = expected_tokens(alphas, ks)
    assert np.allclose(alpha_from_mean_tokens(means, ks), alphas, atol=1e-9)
    prof = AcceptanceProfile.from_mean_length(3.2, 4)
    assert float(prof.mean_tokens(4)) == pytest.approx(3.2, abs=1e-9)
    with pytest.raises(SpecsimError, match="outside"):
        AcceptanceProfile.from_mean_length(5.5, 4)  # more than k+1 tokens is impossible
    with pytest.raises(SpecsimError, match="outside"):
        AcceptanceProfile.from_mean_length(0.7, 4)  # forgot the bonus token


def test_beta_seed_check_your_understanding() -> None:
    p = np.array([0.6, 0.3, 0.1])
    q = np.array([0.3, 0.6, 0.1])
    assert float(acceptance_beta(p, q)) == pytest.approx(0.7)
    assert np.allclose(residual_distribution(p, q), [1.0, 0.0, 0.0])  # all on token a
    # P(a) = min(p, q)(a) + (1 - beta) * residual(a) = 0.3 + 0.3 = 0.6
    assert 0.3 + (1 - 0.7) * residual_distribution(p, q)[0] == pytest.approx(0.6)


def test_beta_is_one_minus_total_variation_vectorised() -> None:
    rng = np.random.default_rng(2)
    p = rng.dirichlet(np.ones(7), size=50)
    q = rng.dirichlet(np.ones(7), size=50)
    tv = 0.5 * np.abs(p - q).sum(axis=-1)
    assert np.allclose(acceptance_beta(p, q), 1 - tv)


def test_beta_from_logits_with_temperature() -> None:
    lp = np.array([2.0, 1.0, -1.0, 0.5])
    lq = np.array([1.5, 1.2, -0.5, 0.0])
    for t in (0.5, 1.0, 2.0):
        ep, eq = np.exp(lp / t), np.exp(lq / t)
        manual = np.minimum(ep / ep.sum(), eq / eq.sum()).sum()
        assert float(beta_from_logits(lp, lq, t)) == pytest.approx(manual)
    # greedy: accepted iff the argmaxes agree
    assert float(beta_from_logits(lp, lq, 0.0)) == 1.0
    assert float(beta_from_logits(lp, lq[::-1], 0.0)) == 0.0
    # hotter sampling flattens both towards uniform: beta grows
    assert beta_from_logits(lp, lq, 5.0) > beta_from_logits(lp, lq, 0.5)
    assert np.allclose(softmax(lp, 1.0).sum(), 1.0)


@pytest.mark.parametrize("alpha", [1.5, -0.1, float("nan")])
def test_bad_alpha_is_a_specsim_error(alpha: float) -> None:
    with pytest.raises(SpecsimError, match=r"alpha must lie in \[0, 1\]"):
        expected_tokens(alpha, 3)
    with pytest.raises(SpecsimError):
        AcceptanceProfile.from_alpha(alpha)


@pytest.mark.parametrize("k", [-1, 2.5])
def test_bad_k_is_a_specsim_error(k: float) -> None:
    with pytest.raises(SpecsimError, match="k must be"):
        expected_tokens(0.5, k)


def test_bad_distributions() -> None:
    with pytest.raises(SpecsimError, match="sum to 1"):
        acceptance_beta([0.5, 0.6], [0.5, 0.5])
    with pytest.raises(SpecsimError, match="temperature"):
        softmax([1.0, 2.0], -1.0)
