"""Prefill attention as its kernels run (issue 33's long-context floor): the causal triangle plus half a KV block, the
softmax's exps on the MUFU units, the query tiles' makespan, and TensorRT-LLM's MLA generation on its context FMHA
where the GPU has no MLA decode kernel. Hand calculations here; against NVIDIA's tables where they are installed."""

from __future__ import annotations

import dataclasses
import importlib.util

import numpy as np
import pytest

from specsim.cost import attention as at
from specsim.cost.hardware import load_hardware

TABLES = importlib.util.find_spec("aiconfigurator_core") is not None and importlib.util.find_spec("pyarrow") is not None


@pytest.fixture(scope="module")
def h100():
    return load_hardware("h100-sxm")


def test_tile_keys_count_the_diagonal_block_whole() -> None:
    """Decode and verification (q <= a 128-key block) compute every key; a 1024-token prefill computes the triangle
    (512.5 keys a row) plus half a block (63.5): 576; a chunk of 8k over 16k keys 16384 - 4095.5 + 63.5 = 12352."""
    got = at.tile_keys(np.array([1.0, 4.0, 128.0, 1024.0, 8192.0]), np.array([4096.0, 4096.0, 4096.0, 1024.0, 16384.0]))
    assert got.tolist() == [4096.0, 4096.0, 4096.0, 576.0, 12352.0]


def test_softmax_runs_at_the_mufu_rate(h100) -> None:
    """H100: 132 SMs x 16 exp2 a clock x 1.83 GHz = 3.865e12 a second (FlashAttention-3's 3.9 TFLOPS); one slot a
    score prices 1e12 scores at 0.259 s; 0 slots (a profile without a prefill fit) prices nothing."""
    one = h100.with_efficiency(attention_softmax_ops=1.0)
    assert at.softmax_s(1e12, one) == pytest.approx(1e12 / (132 * 16 * 1.83e9))
    assert at.softmax_s(1e12, h100.with_efficiency(attention_softmax_ops=0.0)) == 0.0


def test_prefill_makespan_by_hand() -> None:
    """One head of 16,384 tokens on 132 SMs: 128 query tiles; the last sees 128 x 16384 scores, all of them
    16384 x 8255.5 (tile_keys); longest-first: max(1, 132 x 128 x 16384 / (16384 x 8255.5)) = 2.047; a plain grid:
    1 + 2.047 / 2. Decode (q = 1) is never scaled; 64 heads fill the SMs (factor 1 longest-first)."""
    ctx = np.array(16384.0)
    scores = ctx * at.tile_keys(ctx, ctx)
    r = 132 * 128 * 16384 / float(scores)
    assert at.prefill_makespan(ctx, ctx, scores, 132.0, True) == pytest.approx(r)
    assert at.prefill_makespan(ctx, ctx, scores, 132.0, False) == pytest.approx(1 + r / 2)
    assert at.prefill_makespan(np.array(1.0), ctx, ctx, 132.0, True) == 1.0
    assert at.prefill_makespan(ctx, ctx, 64 * scores, 132.0, True) == 1.0


def test_prefill_compute_adds_softmax_to_matmuls(h100) -> None:
    """64 heads of 16k (tiles fill the SMs): compute = matmul FLOPs of the padded triangle / (peak x attention_compute)
    + scores x slots / MUFU rate, by hand."""
    hw = h100.with_efficiency(attention_compute=0.8, attention_softmax_ops=1.0)
    L, h, d = 16384.0, 64.0, 128.0
    keys = L - (L - 1) / 2 + 63.5
    scores = h * L * keys
    want = 2 * scores * 2 * d / (989e12 * 0.8) + scores / (132 * 16 * 1.83e9)
    got = at.attention_time_s(1, L, L, h, h, d, d, 2 * h * d * 2, hw)[1]
    assert got == pytest.approx(want, rel=1e-9)


def test_trtllm_mla_generation_on_context_fmha_is_flat_in_batch() -> None:
    """A100 (sm80: no FlashMLA, no trtllm-gen) prices TensorRT-LLM's MLA generation on its context FMHA: 128 heads in
    two 64-row CTAs a sequence, unsplit, each walking the whole latent on one SM, so batch 1 to 16 (32 CTAs on 108
    SMs) take one CTA's time: 64 x 65536 x 2 x 1088 FLOPs at attention_compute of one SM's peak."""
    hw = load_hardware("a100-sxm-80gb").for_framework("trtllm")
    assert hw.attention_kernel == "xqa" and hw.split_kv is None and at.fmha_generation(hw, 576.0)
    assert not at.fmha_generation(load_hardware("h100-sxm").for_framework("trtllm"), 128.0)
    t = [at.attention_time_s(b, 1, 65536, 128, 1, 576, 512, 576 * 2, hw)[0] for b in (1, 16, 64)]
    cta = 64 * 65536 * 2 * 1088 / (hw.peak("bf16") / hw.sm_count * hw.efficiency.attention_compute)
    assert t[0] == pytest.approx(t[1], rel=0.02)
    assert t[0] == pytest.approx(cta, rel=0.05)
    assert t[2] == pytest.approx(2 * t[0], rel=0.05)  # 128 CTAs on 108 SMs: two waves
    assert at.attention_num_splits(1, 1, 65536, 128, 1, 576, hw)[1] == 1.0


