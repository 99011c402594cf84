"""Adaptive draft length (specsim.acceptance.adaptive): the closed form against a Monte-Carlo run of
the same stop/accept process, its fixed-k limit against the chain formula, and the sourced table."""

from __future__ import annotations

import numpy as np
import pytest

from specsim.acceptance import adaptive as ad
from specsim.acceptance.chain import (
    conditional_from_unconditional,
    expected_tokens_positional,
    tokens_distribution_positional,
)
from specsim.errors import SpecsimError

N_MC = 200_000
Z_MAX = 4.0


def _simulate(rule: ad.StopRule, n: int, seed: int) -> dict[str, np.ndarray]:
    """Draw ``n`` steps of one sequence, position by position, straight from the process definition
    (no recursion shared with the module): returns k, draft passes and tokens per step."""
    rng = np.random.default_rng(seed)
    a, t, f, o = rule.accept, rule.stop_if_reject, rule.stop_if_accept, rule.stop_off_path
    assert a.ndim == 1
    K = a.shape[0]
    drafting = np.ones(n, dtype=bool)     # still drafting
    correct = np.ones(n, dtype=bool)      # every included draft so far accepted
    k = np.zeros(n, dtype=np.int64)
    passes = np.zeros(n, dtype=np.int64)
    accepted = np.zeros(n, dtype=np.int64)
    for i in range(K):
        acc = rng.random(n) < a[i]
        u = rng.random(n)
        stop = np.where(correct, np.where(acc, u < f[i], u < t[i]), u < o[i])
        passes += drafting
        include = drafting.copy() if rule.convention == "inclusive" else drafting & ~stop
        k += include
        accepted += include & correct & acc
        correct = correct & ~(include & ~acc)
        drafting = drafting & ~stop
    return {"k": k, "passes": passes, "tokens": 1 + accepted}


def _z(sample: np.ndarray, expected: float) -> float:
    se = sample.std(ddof=1) / np.sqrt(sample.size)
    if se == 0:
        return 0.0 if np.isclose(sample.mean(), expected, atol=1e-12) else np.inf
    return float((sample.mean() - expected) / se)


RULES = [
    ("inclusive-correlated", dict(accept=[0.85, 0.8, 0.7, 0.65, 0.6, 0.5], stop_if_reject=0.6,
                                  stop_if_accept=0.15, convention="inclusive")),
    ("exclusive-correlated", dict(accept=[0.85, 0.8, 0.7, 0.65, 0.6, 0.5], stop_if_reject=0.6,
                                  stop_if_accept=0.15, convention="exclusive")),
    ("inclusive-offpath", dict(accept=[0.9, 0.75, 0.6, 0.5], stop_if_reject=[0.8, 0.7, 0.6, 0.5],
                               stop_if_accept=[0.05, 0.1, 0.1, 0.2], stop_off_path=0.4,
                               convention="inclusive")),
    ("exclusive-offpath", dict(accept=[0.9, 0.75, 0.6, 0.5], stop_if_reject=[0.8, 0.7, 0.6, 0.5],
                               stop_if_accept=[0.05, 0.1, 0.1, 0.2], stop_off_path=0.9,
                               convention="exclusive")),
]


@pytest.mark.parametrize(("name", "kw"), RULES, ids=[r[0] for r in RULES])
def test_expectations_match_monte_carlo(name: str, kw: dict) -> None:
    rule = ad.stop_rule(**kw)
    st = ad.adaptive_stats(rule)
    sim = _simulate(rule, N_MC, seed=sum(map(ord, name)))
    assert abs(_z(sim["k"], float(st.expected_k))) < Z_MAX
    assert abs(_z(sim["passes"], float(st.expected_passes))) < Z_MAX
    assert abs(_z(sim["tokens"], float(st.expected_tokens))) < Z_MAX
    # the whole distributions, bin by bin (binomial standard errors)
    for dist, draws, offset in ((st.k_dist, sim["k"], 0), (st.passes_dist, sim["passes"], 0),
                                (st.tokens_dist, sim["tokens"], 1)):
        assert np.isclose(dist.sum(), 1.0)
        counts = np.bincount(draws - offset, minlength=dist.size)[: dist.size] / N_MC
        se = np.sqrt(np.maximum(dist * (1 - dist), 1e-12) / N_MC)
        assert np.all(np.abs(counts - dist) / se < Z_MAX)
    # vLLM's per-position metric: P(draft i accepted)
    k_max = rule.k_max
    acc_pos = np.array([np.mean(sim["tokens"] - 1 >= i) for i in range(1, k_max + 1)])
    se = np.sqrt(np.maximum(st.accepted_per_position * (1 - st.accepted_per_position), 1e-12) / N_MC)
    assert np.all(np.abs(acc_pos - st.accepted_per_position) / se < Z_MAX)


