"""The bands a policy gives engines: where speculation runs, the chain schedule, its largest k."""

from __future__ import annotations

from specsim.engines.configs.bands import Band, Bands

TREE = Band(1, 8, 5, 4, 12)
CHAIN = Band(9, 64, 3)


def test_chain_schedule_is_the_policy_chains_or_the_given_chain_policy() -> None:
    bands = Bands.of([TREE, CHAIN, Band(65, 128, 0)])
    assert bands.on == (TREE, CHAIN) and bands.trees == (TREE,) and bands.low_tree == TREE
    assert bands.chain == (CHAIN,) and bands.k_max == 3 and bands.last_on == 64
    assert bands.per_batch  # off above 64, and the chain starts past batch 1
    given = Bands.of([TREE, CHAIN], [Band(1, 16, 4), Band(17, 64, 2), Band(65, 99, 0)])
    assert given.chain == (Band(1, 16, 4), Band(17, 64, 2)) and given.k_max == 4


def test_a_policy_of_trees_alone_runs_them_as_chains() -> None:
    bands = Bands.of([TREE])
    assert bands.chain == (Band(1, 8, 5),) and not bands.chain[0].is_tree and bands.k_max == 5
    assert Bands.of([TREE], [Band(1, 8, 0)]).chain == (Band(1, 8, 5),)  # a chain policy that never speculates


def test_one_chain_from_batch_one_needs_no_schedule() -> None:
    bands = Bands.of([Band(1, 64, 3)])
    assert not bands.per_batch and bands.low_tree is None and bands.trees == ()
