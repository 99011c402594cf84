"""The engine's execution model against hand calculations."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from specsim.cost.forward import breakdown
from specsim.cost.hardware import load_hardware
from specsim.cost.model import load_model
from specsim.cost.ops import make_shape
from specsim.engines.passes import eager_launches, graph_batch, pass_time_s, step_time_s
from specsim.engines.profile import load_engine

H100 = load_hardware("h100-sxm")
L8 = load_model("llama-3.1-8b")


def test_vllm_pads_tokens_to_capture_sizes_rounded_to_multiples_of_k_plus_1() -> None:
    # vLLM sizes [1, 2, 4, 8, 16, ...] in tokens; with 4 tokens per request they round up to multiples
    # of 4: 4, 8, 16, 24 ... = 1, 2, 4, 6 ... requests; 5 requests pad to 6 (24 tokens).
    b, graphed = graph_batch(load_engine("vllm"), [1, 3, 5, 200], 4)
    assert list(b) == [1, 4, 6, 200] and list(graphed) == [True, True, True, False]


def test_sglang_pads_requests_and_trtllm_graphs_only_exact_sizes() -> None:
    b, graphed = graph_batch(load_engine("sglang"), [9, 33, 300], 4)
    assert list(b) == [10, 40, 300] and list(graphed) == [True, True, False]
    b, graphed = graph_batch(load_engine("trtllm"), [32, 33, 64], 4)
    assert list(b) == [32, 33, 64] and list(graphed) == [True, False, True]


def test_an_eager_pass_is_bound_by_the_slower_of_host_and_gpu() -> None:
    hf = load_engine("hf")
    # HF generate, counted: 33 + 42 L kernels and 8 + 37 L views (views at 0.4), + GQA's repeat_kv 2 + 6 per layer
    launches = (33 + 42 * 32) + 0.4 * (8 + 37 * 32) + (2 + 0.4 * 6) * 32
    assert hf.eager_loop is not None and hf.eager_loop.plain_ops(32, gqa=True) == pytest.approx(launches)
    assert eager_launches(hf, L8) == pytest.approx(32 * 56.8 + 36.2)  # the generic count (no GQA term)
    host = launches * hf.eager_op_us * 1e-6
    br = breakdown(L8, H100, make_shape(1, 1, 512))
    gpu = float(br.time_s - br.overhead_s)
    assert host > gpu  # an 8B model at batch 1 in eager PyTorch is host-bound (gpt-fast blog: ~25 tok/s)
    assert float(pass_time_s(hf, H100, L8, 1, 1, 512)) == pytest.approx(host + hf.eager_op_us * 1e-6)
    # with a free host the GPU decides
    free = dataclasses.replace(hf, eager_op_us=0.0)
    assert float(pass_time_s(free, H100, L8, 1, 1, 512)) == pytest.approx(gpu)


def test_an_eager_cycle_costs_its_counted_ops_and_the_ratio_is_the_op_ratio_when_host_bound() -> None:
    """Spec-Bench's EAGLE-2 cycle (494 + 48 L kernels, 466 + 56 L views, 195 + 7 L host ops) against HF
    generate's step: the cycle / AR ratio of a host-bound 7B (L = 32, MHA) is the ratio of their
    launch-equivalents, whatever the per-op cost (the measured Spec-Bench A100 ratio is 1.84)."""
    from specsim.engines.passes import eager_cycle_host_s

    hf = load_engine("hf")
    vicuna = load_model("vicuna-7b")
    cycle = (494 + 48 * 32) + 0.4 * (466 + 56 * 32) + 0.5 * (195 + 7 * 32)
    ar = (33 + 42 * 32) + 0.4 * (8 + 37 * 32)
    host = float(eager_cycle_host_s(hf, "eagle2", vicuna, 6))
    assert host == pytest.approx(cycle * hf.eager_op_us * 1e-6)
    assert cycle / ar == pytest.approx(1.70, abs=0.01)  # 3143 / 1854 launch-equivalents


def test_a_graphed_pass_is_its_kernels_at_the_padded_batch_plus_one_replay() -> None:
    """5 requests x 4 tokens pad to 6 requests: GEMMs at 6, attention for the 5 real sequences only
    (padding slots have no KV cache), plus one graph replay."""
    v = load_engine("vllm")
    br = breakdown(L8, H100, make_shape(6, 4, 512))
    attention = float(br.by_family()["attention"])
    expected = float(br.time_s - br.overhead_s) - attention / 6 + v.graph_launch_us * 1e-6
    assert float(pass_time_s(v, H100, L8, 5, 4, 512)) == pytest.approx(expected)


def test_padding_never_makes_speculation_cheaper_than_its_parts() -> None:
    """At long context the padded batch's attention dominated: a padded verify must still cost at least
    the unpadded GEMMs' pass (regression: an EAGLE-3 step once priced below plain decoding)."""
    v = load_engine("vllm")
    for b in (9, 17, 33):
        padded = float(pass_time_s(v, H100, L8, b, 4, 12_500))
        bare = breakdown(L8, H100, make_shape(b, 4, 12_500))
        assert padded >= 0.99 * float(bare.time_s - bare.overhead_s)  # attention's fixed part scales too: < 1%


