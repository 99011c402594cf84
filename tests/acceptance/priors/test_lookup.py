"""The lookup: the sources' own numbers, tree-measured means kept as trees, bands, held-out block
sizes, and its errors.

Numbers typed here are read from the sources (the papers' tables, the blogs), not from priors.yaml:
a test fails if the catalogue, its parsing or the tree model drifts from what was published.
"""

from __future__ import annotations

import math

import pytest

from specsim.acceptance.chain import AcceptanceProfile, expected_tokens
from specsim.acceptance.priors import MEASURE_YOURS, Shape, extend_profile, load_catalogue, lookup
from specsim.errors import SpecsimError

EAGLE1_TREE = Shape("tree", 5, 4, 25, static="eagle1")
MEDUSA_TREE = Shape("tree", 4, 10, 63, static="medusa")
EAGLE2_TREE_7B = Shape("tree", 6, 10, 59)  # EAGLE-2 App. A: 60 tokens incl. root, depth 6, top-10


@pytest.mark.parametrize(("method", "target", "draft", "task", "temperature", "shape", "published"), [
    # EAGLE-2 (Li et al. 2024, EMNLP), Table 1, Vicuna-7B, MT-bench, T=0: each method at its own default
    ("eagle2", "vicuna-7b", None, "mt-bench", 0.0, EAGLE2_TREE_7B, 4.98),
    ("eagle", "vicuna-7b", None, "mt-bench", 0.0, EAGLE1_TREE, 3.94),
    ("medusa", "vicuna-7b", None, "mt-bench", 0.0, MEDUSA_TREE, 2.52),
    ("lookahead", "vicuna-7b", None, "mt-bench", 0.0, 4, 1.69),
    ("eagle2", "vicuna-7b", None, "mt-bench", 1.0, EAGLE2_TREE_7B, 4.28),
    # EAGLE (Li et al. 2024, ICML), Table 5: the same head drafting a chain of 5
    ("eagle", "vicuna-7b", None, "mt-bench", 0.0, 5, 3.20),
    ("eagle", "llama-2-70b", "eagle1-head", "mt-bench", 0.0, 5, 3.12),
    # EAGLE-3 (Li et al. 2025), Table 1, Vicuna-13B, T=0 (the repo's 60-token, 8-layer tree)
    ("eagle3", "vicuna-13b", "eagle3 head", "mt-bench", 0.0, Shape("tree", 8, 10, 59), 6.65),
    ("eagle3", "vicuna-13b", "eagle3 head", "humaneval", 0.0, Shape("tree", 8, 10, 59), 7.54),
    # vLLM P-EAGLE post, gpt-oss-20b, HumanEval, T=0, K = 3 / 7 (one parallel pass)
    ("p_eagle", "gpt-oss-20b", "amazon/GPT-OSS-20B-P-EAGLE", "humaneval", 0.0, Shape("parallel", 3), 3.02),
    ("p_eagle", "gpt-oss-20b", "amazon/GPT-OSS-20B-P-EAGLE", "humaneval", 0.0, Shape("parallel", 7), 3.94),
    # TensorRT-LLM tech blog 7: n-gram on translation, max_draft_len 23
    ("ngram", "llama-4-scout", None, "translation", None, 23, 4.73),
    # vLLM PR #24852: suffix decoding on MT-bench, k = 1
    ("suffix", "llama-3.1-8b", None, "mt-bench", None, 1, 1.62),
    # Leviathan et al. 2022, Table 3: LaMDA 137B with 100M / 2B / 8B drafts (alpha 0.61 / 0.71 / 0.75), tau at k=3
    ("draft_model", "lamda-137b", "lamda-100m", "chat", 0.0, 3, float(expected_tokens(0.61, 3))),
    ("draft_model", "lamda-137b", "lamda-2b", "chat", 0.0, 3, float(expected_tokens(0.71, 3))),
    ("draft_model", "lamda-137b", "lamda-8b", "chat", 0.0, 3, float(expected_tokens(0.75, 3))),
])
def test_lookup_reproduces_the_sources_numbers(method, target, draft, task, temperature, shape, published) -> None:
    m = lookup(method, target=target, draft=draft, task=task, temperature=temperature, shape=shape)
    assert m.tau_for(shape) == pytest.approx(published, rel=0.03), m.entry_id
    assert m.distance <= 0.5 and MEASURE_YOURS in m.note



