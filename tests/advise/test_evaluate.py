from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from specsim.acceptance.sibling_probs import sibling_probs_hazard
from specsim.acceptance.tree_files import TreeSpec
from specsim.acceptance.trees import Tree
from specsim.advise.evaluate import (
    Acceptance,
    EvaluateRequest,
    RatioCost,
    RatioStep,
    RealCost,
    RealStep,
    acceptance_profile,
    check_chain_or_tree,
    evaluate_step,
    tree_probs,
)
from specsim.errors import SpecsimError

DATA = Path(__file__).parents[1] / "data"
LLAMA_8B = RealCost("h100-sxm", "llama-3.1-8b", "eagle3")


def _never() -> list[float]:
    raise AssertionError("parsed although not needed")


def ratio(**kw: object) -> RatioStep:
    r = evaluate_step(EvaluateRequest(RatioCost(0.05), **kw))
    assert isinstance(r, RatioStep)
    return r


def real(cost: RealCost = LLAMA_8B, **kw: object) -> RealStep:
    r = evaluate_step(EvaluateRequest(cost, **kw))
    assert isinstance(r, RealStep)
    return r


def test_ratio_chain_reproduces_the_seed_worked_example() -> None:
    r = ratio(acceptance=Acceptance(alpha=0.8), k=4)
    assert float(r.metrics.tokens_per_step) == pytest.approx(3.3616)
    assert round(float(r.metrics.speedup), 2) == 2.80
    assert r.k == 4 and r.is_chain and r.verify_tokens == 5 and r.chain_rates == (0.8,) * 4
    assert r.acceptance == "alpha=0.8" and "c = 0.05" in r.cost_source and "T = 1 ms" in r.cost_source


def test_ratio_ridge_and_target_step_in_the_note_and_times() -> None:
    r = evaluate_step(EvaluateRequest(RatioCost(0.05, 20.0, 128.0), Acceptance(alpha=0.8), k=4, batch=128))
    assert float(r.metrics.verify_ms) == pytest.approx(100.0)  # 128 x 5 tokens past the 128-token ridge
    assert "up to 128 tokens, then x tokens/128" in r.cost_source and "T = 20 ms" in r.cost_source


def test_ratio_measured_mean_length_becomes_alpha_at_depth_k() -> None:
    r = ratio(acceptance=Acceptance(mean_length=3.2), k=4)
    assert float(r.metrics.tokens_per_step) == pytest.approx(3.2)
    with pytest.raises(SpecsimError, match="needs the draft length --k"):
        ratio(acceptance=Acceptance(mean_length=3.2))
    with pytest.raises(SpecsimError, match=r"\[1, k\+1\] = \[1, 5\]"):
        ratio(acceptance=Acceptance(mean_length=6.0), k=4)


def test_ratio_tree_file_uses_its_own_table_and_refuses_sibling_probs_it_would_not_read() -> None:
    with pytest.raises(SpecsimError, match="its own acceptance table: --sibling-probs would change nothing"):
        ratio(tree=DATA / "tree_seed.yaml", sibling_probs=lambda: [0.5], batch=8)
    r = ratio(tree=DATA / "tree_seed.yaml", batch=8)
    assert float(r.metrics.tokens_per_step) == pytest.approx(2.53)
    assert r.k is None and not r.is_chain and r.chain_rates is None
    assert r.verify_tokens == 8 * 7 and r.acceptance == "tree file / --sibling-probs"


def test_tree_probs_resolution_order() -> None:
    tree = Tree.from_parents([-1, -1, 0, 0, 1, 1])
    table = np.array([[0.6, 0.3], [0.5, 0.2]])
    assert tree_probs(TreeSpec(tree, table), None, None) is table
    with pytest.raises(SpecsimError, match="--sibling-probs would change nothing"):
        tree_probs(TreeSpec(tree, table), _never, None)
    assert list(tree_probs(TreeSpec(tree), lambda: [0.6, 0.3], None)) == [0.6, 0.3]
    hazard = tree_probs(TreeSpec(tree), None, lambda depth: np.full(depth, 0.7))
    assert np.allclose(hazard, sibling_probs_hazard(np.full(2, 0.7), 2))
    with pytest.raises(SpecsimError, match="a tree needs acceptance"):
        tree_probs(TreeSpec(tree), None, None)


