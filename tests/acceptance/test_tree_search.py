from __future__ import annotations

import numpy as np
import pytest

from specsim.acceptance.sibling_probs import sibling_probs_hazard
from specsim.acceptance.tree_search import best_tree, best_tree_curve, best_tree_for_budget, best_tree_size
from specsim.acceptance.tree_shapes import chain
from specsim.errors import SpecsimError


def _all_trees(n_max: int, max_rank: int) -> dict[int, set[frozenset[tuple[int, ...]]]]:
    """Every tree (as a set of rank paths) with up to n_max nodes, by brute-force growth."""
    levels: dict[int, set[frozenset[tuple[int, ...]]]] = {0: {frozenset()}}
    for n in range(1, n_max + 1):
        nxt: set[frozenset[tuple[int, ...]]] = set()
        for tree in levels[n - 1]:
            for parent in [(), *tree]:
                rank = sum(1 for p in tree if len(p) == len(parent) + 1 and p[:-1] == parent)
                if rank < max_rank:
                    nxt.add(tree | {(*parent, rank)})
        levels[n] = nxt
    return levels


def _value(paths: frozenset[tuple[int, ...]], probs: np.ndarray) -> float:
    total = 1.0
    for path in paths:
        v = 1.0
        for d, r in enumerate(path):
            v *= probs[d, r] if d < probs.shape[0] else 0.0
        total += v
    return total


def test_best_tree_is_optimal_against_brute_force() -> None:
    """Greedy on path probability vs exhaustive search over all trees of n <= 7 nodes."""
    rng = np.random.default_rng(3)
    trees = _all_trees(7, max_rank=3)
    for _ in range(6):
        raw = rng.dirichlet(np.ones(4), size=4)[:, :3]
        probs = -np.sort(-raw, axis=1)  # non-increasing in rank
        for n in range(1, 8):
            brute = max(_value(t, probs) for t in trees[n])
            greedy = best_tree(probs, n)
            assert greedy.num_nodes == n
            assert float(greedy.expected_tokens(probs)) == pytest.approx(brute, abs=1e-12)


def test_best_tree_is_optimal_under_the_hazard_model() -> None:
    """best_tree against exhaustive search when the probabilities come from the hazard model (the
    planner's case): equal for every n <= 7."""
    trees = _all_trees(7, max_rank=3)
    for rates in ([0.8, 0.7, 0.6, 0.6], [0.5, 0.4, 0.4, 0.3], [0.95, 0.9, 0.5, 0.2]):
        probs = sibling_probs_hazard(rates, 3)
        for n in range(1, 8):
            brute = max(_value(t, probs) for t in trees[n])
            assert float(best_tree(probs, n).expected_tokens(probs)) == pytest.approx(brute, abs=1e-12)


def test_best_tree_curve_and_nesting() -> None:
    probs = np.array([0.7, 0.2, 0.05])
    curve = best_tree_curve(probs, 15)
    assert curve[0] == 1.0 and np.all(np.diff(curve) >= 0)
    for n in (1, 4, 9, 15):
        assert curve[n] == pytest.approx(float(best_tree(probs, n).expected_tokens(probs)))


def test_best_tree_special_cases() -> None:
    # a single candidate per node: the best tree is the chain
    assert best_tree([0.8], 5).parents == chain(5).parents
    # rank monotonicity is required for the greedy guarantee
    with pytest.raises(SpecsimError, match="non-increasing"):
        best_tree([0.2, 0.5], 3)
    # budget: batch 8, 40 tokens -> 5 tokens per sequence -> 4 nodes
    assert best_tree_for_budget([0.7, 0.2], 40, batch=8).num_nodes == 4
    with pytest.raises(SpecsimError, match="budget"):
        best_tree_for_budget([0.7, 0.2], 4, batch=8)


def test_best_tree_size_trades_tokens_against_time() -> None:
    probs = [0.8, 0.1]
    n = np.arange(0, 31)
    flat = np.ones(31)  # verification free: more nodes never hurt
    assert best_tree_size(probs, flat) == 30
    steep = 1.0 + 0.5 * n  # every node costs half a step: stop early
    curve = best_tree_curve(probs, 30)
    assert best_tree_size(probs, steep) == int(np.argmax(curve / steep)) < 10
