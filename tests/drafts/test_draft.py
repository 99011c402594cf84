from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from specsim.cost.forward import breakdown
from specsim.cost.hardware import load_hardware
from specsim.cost.model import load_model
from specsim.cost.ops import make_shape
from specsim.drafts.build import make_draft
from specsim.drafts.cost import draft_time_s, memory_bytes_per_gpu
from specsim.drafts.draft import METHODS
from specsim.drafts.priors import prior_match, prior_profile
from specsim.engines.profile import load_engine
from specsim.errors import SpecsimError

H100 = load_hardware("h100-sxm")
L70 = load_model("llama-3.1-70b")
VLLM = load_engine("vllm")


def test_default_acceptance_is_the_sourced_prior_with_a_note() -> None:
    """No flat 'EAGLE-2 x 1.3' any more: EAGLE-3's default is a catalogue entry for this target, with 32
    explicit per-position rates (no i.i.d. tail), a note that says where it comes from and to measure,
    and a band around it."""
    d = make_draft("eagle3", L70)
    assert d.acceptance.prior and d.acceptance.tail is None and len(d.acceptance.rates) == 32
    assert "measure yours" in d.acceptance.note and d.prior is not None
    low, mid, high = d.prior.tau_band(8)
    assert low < mid < high
    # the old default gave 6.0 tokens at k = 8 (flat 0.895); published chains of 7 reach about 3.5-4
    # (vLLM and SGLang, Llama-3 EAGLE-3 heads; research notes section 3.6)
    assert 3.0 < d.tokens_per_step(8) < 4.6


def test_spec_bench_ordering_of_priors_at_their_own_shapes() -> None:
    """Spec-Bench (A100, Vicuna-7B): EAGLE-2 4.34 > EAGLE 3.58 > Medusa 2.31 > SpS 2.28 > PLD 1.75 >
    Lookahead 1.64, each with its own default shape (trees for the first three): the lookup reproduces
    each from the rates it fitted, in the same order."""
    from specsim.acceptance.priors import load_catalogue

    cat = load_catalogue()
    ids = ["specbench-eagle2-vicuna-7b-v1p3-a100", "specbench-eagle-vicuna-7b-v1p3-a100",
           "specbench-medusa-vicuna-7b-v1p3-a100", "specbench-draft_model-vicuna-7b-v1p3-a100",
           "specbench-ngram-vicuna-7b-v1p3-a100", "specbench-lookahead-vicuna-7b-v1p3-a100"]
    published = [4.34, 3.58, 2.31, 2.28, 1.75, 1.64]
    model = [cat.by_id(i).tau_for(cat.by_id(i).shape) for i in ids]
    assert model == pytest.approx(published, rel=0.005)
    assert model == sorted(model, reverse=True)


def test_medusa_acceptance_decays_by_head() -> None:
    rates = prior_profile("medusa", "vicuna-7b").rates_for(5)
    assert np.all(np.diff(rates) < 0)


def test_draft_model_pair_prior_is_not_vicuna_68m() -> None:
    """Llama-3.2-1B drafting for a 70B gets the pair model (size ratio), not the Vicuna-68M entry, and
    says so; a 3B draft of the same family accepts more than a 1B one."""
    one = prior_match("draft_model", L70, load_model("llama-3.2-1b"))
    three = prior_match("draft_model", L70, load_model("llama-3.2-3b"))
    assert one.entry_id == three.entry_id == "pair-model"
    assert "not measured for this pair" in one.note and "Leviathan" in one.note
    assert three.conditional_rates[0] > one.conditional_rates[0]


def test_draft_model_cost_is_the_engines_drafting_loop() -> None:
    """vLLM drafts k tokens with k passes of the draft model: one draft-extend over the k + 1 verified
    positions, then k - 1 passes of one token (vllm/v1/spec_decode/eagle.py); with no launch or per-pass
    overhead each pass is its kernels' time at its graph-padded batch (8 sequences: a captured size)."""
    bare = dataclasses.replace(VLLM, graph_launch_us=0.0, draft_pass_overhead_us=0.0)
    d = make_draft({"method": "draft_model", "model": "llama-3.2-1b", "draft_tp": 1}, L70)

    def gpu(q: int) -> float:
        br = breakdown(d.model, H100, make_shape(8, q, 2048, 1))
        return float(br.time_s - br.overhead_s)

    expected = gpu(5) + 3 * gpu(1)
    assert float(draft_time_s(d, bare, H100, L70, 8, 4, 2048, tp=8)) == pytest.approx(expected, rel=1e-9)
    # the EAGLE repository's loop (hf) runs one more pass: extend + k passes
    hf = dataclasses.replace(load_engine("hf"), eager_op_us=0.0, draft_tree_ops=0.0)
    assert float(draft_time_s(d, hf, H100, L70, 8, 4, 2048, tp=8)) == pytest.approx(gpu(5) + 4 * gpu(1), rel=1e-9)


