from __future__ import annotations

from specsim.cost.model import load_model
from specsim.drafts.build import make_draft
from specsim.engines.profile import load_engine

L70 = load_model("llama-3.1-70b")
DS = load_model("deepseek-v3")


def test_lookahead_verifies_more_tokens() -> None:
    d = make_draft("lookahead", L70)
    assert d.verify_tokens_per_seq(4) == 1 + (d.window + d.guesses) * 4


def test_a_draft_asks_its_family_instead_of_its_method_name() -> None:
    """The properties callers use in place of method-name tests: what the old tuples of names said
    (TREE_METHODS eagle/eagle2/eagle3/medusa, PARALLEL_METHODS p_eagle/dflash/dspark, 'none')."""
    some = ("eagle", "eagle2", "eagle3", "medusa", "mtp", "ngram", "p_eagle")
    trees = {m for m in some if make_draft(m, DS).can_tree}
    assert trees == {"eagle", "eagle2", "eagle3", "medusa"}
    assert make_draft("dflash", L70).is_parallel and not make_draft("eagle3", L70).is_parallel
    none = make_draft("none", L70)
    assert not none.speculates and none.family.name == "none" and none.tokens_per_step(4) == 1.0
    assert make_draft("eagle3", L70).speculates and make_draft("eagle3", L70).family.name == "head"
    assert not make_draft({"method": "eagle3", "trees": False}, L70).can_tree


def test_labels_and_verified_tokens_of_chains_and_trees() -> None:
    assert make_draft("llama-3.2-1b", L70).label == "draft:llama-3.2-1b"
    chain = make_draft("eagle3", L70)
    assert chain.label == "eagle3" and chain.verify_tokens_per_seq(4) == 5
    tree = chain.with_tree(4, 16)
    assert tree.label == "eagle3:top4x16"
    # 4 + 16 (k - 1) candidates, at most the 16-node budget, + the root; k = 0 verifies the root alone
    assert tree.verify_tokens_per_seq([0, 1, 2, 5]).tolist() == [1.0, 5.0, 17.0, 17.0]


def test_only_ngram_verifies_what_it_drafted_on_engines_that_skip_empty_drafts() -> None:
    vllm, trtllm = load_engine("vllm"), load_engine("trtllm")
    assert vllm.ngram_empty_drafts and not trtllm.ngram_empty_drafts
    assert make_draft("ngram", L70).verifies_drafted_only(vllm)
    assert not make_draft("ngram", L70).verifies_drafted_only(trtllm)
    assert not make_draft("suffix", L70).verifies_drafted_only(vllm)
