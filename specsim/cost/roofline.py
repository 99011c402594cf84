"""Time of one dense kernel from its shape on a HardwareProfile: GEMMs, memory-bound ops, collectives;
and the roofline's shared pieces (the p-norm join of the ceilings, L2 residency of benchmark replays,
streaming time) on which attention.py and moe.py build. Pure numpy, broadcasting over any array arguments.

Not a bare max(compute, memory): a GEMM is timed for each kernel configuration a cuBLAS / CUTLASS
heuristic chooses among (tile shape, split-K, data-parallel waves or stream-K; NVIDIA "Matrix
Multiplication Background" guide §3.1-3.2; swap-AB skinny tiles for few tokens), each with its own
roofline: whole waves of tiles, each tile bounded by the tensor cores or by its operand stream from
L2, a pipeline fill per tile, HBM bandwidth that needs enough CTAs in flight, weights a benchmark
replays from L2, and a p-norm join so the curve bends near the ridge as measured kernels do. The
fastest configuration wins; every kernel adds a fixed cost.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from specsim.cost.gemm_dispatch import bucket_starts, dispatch_configs
from specsim.cost.hardware_profile import ALLREDUCE_IMPLEMENTATIONS, Efficiency, HardwareProfile
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
QUANT_BYTES = 1.0  # fp8 / int8 activations after dynamic quantisation (fp4: counted alike, an upper bound)
LOW_PRECISION = ("fp8", "int8", "fp4")  # W8A8 / W4A4 tensor-core dtypes: quantised activations


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
_SWAP_SPAN = TOKEN_STEP * np.maximum(_SWAP, 1.0)  # tokens a swap-AB configuration's token tiles span per TOKEN_STEP


def _join(compute_s: Array, memory_s: Array, p: float | Array) -> Array:
    """p-norm of the two ceilings: max() as p -> inf; smooth near the ridge (fitted p ~ 1.5-3)."""
    hi = np.maximum(compute_s, memory_s)
    lo = np.minimum(compute_s, memory_s)
    ratio = np.divide(lo, hi, out=np.zeros(np.shape(hi)), where=hi > 0)  # 0 where hi is not > 0
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


#: The split-K factors of `_SK` once each, and each configuration's among them (`_tiles` computes K per tile per factor)
_SPLITS, _SPLIT_OF = np.unique(_SK, return_inverse=True)
#: The configurations whose tiles run at `swap_tile_efficiency` (swap-AB, whatever their token width) and at
#: `small_tile_efficiency` (64-row tiles); the rest at 1
_SWAP_TILE, _SMALL_TILE = _IS_SWAP, ~_IS_SWAP & (_TM < 128)


def _tiles(m: Array, n: Array, k: Array, g: Array, eff: Efficiency, dispatch: str
           ) -> tuple[Array, Array, Array, Array, Array, Array, Array, Array]:
    """`_gemm_configs`' grid of each configuration (trailing axis): tile rows and columns, split-K, stream-K (1 or 0),
    CTAs per row of tiles and in all (the grid rounded up to whole clusters), the tile's efficiency and its K
    (`k_eff`: the MMA main loop in whole K blocks, plus the pipeline fill)."""
    if dispatch:  # the engine's fixed configuration for this shape (gemm_dispatch.py): one, no split-K
        tm, tn, cm, cn, swap_flag = (a[..., None] for a in dispatch_configs(dispatch, m[..., 0], n[..., 0]))
        sk, stream = np.ones(1), np.zeros(1)
        ctas_per_row = g * np.ceil(np.ceil(n / tn) / cn) * cn * sk
        ctas = np.ceil(np.ceil(m / tm) / cm) * cm * ctas_per_row
        tile_eff = np.where(swap_flag > 0, eff.swap_tile_efficiency,
                            np.where(tm < 128, eff.small_tile_efficiency, 1.0))
        return tm, tn, sk, stream, ctas_per_row, ctas, tile_eff, np.ceil(k / sk / K_STEP) * K_STEP + eff.cta_k_overhead
    # every configuration, clusters of one tile; a swap-AB tile's rows are the token width (a multiple of 8 over M)
    token_tile = np.minimum(np.maximum(TOKEN_STEP * np.ceil(m / _SWAP_SPAN), TOKEN_STEP), MAX_TOKEN_TILE)
    tm = np.where(_IS_SWAP, token_tile, _TM)
    ctas_per_row = g * np.ceil(n / _TN) * _SK
    ctas = np.ceil(m / tm) * ctas_per_row
    tile_eff = np.where(_SWAP_TILE, eff.swap_tile_efficiency, np.where(_SMALL_TILE, eff.small_tile_efficiency, 1.0))
    k_eff = (np.ceil(k / _SPLITS / K_STEP) * K_STEP + eff.cta_k_overhead)[..., _SPLIT_OF]
    return tm, _TN, _SK, _STREAM, ctas_per_row, ctas, tile_eff, k_eff


def _gemm_configs(m: ArrayLike, n: ArrayLike, k: ArrayLike, hw: HardwareProfile, dtype: str,
                  weight_bytes: float, act_bytes: float, groups: ArrayLike, buffer_sets: ArrayLike | None = None,
                  compute_scale: float = 1.0, working_set: ArrayLike | None = None, dispatch: str = ""
                  ) -> tuple[Array, Array, Array]:
    """(compute, memory) seconds of every configuration and their split-K factors; trailing axis = configuration
    (one: the engine's, where `dispatch` names its fixed table, gemm_dispatch.py).

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
    if dtype in LOW_PRECISION:  # fp4 tiles at the fp8 tiles' fitted share of their peak (no fp4 tables fitted)
        per_sm = per_sm * eff.fp8_compute
    a_in = QUANT_BYTES if dtype in LOW_PRECISION else act_bytes  # W8A8 GEMMs read quantised activations
    l2_per_sm = eff.l2_bw_tb_per_s * 1e12 / sms
    m, n, k, g = (np.asarray(a, dtype=float)[..., None] for a in (m, n, k, groups))
    tm, tn, sk, stream, ctas_per_row, ctas, tile_eff, k_eff = _tiles(m, n, k, g, eff, dispatch)
    per_wave = ctas / sms
    waves = np.where(stream > 0, per_wave + eff.streamk_fixup_tiles, np.ceil(per_wave))
    rate = per_sm * tile_eff
    rows = np.minimum(tm, m)
    tile_s = np.maximum(2.0 * tm * tn * k_eff / rate, (rows * a_in + tn * weight_bytes) * k_eff / l2_per_sm)
    if wo:  # CUDA-core dequantisation of the tile's weights, in series with its MMAs (fitted: NVIDIA's
        # A100 TRT-LLM weight-only tables run ~1.8x their streaming time at M = 1; overlapping fits worse)
        tile_s = tile_s + tn * k_eff / (eff.dequant_tera_per_s * 1e12 / sms)
    compute = waves * tile_s
    tau_s = eff.throttle_tau_ms * 1e-3
    compute = compute * (1.0 + eff.power_throttle * compute / (compute + tau_s))
    weights = g * n * k * weight_bytes
    acts = g * m * (k * a_in + n * act_bytes)
    bytes_ = weights + acts + g * 8.0 * (sk - 1.0) * m * n
    hit: Array | float
    if working_set is not None:
        hit = l2_hit_fraction(np.asarray(working_set, dtype=float)[..., None], hw)
    else:
        hit = 0.0 if buffer_sets is None else l2_hit_fraction(
            np.asarray(buffer_sets, dtype=float)[..., None] * (weights + acts), hw)
    ramp = np.minimum(1.0, np.minimum(ctas_per_row, sms) / (eff.bw_ramp_ctas_frac * sms))
    return compute, stream_s(bytes_, hit, hw, hw.mem_bw_bytes_per_s * eff.memory, ramp), sk


def gemm_dispatch(hw: HardwareProfile, dtype: str, weight_bytes: float, groups: ArrayLike = 1.0) -> str:
    """The fixed tile dispatch (gemm_dispatch.DISPATCH) the profile's engine runs a dense GEMM of this dtype with, or
    "" (autotuned: the best configuration). Only per-tensor / per-channel fp8 (1-byte weights), not grouped GEMMs."""
    name = hw.gemm_dispatch.get(dtype, "")
    if not name or weight_bytes != 1.0 or np.any(np.asarray(groups) != 1.0):
        return ""
    return name


def activation_quant_s(m: ArrayLike, k: ArrayLike, hw: HardwareProfile, act_bytes: float = 2.0,
                       groups: ArrayLike = 1.0, row_ns: float = 0.0) -> Array:
    """Dynamic per-token fp8/int8 quantisation of the GEMM input (sgl_per_token_quant_fp8, vLLM
    scaled_fp8_quant): one kernel reading m x k 16-bit activations, writing them in 1 byte plus a
    4-byte scale per row, plus `row_ns` a row (the caller's: vLLM's per-token fp8 kernel runs one thread block a
    token, `quant_row_ns`). NVIDIA's fp8 GEMM tables include it; so does every unfused W8A8 linear."""
    m, k, g = (np.asarray(a, dtype=float) for a in (m, k, groups))
    rows = g * m
    return memory_op_time_s(rows * (k * (act_bytes + QUANT_BYTES) + 4.0), hw) + rows * row_ns * 1e-9


def gemm_compute_s(
    m: ArrayLike, n: ArrayLike, k: ArrayLike, hw: HardwareProfile, dtype: str = "bf16",
    groups: ArrayLike = 1.0, weight_bytes: float = 2.0, act_bytes: float = 2.0,
) -> Array:
    """Compute-only time of `groups` GEMMs (m x k) @ (k x n): the cheapest configuration's compute
    (whole waves of tiles or stream-K, see `_gemm_configs`), ignoring memory."""
    compute, _, _ = _gemm_configs(m, n, k, hw, dtype, weight_bytes, act_bytes, groups,
                                  dispatch=gemm_dispatch(hw, dtype, weight_bytes, groups))
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
    dispatch = gemm_dispatch(hw, dtype, weight_bytes, groups)
    args = (n, k, hw, dtype, weight_bytes, act_bytes, groups, buffer_sets, act_quant, compute_scale, working_set)
    t, compute, memory = _gemm_time_s(m_arr, *args, dispatch)
    if dispatch:
        # a fixed dispatch changes kernels between M buckets, and a larger bucket's kernel can be the cheaper one: an
        # engine could pad M into it, so the time is the least over the next buckets' first M (within a bucket the
        # kernel is fixed and its time does not fall with M: monotone non-decreasing in m, as the autotuned model)
        for start in bucket_starts(dispatch):
            later = m_arr < start
            if later.any():
                # (every point's pass at the bucket's first M, priced once: elementwise, a one-point M broadcasts)
                padded = _gemm_time_s(np.full((1,) * m_arr.ndim, start), *args, dispatch)[0]
                t = np.where(later, np.minimum(t, padded), t)
    return t, compute, memory


#: Points `_gemm_time_s` prices at once. Its arrays hold every configuration of each point (52): blocks of 256 points
#: keep each ~100 KiB, in cache and below glibc's mmap threshold; a calibration fit's 4,000 shapes at once spent
#: more time faulting in fresh pages for its temporaries than computing (3x slower).
GEMM_BLOCK_POINTS = 256


def _gemm_time_s(m: Array, n: ArrayLike, k: ArrayLike, hw: HardwareProfile, dtype: str, weight_bytes: float,
                 act_bytes: float, groups: ArrayLike, buffer_sets: ArrayLike | None, act_quant: bool | None,
                 compute_scale: float, working_set: ArrayLike | None, dispatch: str) -> tuple[Array, Array, Array]:
    """`gemm_time_s` of one kernel choice: the best configuration, or the dispatch's; elementwise in its array
    arguments, evaluated in blocks of `GEMM_BLOCK_POINTS` points."""
    arrays = (m, n, k, groups, buffer_sets, working_set)
    shape = np.broadcast_shapes(*(np.shape(a) for a in arrays if a is not None))
    size = math.prod(shape)
    if size <= GEMM_BLOCK_POINTS:
        return _gemm_block_s(m, n, k, hw, dtype, weight_bytes, act_bytes, groups, buffer_sets, act_quant,
                             compute_scale, working_set, dispatch)

    def flat(a: ArrayLike) -> Array:
        return np.broadcast_to(np.asarray(a, dtype=float), shape).ravel()

    fm, fn, fk, fg = (flat(a) for a in (m, n, k, groups))
    fb, fw = (None if a is None else flat(a) for a in (buffer_sets, working_set))
    blocks = []
    for i in range(0, size, GEMM_BLOCK_POINTS):
        cut = slice(i, i + GEMM_BLOCK_POINTS)
        blocks.append(_gemm_block_s(fm[cut], fn[cut], fk[cut], hw, dtype, weight_bytes, act_bytes, fg[cut],
                                    None if fb is None else fb[cut], act_quant, compute_scale,
                                    None if fw is None else fw[cut], dispatch))
    t, compute, memory = (np.concatenate(parts).reshape(shape) for parts in zip(*blocks, strict=True))
    return t, compute, memory


def _gemm_block_s(m: Array, n: ArrayLike, k: ArrayLike, hw: HardwareProfile, dtype: str, weight_bytes: float,
                  act_bytes: float, groups: ArrayLike, buffer_sets: ArrayLike | None, act_quant: bool | None,
                  compute_scale: float, working_set: ArrayLike | None, dispatch: str) -> tuple[Array, Array, Array]:
    """`_gemm_time_s` of one block of points."""
    compute, memory, sk = _gemm_configs(m, n, k, hw, dtype, weight_bytes, act_bytes, groups, buffer_sets,
                                        compute_scale, working_set, dispatch)
    eff = hw.efficiency
    # split-K > 1 sums its fp32 partials in a second kernel (cuBLAS splitKreduce): `splitk_overhead_us`
    joined = _join(compute, memory, eff.ridge_sharpness) + np.where(sk > 1, eff.splitk_overhead_us * 1e-6, 0.0)
    # each point's best configuration, picked from every array by flat index
    best = np.argmin(joined, axis=-1).reshape(-1) + np.arange(0, joined.size, joined.shape[-1])
    pick = lambda a: np.broadcast_to(a, joined.shape).reshape(-1)[best].reshape(joined.shape[:-1])  # noqa: E731
    t = eff.kernel_overhead_us * 1e-6 + pick(joined)
    quantise = dtype in LOW_PRECISION if act_quant is None else act_quant
    if quantise:
        # an engine's own per-tensor fp8 path's fixed and per-token costs (fitted on those fp8 rows only; fp4, int8
        # and block-scaled fp8, whose per-token-group quantisation is another kernel, keep one streaming kernel)
        own = dtype == "fp8" and weight_bytes == 1.0
        t = t + activation_quant_s(m, k, hw, act_bytes, groups, eff.quant_row_ns if own else 0.0) + (
            eff.quant_overhead_us * 1e-6 if own else 0.0)
    return t, pick(compute), pick(memory)


def memory_s(bytes_: ArrayLike, hw: HardwareProfile) -> Array:
    """Streaming time of bytes at the achieved fraction of HBM bandwidth."""
    return np.asarray(bytes_, dtype=float) / (hw.mem_bw_bytes_per_s * hw.efficiency.memory)


def memory_op_time_s(bytes_: ArrayLike, hw: HardwareProfile, kernels: ArrayLike = 1.0) -> Array:
    """Element-wise / copy kernels: a fixed cost each plus their bytes at streaming bandwidth."""
    return np.asarray(kernels, dtype=float) * hw.efficiency.kernel_overhead_us * 1e-6 + memory_s(bytes_, hw)


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
    (hardware_profile.ALLREDUCE_IMPLEMENTATIONS: eager "nccl", "nccl_graph", "custom"; chosen by the caller).

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
