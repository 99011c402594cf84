"""Time of one fused-MoE layer's expert computation from its shape on a HardwareProfile: the experts
its tokens reach, the grouped GEMMs as the GPU's fused-MoE kernel family runs them (grouped / SGLang
Triton / FlashInfer TRT-LLM-gen), and the fixed costs outside the GEMM tiles. Pure numpy, broadcasting
over any array arguments; dense GEMMs and the roofline pieces are roofline.py's."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from specsim.cost.hardware_profile import HardwareProfile
from specsim.cost.roofline import Array, _join, gemm_time_s, l2_hit_fraction, memory_s, stream_s


def distinct_experts(tokens: ArrayLike, n_experts: ArrayLike, top_k: ArrayLike, ep: ArrayLike = 1.0) -> Array:
    """Expected experts on one of `ep` ranks that T tokens route to, each picking k of E uniformly:
    (E/ep) * (1 - (1 - k/E)^T) (occupancy of E bins): the "expert tax" that makes verification of
    B(k+1) tokens read more expert weights than a decode step of B tokens."""
    t, e, k, ep_ = (np.asarray(a, dtype=float) for a in (tokens, n_experts, top_k, ep))
    return e / ep_ * (1.0 - (1.0 - k / e) ** t)


def balanced_experts(tokens: ArrayLike, n_experts: ArrayLike, top_k: ArrayLike, ep: ArrayLike = 1.0) -> Array:
    """Experts on one of `ep` ranks that T tokens reach under perfectly balanced routing (NVIDIA's
    "balanced" MoE tables: the T*k assignments spread evenly): min(E, T*k) / ep."""
    t, e, k, ep_ = (np.asarray(a, dtype=float) for a in (tokens, n_experts, top_k, ep))
    return np.minimum(e, t * k) / ep_


def moe_routing_bytes(tokens: ArrayLike, hidden: ArrayLike, inter: ArrayLike, top_k: ArrayLike, ep: ArrayLike = 1.0,
                      gated: bool = True, act_bytes: float = 2.0) -> Array:
    """Bytes the fused MoE moves outside its GEMMs: the activation (read the gate and up halves,
    write the product) and the top-k combine (read the T*k expert outputs, write T rows)."""
    t, h, i, k, ep_ = (np.asarray(a, dtype=float) for a in (tokens, hidden, inter, top_k, ep))
    pairs = t * k / ep_
    return pairs * i * act_bytes * ((2.0 if gated else 1.0) + 1.0) + (pairs + t) * h * act_bytes


# SGLang's default fused-MoE config for 16-bit weights (python/sglang/srt/layers/moe/fused_moe_triton/
# fused_moe_triton_config.py, get_default_config, SGLang 0.5.x): (BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K)
# while M (tokens) <= E (the rank's experts), and above.
SGLANG_SMALL_M_BLOCKS = (16.0, 32.0, 64.0)
SGLANG_BLOCKS = (64.0, 64.0, 32.0)


def sglang_default_blocks(tokens: ArrayLike, local_experts: ArrayLike) -> tuple[Array, Array, Array]:
    """(BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K) of SGLang's default bf16/fp16 fused-MoE config
    (fused_moe_triton_config.get_default_config): 16 x 32 x 64 when tokens <= experts, else 64 x 64 x 32."""
    small = np.asarray(tokens, dtype=float) <= np.asarray(local_experts, dtype=float)
    bm, bn, bk = (np.where(small, a, b) for a, b in zip(SGLANG_SMALL_M_BLOCKS, SGLANG_BLOCKS, strict=True))
    return bm, bn, bk


def sglang_tuned(n_experts: ArrayLike, inter: ArrayLike, hw: HardwareProfile) -> NDArray[np.bool_]:
    """Whether SGLang ships a tuned bf16 config for (experts, N = per-GPU expert width) on this GPU
    (`hw.moe_tuned_configs`): its kernel then never runs the default config."""
    e, i = np.broadcast_arrays(np.asarray(n_experts, dtype=float), np.asarray(inter, dtype=float))
    out = np.zeros(e.shape, bool)
    for te, tn in hw.moe_tuned_shapes:
        out |= (e == te) & (i == tn)
    return out


def triton_moe_gemm_s(rows: ArrayLike, active: ArrayLike, n: ArrayLike, k: ArrayLike, block_m: ArrayLike,
                      block_n: ArrayLike, block_k: ArrayLike, hw: HardwareProfile, dtype: str = "bf16",
                      weight_bytes: float = 2.0, act_bytes: float = 2.0, working_set: ArrayLike | None = None,
                      ) -> tuple[Array, Array, Array]:
    """(time, compute, memory) seconds of one grouped GEMM of a Triton fused-MoE kernel run with one
    fixed block config (BLOCK_SIZE_M x N x K), over `active` experts of `rows` token rows each.

      blocks = ceil(rows / BLOCK_M) per expert: moe_align_block_size pads every expert's rows to a whole
               block, so at BLOCK_M = 64 an expert with 33 rows costs 64
      CTAs = active * blocks * ceil(n / BLOCK_N), in whole waves over the SMs (one CTA each)
      one CTA = max(tensor cores: 2 * BLOCK_M * BLOCK_N * K' at the per-SM share of gemm_compute x
                    moe_compute x moe_default_tile_efficiency, L2 operand stream:
                    (BLOCK_M * act + BLOCK_N * weight bytes) * K'), K' = K in whole BLOCK_K steps; no
                    cta_k_overhead (the dense GEMM's per-tile fill, fitted on cuBLAS's 128-256-column tiles:
                    the Triton blocks' own is in moe_default_tile_efficiency; with it the A100 SGLang
                    tables fit worse, held-out 513-2048 tokens 15.5% against 13.8%)
      memory = (weights + token rows in and out) at `moe_memory` of HBM bandwidth (times the CTAs-in-flight
               ramp of `_gemm_configs`); the padding is compute, never bytes (masked loads)
    joined by the p-norm `ridge_sharpness`, plus the fixed cost of a kernel."""
    eff = hw.efficiency
    sms = float(hw.sm_count)
    r, g, n_, k_, bm, bn, bk = (np.asarray(a, dtype=float) for a in (rows, active, n, k, block_m, block_n, block_k))
    per_sm = hw.peak(dtype) * eff.gemm_compute * eff.moe_compute * eff.moe_default_tile_efficiency / sms
    l2_per_sm = eff.l2_bw_tb_per_s * 1e12 / sms
    ctas_per_row = g * np.ceil(n_ / bn)
    ctas = np.ceil(r / bm) * ctas_per_row
    k_eff = np.ceil(k_ / bk) * bk
    cta_s = np.maximum(2.0 * bm * bn * k_eff / per_sm, (bm * act_bytes + bn * weight_bytes) * k_eff / l2_per_sm)
    compute = np.ceil(ctas / sms) * cta_s
    bytes_ = g * (n_ * k_ * weight_bytes + r * (k_ + n_) * act_bytes)
    hit = 0.0 if working_set is None else l2_hit_fraction(working_set, hw)
    ramp = np.minimum(1.0, np.minimum(ctas_per_row, sms) / (eff.bw_ramp_ctas_frac * sms))
    memory = stream_s(bytes_, hit, hw, hw.mem_bw_bytes_per_s * eff.moe_memory, ramp)
    return eff.kernel_overhead_us * 1e-6 + _join(compute, memory, eff.ridge_sharpness), compute, memory


# FlashInfer's TRT-LLM-gen fused MoE, bf16 (flashinfer-ai/flashinfer csrc/trtllm_fused_moe_kernel_launcher.cu):
# Bf16MoeLauncher::mSupportedTileNums = {8, 16, 32, 64, 128}, the tokens-per-expert tiles (tile_N) of its
# batched GEMMs; the weights are the GEMMs' M side in 128-row tiles (vLLM's flashinfer weight shuffle,
# epilogue_tile_m = 128).
TRTLLM_BF16_TILE_TOKENS = (8.0, 16.0, 32.0, 64.0, 128.0)
TRTLLM_WEIGHT_TILE = 128.0


def trtllm_default_tile_tokens(rows: ArrayLike, active: ArrayLike, local_experts: ArrayLike) -> Array:
    """tile_N of FlashInfer's TRT-LLM-gen bf16 MoE without an autotuned tactic (the tactic [-1, -1]
    that `trtllm_bf16_moe` passes when its AutoTuner has no profile): computeSelectedTileN centres the
    candidates on nextPowerOfTwo(T * k / local experts) clamped to {8..128} and adds the ladder's -1, +1
    and +2 neighbours; selectDefaultTileN takes the smallest, i.e. half the centre (8 when the centre is
    8). `rows` x `active` = T * k on this rank."""
    lo, hi = TRTLLM_BF16_TILE_TOKENS[0], TRTLLM_BF16_TILE_TOKENS[-1]
    avg = np.asarray(rows, dtype=float) * np.asarray(active, dtype=float) / np.asarray(local_experts, dtype=float)
    # nextPowerOfTwo(ceil(avg)); the guard keeps an exact power of two (8.0000001 from float rows) at itself
    centre = np.clip(np.exp2(np.ceil(np.log2(np.maximum(np.ceil(avg - 1e-6), 1.0)))), lo, hi)
    return np.where(centre > lo, centre / 2.0, lo)


def trtllm_moe_gemm_s(rows: ArrayLike, active: ArrayLike, n: ArrayLike, k: ArrayLike, tile: ArrayLike,
                      hw: HardwareProfile, dtype: str = "bf16", weight_bytes: float = 2.0, act_bytes: float = 2.0,
                      working_set: ArrayLike | None = None) -> tuple[Array, Array, Array]:
    """(time, compute, memory) seconds of one batched GEMM of FlashInfer's TRT-LLM-gen fused MoE over
    `active` experts of `rows` token rows each, tokens in tiles of `tile` (tile_N):

      token tiles = ceil(rows / tile) per expert: each expert's rows padded to whole tiles
      CTAs = active x token tiles x ceil(n / 128), in whole waves over the SMs; one CTA = 2 x 128 x tile
             x (K + cta_k_overhead) at the per-SM share of gemm_compute x moe_compute
      memory = every token tile of an expert streams that expert's n x K weights; what a tile finds still
               in L2 from the one before is not re-read: of W = n x K x weight bytes, L2 holds
               C = l2_resident_frac x L2 between passes, so a pass re-reads max(0, 1 - C / W) of W. Wide
               experts (W >> C) re-stream nearly all their weights per 64-token tile (64 FLOP per weight
               byte: the ~550-600 TFLOP/s ceiling of NVIDIA's B300/GB200 tables at width 8192-16384,
               against ~1000 where an expert's weights stay in L2); plus the token rows in and out, at
               `moe_memory` of HBM bandwidth (times the CTAs-in-flight ramp)
    joined by the p-norm `ridge_sharpness`, plus the fixed cost of a kernel."""
    eff = hw.efficiency
    sms = float(hw.sm_count)
    r, g, n_, k_, tn = (np.asarray(a, dtype=float) for a in (rows, active, n, k, tile))
    per_sm = hw.peak(dtype) * eff.gemm_compute * eff.moe_compute / sms
    tiles = np.ceil(r / tn - 1e-9)
    m_tiles = np.ceil(n_ / TRTLLM_WEIGHT_TILE)
    ctas = g * tiles * m_tiles
    compute = np.ceil(ctas / sms) * 2.0 * TRTLLM_WEIGHT_TILE * tn * (k_ + eff.cta_k_overhead) / per_sm
    w = n_ * k_ * weight_bytes
    kept = np.minimum(1.0, hw.l2_bytes * eff.l2_resident_frac / w)
    bytes_ = g * (w * (1.0 + (tiles - 1.0) * (1.0 - kept)) + r * (k_ + n_) * act_bytes)
    hit = 0.0 if working_set is None else l2_hit_fraction(working_set, hw)
    ramp = np.minimum(1.0, np.minimum(g * m_tiles, sms) / (eff.bw_ramp_ctas_frac * sms))
    memory = stream_s(bytes_, hit, hw, hw.mem_bw_bytes_per_s * eff.moe_memory, ramp)
    return eff.kernel_overhead_us * 1e-6 + _join(compute, memory, eff.ridge_sharpness), compute, memory


def moe_gemm_s(tokens: ArrayLike, rows: ArrayLike, active: ArrayLike, n: ArrayLike, k: ArrayLike,
               n_experts: ArrayLike, inter: ArrayLike, hw: HardwareProfile, dtype: str = "bf16",
               weight_bytes: float = 2.0, act_bytes: float = 2.0, ep: ArrayLike = 1.0,
               working_set: ArrayLike | None = None) -> tuple[Array, Array, Array]:
    """(time, compute, memory) seconds of one grouped GEMM of a fused MoE layer (gate+up: n = 2 x inter,
    k = hidden; down: n = hidden, k = inter) over `active` experts of `rows` rows each, T = `tokens`
    before routing, as the GPU's fused-MoE kernel family runs it (`hw.moe_kernel`):

    * "grouped": the fastest tile configuration of a grouped GEMM (`gemm_time_s`, groups = active
      experts) at `moe_compute` of a dense GEMM's tile rate.
    * "triton_sglang": SGLang's Triton kernel with its default config for 16-bit weights
      (`sglang_default_blocks` over T and the rank's E/ep experts; `triton_moe_gemm_s`), unless SGLang
      ships a tuned config for (E, inter) on this GPU (`sglang_tuned`), which is priced as "grouped" (a
      tuned config picks its tiles per token count, as the grouped search does), its weights streamed at
      `moe_memory` too (the same Triton kernel). Quantised or weight-only kernels (other default
      configs) are priced as "grouped".
    * "trtllm_gen": FlashInfer's TRT-LLM-gen bf16 MoE without a tuned tactic (`trtllm_default_tile_tokens`
      over the rank's E/ep experts; `trtllm_moe_gemm_s`): token tiles of 8-64 rows, each re-streaming its
      expert's weights past what L2 keeps. Quantised kernels are priced as "grouped".

    `moe_time_s` (the measured tables' rows) and the forward pass (ops._mlp_ops) both price MoE GEMMs here."""
    if hw.moe_kernel == "trtllm_gen" and dtype in ("bf16", "fp16") and weight_bytes == act_bytes:
        local = np.asarray(n_experts, dtype=float) / np.asarray(ep, dtype=float)
        tile = trtllm_default_tile_tokens(rows, active, local)
        return trtllm_moe_gemm_s(rows, active, n, k, tile, hw, dtype, weight_bytes, act_bytes, working_set)
    sglang = hw.moe_kernel == "triton_sglang" and dtype in ("bf16", "fp16") and weight_bytes == act_bytes
    # SGLang's Triton kernel streams the expert weights at its own rate, tuned config or not
    tiled = hw.with_efficiency(memory=hw.efficiency.moe_memory) if sglang else hw
    grouped = gemm_time_s(rows, n, k, tiled, dtype, weight_bytes, act_bytes, active,
                          compute_scale=hw.efficiency.moe_compute, working_set=working_set)
    if not sglang:
        return grouped
    bm, bn, bk = sglang_default_blocks(tokens, np.asarray(n_experts, dtype=float) / np.asarray(ep, dtype=float))
    triton = triton_moe_gemm_s(rows, active, n, k, bm, bn, bk, hw, dtype, weight_bytes, act_bytes, working_set)
    tuned = sglang_tuned(n_experts, inter, hw)
    t, c, m = (np.where(tuned, a, b) for a, b in zip(grouped, triton, strict=True))
    return t, c, m


def moe_time_s(
    tokens: ArrayLike, hidden: ArrayLike, inter: ArrayLike, n_experts: ArrayLike, top_k: ArrayLike,
    hw: HardwareProfile, dtype: str = "bf16", weight_bytes: float = 2.0, ep: ArrayLike = 1.0,
    gated: bool = True, act_bytes: float = 2.0, balanced: bool = False, buffer_sets: ArrayLike | None = None,
) -> tuple[Array, Array, Array, Array]:
    """(time, up, down, fixed) seconds of one fused MoE layer's expert computation on one rank
    (what NVIDIA's moe tables time: routing applied, grouped gate+up GEMM, activation, down GEMM;
    vLLM/SGLang fused_moe, TensorRT-LLM CUTLASS MoE): T tokens before routing, experts of width
    `inter` (the per-GPU shard), E experts of which this rank holds E/ep, top-k routing.

    T*k/ep token-expert pairs on this rank over the active experts (`distinct_experts` for random
    routing, `balanced_experts` when `balanced`), each a GEMM of T*k/(ep*active) rows — a grouped GEMM
    priced by the GPU's fused-MoE kernel family (`moe_gemm_s`): its tiles run at `moe_compute` of a
    dense GEMM's rate (fused MoE kernels reach less than cuBLAS at large token counts: NVIDIA's tables,
    H100 Mixtral shape, 8192 tokens: SGLang Triton 209 TFLOP/s, TensorRT-LLM CUTLASS 808), plus
    `moe_fixed_s` (token sort / block alignment, permutation, activation, combine).
    """
    t, h, i, e, k, ep_ = (np.asarray(a, dtype=float) for a in (tokens, hidden, inter, n_experts, top_k, ep))
    active = np.maximum((balanced_experts if balanced else distinct_experts)(t, e, k, ep_), 1e-9)
    rows = np.maximum(t * k / ep_ / active, 1e-9)
    branches = 2.0 if gated else 1.0
    # a benchmark replaying the layer (buffer_sets) keeps all active experts' weights in one working set
    ws = None if buffer_sets is None else np.asarray(buffer_sets, dtype=float) * active * (branches + 1.0) * h * i \
        * weight_bytes
    up = moe_gemm_s(t, rows, active, branches * i, h, e, i, hw, dtype, weight_bytes, act_bytes, ep_, ws)[0]
    down = moe_gemm_s(t, rows, active, h, i, e, i, hw, dtype, weight_bytes, act_bytes, ep_, ws)[0]
    fixed = moe_fixed_s(moe_routing_bytes(t, h, i, k, ep_, gated, act_bytes), t * k / ep_ * h * act_bytes, active, hw)
    return up + down + fixed, up, down, fixed


def moe_fixed_s(routing_bytes: ArrayLike, permute_bytes: ArrayLike, active_experts: ArrayLike,
                hw: HardwareProfile) -> Array:
    """The fused MoE's time outside its GEMM tiles: `moe_overhead_us` per layer, the activation and
    combine traffic at streaming bandwidth, the token permutation (gathering each token's hidden state
    for each of its experts: T*k*hidden*2 bytes at `moe_permute_tb_per_s`, scattered rows), and
    `moe_expert_us` per active expert (its block setup, serial in the fused kernels). The last two
    were fitted to NVIDIA's MoE tables: without them the error grew as the expert width per GPU fell
    (TP-sharded experts of width 16-96: 40-70% too fast)."""
    eff = hw.efficiency
    return (eff.moe_overhead_us * 1e-6 + memory_s(routing_bytes, hw)
            + np.asarray(permute_bytes, dtype=float) / (eff.moe_permute_tb_per_s * 1e12)
            + eff.moe_expert_us * 1e-6 * np.asarray(active_experts, dtype=float))
