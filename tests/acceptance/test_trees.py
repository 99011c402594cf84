from __future__ import annotations

import numpy as np
import pytest

from specsim.acceptance.chain import expected_tokens, expected_tokens_positional
from specsim.acceptance.tree_shapes import chain, medusa_tree
from specsim.acceptance.trees import Tree
from specsim.errors import SpecsimError

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
