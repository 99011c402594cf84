"""The exact reference sampler against the formulas and against the target distribution.

Statistical tests use fixed seeds, so they are deterministic; the thresholds say how often they
would fail by chance with a fresh seed: Monte-Carlo means |z| < 4 (two-sided false-alarm rate
6e-5), distributions chi-square p > 1e-3 (false-alarm rate 1e-3).
"""

from __future__ import annotations

import numpy as np
import pytest

from specsim.acceptance import reference as ref
from specsim.acceptance.chain import AcceptanceProfile, expected_tokens, tokens_distribution
from specsim.acceptance.check import chi_square_test
from specsim.acceptance.sibling_probs import sibling_probs_multicandidate
from specsim.acceptance.tree_search import best_tree
from specsim.acceptance.tree_shapes import chain, medusa_tree
from specsim.acceptance.trees import Tree
from specsim.errors import SpecsimError

Z_LIMIT = 4.0
P_FALSE_ALARM = 1e-3


def z_score(samples: np.ndarray, expected: float) -> float:
    return float((samples.mean() - expected) / (samples.std(ddof=1) / np.sqrt(samples.size)))


@pytest.fixture(scope="module")
def seed_models() -> tuple[ref.MarkovLM, ref.MarkovLM, ref.MarkovLM]:
    """The seed chapter's setting: random 6-token chains, a 0.7/0.3 mixture draft, an unrelated one."""
    rng = np.random.default_rng(0)
    target = ref.random_markov_lm(6, 2.0, rng)
    draft = ref.mixture(target, ref.random_markov_lm(6, 2.0, rng), 0.7)
    unrelated = ref.random_markov_lm(6, 2.0, rng)
    return target, draft, unrelated


def test_circulant_models_have_exact_acceptance() -> None:
    rng = np.random.default_rng(1)
    target, draft = ref.circulant_pair(7, 0.65, rng)
    betas = np.minimum(target.table, draft.table).sum(axis=1)
    assert np.allclose(betas, 0.65)


@pytest.mark.parametrize(("alpha", "k"), [(0.8, 4), (0.6, 3), (0.3, 6), (0.95, 2)])
def test_chain_tokens_per_step_match_formula(alpha: float, k: int) -> None:
    """Mean tokens/step of the reference vs (1 - a^(k+1)) / (1 - a); |z| < 4 (false alarm 6e-5)."""
    rng = np.random.default_rng(100 + k)
    target, draft = ref.circulant_pair(6, alpha, rng)
    counts = ref.tokens_per_step(target, draft, 12_000, rng, k=k)
    assert abs(z_score(counts, float(expected_tokens(alpha, k)))) < Z_LIMIT


def test_chain_tokens_per_step_full_distribution() -> None:
    """The histogram of tokens/step vs the formula's distribution: chi-square p > 1e-3."""
    rng = np.random.default_rng(7)
    alpha, k = 0.75, 4
    target, draft = ref.circulant_pair(6, alpha, rng)
    counts = ref.tokens_per_step(target, draft, 12_000, rng, k=k)
    observed = np.bincount(counts, minlength=k + 2)[1:]
    _, _, p = chi_square_test(observed, tokens_distribution(alpha, k))
    assert p > P_FALSE_ALARM


def test_per_position_rates_match_formula() -> None:
    """Draft quality decaying with depth (Medusa-like): E = 1 + sum prod alpha_j; |z| < 4."""
    rng = np.random.default_rng(11)
    alphas = [0.9, 0.7, 0.5, 0.3]
    target, drafts = ref.circulant_pair(6, alphas, rng)
    counts = ref.tokens_per_step(target, drafts, 12_000, rng, k=4)
    assert abs(z_score(counts, float(AcceptanceProfile.from_alphas(alphas).mean_tokens(4)))) < Z_LIMIT


@pytest.mark.parametrize("shape", ["medusa32", "best10", "seed_figure"])
def test_tree_tokens_per_step_match_sequoia_formula(shape: str) -> None:
    """SpecInfer multi-candidate verification vs 1 + sum of path probabilities; |z| < 4."""
    rng = np.random.default_rng(21)
    target, draft = ref.circulant_pair(6, 0.6, rng)
    probs = sibling_probs_multicandidate(target.table[0], draft.table[0], 4)
    tree = {
        "medusa32": medusa_tree([3, 2]),
        "best10": best_tree(probs, 10),
        "seed_figure": Tree.from_parents([-1, -1, 0, 0, 1, 1]),
    }[shape]
    counts = ref.tokens_per_step(target, draft, 12_000, rng, tree=tree)
    assert abs(z_score(counts, float(tree.expected_tokens(probs)))) < Z_LIMIT


def test_tree_beats_chain_of_same_depth_in_reference() -> None:
    rng = np.random.default_rng(5)
    target, draft = ref.circulant_pair(6, 0.5, rng)
    chain_mean = ref.tokens_per_step(target, draft, 6000, rng, tree=chain(2)).mean()
    tree_mean = ref.tokens_per_step(target, draft, 6000, rng, tree=medusa_tree([3, 3])).mean()
    assert tree_mean > chain_mean + 0.2


def test_chain_output_distribution_equals_target(seed_models) -> None:
    """Joint law of the first 3 tokens (216 cells) vs the target's: chi-square p > 1e-3."""
    target, draft, unrelated = seed_models
    for d, seed in ((draft, 31), (unrelated, 32)):
        rng = np.random.default_rng(seed)
        counts = ref.sequence_counts(target, d, 0, 3, 15_000, rng, k=4)
        _, _, p = chi_square_test(counts, ref.exact_sequence_probs(target, 0, 3))
        assert p > P_FALSE_ALARM


