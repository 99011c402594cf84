from __future__ import annotations

import numpy as np
import pytest

from specsim.acceptance.sibling_probs import sibling_probs_hazard
from specsim.acceptance.tree_search import best_tree
from specsim.acceptance.tree_shapes import chain, eagle2_expected_tokens, eagle2_tree, medusa_tree, static_tree
from specsim.acceptance.trees import Tree
from specsim.errors import SpecsimError
from tests.acceptance.test_trees import SEED_PARENTS


def test_medusa_tree_shape_and_paths_round_trip() -> None:
    t = medusa_tree([3, 2, 2])
    assert t.num_nodes == 3 + 6 + 12
    assert np.bincount(t.depths).tolist() == [0, 3, 6, 12]
    assert Tree.from_paths(t.paths()).parents == t.parents
    assert Tree.from_paths([[0], [1], [0, 0], [0, 1], [1, 0], [1, 1]]).parents == tuple(SEED_PARENTS)
    with pytest.raises(SpecsimError, match="no parent path"):
        Tree.from_paths([[0], [1, 0]])


def test_eagle2_tree() -> None:
    probs = np.array([0.6, 0.25, 0.1, 0.05])
    t = eagle2_tree(probs, topk=4, depth=5, num_nodes=7)  # SGLang default: topk 4, 5 steps, 8 draft tokens
    assert t.num_nodes == 7 and t.depth <= 5
    best = best_tree(probs, 7, max_depth=5)
    assert float(t.expected_tokens(probs)) <= float(best.expected_tokens(probs)) + 1e-12
    # with enough width and depth the EAGLE-2 rerank finds the optimum
    t_wide = eagle2_tree(probs, topk=10, depth=10, num_nodes=10)
    assert float(t_wide.expected_tokens(probs)) == pytest.approx(float(best_tree(probs, 10).expected_tokens(probs)))
    # top-1 expansion is a chain
    assert eagle2_tree(probs, topk=1, depth=4, num_nodes=4).parents == chain(4).parents


def test_eagle2_expected_tokens_equals_the_built_tree() -> None:
    """The vectorised expectation (sum of the kept candidates' path probabilities) against building the
    tree and summing its path probabilities, for random rank-monotone profiles and several shapes."""
    rng = np.random.default_rng(11)
    for _ in range(5):
        rates = rng.uniform(0.3, 0.95, size=8)
        probs = sibling_probs_hazard(rates, 10)
        for topk, depth, n in ((10, 6, 59), (4, 5, 24), (2, 7, 9), (8, 3, 20), (1, 4, 4)):
            built = float(eagle2_tree(probs, topk, depth, n).expected_tokens(probs))
            assert float(eagle2_expected_tokens(probs, topk, depth, n)) == pytest.approx(built, rel=1e-12)
    stack = np.stack([sibling_probs_hazard(rng.uniform(0.3, 0.9, size=6), 4) for _ in range(3)])
    batched = eagle2_expected_tokens(stack, 4, 6, 16)
    assert batched == pytest.approx([float(eagle2_expected_tokens(s, 4, 6, 16)) for s in stack])


def test_published_static_trees() -> None:
    """EAGLE's mc_sim_7b_63 (25 nodes, depth 5) and Medusa's (63 nodes + root, depth 4), as shipped."""
    e1, md = static_tree("eagle1"), static_tree("medusa")
    assert (e1.num_nodes, e1.depth) == (25, 5) and (md.num_nodes, md.depth) == (63, 4)
    assert int(np.bincount(e1.depths)[1]) == 4 and int(md.ranks.max()) == 9
    with pytest.raises(SpecsimError, match="unknown static tree"):
        static_tree("sequoia")
