from __future__ import annotations

import itertools

import numpy as np
import pytest

from specsim.cost import roofline as rl
from specsim.cost.hardware import load_hardware
from specsim.errors import SpecsimError


@pytest.fixture(scope="module")
def h100():
    return load_hardware("h100-sxm")


def test_gemm_never_faster_with_more_rows(h100) -> None:
    m = np.arange(1, 8193)
    for n, k in [(4096, 4096), (1280, 8192), (28672, 8192), (152064, 8192)]:
        t = rl.gemm_time_s(m, n, k, h100)[0]
        assert np.all(np.diff(t) >= -1e-15), (n, k)


def test_gemm_flat_while_memory_bound_linear_when_compute_bound(h100) -> None:
    n, k = 28672, 8192  # Llama-70B gate+up at tp 1
    t = rl.gemm_time_s(np.array([1, 8, 16, 4096, 8192]), n, k, h100)[0]
    assert t[2] / t[0] < 1.10  # 16 tokens cost about one: weights are read once
    assert t[4] / t[3] == pytest.approx(2.0, rel=0.05)  # compute-bound: linear in tokens


def test_gemm_wave_quantisation_steps(h100) -> None:
    # Past one wave of tiles on 132 SMs the time jumps: a step, not a smooth ramp.
    c = rl.gemm_compute_s(np.arange(1, 1025), 8192, 8192, h100)
    steps = np.diff(c) / c[:-1]
    assert steps.max() > 0.03 and (steps < 1e-9).sum() > 0  # some jumps, some flat runs


def test_gemm_time_above_both_ceilings(h100) -> None:
    m = np.array([1, 64, 512, 4096])
    t, c, mem = rl.gemm_time_s(m, 8192, 8192, h100)
    flops = 2 * m * 8192 * 8192
    assert np.all(t >= flops / h100.peak("bf16"))  # never faster than the datasheet peak
    assert np.all(t >= 8192 * 8192 * 2 / h100.mem_bw_bytes_per_s)
    assert np.all(t >= np.maximum(c, mem))


def test_attention_reads_kv_once_per_sequence(h100) -> None:
    # Flash-decoding: 1 or 4 new tokens per sequence read the same KV cache.
    t1 = rl.attention_time_s(8, 1, 32768, 64, 8, 128, 128, 2 * 8 * 128 * 2, h100)
    t4 = rl.attention_time_s(8, 4, 32768, 64, 8, 128, 128, 2 * 8 * 128 * 2, h100)
    assert t1[4] == pytest.approx(8 * 32768 * 4096 + 8 * 64 * 256 * 2)
    assert t4[0] / t1[0] < 1.05
    # FLOPs grow with the query tokens; the 4 new tokens see each other causally: L - (q - 1)/2 keys
    assert t4[3] == pytest.approx(4 * t1[3] * (32768 - 1.5) / 32768)


def test_attention_fixed_and_per_sequence_costs(h100) -> None:
    """A decode kernel has a floor (launch, split-KV combine) and a cost per wave of (sequence x KV
    head) work units: short-KV decode of many sequences is not free (NVIDIA's H100 FA3 tables: 9 us
    at batch 1, ~0.18 ms at batch 1024 over 2 keys with 8 KV heads)."""
    e = h100.efficiency
    one = rl.attention_time_s(1, 1, 2, 32, 8, 128, 128, 4096, h100)[0]
    assert one == pytest.approx((e.attention_overhead_us + e.attention_cta_us) * 1e-6, rel=0.05)
    many = rl.attention_time_s(1024, 1, 2, 32, 8, 128, 128, 4096, h100)[0]
    assert many > one + e.attention_cta_us * 1e-6 * (1024 * 8 / h100.sm_count - 1) * 0.99


def test_verification_between_decode_and_prefill(h100) -> None:
    """q > 1 over a long KV: the KV is read once (memory as decode), the q x group query rows pad to
    64-row tiles (so small q costs what decode costs), and compute grows toward prefill's."""
    kv = 2 * 8 * 128 * 2
    t = [rl.attention_time_s(16, q, 8192, 32, 8, 128, 128, kv, h100)[0] for q in (1, 2, 8, 16, 64, 512)]
    assert all(b >= a for a, b in itertools.pairwise(t))
    assert t[2] / t[0] < 1.1  # q x group = 32 rows: one tile, as decode
    prefill = rl.attention_time_s(16, 8192, 8192, 32, 8, 128, 128, kv, h100)
    assert prefill[0] > t[-1] and prefill[1] > prefill[2]  # prefill is compute-bound


