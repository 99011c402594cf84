"""PARD (drafts/families/pard.py): one pass of a target-family draft model over the verified tokens and
k - 1 masks, priced against a hand calculation from the draft model's own pass."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from specsim.cost.hardware import load_hardware
from specsim.cost.model import load_model
from specsim.drafts.build import make_draft
from specsim.drafts.cost import draft_time_s, memory_bytes_per_gpu
from specsim.drafts.families.pard import PARD, default_draft
from specsim.drafts.registry import family_of, parse_method
from specsim.engines.passes import pass_time_s
from specsim.engines.profile import load_engine
from specsim.errors import SpecsimError

B200 = load_hardware("b200")
L70 = load_model("llama-3.3-70b")
VLLM = dataclasses.replace(load_engine("vllm"), graph_launch_us=0.0, draft_pass_overhead_us=0.0)
ACC = {"alpha": 0.7}


def pard(model: str | None = None, target=L70):  # type: ignore[no-untyped-def]
    spec = {"method": "pard", "acceptance": ACC, "draft_tp": 1}
    if model:
        spec["model"] = model
    return make_draft(spec, target)


def test_registry_lookup() -> None:
    assert family_of("pard") is PARD
    assert parse_method("PARD") == "pard"
    assert PARD.parallel and PARD.speculates and not PARD.can_tree


def test_default_draft_is_amds_release_for_the_family() -> None:
    assert default_draft(L70) == "llama-3.2-1b"
    assert default_draft(load_model("qwen3-8b")) == "qwen3-0.6b"
    assert default_draft(load_model("qwen2.5-7b")) == "qwen2.5-0.5b"
    assert pard().model is not None and pard().model.name == "llama-3.2-1b"
    with pytest.raises(SpecsimError, match="no PARD draft"):
        make_draft({"method": "pard", "acceptance": ACC}, load_model("gpt-oss-20b"))


def test_one_pass_over_verified_tokens_and_masks() -> None:
    """Cost = one pass of the draft model over B x 2k tokens (k + 1 verified slots, k - 1 masks)."""
    d = pard("llama-3.2-1b")
    assert d.model is not None
    for b, k in ((1, 11), (8, 7), (32, 4)):
        hand = float(pass_time_s(VLLM, B200, d.model, b, 2 * k, 2048, 1, "bf16", "bf16", graphs=VLLM.draft_graphs))
        got = float(draft_time_s(d, VLLM, B200, L70, b, k, 2048, tp=1))
        assert got == pytest.approx(hand, rel=1e-9)


def test_flat_in_k_apart_from_the_tokens_in_the_pass() -> None:
    # at batch 1 a 1B pass is weight-bound: 2 -> 16 drafts costs far less than 8x
    d = pard("llama-3.2-1b")
    t = [float(draft_time_s(d, VLLM, B200, L70, 1, k, 2048, tp=1)) for k in (2, 4, 8, 16)]
    assert all(a <= b for a, b in itertools.pairwise(t))
    assert t[-1] < 1.5 * t[0]


def test_rises_with_the_draft_models_size() -> None:
    small = pard("llama-3.2-1b")
    big = pard("llama-3.2-3b")
    for b in (1, 8, 64):
        assert float(draft_time_s(big, VLLM, B200, L70, b, 8, 2048, tp=1)) > float(
            draft_time_s(small, VLLM, B200, L70, b, 8, 2048, tp=1))


def test_k_sequential_passes_cost_more_than_pard() -> None:
    p = pard("llama-3.2-1b")
    seq = make_draft({"method": "draft_model", "model": "llama-3.2-1b", "acceptance": ACC, "draft_tp": 1}, L70)
    for b in (1, 8):
        for k in (2, 4, 8, 11):
            assert float(draft_time_s(seq, VLLM, B200, L70, b, k, 2048, tp=1)) > float(
                draft_time_s(p, VLLM, B200, L70, b, k, 2048, tp=1))


def test_memory_is_a_draft_models() -> None:
    p = pard("llama-3.2-1b")
    seq = make_draft({"method": "draft_model", "model": "llama-3.2-1b", "acceptance": ACC, "draft_tp": 1}, L70)
    b, ctx = np.array([8.0]), np.array([4096.0])
    for a, c in zip(memory_bytes_per_gpu(p, L70, b, ctx, 1, "bf16", "bf16"),
                    memory_bytes_per_gpu(seq, L70, b, ctx, 1, "bf16", "bf16"), strict=True):
        assert float(np.asarray(a).ravel()[0]) == pytest.approx(float(np.asarray(c).ravel()[0]))
