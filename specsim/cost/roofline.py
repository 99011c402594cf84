"""Time of one kernel from its shape on a HardwareProfile: GEMMs, attention, memory-bound ops,
collectives. Pure numpy, broadcasting over any array arguments.

Not a bare max(compute, memory): a GEMM is timed for each kernel configuration a cuBLAS heuristic
chooses among (tile shape, split-K, data-parallel waves or stream-K; NVIDIA "Matrix Multiplication
Background" guide §3.1-3.2), each with its own roofline: whole waves of tiles, each tile bounded by
the tensor cores or by its operand stream from L2, a pipeline fill per tile, HBM bandwidth that
needs enough CTAs in flight, and a p-norm join so the curve bends near the ridge as measured
kernels do. The fastest configuration wins; every kernel adds a fixed cost.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from specsim.cost.hardware import HardwareProfile

Array = NDArray[np.float64]

# Kernel configurations a cuBLAS / CUTLASS heuristic chooses among (NVIDIA "Matrix Multiplication
# Background" guide §3; CUTLASS 3 tile schedulers): an output tile (rows of M x columns of N), a
# split-K factor, and data-parallel scheduling (whole waves of tiles) or stream-K (Osama et al. 2023:
# the tiles' K-iterations spread evenly over the SMs, plus a fix-up of partial tiles).
TILES_MN = np.array([(64, 64), (64, 128), (128, 64), (128, 128), (128, 256), (256, 128), (64, 256), (256, 64)],
                    dtype=float)
SPLIT_K = np.array([1.0, 2.0, 4.0])


def _configs() -> tuple[Array, Array, Array, Array]:
    """Flat arrays (tile rows, tile cols, split-K, 1 if stream-K) over every configuration."""
    tm, tn, sk, stream = [], [], [], []
    for rows, cols in TILES_MN:
        for s in SPLIT_K:
            tm.append(rows), tn.append(cols), sk.append(s), stream.append(0.0)
        tm.append(rows), tn.append(cols), sk.append(1.0), stream.append(1.0)
    return np.array(tm), np.array(tn), np.array(sk), np.array(stream)


_TM, _TN, _SK, _STREAM = _configs()


def _join(compute_s: Array, memory_s: Array, p: float) -> Array:
    """p-norm of the two ceilings: max() as p -> inf; smooth near the ridge (fitted p ~ 1.5-3)."""
    hi = np.maximum(compute_s, memory_s)
    lo = np.minimum(compute_s, memory_s)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(hi > 0, lo / hi, 0.0)
    return hi * (1.0 + ratio**p) ** (1.0 / p)


def _gemm_configs(m: ArrayLike, n: ArrayLike, k: ArrayLike, hw: HardwareProfile, dtype: str,
                  weight_bytes: float, act_bytes: float, groups: ArrayLike) -> tuple[Array, Array]:
    """(compute, memory) seconds of every configuration; trailing axis = configuration.

    Per configuration (tile Tm x Tn, split-K s, `groups` GEMMs in one kernel):
      CTAs = groups * ceil(m/Tm) * ceil(n/Tn) * s
      waves = ceil(CTAs / SMs) (data-parallel: a partial wave costs a whole one, guide §3.2)
            | CTAs / SMs + fixup (stream-K: even split, plus `streamk_fixup_tiles` of reduction work)
      one tile = max(tensor-core time 2*Tm*Tn*K' / (per-SM peak * efficiency),
                     L2 operand stream (Tm*act + Tn*weight bytes)*K' / (per-SM share of L2 bandwidth)),
                 K' = k/s + cta_k_overhead (pipeline fill/drain per tile); 64-row tiles run at
                 `small_tile_efficiency` (one Hopper warpgroup MMA is 64 rows: less reuse per load)
      compute = waves * tile * (1 + power_throttle * c / (c + tau)): long, dense tensor-core kernels
                slow down as GPU Boost meets the power limit (seen in the Vidur H100 rows)
      memory = (weights + activations in/out + fp32 split-K partials 8*(s-1)*m*n) / (HBM bandwidth *
               memory * min(1, parallel CTAs / (bw_ramp_ctas_frac * SMs))): too few CTAs in flight
               cannot keep HBM busy (Little's law); parallel CTAs counted per tile row so that time
               never falls as m grows
    """
    eff = hw.efficiency
    sms = float(hw.sm_count)
    per_sm = hw.peak(dtype) * eff.gemm_compute / sms
    l2_per_sm = eff.l2_bw_tb_per_s * 1e12 / sms
    m, n, k, g = (np.asarray(a, dtype=float)[..., None] for a in (m, n, k, groups))
    ctas_per_row = g * np.ceil(n / _TN) * _SK
    ctas = np.ceil(m / _TM) * ctas_per_row
    waves = np.where(_STREAM > 0, ctas / sms + eff.streamk_fixup_tiles, np.ceil(ctas / sms))
    k_eff = k / _SK + eff.cta_k_overhead
    rate = per_sm * np.where(_TM < 128, eff.small_tile_efficiency, 1.0)
    tile_s = np.maximum(2.0 * _TM * _TN * k_eff / rate, (_TM * act_bytes + _TN * weight_bytes) * k_eff / l2_per_sm)
    compute = waves * tile_s
    tau_s = eff.throttle_tau_ms * 1e-3
    compute = compute * (1.0 + eff.power_throttle * compute / (compute + tau_s))
    bytes_ = g * (n * k * weight_bytes + m * (k + n) * act_bytes + 8.0 * (_SK - 1.0) * m * n)
    ramp = np.minimum(1.0, np.minimum(ctas_per_row, sms) / (eff.bw_ramp_ctas_frac * sms))
    bw = hw.mem_bw_bytes_per_s * eff.memory * ramp
    return compute, bytes_ / bw


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
) -> tuple[Array, Array, Array]:
    """(time, compute time, memory time) in seconds of a (grouped) GEMM: y[m,n] = x[m,k] @ W[k,n].

    Each configuration is its own roofline (Williams et al. 2009): its compute and memory time joined
    by the p-norm `ridge_sharpness`; the fastest configuration is taken, as an autotuned library
    would, plus a fixed cost per kernel. Compute and memory returned are the chosen configuration's.
    Monotone non-decreasing in m: every configuration's time is.
    """
    compute, memory = _gemm_configs(m, n, k, hw, dtype, weight_bytes, act_bytes, groups)
    eff = hw.efficiency
    joined = _join(compute, memory, eff.ridge_sharpness)
    best = np.argmin(joined, axis=-1)[..., None]
    pick = lambda a: np.take_along_axis(a, best, axis=-1)[..., 0]  # noqa: E731
    return eff.kernel_overhead_us * 1e-6 + pick(joined), pick(compute), pick(memory)


def memory_s(bytes_: ArrayLike, hw: HardwareProfile) -> Array:
    """Streaming time of bytes at the achieved fraction of HBM bandwidth."""
    return np.asarray(bytes_, dtype=float) / (hw.mem_bw_bytes_per_s * hw.efficiency.memory)


def memory_op_time_s(bytes_: ArrayLike, hw: HardwareProfile, kernels: ArrayLike = 1.0) -> Array:
    """Element-wise / copy kernels: a fixed cost each plus their bytes at streaming bandwidth."""
    return np.asarray(kernels, dtype=float) * hw.efficiency.kernel_overhead_us * 1e-6 + memory_s(bytes_, hw)


def attention_time_s(
    batch: ArrayLike, q_per_seq: ArrayLike, context_len: ArrayLike, heads: float, kv_heads: float,
    qk_dim: float, v_dim: float, kv_bytes_per_token: float, hw: HardwareProfile,
    dtype: str = "bf16", act_bytes: float = 2.0,
) -> tuple[Array, Array, Array, Array, Array]:
    """Decode / verification attention, flash-decoding style, for one layer on one GPU.

    Each sequence's KV cache (context_len tokens, kv_bytes_per_token each) is read once for all
    its q new tokens (FlashDecoding, Dao et al. 2023). FLOPs = 2*q*L*(qk_dim + v_dim) per head
    (QK^T and PV). Tensor cores work on 64-row tiles of the q*(heads/kv_heads) query rows that
    share a KV head, so short query blocks still pay for 64 rows (FlashAttention-2/3 tiling).
    Returns (time, compute, memory, flops, bytes).
    """
    b, q, ctx = (np.asarray(a, dtype=float) for a in (batch, q_per_seq, context_len))
    group = heads / kv_heads
    flops = 2.0 * b * q * ctx * heads * (qk_dim + v_dim)
    rows = np.ceil(q * group / 64.0) * 64.0
    padded = 2.0 * b * kv_heads * rows * ctx * (qk_dim + v_dim)
    kv = b * ctx * kv_bytes_per_token
    bytes_ = kv + b * q * heads * (qk_dim + v_dim) * act_bytes
    eff = hw.efficiency
    compute = padded / (hw.peak(dtype) * eff.attention_compute)
    mem = memory_s(bytes_, hw)
    t = eff.kernel_overhead_us * 1e-6 + _join(compute, mem, eff.ridge_sharpness)
    return t, compute, mem, flops, bytes_


def allreduce_time_s(bytes_: ArrayLike, world_size: ArrayLike, hw: HardwareProfile) -> Array:
    """Ring / NVLS all-reduce of `bytes_` over `world_size` GPUs (zero for one GPU).

    t = latency (+)_p 2(n-1)/n * bytes / busbw (nccl-tests PERFORMANCE.md: bus bandwidth), joined by
    a p-norm of sharpness p: p = 1 is the plain sum; p < 1 adds the mid-size hump where NCCL has not
    yet opened all its channels (effective bandwidth still ramping, hardware.md §5); p > 1 a latency
    plateau. World sizes in `interconnect.allreduce_by_world_size` use their own fitted (latency,
    busbw, p); others use the scalar latency and busbw with p = 1.
    """
    n = np.asarray(world_size, dtype=float)
    b = np.asarray(bytes_, dtype=float)
    n, b = np.broadcast_arrays(n, b)
    ic = hw.interconnect
    latency = np.full(n.shape, ic.allreduce_latency_s)
    busbw = np.full(n.shape, ic.allreduce_busbw_bytes_per_s)
    sharp = np.ones(n.shape)
    for size, (lat_s, bw, p) in ic.allreduce_by_world_size.items():
        hit = n == size
        latency, busbw, sharp = np.where(hit, lat_s, latency), np.where(hit, bw, busbw), np.where(hit, p, sharp)
    transfer = 2.0 * (n - 1.0) / np.maximum(n, 1.0) * b / busbw
    t = _join(latency, transfer, sharp)
    return np.where(n > 1, t, 0.0)
