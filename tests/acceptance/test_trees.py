from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from specsim.acceptance.chain import expected_tokens, expected_tokens_positional
from specsim.acceptance.trees import (
    Tree,
    best_tree,
    best_tree_curve,
    best_tree_for_budget,
    best_tree_size,
    chain,
    eagle2_tree,
    load_tree,
    medusa_tree,
    sibling_probs_independent,
    sibling_probs_multicandidate,
)
from specsim.errors import SpecsimError

DATA = Path(__file__).parents[1] / "data"

# the seed chapter's figure: flattened [a, b, a1, a2, b1, b2]
SEED_PARENTS = [-1, -1, 0, 0, 1, 1]
SEED_MASK = np.array(
    [
        [1, 0, 0, 0, 0, 0],
        [0, 1, 0, 0, 0, 0],
        [1, 0, 1, 0, 0, 0],
        [1, 0, 0, 1, 0, 0],
        [0, 1, 0, 0, 1, 0],
        [0, 1, 0, 0, 0, 1],
    ]
)


def test_seed_figure_mask_and_positions() -> None:
    t = Tree.from_parents(SEED_PARENTS)
    assert np.array_equal(t.attention_mask(), SEED_MASK)
    assert t.depths.tolist() == [1, 1, 2, 2, 2, 2]
    assert t.position_ids(first_position=100).tolist() == [100, 100, 101, 101, 101, 101]
    assert t.ranks.tolist() == [0, 1, 0, 1, 0, 1]
    assert t.num_verify_tokens == 7 and t.depth == 2
    full = t.attention_mask(include_root=True)
    assert full.shape == (7, 7) and full[:, 0].all() and np.array_equal(full[1:, 1:], SEED_MASK)


def test_any_node_order_is_allowed() -> None:
    # the same tree listed children-first: a1 (0), a (1), b (2), b1 (3)
    t = Tree.from_parents([1, -1, -1, 2])
    assert t.depths.tolist() == [2, 1, 1, 2]
    assert t.attention_mask()[0].tolist() == [1, 1, 0, 0]


@pytest.mark.parametrize(
    ("parents", "message"),
    [
        ([1, 0], "cycle"),
        ([-1, 2, 1], "cycle"),
        ([-1, 5], "allowed -1"),
        ([-2], "allowed -1"),
        ([0], "own parent"),
    ],
)
def test_not_a_tree(parents: list[int], message: str) -> None:
    with pytest.raises(SpecsimError, match=message):
        Tree.from_parents(parents)


def test_chain_tree_equals_chain_formula() -> None:
    rates = np.array([0.9, 0.8, 0.5, 0.4])
    t = chain(4)
    assert t.parents == (-1, 0, 1, 2)
    assert float(t.expected_tokens(rates[:, None])) == pytest.approx(float(expected_tokens_positional(rates, 4)))
    assert float(chain(5).expected_tokens([0.7])) == pytest.approx(float(expected_tokens(0.7, 5)))
    assert chain(0).num_nodes == 0 and float(chain(0).expected_tokens([0.7])) == 1.0


def test_expected_tokens_by_hand_seed_tree() -> None:
    t = Tree.from_parents(SEED_PARENTS)
    # one vector by rank at every depth: a .6, b .3, a1 .36, a2 .18, b1 .18, b2 .09
    assert float(t.expected_tokens([0.6, 0.3])) == pytest.approx(1 + 0.6 + 0.3 + 0.36 + 0.18 + 0.18 + 0.09)
    # by depth and rank
    probs = [[0.6, 0.3], [0.5, 0.2]]
    assert float(t.expected_tokens(probs)) == pytest.approx(1 + 0.6 + 0.3 + 0.3 + 0.12 + 0.15 + 0.06)


def test_path_probabilities_broadcast_over_profiles() -> None:
    t = medusa_tree([2, 2])
    rng = np.random.default_rng(0)
    probs = np.sort(rng.dirichlet(np.ones(3), size=(5, 2))[..., :2], axis=-1)[..., ::-1]
    out = t.path_probabilities(probs)
    assert out.shape == (5, t.num_nodes)
    for i in range(5):
        assert np.allclose(out[i], t.path_probabilities(probs[i]))


def test_sibling_probs_must_be_exclusive() -> None:
    with pytest.raises(SpecsimError, match="sum to <= 1"):
        chain(2).expected_tokens([0.8, 0.5])


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