@pytest.mark.parametrize("batch", [1, 4, 16])
def test_batch_max_and_step_cost_match_monte_carlo(batch: int) -> None:
    rule = ad.stop_rule([0.85, 0.8, 0.7, 0.65, 0.6], 0.6, 0.15, convention="exclusive")
    st = ad.adaptive_stats(rule)
    n_batches = 40_000
    sim = _simulate(rule, n_batches * batch, seed=batch)
    k = sim["k"].reshape(n_batches, batch)
    passes = sim["passes"].reshape(n_batches, batch)
    assert abs(_z(k.max(axis=1), float(ad.expected_max(st.k_dist, batch)))) < Z_MAX
    assert np.isclose(ad.max_distribution(st.k_dist, batch).sum(), 1.0)
    assert np.isclose(float(ad.expected_verify_tokens(st, batch, padded=True)),
                      1.0 + float(ad.expected_max(st.k_dist, batch)))
    assert np.isclose(float(ad.expected_verify_tokens(st, batch, padded=False)), 1.0 + float(st.expected_k))

    draft_cost = np.array([1.0, 0.9, 0.8, 0.7, 0.6])

    def verify_cost(tokens: np.ndarray) -> np.ndarray:  # a staircase (graph padding) plus a slope
        return 5.0 + 0.5 * np.ceil(tokens / 8.0) + 0.01 * tokens

    reach = np.arange(1, 6)
    mc_draft_lock = (passes.max(axis=1)[:, None] >= reach) @ draft_cost
    mc_draft_share = ((passes[..., None] >= reach) @ draft_cost).mean(axis=1)
    mc_pad = verify_cost(batch * (k.max(axis=1) + 1))
    mc_rag = verify_cost((k + 1).sum(axis=1))
    for padded, lock, mc in ((True, True, mc_draft_lock + mc_pad), (False, True, mc_draft_lock + mc_rag),
                             (True, False, mc_draft_share + mc_pad), (False, False, mc_draft_share + mc_rag)):
        exp = ad.expected_step_cost(st, draft_cost, verify_cost, batch, padded=padded, draft_lockstep=lock,
                                    overhead=0.3)
        assert abs(_z(mc + 0.3, float(exp))) < Z_MAX, (padded, lock)
    if batch == 1:  # one sequence: padding changes nothing
        assert np.isclose(ad.expected_step_cost(st, draft_cost, verify_cost, 1, padded=True),
                          ad.expected_step_cost(st, draft_cost, verify_cost, 1, padded=False))


def test_sum_distribution_is_the_convolution() -> None:
    d = np.array([0.2, 0.5, 0.3])
    two = np.convolve(d, d)
    assert np.allclose(ad.sum_distribution(d, 2), two, atol=1e-14)
    assert np.allclose(ad.sum_distribution(d, 3), np.convolve(two, d), atol=1e-14)


def test_never_stop_is_the_chain_formula() -> None:
    rng = np.random.default_rng(7)
    rates = rng.uniform(0.3, 0.95, size=(5, 8))
    rule = ad.stop_rule(rates, 0.0, 0.0)
    st = ad.adaptive_stats(rule)
    # bit for bit: the same float operations as the chain formula
    assert np.array_equal(st.expected_tokens, expected_tokens_positional(rates, 8))
    for k_cap in (1, 3, 5):
        capped = ad.adaptive_stats(ad.stop_rule(rates[:, :k_cap], 0.0, 0.0)).expected_tokens
        assert np.array_equal(capped, expected_tokens_positional(rates, k_cap))
    assert np.allclose(st.tokens_dist, tokens_distribution_positional(rates, 8), rtol=1e-13, atol=1e-15)
    assert np.allclose(st.k_dist[:, -1], 1.0, rtol=0, atol=1e-15)
    assert np.allclose(st.expected_k, 8.0)
    # the exclusive convention never stopping is the same chain
    st_ex = ad.adaptive_stats(ad.stop_rule(rates, 0.0, 0.0, convention="exclusive"))
    assert np.allclose(st_ex.expected_tokens, st.expected_tokens, rtol=1e-13)
    assert np.allclose(st_ex.passes_dist, st.passes_dist)


def test_perfect_rule_keeps_tokens_and_drafts_less() -> None:
    rates = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4])
    fixed = ad.adaptive_stats(ad.stop_rule(rates, 0.0, 0.0))
    # inclusive, stops right after the first rejected draft: same tokens, fewer drafts
    perfect = ad.adaptive_stats(ad.stop_rule(rates, 1.0, 0.0))
    assert np.isclose(perfect.expected_tokens, fixed.expected_tokens)
    assert perfect.expected_k < fixed.expected_k
    # with an oracle stop the drafts verified are the accepted ones plus the one rejected
    assert np.isclose(perfect.expected_k, np.sum(np.concatenate([[1.0], np.cumprod(rates)[:-1]])))
    # an uninformative signal that stops as often loses tokens
    p_stop = 1.0 - rates
    blind = ad.adaptive_stats(ad.independent_stop_rule(rates, 1.0 - p_stop))
    assert blind.expected_tokens < perfect.expected_tokens


