"""Acceptance priors for block drafters on new targets (priors.yaml, vllm-pr49406-dflash-*)."""

from __future__ import annotations

from specsim.cost.model import load_model
from specsim.drafts.priors import prior_match


def test_dflash_qwen3_8b_prior_is_the_pr49406_entry() -> None:
    m = prior_match("dflash", load_model("qwen3-8b"), None, "code", None)
    assert m.entry_ids[0] == "vllm-pr49406-dflash-qwen3-8b-k15-humaneval"


def test_dflash_llama_prior_finds_the_pr49406_entries() -> None:
    m = prior_match("dflash", load_model("llama-3.1-8b"), None, "math", None)
    assert any(e.startswith("vllm-pr49406-dflash-llama31-8b-k9-") for e in m.entry_ids)