def test_task_effects_are_coherent_without_a_checkpoint() -> None:
    """With no checkpoint named, the central case pools nearby checkpoints, each carried to the asked task
    by the catalogue's task factors: code > chat > math > QA for EAGLE-3 on Llama-3.1-8B (the RedHat
    dashboard's order: HumanEval 3.58 > question 2.94, math 3.24, qa 2.42 at k = 5)."""
    tau = {t: lookup("eagle3", target="llama-3.1-8b", task=t, temperature=0.0, shape=4).tau_for(4)
           for t in ("code", "chat", "qa")}
    assert tau["code"] > tau["chat"] > tau["qa"]



def test_tree_measured_means_are_never_reused_as_chains() -> None:
    """Spec-Bench's EAGLE-2 mean (4.34) was measured with a 60-token tree: in its own shape the prior
    gives 4.34 (the old default carried it into a chain and applied a tree again: 5.73), and as a
    chain of 2 / 4 it gives far less (the old default: 2.41 / 3.28)."""
    m = lookup("eagle2", target="vicuna-7b", task="mixed", temperature=0.0, shape=EAGLE2_TREE_7B,
               exclude=("2406.16858",))  # Spec-Bench's own numbers, not the EAGLE-2 paper's
    assert m.tau_for(EAGLE2_TREE_7B) == pytest.approx(4.34, rel=0.03)
    assert m.tau_for(2) < 2.3 and m.tau_for(4) < 2.9
    assert m.tau_for(EAGLE2_TREE_7B) - 1 > 1.3 * (m.tau_for(6) - 1)  # the tree is worth about +30% (tau - 1)



def test_extend_measured_profile_with_a_stated_model() -> None:
    measured = AcceptanceProfile.from_unconditional([0.8, 0.6, 0.42], "scrape")
    ext = extend_profile(measured, "eagle3", 8)
    assert ext.rates[:3] == pytest.approx(measured.rates)
    assert len(ext.rates) == 8 and ext.tail is None
    assert "measured to k = 3" in ext.note and "decay model" in ext.note
    # the extension follows the model's ratios, not the last measured rate
    rel = load_catalogue().decay["eagle3"].relative_curve(8)
    assert ext.rates[4] / ext.rates[2] == pytest.approx(rel[4] / rel[2])



def test_band_widens_with_distance() -> None:
    """Same target, task and temperature as a measurement: a narrow band; another family, task and an
    unknown temperature: a wider one. low < central < high always."""
    near = lookup("eagle3", target="llama-3.1-8b", task="mt-bench", temperature=0.0, shape=3)
    far = lookup("eagle3", target="mixtral-8x7b", task="translation", shape=3)
    for m in (near, far):
        lo, mid, hi = m.tau_band(3)
        assert lo < mid < hi
    width = lambda m: math.log((m.high.tau_for(3) - 1) / (m.low.tau_for(3) - 1))  # noqa: E731
    assert width(far) > 1.25 * width(near)
    assert far.distance > near.distance



def test_parallel_drafters_held_out_across_block_sizes() -> None:
    """P-EAGLE at K = 3 (its K = 7 rows left out) predicts the published K = 7 (HumanEval 3.94, MT-bench
    3.70) through the per-position model: parallel drafting has its own decay, not a flat rate."""
    for task, k7 in (("humaneval", 3.94), ("mt-bench", 3.70)):
        m = lookup("p_eagle", target="gpt-oss-20b", task=task, temperature=0.0, shape=Shape("parallel", 3),
                   exclude=lambda e: e.id.endswith("-k7"))
        assert m.tau_for(Shape("parallel", 7)) == pytest.approx(k7, rel=0.12)



def test_suffix_decoding_is_its_own_method() -> None:
    s = lookup("suffix", target="llama-3.1-8b", task="mt-bench", shape=1)
    n = lookup("ngram", target="llama-3.1-8b", task="mt-bench", shape=1)
    assert s.method == "suffix" and s.entry_id.startswith("vllm-pr24852-suffix")
    assert n.entry_id != s.entry_id
    assert s.tau_for(1) == pytest.approx(1.62, rel=0.01)



def test_lookup_errors() -> None:
    with pytest.raises(SpecsimError, match="no acceptance prior for method"):
        lookup("warp")
    with pytest.raises(SpecsimError, match="unknown task"):
        lookup("eagle3", task="poetry slam")
    with pytest.raises(SpecsimError, match="temperature"):
        lookup("eagle3", temperature=5.0)