def test_small_m_gemms_are_not_padded_to_64_rows() -> None:
    """Decode GEMMs run skinny (swap-AB) tiles padded to 8 tokens, so M = 1 stays memory-bound even
    where a 64-row tile at tensor-core rate would be compute-bound (int4 weights on a GPU with few
    FLOP per byte), and nothing steps when batch x (k+1) crosses 64."""
    hw = load_hardware("a100-sxm-80gb")
    t = rl.gemm_time_s(1, 28672, 8192, hw, "bf16", 0.5)[0]
    stream = 28672 * 8192 * 0.5 / (hw.mem_bw_bytes_per_s * hw.efficiency.memory)
    # weight-only int4 at M = 1: streaming plus dequantisation (TRT-LLM's A100 int4 GEMV runs ~1.8x its
    # streaming time, NVIDIA's tables), far from a 64-row tile at tensor-core rate with dequantisation
    eff = hw.efficiency
    padded = 2 * 64 * 28672 * 8192 / (hw.peak("bf16") * eff.gemm_compute * eff.small_tile_efficiency)
    assert stream < t < 2.5 * stream and t < padded
    m = np.arange(56, 73)
    steps = np.diff(rl.gemm_time_s(m, 8192, 8192, hw)[0]) / rl.gemm_time_s(m, 8192, 8192, hw)[0][:-1]
    assert steps.max() < 0.05


def test_softer_tile_boundaries(h100) -> None:
    t = rl.gemm_time_s(np.array([256, 257]), 8192, 8192, h100)[0]
    assert t[1] / t[0] < 1.15  # measured +4-6% (NVIDIA's H100 tables); was +35% with whole 128-row tiles


def test_fp8_adds_its_activation_quantisation_kernel(h100) -> None:
    with_q = rl.gemm_time_s(4096, 8192, 8192, h100, "fp8", 1.0)[0]
    without = rl.gemm_time_s(4096, 8192, 8192, h100, "fp8", 1.0, act_quant=False)[0]
    quant = rl.activation_quant_s(4096, 8192, h100)
    assert with_q == pytest.approx(without + quant)
    assert quant > h100.efficiency.kernel_overhead_us * 1e-6 + 4096 * 8192 * 3 / h100.mem_bw_bytes_per_s


def test_l2_resident_weights_only_in_benchmark_replays(h100) -> None:
    """A benchmark cycling 6 copies of a 1 MB weight runs it from L2; a forward pass (no buffer_sets)
    streams it from HBM."""
    cold = rl.gemm_time_s(1, 1024, 512, h100)[2]
    warm = rl.gemm_time_s(1, 1024, 512, h100, buffer_sets=6)[2]
    assert warm < cold
    assert rl.l2_hit_fraction(np.array([1e6, 10 * h100.l2_bytes, np.nan]), h100).tolist() == pytest.approx(
        [1.0, 0.0, 0.0], abs=1e-3)


def test_moe_layer_grows_with_active_experts(h100) -> None:
    t = rl.moe_time_s(np.array([1, 2, 8, 8192]), 4096, 14336, 8, 2, h100)[0]
    assert np.all(np.diff(t) > 0)
    balanced = rl.moe_time_s(4, 4096, 14336, 8, 2, h100, balanced=True)[0]
    assert balanced > rl.moe_time_s(4, 4096, 14336, 8, 2, h100)[0]  # 8 experts, not 6.3 expected at random


def test_allreduce_formula(h100) -> None:
    lat, bw, p = (float(a) for a in rl.allreduce_params(8, h100, "nccl"))
    t = rl.allreduce_time_s(64e6, 8, h100)
    assert t == pytest.approx(rl._join(np.array(lat), np.array(2 * 7 / 8 * 64e6 / bw), p))
    assert rl.allreduce_time_s(64e6, 1, h100) == 0