def test_async_scheduling_hides_host_work_until_it_exceeds_the_gpu() -> None:
    v = load_engine("vllm")
    host = (v.step_host_us + v.per_seq_host_us * 8) * 1e-6
    fast, slow = 0.1e-3, 20e-3
    assert float(step_time_s(v, fast, 8, speculative=False)) == pytest.approx(host)  # host-bound
    assert float(step_time_s(v, slow, 8, speculative=False)) == pytest.approx(slow + v.step_exposed_us * 1e-6)
    # synchronous: device + host
    assert float(step_time_s(v, slow, 8, speculative=False, sync=True)) == pytest.approx(slow + host)


def test_sglang_speculative_step_runs_without_overlap_but_its_plain_step_overlaps() -> None:
    s = load_engine("sglang")
    dev = np.array(10e-3)
    plain = float(step_time_s(s, dev, 4, speculative=False))
    spec = float(step_time_s(s, dev, 4, speculative=True))
    assert plain == pytest.approx(10e-3 + s.step_exposed_us * 1e-6)
    host = (s.step_host_us + s.per_seq_host_us * 4 + s.spec_step_host_us + s.spec_per_seq_host_us * 4) * 1e-6
    assert spec == pytest.approx(10e-3 + host)


def test_an_ngram_request_without_a_match_verifies_only_its_own_token() -> None:
    """vLLM V1 (ngram_proposer.py returns [] without a match): the verify pass of B sequences holds
    B x (1 + drafted) tokens, drafted from the tokens per step — a mean over sequences that verify 1 or
    k + 1, priced between the neighbouring whole counts; TensorRT-LLM verifies B x (k + 1) always."""
    from specsim.drafts.build import make_draft
    from specsim.drafts.families.lookup import ngram_drafted_tokens
    from specsim.step.evaluate import Target, step_arrays

    hw, m = load_hardware("h100-sxm"), load_model("llama-3.1-8b")
    d = make_draft({"method": "ngram"}, m, "draft")
    b, ctx, tau = 128.0, 1024.0, 1.44
    for name, q in (("vllm", 1.0 + float(ngram_drafted_tokens(3, tau))), ("trtllm", 4.0)):
        e = load_engine(name)
        got = step_arrays(Target(hw, m, engine=e), d, 3.0, b, ctx, tau).verify_time_s
        lo, w = np.floor(q), q - np.floor(q)
        at_lo, at_hi = (float(pass_time_s(e, hw, m, b, x, ctx)) for x in (lo, lo + 1.0))
        assert float(np.asarray(got)) == pytest.approx(at_lo + w * (at_hi - at_lo))
        assert (w > 0) == (name == "vllm")  # a fractional mean for vLLM, k + 1 whole for TensorRT-LLM
    assert load_engine("vllm").ngram_empty_drafts and not load_engine("trtllm").ngram_empty_drafts