def test_sibling_probability_models() -> None:
    # SpecInfer multi-candidate: seed p/q -> beta 0.7, residual (1,0,0), second try passes w.p. q(a)=0.3
    p, q = np.array([0.6, 0.3, 0.1]), np.array([0.3, 0.6, 0.1])
    assert np.allclose(sibling_probs_multicandidate(p, q, 3), [0.7, 0.3 * 0.3, 0.3 * 0.7 * 0.3])
    ind = sibling_probs_independent([0.8, 0.5], 3)
    assert np.allclose(ind, [[0.8, 0.16, 0.032], [0.5, 0.25, 0.125]])


def test_load_tree_file() -> None:
    spec = load_tree(DATA / "tree_seed.yaml")
    assert spec.tree.parents == tuple(SEED_PARENTS)
    assert spec.probs is not None and float(spec.tree.expected_tokens(spec.probs)) == pytest.approx(2.53)
    with pytest.raises(SpecsimError, match="not a tree"):
        load_tree(DATA / "tree_cycle.yaml")
    with pytest.raises(SpecsimError, match="no such tree file"):
        load_tree(DATA / "absent.yaml")


def test_load_tree_json_and_bad_fields(tmp_path: Path) -> None:
    f = tmp_path / "t.json"
    f.write_text('{"paths": [[0], [0, 0], [1]]}')
    assert load_tree(f).tree.num_nodes == 3
    f.write_text('{"nodes": [1, 2]}')
    with pytest.raises(SpecsimError, match="'parents'"):
        load_tree(f)
    f.write_text('{"parents": [-1, "x"]}')
    with pytest.raises(SpecsimError, match="integers"):
        load_tree(f)


# ---------------------------------------------------------------------------------------------
# the sibling hazard model, the vectorised EAGLE-2 expectation, the published static trees
# ---------------------------------------------------------------------------------------------


def test_sibling_hazard_by_hand() -> None:
    """probs[d, r] = a decay^r prod_{j<r} (1 - a decay^j): a = 0.8, decay 0.5 by hand."""
    from specsim.acceptance.trees import sibling_probs_hazard

    p = sibling_probs_hazard([0.8], 3, decay=0.5)[0]
    assert p == pytest.approx([0.8, 0.2 * 0.4, 0.2 * 0.6 * 0.2])
    # decay 1 is the independent model; rank 0 is always the chain rate
    rates = np.array([0.9, 0.6, 0.3])
    assert sibling_probs_hazard(rates, 4, decay=1.0) == pytest.approx(sibling_probs_independent(rates, 4))
    assert sibling_probs_hazard(rates, 4)[:, 0] == pytest.approx(rates)
    assert np.all(sibling_probs_hazard(rates, 8).sum(axis=1) <= 1.0 + 1e-12)
    assert np.all(np.diff(sibling_probs_hazard(rates, 8), axis=1) <= 1e-12)  # rank-monotone (best_tree needs it)
    # a chain under the hazard model is the chain formula
    assert float(chain(3).expected_tokens(sibling_probs_hazard(rates, 2))) == pytest.approx(
        float(expected_tokens_positional(rates, 3)))


def test_eagle2_expected_tokens_equals_the_built_tree() -> None:
    """The vectorised expectation (sum of the kept candidates' path probabilities) against building the
    tree and summing its path probabilities, for random rank-monotone profiles and several shapes."""
    from specsim.acceptance.trees import eagle2_expected_tokens, sibling_probs_hazard

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
    from specsim.acceptance.trees import static_tree

    e1, md = static_tree("eagle1"), static_tree("medusa")
    assert (e1.num_nodes, e1.depth) == (25, 5) and (md.num_nodes, md.depth) == (63, 4)
    assert int(np.bincount(e1.depths)[1]) == 4 and int(md.ranks.max()) == 9
    with pytest.raises(SpecsimError, match="unknown static tree"):
        static_tree("sequoia")


def test_best_tree_is_optimal_under_the_hazard_model() -> None:
    """best_tree against exhaustive search when the probabilities come from the hazard model (the
    planner's case): equal for every n <= 7."""
    from specsim.acceptance.trees import sibling_probs_hazard

    trees = _all_trees(7, max_rank=3)
    for rates in ([0.8, 0.7, 0.6, 0.6], [0.5, 0.4, 0.4, 0.3], [0.95, 0.9, 0.5, 0.2]):
        probs = sibling_probs_hazard(rates, 3)
        for n in range(1, 8):
            brute = max(_value(t, probs) for t in trees[n])
            assert float(best_tree(probs, n).expected_tokens(probs)) == pytest.approx(brute, abs=1e-12)