def test_allreduce_per_implementation(h100) -> None:
    """Custom all-reduce under CUDA graphs is several times faster than eager NCCL at decode sizes
    (H100, 8 GPUs, 16 KiB: 3.7 us measured vs ~30 us eager, NVIDIA's tables / Vidur)."""
    eager, graph, custom = (float(rl.allreduce_time_s(16384, 8, h100, impl)) for impl in ("nccl", "nccl_graph",
                                                                                       "custom"))
    assert custom < graph < eager and eager / custom > 4
    assert 2e-6 < custom < 8e-6
    with pytest.raises(SpecsimError, match="unknown all-reduce implementation"):
        rl.allreduce_time_s(16384, 8, h100, "mpi")
    # an implementation without a table for a GPU count falls back to eager NCCL's figures
    assert float(rl.allreduce_time_s(1e6, 16, h100, "custom")) == pytest.approx(float(rl.allreduce_time_s(1e6, 16,
                                                                                                        h100)))


def test_fa_num_splits_matches_flash_api_heuristic() -> None:
    """Hand calculations of FlashAttention's num_splits_heuristic (flash_api.cpp) on an A100 (108 SMs,
    FA2 counts 2 CTAs per SM: 216 slots). 1 unit, 32 KV blocks: the efficiency s/216 peaks at the cap
    min(128, 216, 32) = 32 splits. 128 units, 1024 blocks: waves 128s/216, efficiency 0.59 (s = 1, 2),
    0.89 (s = 3) >= 0.85 x 1.0 (s = 27): 3. 172 units (< 0.8 x 216 = 172.8): 0.80 up to s = 4, 0.995 at
    5: 5. 173 units fill 80%: 1. 1 unit, 2 blocks: 2."""
    got = rl.fa_num_splits([1, 128, 172, 173, 1], 216, [32, 1024, 1024, 1024, 2])
    assert got.tolist() == [32.0, 3.0, 5.0, 1.0, 2.0]
    # a split count that leaves the blocks per split unchanged is skipped: 10 blocks over 1 unit and
    # 216 slots would take 10 splits; 9 (ceil(10/9) = 2 = ceil(10/8)) is not eligible either way
    assert rl.fa_num_splits(1, 216, 10).item() == 10.0
    assert rl.fa_block_n([64, 128, 256]).tolist() == [256.0, 128.0, 64.0]


def test_fa2_splits_only_gqa_decode() -> None:
    """vLLM's FA2 (mha_varlen_fwd) splits the KV only when it swaps a GQA decode's query heads into the
    query length (seqlenq_ngroups_swapped: q = 1 and heads > KV heads); MHA decode and prefill never.
    FA3-style kernels ("fa3", H100) split MHA decode too."""
    a100, h100 = load_hardware("a100-sxm-80gb"), load_hardware("h100-sxm")
    assert a100.attention_kernel == "fa2" and h100.attention_kernel == "fa3"
    units, splits, slots = rl.attention_num_splits(1, 1, 8192, [8, 32, 32], [8, 8, 8], 128, a100)
    assert units.tolist() == [8.0, 8.0, 8.0] and slots.tolist() == [216.0] * 3
    assert splits[0] == 1 and splits[1] > 1 and splits[2] == splits[1]
    assert rl.attention_num_splits(1, 64, 8192, 32, 8, 128, a100)[1].item() == 1  # prefill / verification
    assert rl.attention_num_splits(1, 1, 8192, 8, 8, 128, h100)[1].item() > 1


def test_fa2_mha_decode_streams_per_cta() -> None:
    """An unsplit MHA decode walks each head's KV in one CTA: NVIDIA's A100 vLLM FA2 table (aiconfigurator-core
    0.12.0) times batch 1, one head of 128 over 131072 keys (64 MiB) at 3.02 ms, ~22 GB/s, and 8 heads in the
    same 3.02 ms (8 CTAs side by side); split GQA decode of the same bytes runs near HBM bandwidth."""
    a100 = load_hardware("a100-sxm-80gb")
    one = float(rl.attention_time_s(1, 1, 131072, 1, 1, 128, 128, 512, a100, buffer_sets=1)[0])
    eight = float(rl.attention_time_s(1, 1, 131072, 8, 8, 128, 128, 8 * 512, a100, buffer_sets=1)[0])
    assert one == pytest.approx(3.02e-3, rel=0.2) and eight == pytest.approx(one, rel=0.05)
    gqa = float(rl.attention_time_s(1, 1, 131072, 8, 1, 128, 128, 512, a100, buffer_sets=1)[0])
    assert gqa < one / 5


