from __future__ import annotations

import itertools

import pytest

from specsim.cost import attention as at
from specsim.cost.hardware import load_hardware


@pytest.fixture(scope="module")
def h100():
    return load_hardware("h100-sxm")


def test_attention_reads_kv_once_per_sequence(h100) -> None:
    # Flash-decoding: 1 or 4 new tokens per sequence read the same KV cache.
    t1 = at.attention_time_s(8, 1, 32768, 64, 8, 128, 128, 2 * 8 * 128 * 2, h100)
    t4 = at.attention_time_s(8, 4, 32768, 64, 8, 128, 128, 2 * 8 * 128 * 2, h100)
    assert t1[4] == pytest.approx(8 * 32768 * 4096 + 8 * 64 * 256 * 2)
    assert t4[0] / t1[0] < 1.05
    # FLOPs grow with the query tokens; the 4 new tokens see each other causally: L - (q - 1)/2 keys
    assert t4[3] == pytest.approx(4 * t1[3] * (32768 - 1.5) / 32768)


def test_attention_fixed_and_per_sequence_costs(h100) -> None:
    """A decode kernel has a floor (launch, split-KV combine) and a cost per wave of (sequence x KV
    head) work units: short-KV decode of many sequences is not free (NVIDIA's H100 FA3 tables: 9 us
    at batch 1, ~0.18 ms at batch 1024 over 2 keys with 8 KV heads)."""
    e = h100.efficiency
    one = at.attention_time_s(1, 1, 2, 32, 8, 128, 128, 4096, h100)[0]
    assert one == pytest.approx((e.attention_overhead_us + e.attention_cta_us) * 1e-6, rel=0.05)
    many = at.attention_time_s(1024, 1, 2, 32, 8, 128, 128, 4096, h100)[0]
    assert many > one + e.attention_cta_us * 1e-6 * (1024 * 8 / h100.sm_count - 1) * 0.99


def test_verification_between_decode_and_prefill(h100) -> None:
    """q > 1 over a long KV: the KV is read once (memory as decode), the q x group query rows pad to
    64-row tiles (so small q costs what decode costs), and compute grows toward prefill's."""
    kv = 2 * 8 * 128 * 2
    t = [at.attention_time_s(16, q, 8192, 32, 8, 128, 128, kv, h100)[0] for q in (1, 2, 8, 16, 64, 512)]
    assert all(b >= a for a, b in itertools.pairwise(t))
    assert t[2] / t[0] < 1.1  # q x group = 32 rows: one tile, as decode
    prefill = at.attention_time_s(16, 8192, 8192, 32, 8, 128, 128, kv, h100)
    assert prefill[0] > t[-1] and prefill[1] > prefill[2]  # prefill is compute-bound


def test_fa_num_splits_matches_flash_api_heuristic() -> None:
    """Hand calculations of FlashAttention's num_splits_heuristic (flash_api.cpp) on an A100 (108 SMs,
    FA2 counts 2 CTAs per SM: 216 slots). 1 unit, 32 KV blocks: the efficiency s/216 peaks at the cap
    min(128, 216, 32) = 32 splits. 128 units, 1024 blocks: waves 128s/216, efficiency 0.59 (s = 1, 2),
    0.89 (s = 3) >= 0.85 x 1.0 (s = 27): 3. 172 units (< 0.8 x 216 = 172.8): 0.80 up to s = 4, 0.995 at
    5: 5. 173 units fill 80%: 1. 1 unit, 2 blocks: 2."""
    got = at.fa_num_splits([1, 128, 172, 173, 1], 216, [32, 1024, 1024, 1024, 2])
    assert got.tolist() == [32.0, 3.0, 5.0, 1.0, 2.0]
    # a split count that leaves the blocks per split unchanged is skipped: 10 blocks over 1 unit and
    # 216 slots would take 10 splits; 9 (ceil(10/9) = 2 = ceil(10/8)) is not eligible either way
    assert at.fa_num_splits(1, 216, 10).item() == 10.0
    assert at.fa_block_n([64, 128, 256]).tolist() == [256.0, 128.0, 64.0]