@pytest.mark.skipif(not TABLES, reason="aiconfigurator-core / pyarrow not installed (.[tables])")
@pytest.mark.parametrize(("gpu", "fw"), [("h100-sxm", "vllm"), ("h200", "vllm"), ("a100-sxm-80gb", "vllm"),
                                         ("b200", "vllm"), ("a100-sxm-80gb", "sglang")])
def test_long_prefill_within_12_pct_of_the_tables(gpu: str, fw: str) -> None:
    """The prefill rows with KV >= 16k (not fitted: tools/prefill_attention.py fits KV < 16k) within issue 33's 12%
    median |error| where the model explains them (before: 16.6%, 11.4%, 25.2%, 26.4%, 18.6%)."""
    from specsim.calibration import long_context as lc

    row = next(r for r in lc.score_gpu(gpu, fw) if r["family"] == "prefill")
    assert row["n"] > 100 and float(row["median_pct"]) < 12.0


@pytest.mark.skipif(not TABLES, reason="aiconfigurator-core / pyarrow not installed (.[tables])")
def test_trtllm_mla_on_a100_against_the_tables() -> None:
    """NVIDIA's A100 TensorRT-LLM MLA rows (KV >= 16k, bf16 and fp8 caches) within 12% (before: -82%, the split-KV
    kernel A100 does not have)."""
    from specsim.calibration import long_context as lc

    rows = [r for r in lc.score_gpu("a100-sxm-80gb", "trtllm") if str(r["family"]).startswith("mla")]
    assert len(rows) == 2 and all(float(r["median_pct"]) < 12.0 for r in rows)


def test_unfitted_profile_prices_no_softmax() -> None:
    """A profile without a prefill fit (attention_softmax_ops 0, attention_prefill_cta_us 0) keeps its lumped
    attention_compute: the prefill compute is the padded FLOPs at that rate times the makespan alone (L4, 58 SMs, a
    plain grid: 1 + 58 x 128 x 8192 / (4 x 32 x 8192 x 4160) / 2 = 1.00697)."""
    hw = load_hardware("l4")
    assert hw.efficiency.attention_softmax_ops == 0.0 and hw.efficiency.attention_prefill_cta_us == 0.0
    hw = dataclasses.replace(hw)
    assert hw.sm_count == 58 and not hw.is_hopper
    L = 8192.0
    got = at.attention_time_s(4, L, L, 32, 8, 128, 128, 4096, hw)[1]
    padded = 2 * 4 * 8 * 4 * L * (L - (L - 1) / 2 + 63.5) * 256
    span = 1 + 58 * 128 * 8192 / (4 * 32 * 8192 * 4160) / 2
    assert got == pytest.approx(span * padded / (hw.peak("bf16") * hw.efficiency.attention_compute), rel=1e-9)


@pytest.mark.parametrize(("q", "heads", "kv_heads", "tiles"), [
    (2.0, 128.0, 1.0, 2.0),  # MLA verification: 128 heads x 2 rows packed over one latent head, 2 tiles (not 128)
    (4.0, 32.0, 8.0, 8.0),  # GQA verification: 4 heads x 4 rows = 16 rows per KV head, one tile each of 8
    (1024.0, 32.0, 8.0, 256.0),  # a prompt of whole tiles: 32 heads x 8 tiles, packing changes nothing
])
def test_per_tile_cost_counts_the_tiles_the_kernel_launches(h100, q: float, heads: float, kv_heads: float,
                                                             tiles: float) -> None:
    """`attention_prefill_cta_us` per wave of query tiles: the heads of a KV head share a tile where q x group rows
    fit it better (FA3's pack_gqa), so verification pays for b x KV heads x ceil(q x group / 128) tiles. The term
    is in series with the rest: the time with 10 us a tile less the time with 0 is 10 us x tiles / SMs (batch 1)."""
    def t(cta_us: float) -> float:
        hw = h100.with_efficiency(attention_prefill_cta_us=cta_us)
        return float(at.attention_time_s(1.0, q, 4096.0, heads, kv_heads, 128.0, 128.0, 2.0 * kv_heads * 256.0,
                                         hw)[0])

    assert t(10.0) - t(0.0) == pytest.approx(10e-6 * tiles / 132, rel=1e-9)