def test_sglang_default_config_blocks() -> None:
    """SGLang's get_default_config (fused_moe_triton_config.py) for bf16: BLOCK_SIZE_M x N x K = 16 x 32 x 64
    while M (tokens) <= E (the rank's experts), 64 x 64 x 32 above."""
    bm, bn, bk = rl.sglang_default_blocks([1, 256, 257, 4096], 256)
    assert bm.tolist() == [16, 16, 64, 64] and bn.tolist() == [32, 32, 64, 64] and bk.tolist() == [64, 64, 32, 32]
    assert rl.sglang_default_blocks(128, 256 / 2)[0].item() == 16  # ep = 2: 128 local experts


def test_triton_moe_block_padding_by_hand() -> None:
    """Hand calculation on an A100 (108 SMs): 256 experts of 10 rows each, gate+up (n 4096, k 7168) at
    64 x 64 x 32 blocks. moe_align_block_size pads each expert's 10 rows to one 64-row block, so the
    grid is 256 x 1 x 4096/64 = 16384 CTAs, ceil(16384 / 108) = 152 waves, each CTA 2 x 64 x 64 x 7168
    FLOPs at the per-SM rate 312e12 x gemm_compute x moe_compute x moe_default_tile_efficiency / 108.
    Any row count up to 64 costs the same MMAs; 65 rows take a second block (twice the waves)."""
    a100 = load_hardware("a100-sxm-80gb")
    eff = a100.efficiency
    per_sm = 312e12 * eff.gemm_compute * eff.moe_compute * eff.moe_default_tile_efficiency / 108
    by_hand = 152 * 2 * 64 * 64 * 7168 / per_sm
    compute = rl.triton_moe_gemm_s([10, 64, 65], 256, 4096, 7168, 64, 64, 32, a100)[1]
    assert compute[0] == pytest.approx(by_hand) and compute[1] == pytest.approx(by_hand)
    assert compute[2] == pytest.approx(2 * by_hand)  # 2 x 16384 CTAs = 304 waves, not 303.4
    # the bytes are not padded: weights 256 x 4096 x 7168 x 2 B plus 10 rows in (7168) and out (4096)
    mem = rl.triton_moe_gemm_s(10, 256, 4096, 7168, 64, 64, 32, a100)[2]
    streamed = 256 * (4096 * 7168 * 2 + 10 * (7168 + 4096) * 2)
    assert mem == pytest.approx(streamed / (a100.mem_bw_bytes_per_s * eff.moe_memory))


def test_sglang_moe_switches_config_above_e_tokens_unless_tuned() -> None:
    """NVIDIA's A100 SGLang 0.5.10 tables (aiconfigurator-core 0.12.0, balanced routing): hidden 7168,
    width 2048, 256 experts, top-8 steps from 13.1 ms at 256 tokens to 19.6 ms at 320 (16 x 32 blocks
    streaming the weights -> 64-row padded blocks); Mixtral's 8 experts of width 3584 (a tuned config
    ships) do not step (0.428 -> 0.433 ms), width 14336 (none ships) does (1.64 -> 2.40 ms). H100's
    "grouped" kernel family has no such step."""
    a100, h100 = load_hardware("a100-sxm-80gb"), load_hardware("h100-sxm")
    assert a100.moe_kernel == "triton_sglang" and h100.moe_kernel == "grouped"
    assert (8.0, 3584.0) in a100.moe_tuned_shapes and (8.0, 14336.0) not in a100.moe_tuned_shapes

    def step(hw, tokens, h, n, e, k):
        t = rl.moe_time_s(np.array(tokens), h, n, e, k, hw, balanced=True, buffer_sets=1.0)[0]
        return t[1] / t[0], t

    ratio, t = step(a100, [256, 320], 7168, 2048, 256, 8)
    assert ratio > 1.15 and t[0] == pytest.approx(13.1e-3, rel=0.15) and t[1] == pytest.approx(19.6e-3, rel=0.2)
    assert step(a100, [8, 16], 4096, 3584, 8, 2)[0] < 1.05
    assert step(a100, [8, 16], 4096, 14336, 8, 2)[0] > 1.15
    assert step(h100, [256, 320], 7168, 2048, 256, 8)[0] < 1.15