def test_fa2_splits_only_gqa_decode() -> None:
    """vLLM's FA2 (mha_varlen_fwd) splits the KV only when it swaps a GQA decode's query heads into the
    query length (seqlenq_ngroups_swapped: q = 1 and heads > KV heads); MHA decode and prefill never.
    FA3-style kernels ("fa3", H100) split MHA decode too."""
    a100, h100 = load_hardware("a100-sxm-80gb"), load_hardware("h100-sxm")
    assert a100.attention_kernel == "fa2" and h100.attention_kernel == "fa3"
    units, splits, slots = at.attention_num_splits(1, 1, 8192, [8, 32, 32], [8, 8, 8], 128, a100)
    assert units.tolist() == [8.0, 8.0, 8.0] and slots.tolist() == [216.0] * 3
    assert splits[0] == 1 and splits[1] > 1 and splits[2] == splits[1]
    assert at.attention_num_splits(1, 64, 8192, 32, 8, 128, a100)[1].item() == 1  # prefill / verification
    assert at.attention_num_splits(1, 1, 8192, 8, 8, 128, h100)[1].item() > 1


def test_fa2_mha_decode_streams_per_cta() -> None:
    """An unsplit MHA decode walks each head's KV in one CTA: NVIDIA's A100 vLLM FA2 table (aiconfigurator-core
    0.12.0) times batch 1, one head of 128 over 131072 keys (64 MiB) at 3.02 ms, ~22 GB/s, and 8 heads in the
    same 3.02 ms (8 CTAs side by side); split GQA decode of the same bytes runs near HBM bandwidth."""
    a100 = load_hardware("a100-sxm-80gb")
    one = float(at.attention_time_s(1, 1, 131072, 1, 1, 128, 128, 512, a100, buffer_sets=1)[0])
    eight = float(at.attention_time_s(1, 1, 131072, 8, 8, 128, 128, 8 * 512, a100, buffer_sets=1)[0])
    assert one == pytest.approx(3.02e-3, rel=0.2) and eight == pytest.approx(one, rel=0.05)
    gqa = float(at.attention_time_s(1, 1, 131072, 8, 1, 128, 128, 512, a100, buffer_sets=1)[0])
    assert gqa < one / 5


def test_xqa_sub_sequences_follow_tensorrt_llms_rule() -> None:
    """Hand calculations of computeMultiBlockCount (TensorRT-LLM decoderXQAImplCommon.h) on an H200 (132 SMs):
    L = 16384, 8 KV heads, batch 1: m = 128, capped at round(sqrt(1024)) = 32, 256 CTAs are 1.9 waves (<= 8): 32.
    Batch 8: 2048 CTAs, 15.5 waves, m = floor(32 / 1.94) = 16. L = 4096, batch 1: min(32, round(sqrt(256))) = 16.
    L = 200: floor(200 / 128) = 1. Batch 2000, 1 KV head, L = 65536: the 6000-sub-sequence workspace allows 3;
    the wave target leaves 1."""
    got = at.xqa_num_splits([1, 8, 1, 1, 2000], [8, 8, 8, 8, 1], [16384, 16384, 4096, 200, 65536], 132.0)
    assert got.tolist() == [32.0, 16.0, 16.0, 1.0, 1.0]
    assert at.xqa_num_splits(2, 1, 65536, 132.0).item() == 64.0  # round(sqrt(8 x 512)) = 64, 1 wave


def test_tensorrt_llm_falls_back_to_mmha_where_xqa_does_not_run() -> None:
    """XQA takes up to 32 query heads per KV head (supportConfigHMMA) and runs where its blocks x 4 >= SMs
    (mayHavePerfGain): with 32 query heads on 1 KV head at batch 1, L = 4096 gives 32 blocks (128 < 132: MMHA) and
    L = 8192 64 (XQA): NVIDIA's H200 TensorRT-LLM table times the two at 37.2 and 20.4 us, the longer context faster.
    64 query heads per KV head always run MMHA, whose query heads each read the cache (its KV bytes x 64, all but
    one read from L2)."""
    import dataclasses

    h200 = dataclasses.replace(load_hardware("h200"), attention_kernel="xqa")
    mmha = at.xqa_runs_mmha(1, 1, [4096, 8192, 8192, 8192], [32, 32, 64, 32], [1, 1, 1, 1], 128, 132.0)
    assert mmha.tolist() == [True, False, True, False]
    assert not at.xqa_runs_mmha(1, 2, 4096, 32, 1, 128, 132.0)  # verification always runs XQA's spec mode
    wide = at.attention_time_s(1, 1, 8192, 64, 1, 128, 128, 512, h200)
    assert wide[4] == pytest.approx(8192 * 512 * 64 + 64 * 256 * 2)  # each query head reads the cache
