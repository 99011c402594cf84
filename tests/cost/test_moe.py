from __future__ import annotations

import numpy as np
import pytest

from specsim.cost import moe as mo
from specsim.cost.hardware import load_hardware


@pytest.fixture(scope="module")
def h100():
    return load_hardware("h100-sxm")


def test_moe_layer_grows_with_active_experts(h100) -> None:
    t = mo.moe_time_s(np.array([1, 2, 8, 8192]), 4096, 14336, 8, 2, h100)[0]
    assert np.all(np.diff(t) > 0)
    balanced = mo.moe_time_s(4, 4096, 14336, 8, 2, h100, balanced=True)[0]
    assert balanced > mo.moe_time_s(4, 4096, 14336, 8, 2, h100)[0]  # 8 experts, not 6.3 expected at random


def test_sglang_default_config_blocks() -> None:
    """SGLang's get_default_config (fused_moe_triton_config.py) for bf16: BLOCK_SIZE_M x N x K = 16 x 32 x 64
    while M (tokens) <= E (the rank's experts), 64 x 64 x 32 above."""
    bm, bn, bk = mo.sglang_default_blocks([1, 256, 257, 4096], 256)
    assert bm.tolist() == [16, 16, 64, 64] and bn.tolist() == [32, 32, 64, 64] and bk.tolist() == [64, 64, 32, 32]
    assert mo.sglang_default_blocks(128, 256 / 2)[0].item() == 16  # ep = 2: 128 local experts


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
    compute = mo.triton_moe_gemm_s([10, 64, 65], 256, 4096, 7168, 64, 64, 32, a100)[1]
    assert compute[0] == pytest.approx(by_hand) and compute[1] == pytest.approx(by_hand)
    assert compute[2] == pytest.approx(2 * by_hand)  # 2 x 16384 CTAs = 304 waves, not 303.4
    # the bytes are not padded: weights 256 x 4096 x 7168 x 2 B plus 10 rows in (7168) and out (4096)
    mem = mo.triton_moe_gemm_s(10, 256, 4096, 7168, 64, 64, 32, a100)[2]
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
        t = mo.moe_time_s(np.array(tokens), h, n, e, k, hw, balanced=True, buffer_sets=1.0)[0]
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
    tile = mo.trtllm_default_tile_tokens(rows, 8, 8)
    assert tile.tolist() == [8, 8, 8, 8, 8, 16, 16, 32, 64, 64, 64]
    assert mo.trtllm_default_tile_tokens(4096 * 8 / 256, 256, 256 / 2).item() == 64  # ep 2: 128 local experts


def test_trtllm_moe_by_hand() -> None:
    """Hand calculation on a B300 (160 SMs): 8 experts of 12 rows each (T = 48, top-2), gate+up n = 32768,
    k = 6144, tile_N 8: two token tiles per expert, 8 x 2 x 32768/128 = 4096 CTAs, ceil(4096 / 160) = 26
    waves of 2 x 128 x 8 x (6144 + cta_k_overhead) FLOPs at the per-SM rate; each token tile streams the
    expert's 402.7 MB of weights, of which l2_resident_frac x L2 stays cached for the second tile."""
    b300 = load_hardware("b300")
    eff = b300.efficiency
    per_sm = 2250e12 * eff.gemm_compute * eff.moe_compute / 160
    _t, compute, mem = mo.trtllm_moe_gemm_s(12, 8, 32768, 6144, 8, b300)
    assert compute == pytest.approx(26 * 2 * 128 * 8 * (6144 + eff.cta_k_overhead) / per_sm)
    w = 32768 * 6144 * 2
    kept = b300.l2_bytes * eff.l2_resident_frac / w
    streamed = 8 * (w * (2 - kept) + 12 * (6144 + 32768) * 2)
    assert mem == pytest.approx(streamed / (b300.mem_bw_bytes_per_s * eff.moe_memory))
    # 8 rows fit one tile: the weights once
    one = mo.trtllm_moe_gemm_s(8, 8, 32768, 6144, 8, b300)[2]
    assert one == pytest.approx(8 * (w + 8 * (6144 + 32768) * 2) / (b300.mem_bw_bytes_per_s * eff.moe_memory))


def test_trtllm_moe_step_and_wide_expert_ceiling() -> None:
    """NVIDIA's B300 vLLM tables (aiconfigurator-core 0.12.0, FlashInfer TRT-LLM-gen bf16 MoE, balanced):
    hidden 6144, 8 experts, top-2, width 16384 steps from 0.683 ms at 32 tokens to 1.231 ms at 48 (one
    8-token tile per expert -> two, each re-streaming the 403 MB gate+up weights) and reaches 550 TFLOP/s
    at 16384 tokens, width 2048 (weights that stay in L2) 1037; the "grouped" family (B200) has no step."""
    b300, b200 = load_hardware("b300"), load_hardware("b200")

    def times(hw, tokens, inter):
        return mo.moe_time_s(np.array(tokens, dtype=float), 6144, inter, 8, 2, hw, balanced=True, buffer_sets=1.0)[0]

    wide = times(b300, [32, 48, 16384], 16384)
    assert wide[0] == pytest.approx(0.683e-3, rel=0.1) and wide[1] == pytest.approx(1.231e-3, rel=0.1)
    assert wide[1] / wide[0] > 1.6
    tflops = lambda t, inter: 2 * 3 * 16384 * 2 * 6144 * inter / t / 1e12  # noqa: E731
    assert tflops(wide[2], 16384) == pytest.approx(550, rel=0.12)
    assert tflops(times(b300, [16384], 2048)[0], 2048) == pytest.approx(1037, rel=0.1)
    step = times(b200, [32, 48], 16384)
    assert step[1] / step[0] < 1.2
