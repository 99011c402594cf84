from __future__ import annotations

import pytest

from specsim.drafts.families.lookup import ngram_drafted_tokens


def test_ngram_drafted_tokens_reproduce_the_vllm_logs_proposal_coverage() -> None:
    """vllm PR #24344 (InstructCoder, k = 5): 163,128 tokens, 53,327 of them from steps without a draft and
    a per-proposal tau of 3.63, so 109,801 / 3.63 = 30,248 drafted steps of 83,575 (coverage 0.362), and
    the sequence-normalised tau is 1.95: from that tau the drafted tokens per step are 5 x 0.362."""
    steps_with_draft = (163_128 - 53_327) / 3.63
    coverage = steps_with_draft / (53_327 + steps_with_draft)
    assert float(ngram_drafted_tokens(5, 163_128 / (53_327 + steps_with_draft))) == pytest.approx(5 * coverage,
                                                                                                 rel=0.01)


def test_ngram_drafted_tokens_edges() -> None:
    out = ngram_drafted_tokens([3, 3, 3, 0, 7], [float("nan"), 1.0, 3.5, 1.5, 2.0])
    # unknown / uninformative acceptance: every step drafts k; coverage never above 1; k = 0 drafts nothing
    assert out[:4].tolist() == [3.0, 3.0, 3.0, 0.0]
    assert 0 < out[4] < 7  # past the 5 measured positions the per-proposal curve is extended, not cut