def test_broadcasting_over_configurations() -> None:
    acc = np.linspace(0.5, 0.9, 4)[:, None, None] * np.ones((1, 1, 6))
    tpr = np.array([0.2, 0.8])[None, :, None]
    rule = ad.stop_rule(acc, tpr, 0.1)
    st = ad.adaptive_stats(rule)
    assert st.k_dist.shape == (4, 2, 7)
    assert st.expected_tokens.shape == (4, 2)
    assert ad.expected_max(st.k_dist, np.array([1, 8])[None, :]).shape == (4, 2)
    one = ad.adaptive_stats(ad.stop_rule(acc[2, 0], 0.8, 0.1))
    assert np.isclose(st.expected_tokens[2, 1], one.expected_tokens)
    assert np.all(np.diff(st.expected_tokens, axis=0) > 0)  # better drafts, more tokens


def test_precision_recall_round_trip() -> None:
    acc = np.array([0.8, 0.7, 0.6])
    tpr, fpr = np.array([0.7, 0.6, 0.5]), np.array([0.1, 0.2, 0.1])
    p_stop = acc * fpr + (1 - acc) * tpr
    precision = (1 - acc) * tpr / p_stop
    rule = ad.stop_rule_from_precision_recall(acc, precision, tpr)
    assert np.allclose(rule.stop_if_accept, fpr)
    assert np.allclose(rule.stop_if_reject, tpr)
    with pytest.raises(SpecsimError):
        ad.stop_rule_from_precision_recall([0.1], [0.05], [0.9])


def test_compare_with_fixed_k() -> None:
    rates = np.array([0.85, 0.75, 0.65, 0.55, 0.45, 0.35, 0.3, 0.25])
    dc = np.full(8, 0.5)

    def vc(tokens: np.ndarray) -> np.ndarray:
        return 10.0 + 0.02 * tokens

    never = ad.compare_with_fixed_k(ad.stop_rule(rates, 0.0, 0.0), dc, vc, 32)
    assert np.isclose(never.adaptive_rate, never.fixed_rate[-1])
    assert np.isclose(never.fixed_tokens[0], 1.0) and np.isclose(never.fixed_cost[0], vc(np.array(32)))
    good = ad.compare_with_fixed_k(ad.stop_rule(rates, 0.8, 0.05), dc, vc, 32, padded=False)
    assert good.adaptive_rate > good.fixed_rate[-1]
    assert good.speedup_vs_best_fixed > 0 and good.best_fixed_k.shape == ()
    # padded batches lose part of the gain: the batch verifies its longest draft
    padded = ad.compare_with_fixed_k(ad.stop_rule(rates, 0.8, 0.05), dc, vc, 32, padded=True)
    assert padded.adaptive_cost > good.adaptive_cost


def test_rejects_bad_input() -> None:
    with pytest.raises(SpecsimError):
        ad.stop_rule([0.5, 1.2], 0.1, 0.1)
    with pytest.raises(SpecsimError):
        ad.stop_rule(0.5, 0.1, 0.1)
    with pytest.raises(SpecsimError):
        ad.stop_rule([0.5], 0.1, 0.1, convention="sometimes")  # type: ignore[arg-type]
    st = ad.adaptive_stats(ad.stop_rule([0.5, 0.5], 0.1, 0.1))
    with pytest.raises(SpecsimError):
        ad.expected_step_cost(st, [1.0], lambda t: t, 4)
    with pytest.raises(SpecsimError):
        ad.expected_max(st.k_dist, 0)


def test_sourced_per_position_tables_are_consistent() -> None:
    pp = ad.GLM52_DSPARK16_GB200_PER_POSITION
    fixed, adaptive = np.array(pp["fixed_k16"]), np.array(pp["adaptive"])
    figures = ad.SOURCES[0]["figures"]
    assert isinstance(figures, dict)
    assert abs(1 + fixed.sum() - figures["AL_fixed"]) < 0.01
    assert abs(1 + adaptive.sum() - figures["AL_adaptive"]) < 0.01
    assert np.all(adaptive <= fixed)  # trimming only removes survival
    # the fixed arm is a chain: its conditional rates give back its AL
    cond = conditional_from_unconditional(fixed)
    assert abs(float(expected_tokens_positional(cond, 16)) - figures["AL_fixed"]) < 0.01
    for src in ad.SOURCES:
        assert src["source"] and src["hardware"] and src["figures"]
