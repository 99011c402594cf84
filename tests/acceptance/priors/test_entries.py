"""Fitting entries: the tree <-> chain conversion checked across shapes measured on the same head, and
per-proposal rates made per-step.

Numbers typed here are read from the sources (the papers' tables, the blogs), not from priors.yaml:
a test fails if the catalogue, its parsing or the tree model drifts from what was published.
"""

from __future__ import annotations

import pytest

from specsim.acceptance.priors import Shape, chain_shape, load_catalogue, lookup

EAGLE1_TREE = Shape("tree", 5, 4, 25, static="eagle1")
EAGLE2_TREE_7B = Shape("tree", 6, 10, 59)  # EAGLE-2 App. A: 60 tokens incl. root, depth 6, top-10


def test_chain_to_tree_on_the_same_head() -> None:
    """EAGLE's head measured as a chain of 5 (Table 5: 3.20) predicts the same head's static 25-node tree
    (Table 2: 3.94) and, less tightly, EAGLE-2's 60-token dynamic tree (EAGLE-2 Table 1: 4.98; a dynamic
    tree adapts per context, which per-depth averages cannot see)."""
    cat = load_catalogue()
    chain5 = cat.by_id("eagle1-vicuna-7b-v1p3-mt-bench-t0-chain5")
    assert chain5.tau_for(EAGLE1_TREE) == pytest.approx(3.94, rel=0.03)
    assert chain5.tau_for(EAGLE2_TREE_7B) == pytest.approx(4.98, rel=0.07)
    # ... and back: the 60-token tree's tau carried to a chain of 5
    tree = cat.by_id("eagle2paper-eagle2-vicuna-7b-v1p3-mt-bench-t0")
    assert tree.tau_for(5) == pytest.approx(3.20, rel=0.08)
    # the per-position n-alpha (Table 2) measured on chains gives the chain's own tau (Table 5)
    nalpha = cat.by_id("eagle1-vicuna-7b-v1p3-mt-bench-t0-chain-nalpha")
    assert nalpha.rates[:5] == pytest.approx((0.79, 0.74, 0.72, 0.73, 0.67))
    assert nalpha.tau_for(5) == pytest.approx(3.20, rel=0.05)



def test_per_proposal_rates_become_per_step_rates_by_the_proposal_coverage() -> None:
    """vLLM PR #24344 logs n-gram acceptance per *proposed* draft (tau 3.63, cumulative 0.69 .. 0.42)
    and, separately, per step (tau 1.95: a third of tokens came from steps without a match). The prior
    must give the per-step figure, with the first position scaled by m = 0.95 / 2.63 (hand calculation)."""
    m = lookup("ngram", target="llama-3.1-8b", task="code", shape=chain_shape(5),
               exclude=("vllm-pr24344-ngram-blazedit-k5",))
    assert m.entry_id == "vllm-pr24344-ngram-instructcoder-k5"
    assert m.tau_band(chain_shape(5))[1] == pytest.approx(1.95, abs=1e-6)
    rates = m.profile("central").rates_for(5)
    assert rates[0] == pytest.approx(0.69 * (1.95 - 1.0) / (3.63 - 1.0), rel=1e-6)
    assert rates[1] == pytest.approx(0.57 / 0.69, rel=1e-6)  # deeper conditionals unchanged


def test_trtllm_code_edit_rows_keep_their_published_mean_at_the_depth_their_acceptance_rate_implies() -> None:
    """TensorRT-LLM logs Accept Rate = accepted / drafted and Accept Len (bonus included). On
    glaiveai/code_edits_sample: EAGLE3 on Llama-3.1-8B-Instruct 0.2976 / 3.38 (PR #12130, k not stated: the row
    implies (3.38 - 1) / 0.2976 = 8), DeepSeek-V3.1 MTP with 8 next-n steps 0.2704 / 3.16 (PR #11434)."""
    cat = load_catalogue()
    eagle3 = cat.by_id("trtllm-pr12130-eagle3-llama3p1-8b-codeedit-bs1")
    assert eagle3.shape.depth == 8 and eagle3.shape.assumed
    assert eagle3.tau_for(8) == pytest.approx(3.38, abs=0.01)
    mtp = cat.by_id("trtllm-pr11434-mtp-deepseek-v3p1-nvfp4-codeedit-k8")
    assert mtp.shape.depth == 8
    assert mtp.tau_for(8) == pytest.approx(3.16, abs=0.01)
    assert (mtp.tau_for(8) - 1.0) / 8 == pytest.approx(0.2704, abs=0.002)
