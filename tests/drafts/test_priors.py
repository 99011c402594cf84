from __future__ import annotations

import numpy as np
import pytest

from specsim.cost.model import load_model
from specsim.drafts.build import make_draft
from specsim.drafts.priors import prior_match, prior_profile

L70 = load_model("llama-3.1-70b")


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