def test_tree_output_distribution_equals_target(seed_models) -> None:
    """SpecInfer's multi-candidate rule is lossless: chi-square p > 1e-3 on the first 3 tokens."""
    target, draft, _ = seed_models
    rng = np.random.default_rng(41)
    counts = ref.sequence_counts(target, draft, 0, 3, 15_000, rng, tree=medusa_tree([2, 2]))
    _, _, p = chi_square_test(counts, ref.exact_sequence_probs(target, 0, 3))
    assert p > P_FALSE_ALARM


@pytest.mark.parametrize("broken", ["residual_is_p", "residual_is_q", "no_subtraction"])
@pytest.mark.parametrize("shape", ["chain", "tree"])
def test_broken_residual_is_detected(seed_models, broken: str, shape: str) -> None:
    """The chi-square test must reject a wrong residual (p < 1e-6): it has power.

    Uses the good (mixture) draft, where rejections are rarest and a fault hardest to see.
    """
    target, draft, _ = seed_models
    wrong = {
        "residual_is_p": lambda p, q: p,
        "residual_is_q": lambda p, q: q,
        "no_subtraction": lambda p, q: np.maximum(p, q) / np.maximum(p, q).sum(),
    }[broken]
    kwargs = {"k": 4} if shape == "chain" else {"tree": medusa_tree([2, 2])}
    rng = np.random.default_rng(51)
    counts = ref.sequence_counts(target, draft, 0, 3, 5000, rng, residual=wrong, **kwargs)
    _, _, p = chi_square_test(counts, ref.exact_sequence_probs(target, 0, 3))
    assert p < 1e-6


def test_paired_control_same_seed_right_residual_passes(seed_models) -> None:
    """Same seed and size as the broken-residual tests, correct residual: p > 1e-3."""
    target, draft, _ = seed_models
    for kwargs in ({"k": 4}, {"tree": medusa_tree([2, 2])}):
        rng = np.random.default_rng(51)
        counts = ref.sequence_counts(target, draft, 0, 3, 5000, rng, **kwargs)
        _, _, p = chi_square_test(counts, ref.exact_sequence_probs(target, 0, 3))
        assert p > P_FALSE_ALARM


def test_seed_check_your_understanding_in_the_sampler() -> None:
    """p = (.6,.3,.1), q = (.3,.6,.1): accepted w.p. 0.7, and every rejection emits token a."""
    p = np.array([0.6, 0.3, 0.1])
    q = np.array([0.3, 0.6, 0.1])
    target = ref.MarkovLM(np.tile(p, (3, 1)))
    draft = ref.MarkovLM(np.tile(q, (3, 1)))
    rng = np.random.default_rng(3)
    accepted, rejected_tokens = [], []
    for _ in range(8000):
        out = ref.chain_step(target, draft, 0, 1, rng)
        accepted.append(len(out) == 2)
        if len(out) == 1:
            rejected_tokens.append(out[0])
    assert abs(z_score(np.array(accepted, dtype=float), 0.7)) < Z_LIMIT
    assert set(rejected_tokens) == {0}


def test_greedy_reduces_to_argmax_matching(seed_models) -> None:
    target, draft, unrelated = seed_models
    rng = np.random.default_rng(0)
    for d in (draft, unrelated):
        for start in range(6):
            want = ref.greedy_sequence(target, start, 20)
            for kwargs in ({"k": 1}, {"k": 5}, {"tree": medusa_tree([3, 2])}):
                got, _ = ref.generate(target, d, start, 20, rng, greedy=True, **kwargs)
                assert got == want


def test_greedy_with_perfect_draft_emits_k_plus_one() -> None:
    rng = np.random.default_rng(0)
    target = ref.random_markov_lm(5, 2.0, rng)
    counts = ref.tokens_per_step(target, target, 50, rng, k=3, greedy=True)
    assert np.all(counts == 4)


def test_no_drafts_is_plain_decoding() -> None:
    rng = np.random.default_rng(0)
    target = ref.random_markov_lm(5, 2.0, rng)
    assert np.all(ref.tokens_per_step(target, target, 100, rng, k=0) == 1)
    assert np.all(ref.tokens_per_step(target, target, 100, rng, tree=chain(0)) == 1)


def test_seeded_runs_are_reproducible(seed_models) -> None:
    target, draft, _ = seed_models
    a = ref.tokens_per_step(target, draft, 200, np.random.default_rng(9), k=3)
    b = ref.tokens_per_step(target, draft, 200, np.random.default_rng(9), k=3)
    assert np.array_equal(a, b)


def test_reference_input_errors() -> None:
    rng = np.random.default_rng(0)
    target = ref.random_markov_lm(4, 1.0, rng)
    with pytest.raises(SpecsimError, match="exactly one"):
        ref.tokens_per_step(target, target, 1, rng)
    with pytest.raises(SpecsimError, match="k must be"):
        ref.tokens_per_step(target, target, 1, rng, k=-1)
    with pytest.raises(SpecsimError, match="probability distribution"):
        ref.MarkovLM(np.ones((3, 3)))
    with pytest.raises(SpecsimError, match="positions"):
        ref.tokens_per_step(target, [target], 1, rng, k=2)
