"""Time of one kernel from its shape on a HardwareProfile: GEMMs, attention, fused MoE, memory-bound
ops, collectives. Pure numpy, broadcasting over any array arguments.

Not a bare max(compute, memory): a GEMM is timed for each kernel configuration a cuBLAS / CUTLASS
heuristic chooses among (tile shape, split-K, data-parallel waves or stream-K; NVIDIA "Matrix
Multiplication Background" guide §3.1-3.2; swap-AB skinny tiles for few tokens), each with its own
roofline: whole waves of tiles, each tile bounded by the tensor cores or by its operand stream from
L2, a pipeline fill per tile, HBM bandwidth that needs enough CTAs in flight, weights a benchmark
replays from L2, and a p-norm join so the curve bends near the ridge as measured kernels do. The
fastest configuration wins; every kernel adds a fixed cost.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from specsim.cost.hardware import ALLREDUCE_IMPLEMENTATIONS, HardwareProfile
from specsim.errors import SpecsimError

Array = NDArray[np.float64]

# Kernel configurations a cuBLAS / CUTLASS heuristic chooses among (NVIDIA "Matrix Multiplication
# Background" guide §3; CUTLASS 3 tile schedulers): an output tile (rows of M x columns of N), a
# split-K factor, and data-parallel scheduling (whole waves of tiles) or stream-K (Osama et al. 2023:
# the tiles' K-iterations spread evenly over the SMs, plus a fix-up of partial tiles).
TILES_MN = np.array([(64, 64), (64, 128), (128, 64), (128, 128), (128, 256), (256, 128), (64, 256), (256, 64)],
                    dtype=float)
SPLIT_K = np.array([1.0, 2.0, 4.0])
# Swap-AB ("skinny M") configurations: the weights take the 128-row side of the MMA (two 64-row
# Hopper warpgroups / Ampere 16-row MMAs stacked) and the tokens the narrow side, whose width is any
# multiple of 8 up to 256 (wgmma n = 8..256; mma.sync n = 8): cuBLAS's and TensorRT-LLM's small-M
# kernels, CUTLASS "swap AB". The width is chosen to cover M in `SWAP_TOKEN_TILES` tiles, so a decode
# GEMM pads to 8 tokens, not to a 64-row tile, and steps past a tile boundary are a few percent.
SWAP_WEIGHT_ROWS = 128.0
SWAP_TOKEN_TILES = np.array([1.0, 2.0, 3.0, 4.0])
SWAP_SPLIT_K = np.array([1.0, 2.0, 4.0, 8.0])
TOKEN_STEP, MAX_TOKEN_TILE = 8.0, 256.0
K_STEP = 64.0  # K per main-loop iteration of 16-bit MMA kernels (CUTLASS / Triton BLOCK_K): a K of 24 costs 64
QUANT_BYTES = 1.0  # fp8 / int8 activations after dynamic quantisation


def _configs() -> tuple[Array, Array, Array, Array, Array]:
    """Flat arrays over every configuration: tile rows (0 for swap-AB: set per M), tile cols,
    split-K, 1 if stream-K, token tiles of a swap-AB configuration (0 otherwise)."""
    configs: list[tuple[float, float, float, float, float]] = []  # (tm, tn, sk, stream, swap)
    for rows, cols in TILES_MN:
        for s in SPLIT_K:
            configs.append((rows, cols, s, 0.0, 0.0))
        configs.append((rows, cols, 1.0, 1.0, 0.0))
    for r in SWAP_TOKEN_TILES:
        for s in SWAP_SPLIT_K:
            configs.append((0.0, SWAP_WEIGHT_ROWS, s, 0.0, r))
        configs.append((0.0, SWAP_WEIGHT_ROWS, 1.0, 1.0, r))
    tm, tn, sk, stream, swap = (np.array(column) for column in zip(*configs, strict=True))
    return tm, tn, sk, stream, swap


_TM, _TN, _SK, _STREAM, _SWAP = _configs()
_IS_SWAP = _SWAP > 0


def _join(compute_s: Array, memory_s: Array, p: float | Array) -> Array:
    """p-norm of the two ceilings: max() as p -> inf; smooth near the ridge (fitted p ~ 1.5-3)."""
    hi = np.maximum(compute_s, memory_s)
    lo = np.minimum(compute_s, memory_s)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(hi > 0, lo / hi, 0.0)
    return hi * (1.0 + ratio**p) ** (1.0 / p)


def l2_hit_fraction(working_set_bytes: ArrayLike, hw: HardwareProfile) -> Array:
    """Share of a kernel's bytes served from L2 when a benchmark replays it over `working_set_bytes`
    (its buffer copies): 1 / (1 + (set / capacity)^24), capacity = l2_resident_frac x L2 — nearly all
    while the set fits, a sharp fall past it (LRU-like thrashing of a cyclic replay; NVIDIA's L40S
    tables step 2.4x between 6 x 16 MB and 6 x 19 MB of weights on its 96 MB L2). NaN working set (a
    forward pass, where every layer streams its own weights and KV) = cold."""
    ws = np.asarray(working_set_bytes, dtype=float)
    cap = hw.l2_bytes * hw.efficiency.l2_resident_frac
    with np.errstate(over="ignore", invalid="ignore"):
        hit = 1.0 / (1.0 + (ws / cap) ** 24)
    return np.where(np.isfinite(ws), hit, 0.0)


def stream_s(bytes_: ArrayLike, hit: ArrayLike, hw: HardwareProfile, bw_bytes_per_s: ArrayLike,
             ramp: ArrayLike = 1.0) -> Array:
    """Seconds to stream bytes of which a share `hit` is L2-resident: the rest at `bw_bytes_per_s`
    (HBM), the resident share at `l2_stream_tb_per_s` (what a streaming kernel reads from L2), both
    times `ramp` (the share of the rate the kernel's CTAs in flight can draw)."""
    b, h = np.asarray(bytes_, dtype=float), np.asarray(hit, dtype=float)
    bw, r = np.asarray(bw_bytes_per_s, dtype=float), np.asarray(ramp, dtype=float)
    return (b * (1.0 - h) / bw + b * h / (hw.efficiency.l2_stream_tb_per_s * 1e12)) / r


def is_weight_only(dtype: str, weight_bytes: float, act_bytes: float = 2.0) -> bool:
    """Weight-only quantisation (int4 / int8 / fp8 weights dequantised to 16-bit MMAs, Marlin-style)."""
    return dtype in ("bf16", "fp16") and weight_bytes < act_bytes


def _gemm_configs(m: ArrayLike, n: ArrayLike, k: ArrayLike, hw: HardwareProfile, dtype: str,
                  weight_bytes: float, act_bytes: float, groups: ArrayLike, buffer_sets: ArrayLike | None = None,
                  compute_scale: float = 1.0, working_set: ArrayLike | None = None) -> tuple[Array, Array]:
    """(compute, memory) seconds of every configuration; trailing axis = configuration.

    Per configuration (tile Tm x Tn, split-K s, `groups` GEMMs in one kernel):
      CTAs = groups * ceil(m/Tm) * ceil(n/Tn) * s  (swap-AB: Tm = the token width, Tn = 128 weight rows)
      waves = ceil(CTAs / SMs) (data-parallel: a partial wave costs a whole one, guide §3.2)
            | CTAs / SMs + fixup (stream-K: even split, plus `streamk_fixup_tiles` of reduction work)
      one tile = max(tensor-core time 2*Tm*Tn*K' / (per-SM peak * efficiency),
                     L2 operand stream (rows*act + Tn*weight bytes)*K' / (per-SM share of L2 bandwidth))
                 + weight-only dequantisation Tn*K' / (per-SM share of `dequant_tera_per_s`),
                 K' = k/s + cta_k_overhead (pipeline fill/drain per tile); 64-row tiles run at
                 `small_tile_efficiency` (one Hopper warpgroup MMA is 64 rows: less reuse per load),
                 swap-AB tiles at `swap_tile_efficiency`; rows = min(Tm, m) (TMA reads no padding)
      compute = waves * tile * (1 + power_throttle * c / (c + tau)): long, dense tensor-core kernels
                slow down as GPU Boost meets the power limit (seen in the Vidur H100 rows)
      memory = HBM share of (weights + activations in/out + fp32 split-K partials 8*(s-1)*m*n) /
               (HBM bandwidth * memory * min(1, parallel CTAs / (bw_ramp_ctas_frac * SMs))): too few
               CTAs in flight cannot keep HBM busy (Little's law); parallel CTAs counted per tile row
               so that time never falls as m grows. The HBM share is 1 - l2_hit_fraction of the
               working set buffer_sets x (weights + activations) a benchmark replays (cold when NaN),
               or `working_set` bytes when the caller knows it (a fused MoE replaying all its experts).
    """
    eff = hw.efficiency
    sms = float(hw.sm_count)
    wo = is_weight_only(dtype, weight_bytes, act_bytes)
    per_sm = hw.peak(dtype) * eff.gemm_compute * compute_scale / sms
    if dtype in ("fp8", "int8"):
        per_sm = per_sm * eff.fp8_compute
    a_in = QUANT_BYTES if dtype in ("fp8", "int8") else act_bytes  # W8A8 GEMMs read quantised activations
    l2_per_sm = eff.l2_bw_tb_per_s * 1e12 / sms
    m, n, k, g = (np.asarray(a, dtype=float)[..., None] for a in (m, n, k, groups))
    token_tile = np.clip(TOKEN_STEP * np.ceil(m / (TOKEN_STEP * np.maximum(_SWAP, 1.0))), TOKEN_STEP,
                         MAX_TOKEN_TILE)
    tm = np.where(_IS_SWAP, token_tile, _TM)
    ctas_per_row = g * np.ceil(n / _TN) * _SK
    ctas = np.ceil(m / tm) * ctas_per_row
    waves = np.where(_STREAM > 0, ctas / sms + eff.streamk_fixup_tiles, np.ceil(ctas / sms))
    k_eff = np.ceil(k / _SK / K_STEP) * K_STEP + eff.cta_k_overhead  # MMA main loop in whole K blocks
    tile_eff = np.where(_IS_SWAP, eff.swap_tile_efficiency, np.where(_TM < 128, eff.small_tile_efficiency, 1.0))
    rate = per_sm * tile_eff
    rows = np.minimum(tm, m)
    tile_s = np.maximum(2.0 * tm * _TN * k_eff / rate, (rows * a_in + _TN * weight_bytes) * k_eff / l2_per_sm)
    if wo:  # CUDA-core dequantisation of the tile's weights, in series with its MMAs (fitted: NVIDIA's
        # A100 TRT-LLM weight-only tables run ~1.8x their streaming time at M = 1; overlapping fits worse)
        tile_s = tile_s + _TN * k_eff / (eff.dequant_tera_per_s * 1e12 / sms)
    compute = waves * tile_s
    tau_s = eff.throttle_tau_ms * 1e-3
    compute = compute * (1.0 + eff.power_throttle * compute / (compute + tau_s))
    weights = g * n * k * weight_bytes
    acts = g * m * (k * a_in + n * act_bytes)
    bytes_ = weights + acts + g * 8.0 * (_SK - 1.0) * m * n
    hit: Array | float
    if working_set is not None:
        hit = l2_hit_fraction(np.asarray(working_set, dtype=float)[..., None], hw)
    else:
        hit = 0.0 if buffer_sets is None else l2_hit_fraction(
            np.asarray(buffer_sets, dtype=float)[..., None] * (weights + acts), hw)
    ramp = np.minimum(1.0, np.minimum(ctas_per_row, sms) / (eff.bw_ramp_ctas_frac * sms))
    return compute, stream_s(bytes_, hit, hw, hw.mem_bw_bytes_per_s * eff.memory, ramp)


def activation_quant_s(m: ArrayLike, k: ArrayLike, hw: HardwareProfile, act_bytes: float = 2.0,
                       groups: ArrayLike = 1.0) -> Array:
    """Dynamic per-token fp8/int8 quantisation of the GEMM input (sgl_per_token_quant_fp8, vLLM
    scaled_fp8_quant): one kernel reading m x k 16-bit activations, writing them in 1 byte plus a
    4-byte scale per row. NVIDIA's fp8 GEMM tables include it; so does every unfused W8A8 linear."""
    m, k, g = (np.asarray(a, dtype=float) for a in (m, k, groups))
    return memory_op_time_s(g * m * (k * (act_bytes + QUANT_BYTES) + 4.0), hw)


def gemm_compute_s(
    m: ArrayLike, n: ArrayLike, k: ArrayLike, hw: HardwareProfile, dtype: str = "bf16",
    groups: ArrayLike = 1.0, weight_bytes: float = 2.0, act_bytes: float = 2.0,
) -> Array:
    """Compute-only time of `groups` GEMMs (m x k) @ (k x n): the cheapest configuration's compute
    (whole waves of tiles or stream-K, see `_gemm_configs`), ignoring memory."""
    compute, _ = _gemm_configs(m, n, k, hw, dtype, weight_bytes, act_bytes, groups)
    return compute.min(axis=-1)


def gemm_time_s(
    m: ArrayLike, n: ArrayLike, k: ArrayLike, hw: HardwareProfile, dtype: str = "bf16",
    weight_bytes: float = 2.0, act_bytes: float = 2.0, groups: ArrayLike = 1.0,
    buffer_sets: ArrayLike | None = None, act_quant: bool | None = None, compute_scale: float = 1.0,
    working_set: ArrayLike | None = None,
) -> tuple[Array, Array, Array]:
    """(time, compute time, memory time) in seconds of a (grouped) GEMM: y[m,n] = x[m,k] @ W[k,n].

    Each configuration is its own roofline (Williams et al. 2009): its compute and memory time joined
    by the p-norm `ridge_sharpness`; the fastest configuration is taken, as an autotuned library
    would, plus a fixed cost per kernel. W8A8 dtypes (fp8, int8) add the activation-quantisation
    kernel unless `act_quant=False` (fused into the previous op). `buffer_sets`: copies of the
    operands a benchmark cycles through (L2 residency, `l2_hit_fraction`); None in a forward pass.
    `compute_scale` scales the tile rate (fused-MoE grouped GEMMs). Compute and memory returned are
    the chosen configuration's. Monotone non-decreasing in m: every configuration's time is.
    Evaluated once per distinct m when every other operand is one value (a grid's token counts repeat).
    """
    m_arr = np.asarray(m, dtype=float)
    if m_arr.size >= 64 and all(np.size(a) == 1 for a in (n, k, groups)) and buffer_sets is None and (
            working_set is None):
        unique, inverse = np.unique(m_arr, return_inverse=True)
        if len(unique) <= 0.5 * m_arr.size:
            parts = gemm_time_s(unique, n, k, hw, dtype, weight_bytes, act_bytes, groups, None, act_quant,
                                compute_scale, None)
            shape = np.broadcast_shapes(m_arr.shape, np.shape(n), np.shape(k), np.shape(groups))
            return tuple(np.broadcast_to(part[inverse.ravel()].reshape(m_arr.shape), shape).copy()
                         for part in parts)  # type: ignore[return-value]
    compute, memory = _gemm_configs(m, n, k, hw, dtype, weight_bytes, act_bytes, groups, buffer_sets,
                                    compute_scale, working_set)
    eff = hw.efficiency
    # split-K > 1 sums its fp32 partials in a second kernel (cuBLAS splitKreduce): `splitk_overhead_us`
    joined = _join(compute, memory, eff.ridge_sharpness) + np.where(_SK > 1, eff.splitk_overhead_us * 1e-6, 0.0)
    best = np.argmin(joined, axis=-1)[..., None]
    pick = lambda a: np.take_along_axis(a, best, axis=-1)[..., 0]  # noqa: E731
    t = eff.kernel_overhead_us * 1e-6 + pick(joined)
    quantise = dtype in ("fp8", "int8") if act_quant is None else act_quant
    if quantise:
        t = t + activation_quant_s(m, k, hw, act_bytes, groups)
    return t, pick(compute), pick(memory)


def memory_s(bytes_: ArrayLike, hw: HardwareProfile) -> Array:
    """Streaming time of bytes at the achieved fraction of HBM bandwidth."""
    return np.asarray(bytes_, dtype=float) / (hw.mem_bw_bytes_per_s * hw.efficiency.memory)


def memory_op_time_s(bytes_: ArrayLike, hw: HardwareProfile, kernels: ArrayLike = 1.0) -> Array:
    """Element-wise / copy kernels: a fixed cost each plus their bytes at streaming bandwidth."""
    return np.asarray(kernels, dtype=float) * hw.efficiency.kernel_overhead_us * 1e-6 + memory_s(bytes_, hw)


# Query rows per MMA tile of FlashAttention-2/3 decode and prefill kernels (FA3: 64-row warpgroup
# tiles; FlashInfer / FA2 on Ampere: 16-row MMAs grouped in 64-row tiles).
ATTENTION_Q_TILE = 64.0
SPLIT_KV_MIN_KEYS = 128.0  # one KV block (kBlockN = 128): a split needs at least two
FA_MAX_SPLITS = 128  # flash_api.cpp: num_splits <= 128
# FA2's split-KV kernels run 4 warps (128 threads) per CTA: its heuristic counts 2 CTAs per SM
FA2_CTAS_PER_SM = 2


def fa_block_n(head_dim: ArrayLike) -> Array:
    """kBlockN of FlashAttention-2's split-KV forward kernel (run_mha_fwd_splitkv_dispatch; mirrored in
    set_params_splitkv): 256 keys per block for head size <= 64, 128 for <= 128, 64 above."""
    d = np.asarray(head_dim, dtype=float)
    return np.where(d <= 64, 256.0, np.where(d <= 128, 128.0, 64.0))


def fa_num_splits(work: ArrayLike, slots: ArrayLike, n_blocks: ArrayLike, max_splits: int = FA_MAX_SPLITS) -> Array:
    """FlashAttention's `num_splits_heuristic` (flash_api.cpp), vectorised: 1 split when the
    (batch x heads x query blocks) CTAs fill >= 80% of the `slots` (SMs x CTAs per SM); otherwise the
    fewest splits, up to min(128, slots, KV blocks), whose wave efficiency n/ceil(n) (n = CTAs x splits
    / slots) is >= 85% of the best, skipping split counts that leave the blocks per split unchanged."""
    w, sl, nb = np.broadcast_arrays(*(np.ceil(np.asarray(a, dtype=float)) for a in (work, slots, n_blocks)))
    out = np.ones(w.shape)
    need = (w < 0.8 * sl) & (nb > 1)
    if not need.any():
        return out
    keys, inverse = np.unique(np.stack([w[need], sl[need], nb[need]], axis=-1), axis=0, return_inverse=True)
    kw, ksl, knb = (keys[:, i, None] for i in range(3))
    s = np.arange(1, max_splits + 1, dtype=float)[None, :]
    top = np.minimum(np.minimum(float(max_splits), ksl), knb)
    eligible = (s <= top) & ((s == 1) | (np.ceil(knb / s) != np.ceil(knb / np.maximum(s - 1, 1))))
    waves = kw * s / ksl
    eff = np.where(eligible, waves / np.ceil(waves), 0.0)
    ok = eligible & (eff >= 0.85 * eff.max(axis=-1, keepdims=True))
    out[need] = (np.argmax(ok, axis=-1) + 1.0)[inverse.reshape(-1)]
    return out


def attention_num_splits(batch: ArrayLike, q_per_seq: ArrayLike, context_len: ArrayLike, heads: ArrayLike,
                         kv_heads: ArrayLike, head_dim: ArrayLike, hw: HardwareProfile) -> tuple[Array, Array, Array]:
    """(work units, KV splits, CTA slots) of one attention kernel as the GPU's kernel family launches it
    (`hw.attention_kernel`). A work unit is one CTA's (sequence x head x query tile) before splitting.

    * "fa2" (FlashAttention-2, vLLM on Ampere / Ada; flash_api.cpp mha_varlen_fwd): a decode step of a
      GQA model swaps its query heads into the query length (seqlenq_ngroups_swapped: the heads sharing
      a KV head ride one 64-row tile) and only then splits the KV (`fa_num_splits` over 2 x SMs slots,
      KV blocks of `fa_block_n` keys). MHA decode (heads = KV heads) is not swapped and never split:
      one CTA per (sequence x head) walks its whole KV, so few sequences run on few SMs.
    * "fa3" (FA3 / FlashInfer): query heads packed per KV head for every layout, the KV split when the
      units do not fill the SMs and span more than one 128-key block; `fa_num_splits` over the SMs."""
    b, q, ctx, h, kvh, d = (np.asarray(a, dtype=float) for a in (batch, q_per_seq, context_len, heads, kv_heads,
                                                                   head_dim))
    sms = float(hw.sm_count)
    units = b * kvh * np.ceil(q * (h / kvh) / ATTENTION_Q_TILE)
    if hw.attention_kernel == "fa2":
        slots = sms * FA2_CTAS_PER_SM
        swapped = (q == 1) & (h > kvh)
        units = np.where((q == 1) & ~swapped, b * h, units)
        splits = np.where(swapped, fa_num_splits(units, slots, np.ceil(ctx / fa_block_n(d))), 1.0)
        return units, splits, np.full(np.shape(splits), slots)
    split = attention_splits_kv(units, ctx, hw)
    splits = np.where(split, np.maximum(fa_num_splits(units, sms, np.ceil(ctx / SPLIT_KV_MIN_KEYS)), 2.0), 1.0)
    return units, splits, np.full(np.shape(splits), sms)


def attention_splits_kv(units: ArrayLike, context_len: ArrayLike, hw: HardwareProfile) -> NDArray[np.bool_]:
    """Whether a split-KV ("fa3") kernel splits the KV across CTAs (and runs a combine kernel): the
    (sequence x KV head x query tile) work units do not fill the SMs and the KV spans more than one
    block (FlashAttention's num_splits heuristic, flash_api.cpp; FlashInfer's split-KV scheduler alike).
    The kernel family's own rule is `attention_num_splits`."""
    return (np.asarray(units, dtype=float) < hw.sm_count) & (np.asarray(context_len, dtype=float) > SPLIT_KV_MIN_KEYS)


def attention_time_s(
    batch: ArrayLike, q_per_seq: ArrayLike, context_len: ArrayLike, heads: ArrayLike, kv_heads: ArrayLike,
    qk_dim: ArrayLike, v_dim: ArrayLike, kv_bytes_per_token: ArrayLike, hw: HardwareProfile,
    dtype: str = "bf16", act_bytes: float = 2.0, buffer_sets: ArrayLike | None = None,
) -> tuple[Array, Array, Array, Array, Array]:
    """Attention of B sequences x q new tokens over a KV cache of L tokens (L includes the q), for
    one layer on one GPU: decode (q = 1), verification (small q, long L) and prefill (q = L) in one
    form, FlashAttention / flash-decoding style (Dao et al. 2022-23).

    * Each sequence's KV cache (L tokens, kv_bytes_per_token each) is read once for all q new
      tokens (flash-decoding); Q and O are read and written once.
    * FLOPs = 2 * q * L' * (qk_dim + v_dim) per head, L' = L - (q - 1)/2: the prefix is visible to
      every new token, the new tokens see each other causally (a prefill does half the square).
    * The q * (heads / kv_heads) query rows that share a KV head are packed into 64-row tensor-core
      tiles (GQA packing), so a decode step pays for 64 rows and verification with q * group <= 64
      costs the same tensor-core time as decode — between the two regimes it is this padding, not q,
      that sets the compute; past the ridge it grows with q as prefill does.
    * Fixed costs: `attention_overhead_us` per kernel, `attention_split_us` more when the KV is
      split across CTAs (`attention_splits_kv`: the combine kernel; fading linearly as the units fill
      the SMs, so that time never drops where splitting stops), and
      `attention_cta_us` per wave of (sequence x KV head x query tile) work units over the SMs (never
      less than one: split-KV fills the GPU at small batch), joined with the streaming by a p-norm
      of p = `attention_cta_overlap` (1: in series, as one unit per SM; large: hidden by the other
      units). Measured: 9 us floor and ~3 us per wave of 132 units on H100 FA3 (NVIDIA's tables,
      aiconfigurator-core 0.12.0).
    * Compute at `attention_compute` of the dense peak, memory at `attention_memory` of HBM; a
      benchmark replaying one KV cache (`buffer_sets`, see `l2_hit_fraction`) reads it from L2.
    Returns (time, compute, memory, flops, bytes).
    """
    b, q, ctx, h, kvh, dqk, dv, kvt = (np.asarray(a, dtype=float) for a in (
        batch, q_per_seq, context_len, heads, kv_heads, qk_dim, v_dim, kv_bytes_per_token))
    group = h / kvh
    keys = np.maximum(ctx - (q - 1.0) / 2.0, 1.0)
    flops = 2.0 * b * q * keys * h * (dqk + dv)
    rows = np.ceil(q * group / ATTENTION_Q_TILE) * ATTENTION_Q_TILE
    padded = 2.0 * b * kvh * rows * keys * (dqk + dv)
    kv = b * ctx * kvt
    bytes_ = kv + b * q * h * (dqk + dv) * act_bytes
    eff = hw.efficiency
    compute = padded / (hw.peak(dtype) * eff.attention_compute)
    hit = 0.0 if buffer_sets is None else l2_hit_fraction(np.asarray(buffer_sets, dtype=float) * bytes_, hw)
    units, splits, slots = attention_num_splits(b, q, ctx, h, kvh, dqk, hw)
    # split-KV spreads few (sequence x KV head) units over the SMs, but not at full bandwidth: a share
    # `attention_split_bw_loss` of it is lost as the units fall to none per SM (H100 FA3: batch 1 streams
    # its KV at ~86% of batch 8's rate, NVIDIA's tables)
    fill = np.clip(units / hw.sm_count, 0.0, 1.0)
    mem = stream_s(bytes_, hit, hw, hw.mem_bw_bytes_per_s * eff.attention_memory
                   * (1.0 - eff.attention_split_bw_loss * (1.0 - fill)))
    # Little's law per CTA: one CTA walks its share of the KV block after block at
    # `attention_cta_gb_per_s` (its loads in flight over the memory latency, with its MMAs in series), so
    # units x splits CTAs, at most `slots` at once, cannot stream faster than that many times the rate
    # (vLLM FA2 on A100: an MHA head alone streams ~22 GB/s, 64 heads ~1.3 TB/s, NVIDIA's tables)
    ctas = units * splits
    cta_s = np.ceil(ctas / slots) * bytes_ / np.maximum(ctas, 1.0) / (eff.attention_cta_gb_per_s * 1e9)
    mem = _join(mem, cta_s, eff.ridge_sharpness)
    per_unit = eff.attention_cta_us * 1e-6 * np.maximum(units / hw.sm_count, 1.0)
    split = splits > 1  # flash-decoding's combine kernel
    # the work units' setup overlaps with the other units' streaming as far as the kernel keeps
    # several units per SM: a p-norm of p = attention_cta_overlap (1: in series, large: hidden)
    # the combine kernel's share fades as the units fill the SMs (fewer splits each): no cliff in batch
    combine = np.where(split, eff.attention_split_us * (1.0 - fill), 0.0)
    t = (eff.attention_overhead_us + combine) * 1e-6 \
        + _join(per_unit, _join(compute, mem, eff.ridge_sharpness), eff.attention_cta_overlap)
    return t, compute, mem, flops, bytes_


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


def allreduce_params(world_size: ArrayLike, hw: HardwareProfile, impl: str = "nccl",
                     ) -> tuple[Array, Array, Array]:
    """(latency_s, busbw, sharpness) arrays for each GPU count under one implementation.

    "nccl" (eager) uses `interconnect.allreduce_by_world_size`, with the scalar latency and bus
    bandwidth (p = 1) for GPU counts it lacks; "nccl_graph" and "custom" use their own table in
    `allreduce_by_implementation` and fall back to eager NCCL's figures where it has no entry."""
    if impl not in ALLREDUCE_IMPLEMENTATIONS:
        raise SpecsimError(f"unknown all-reduce implementation '{impl}' "
                           f"(known: {', '.join(ALLREDUCE_IMPLEMENTATIONS)})")
    n = np.asarray(world_size, dtype=float)
    ic = hw.interconnect
    latency = np.full(n.shape, ic.allreduce_latency_s)
    busbw = np.full(n.shape, ic.allreduce_busbw_bytes_per_s)
    sharp = np.ones(n.shape)
    tables = [ic.allreduce_by_world_size]
    if impl != "nccl":
        tables.append(ic.allreduce_by_implementation.get(impl, {}))
    for table in tables:
        for size, (lat_s, bw, p) in table.items():
            hit = n == size
            latency, busbw, sharp = np.where(hit, lat_s, latency), np.where(hit, bw, busbw), np.where(hit, p, sharp)
    return latency, busbw, sharp


def allreduce_time_s(bytes_: ArrayLike, world_size: ArrayLike, hw: HardwareProfile, impl: str = "nccl") -> Array:
    """All-reduce of `bytes_` over `world_size` GPUs (zero for one GPU) by implementation `impl`
    (hardware.ALLREDUCE_IMPLEMENTATIONS: eager "nccl", "nccl_graph", "custom"; chosen by the caller).

    t = latency (+)_p 2(n-1)/n * bytes / busbw (nccl-tests PERFORMANCE.md: bus bandwidth), joined by
    a p-norm of sharpness p: p = 1 is the plain sum; p < 1 adds the mid-size hump where NCCL has not
    yet opened all its channels or a custom all-reduce switches from one-shot to two-shot (effective
    bandwidth still ramping, hardware.md §5); p > 1 a latency plateau. Each implementation has its
    own (latency, busbw, p) per GPU count (`allreduce_params`).
    """
    n = np.asarray(world_size, dtype=float)
    b = np.asarray(bytes_, dtype=float)
    n, b = np.broadcast_arrays(n, b)
    latency, busbw, sharp = allreduce_params(n, hw, impl)
    transfer = 2.0 * (n - 1.0) / np.maximum(n, 1.0) * b / busbw
    t = _join(latency, transfer, sharp)
    return np.where(n > 1, t, 0.0)
