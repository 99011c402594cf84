"""DSpark's drafter (drafts/families/parallel.py) against figures read off its checkpoint and hand calculations."""

from __future__ import annotations

import numpy as np
import pytest

from specsim.cost.hardware import load_hardware
from specsim.cost.model import load_model
from specsim.drafts.build import make_draft
from specsim.drafts.cost import draft_time_s, memory_bytes_per_gpu
from specsim.drafts.families.parallel import markov_time_s
from specsim.step.evaluate import bundled_engine

Q8B = load_model("qwen3-8b")
A30 = load_hardware("a30")


def test_dspark_drafter_weights_are_its_checkpoint_less_the_shared_embedding_and_head() -> None:
    """deepseek-ai/dspark_qwen3_8b_block7 is 4.74 GB in bf16 (HF API, quoted by the DSpark study notes the
    parallel.py comment names); vLLM's DSparkProposer shares the target's embedding and LM head
    (_maybe_share_embeddings / _maybe_share_lm_head), so the drafter's own weights on one GPU are that less two
    vocab x hidden bf16 matrices: 4.74e9 - 2 x 151936 x 4096 x 2 = 2.25e9 bytes."""
    d = make_draft("dspark", Q8B)
    weights, _ = memory_bytes_per_gpu(d, Q8B, 1.0, 1024.0)
    shared = 2 * 151936 * 4096 * 2
    assert float(weights) == pytest.approx(4.74e9 - shared, rel=0.02)
    # the same drafter under TP 4: the layers and the fusion split, the Markov head (2 x 256 x V bf16) replicated
    split, _ = memory_bytes_per_gpu(d, Q8B, 1.0, 1024.0, tp=4)
    markov = 2 * 256 * 151936 * 2
    assert float(split) == pytest.approx((float(weights) - markov) / 4 + markov, rel=1e-6)


def test_markov_head_streams_its_projection_once_per_drafted_token() -> None:
    """At one sequence the r -> V projection is a GEMV over 256 x 151936 bf16 weights (77.8 MB), memory bound:
    k = 7 steps on an A30 stream 7 x 77.8 MB at the profile's achieved bandwidth (0.933 TB/s x 0.823) = 0.71 ms,
    plus each step's five kernels' fixed cost (5 x 3.8 us) and the short K = 256 tiles' pipeline fill: within 30%."""
    e = bundled_engine("vllm")
    t = float(markov_time_s(256, e, A30, Q8B.vocab, np.array([1.0]), np.array([7.0]))[0])
    by_hand = 7 * 256 * 151936 * 2 / (0.933e12 * 0.823)
    assert by_hand + 7 * 5 * 3.797e-6 < t < 1.3 * by_hand


def test_dspark_drafting_pays_five_layers() -> None:
    """At one sequence the drafter's pass is weight-streaming bound: four more Qwen3-8B layers than a one-layer
    drafter add about their weights' streaming time, 4 x (2 x 4096^2 + 2 x 4096 x 1024 + 3 x 4096 x 12288) x 2
    bytes = 1.54 GB at 0.768 TB/s ~ 2.0 ms on an A30."""
    e = bundled_engine("vllm")
    b, k, ctx = np.array([1.0]), np.array([7.0]), np.array([256.0])
    five = make_draft("dspark", Q8B)
    one = make_draft({"method": "dspark", "draft_layers": 1}, Q8B)
    extra = float(draft_time_s(five, e, A30, Q8B, b, k, ctx)[0] - draft_time_s(one, e, A30, Q8B, b, k, ctx)[0])
    layer = 2 * 4096**2 + 2 * 4096 * 1024 + 3 * 4096 * 12288
    by_hand = 4 * layer * 2 / (0.933e12 * 0.823)
    assert extra == pytest.approx(by_hand, rel=0.2)