def test_acceptance_sources_are_exclusive_and_checked_before_parsing() -> None:
    with pytest.raises(SpecsimError, match="give only one of"):
        acceptance_profile(Acceptance(alpha=0.5, alphas=_never), None)
    with pytest.raises(SpecsimError, match="--alpha must lie in"):
        acceptance_profile(Acceptance(alpha=1.5), None)
    assert acceptance_profile(Acceptance(), None) is None
    p = acceptance_profile(Acceptance(alphas=lambda: [0.9, 0.8]), None)
    assert p is not None and p.max_k == 2


def test_chain_or_tree() -> None:
    check_chain_or_tree(3, None)
    check_chain_or_tree(None, DATA / "tree_seed.yaml")
    with pytest.raises(SpecsimError, match="not both"):
        check_chain_or_tree(3, DATA / "tree_seed.yaml")
    with pytest.raises(SpecsimError, match="not both"):
        ratio(acceptance=Acceptance(alpha=0.5), k=3, tree=DATA / "tree_seed.yaml")


def test_real_route_prices_the_step_and_its_memory() -> None:
    r = real(acceptance=Acceptance(alpha=0.8), k=4, batch=8)
    assert float(r.metrics.tokens_per_step) == pytest.approx(3.3616) and float(r.metrics.speedup) > 1.0
    assert r.fits_memory and 0 < r.memory_gib < r.capacity_gib
    assert (r.draft, r.method, r.engine, r.k, r.tp, r.cost_model) == ("eagle3", "eagle3", "vllm", 4, 1, "roofline")
    assert r.acceptance == "alpha=0.8" and r.acceptance_note is None
    assert r.cost_source.startswith("roofline cost model: llama-3.1-8b on 1x h100-sxm as vllm runs it")


def test_real_route_measured_length_and_prior() -> None:
    r = real(acceptance=Acceptance(mean_length=3.2), k=3)
    assert float(r.metrics.tokens_per_step) == pytest.approx(3.2)
    assert r.acceptance == "measured acceptance length" and r.cost_source.endswith("measured (--acceptance-length)")
    prior = real(k=3)
    assert prior.acceptance.startswith("prior") and float(prior.metrics.tokens_per_step) > 1.0
    with pytest.raises(SpecsimError, match="give one acceptance"):
        real(acceptance=Acceptance(alpha=0.5, mean_length=3.0), k=3)
    with pytest.raises(SpecsimError, match=r"must lie in \[1, 4\] at this draft shape"):
        real(acceptance=Acceptance(mean_length=5.0), k=3)


def test_real_route_tree_file_sets_depth_and_verified_tokens() -> None:
    r = real(tree=DATA / "tree_seed.yaml")
    assert r.k == 2 and float(r.metrics.tokens_per_step) == pytest.approx(2.53)
    with pytest.raises(SpecsimError, match="draft length --k"):
        real()
    with pytest.raises(SpecsimError, match="--acceptance-length or a --tree"):
        real(tree=DATA / "tree_seed.yaml", acceptance=Acceptance(mean_length=2.0))


def test_real_route_refuses_what_does_not_fit_and_says_why() -> None:
    with pytest.raises(SpecsimError, match=r"with draft:llama-3.2-1b at k=4 \(plain decoding needs"):
        real(RealCost("h100-sxm", "llama-3.1-8b", "llama-3.2-1b"), k=4, batch=100, context=4096)
    with pytest.raises(SpecsimError, match="even without speculation; lower --batch"):
        real(RealCost("h100-sxm", "llama-3.1-70b", "eagle3"), k=4)
