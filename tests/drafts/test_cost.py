from __future__ import annotations

import dataclasses

import pytest

from specsim.cost.forward import breakdown
from specsim.cost.hardware import load_hardware
from specsim.cost.model import load_model
from specsim.cost.ops import make_shape
from specsim.drafts.build import make_draft
from specsim.drafts.cost import draft_time_s, memory_bytes_per_gpu
from specsim.engines.profile import load_engine
from specsim.errors import SpecsimError

H100 = load_hardware("h100-sxm")
L70 = load_model("llama-3.1-70b")
VLLM = load_engine("vllm")


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


def test_eagle3_has_smaller_head_than_eagle2() -> None:
    w3, _ = memory_bytes_per_gpu(make_draft("eagle3", L70), L70, 1, 1024, 8)
    w2, _ = memory_bytes_per_gpu(make_draft("eagle2", L70), L70, 1, 1024, 8)
    assert 0 < w2 < w3  # EAGLE-3 carries its own (32k) LM head; EAGLE-2 reuses the target's


def test_mtp_only_for_models_that_ship_it() -> None:
    with pytest.raises(SpecsimError, match="ships no MTP"):
        make_draft("mtp", L70)
    ds = load_model("deepseek-v3")
    assert float(draft_time_s(make_draft("mtp", ds), VLLM, load_hardware("h200"), ds, 8, 1, 1024, 8, "fp8")) > 0