def test_costs_ordered_by_architecture() -> None:
    # Per step at k=4, batch 8: n-gram (host only) < EAGLE (one layer) < a 3B draft model.
    cost = {m: float(draft_time_s(make_draft(m, L70), VLLM, H100, L70, 8, 4, 2048, tp=8)) for m in ("ngram", "eagle3")}
    cost["draft_model"] = float(draft_time_s(make_draft({"method": "draft_model", "model": "llama-3.2-3b",
                                                         "draft_tp": 1}, L70), VLLM, H100, L70, 8, 4, 2048, tp=8))
    assert cost["ngram"] < cost["eagle3"] < cost["draft_model"]
    assert draft_time_s(make_draft("lookahead", L70), VLLM, H100, L70, 8, 4, 2048) == 0


def test_lookahead_verifies_more_tokens() -> None:
    d = make_draft("lookahead", L70)
    assert d.verify_tokens_per_seq(4) == 1 + (d.window + d.guesses) * 4


def test_eagle3_has_smaller_head_than_eagle2() -> None:
    w3, _ = memory_bytes_per_gpu(make_draft("eagle3", L70), L70, 1, 1024, 8)
    w2, _ = memory_bytes_per_gpu(make_draft("eagle2", L70), L70, 1, 1024, 8)
    assert 0 < w2 < w3  # EAGLE-3 carries its own (32k) LM head; EAGLE-2 reuses the target's


def test_mtp_only_for_models_that_ship_it() -> None:
    with pytest.raises(SpecsimError, match="ships no MTP"):
        make_draft("mtp", L70)
    ds = load_model("deepseek-v3")
    assert float(draft_time_s(make_draft("mtp", ds), VLLM, load_hardware("h200"), ds, 8, 1, 1024, 8, "fp8")) > 0


def test_bad_drafts() -> None:
    with pytest.raises(SpecsimError, match="unknown draft 'warp'"):
        make_draft("warp", L70)
    with pytest.raises(SpecsimError, match="share the target's tokenizer"):
        make_draft("llama-2-7b", L70)
    with pytest.raises(SpecsimError, match="unknown field"):
        make_draft({"method": "eagle3", "depth": 3}, L70)
    assert set(METHODS) >= {"draft_model", "ngram", "medusa", "eagle3", "mtp", "lookahead"}


def test_ngram_drafted_tokens_reproduce_the_vllm_logs_proposal_coverage() -> None:
    """vllm PR #24344 (InstructCoder, k = 5): 163,128 tokens, 53,327 of them from steps without a draft and
    a per-proposal tau of 3.63, so 109,801 / 3.63 = 30,248 drafted steps of 83,575 (coverage 0.362), and
    the sequence-normalised tau is 1.95: from that tau the drafted tokens per step are 5 x 0.362."""
    from specsim.drafts.draft import ngram_drafted_tokens

    steps_with_draft = (163_128 - 53_327) / 3.63
    coverage = steps_with_draft / (53_327 + steps_with_draft)
    assert float(ngram_drafted_tokens(5, 163_128 / (53_327 + steps_with_draft))) == pytest.approx(5 * coverage,
                                                                                                 rel=0.01)


def test_ngram_drafted_tokens_edges() -> None:
    from specsim.drafts.draft import ngram_drafted_tokens

    out = ngram_drafted_tokens([3, 3, 3, 0, 7], [float("nan"), 1.0, 3.5, 1.5, 2.0])
    # unknown / uninformative acceptance: every step drafts k; coverage never above 1; k = 0 drafts nothing
    assert out[:4].tolist() == [3.0, 3.0, 3.0, 0.0]
    assert 0 < out[4] < 7  # past the 5 measured positions the per-proposal curve is extended, not cut