def test_trtllm_default_tile_tokens() -> None:
    """FlashInfer's Bf16MoeLauncher without a tuned tactic (csrc/trtllm_fused_moe_kernel_launcher.cu):
    computeSelectedTileN centres on nextPowerOfTwo(T * k / local experts) clamped to {8, 16, 32, 64, 128}
    and adds the -1, +1, +2 neighbours; selectDefaultTileN takes the smallest. 8 experts, top-2: T = 32 ->
    avg 8 -> {8, 16, 32} -> 8; T = 48 -> avg 12 -> centre 16 -> {8, 16, 32, 64} -> 8 (two tiles per
    expert); T = 512 -> avg 128 -> {64, 128} -> 64; T = 16384 -> avg 4096 -> clamped 128 -> 64."""
    tokens = np.array([1, 4, 32, 48, 64, 65, 128, 129, 512, 768, 16384], dtype=float)
    rows = tokens * 2 / 8  # balanced: every expert active
    tile = rl.trtllm_default_tile_tokens(rows, 8, 8)
    assert tile.tolist() == [8, 8, 8, 8, 8, 16, 16, 32, 64, 64, 64]
    assert rl.trtllm_default_tile_tokens(4096 * 8 / 256, 256, 256 / 2).item() == 64  # ep 2: 128 local experts


def test_trtllm_moe_by_hand() -> None:
    """Hand calculation on a B300 (160 SMs): 8 experts of 12 rows each (T = 48, top-2), gate+up n = 32768,
    k = 6144, tile_N 8: two token tiles per expert, 8 x 2 x 32768/128 = 4096 CTAs, ceil(4096 / 160) = 26
    waves of 2 x 128 x 8 x (6144 + cta_k_overhead) FLOPs at the per-SM rate; each token tile streams the
    expert's 402.7 MB of weights, of which l2_resident_frac x L2 stays cached for the second tile."""
    b300 = load_hardware("b300")
    eff = b300.efficiency
    per_sm = 2250e12 * eff.gemm_compute * eff.moe_compute / 160
    _t, compute, mem = rl.trtllm_moe_gemm_s(12, 8, 32768, 6144, 8, b300)
    assert compute == pytest.approx(26 * 2 * 128 * 8 * (6144 + eff.cta_k_overhead) / per_sm)
    w = 32768 * 6144 * 2
    kept = b300.l2_bytes * eff.l2_resident_frac / w
    streamed = 8 * (w * (2 - kept) + 12 * (6144 + 32768) * 2)
    assert mem == pytest.approx(streamed / (b300.mem_bw_bytes_per_s * eff.moe_memory))
    # 8 rows fit one tile: the weights once
    one = rl.trtllm_moe_gemm_s(8, 8, 32768, 6144, 8, b300)[2]
    assert one == pytest.approx(8 * (w + 8 * (6144 + 32768) * 2) / (b300.mem_bw_bytes_per_s * eff.moe_memory))


def test_trtllm_moe_step_and_wide_expert_ceiling() -> None:
    """NVIDIA's B300 vLLM tables (aiconfigurator-core 0.12.0, FlashInfer TRT-LLM-gen bf16 MoE, balanced):
    hidden 6144, 8 experts, top-2, width 16384 steps from 0.683 ms at 32 tokens to 1.231 ms at 48 (one
    8-token tile per expert -> two, each re-streaming the 403 MB gate+up weights) and reaches 550 TFLOP/s
    at 16384 tokens, width 2048 (weights that stay in L2) 1037; the "grouped" family (B200) has no step."""
    b300, b200 = load_hardware("b300"), load_hardware("b200")

    def times(hw, tokens, inter):
        return rl.moe_time_s(np.array(tokens, dtype=float), 6144, inter, 8, 2, hw, balanced=True, buffer_sets=1.0)[0]

    wide = times(b300, [32, 48, 16384], 16384)
    assert wide[0] == pytest.approx(0.683e-3, rel=0.1) and wide[1] == pytest.approx(1.231e-3, rel=0.1)
    assert wide[1] / wide[0] > 1.6
    tflops = lambda t, inter: 2 * 3 * 16384 * 2 * 6144 * inter / t / 1e12  # noqa: E731
    assert tflops(wide[2], 16384) == pytest.approx(550, rel=0.12)
    assert tflops(times(b300, [16384], 2048)[0], 2048) == pytest.approx(1037, rel=0.1)
    step = times(b200, [32, 48], 16384)
    assert step[1] / step[0] < 1.2
