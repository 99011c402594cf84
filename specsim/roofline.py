"""Time of one kernel from its shape on a HardwareProfile: GEMMs, attention, memory-bound ops,
collectives. Pure numpy, broadcasting over any array arguments.

Not a bare max(compute, memory): a GEMM's compute time counts whole waves of output tiles over
the SMs (tile and wave quantization, NVIDIA "Matrix Multiplication Background" guide §3.1-3.2),
picks the cheapest of a few tile shapes and split-K factors the way a cuBLAS heuristic would,
charges each tile a pipeline fill/drain, and joins compute and memory time with a p-norm so the
curve bends near the ridge as measured kernels do; every kernel adds a fixed cost.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from specsim.hardware import HardwareProfile

Array = NDArray[np.float64]

# Output tile shapes (rows M x cols N) that cuBLAS/CUTLASS choose among on Hopper and Ampere.
TILES_MN = np.array([(64, 64), (64, 128), (128, 64), (128, 128), (128, 256), (256, 128)], dtype=float)
SPLIT_K = np.array([1.0, 2.0, 4.0])


def _join(compute_s: Array, memory_s: Array, p: float) -> Array:
    """p-norm of the two ceilings: max() as p -> inf; smooth near the ridge (fitted p ~ 1.5-3)."""
    hi = np.maximum(compute_s, memory_s)
    lo = np.minimum(compute_s, memory_s)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(hi > 0, lo / hi, 0.0)
    return hi * (1.0 + ratio**p) ** (1.0 / p)


def gemm_compute_s(
    m: ArrayLike, n: ArrayLike, k: ArrayLike, hw: HardwareProfile, dtype: str = "bf16",
    groups: ArrayLike = 1.0,
) -> Array:
    """Tensor-core time of `groups` GEMMs of (m x k) @ (k x n) in one kernel, in whole waves.

    For each tile (Tm, Tn) and split-K s: CTAs = groups*ceil(m/Tm)*ceil(n/Tn)*s, waves =
    ceil(CTAs/SMs), each CTA computes 2*Tm*Tn*(k/s + k0) FLOPs at the per-SM share of the peak.
    The cheapest (tile, s) is taken, as an autotuned library would.
    """
    eff = hw.efficiency
    per_sm = hw.peak(dtype) * eff.gemm_compute / hw.sm_count
    m, n, k, groups = (np.asarray(a, dtype=float)[..., None, None] for a in (m, n, k, groups))
    tm, tn = TILES_MN[:, 0][:, None], TILES_MN[:, 1][:, None]
    ctas = groups * np.ceil(m / tm) * np.ceil(n / tn) * SPLIT_K
    waves = np.ceil(ctas / hw.sm_count)
    t = waves * 2.0 * tm * tn * (k / SPLIT_K + eff.cta_k_overhead) / per_sm
    return t.min(axis=(-1, -2))


def gemm_time_s(
    m: ArrayLike, n: ArrayLike, k: ArrayLike, hw: HardwareProfile, dtype: str = "bf16",
    weight_bytes: float = 2.0, act_bytes: float = 2.0, groups: ArrayLike = 1.0,
) -> tuple[Array, Array, Array]:
    """(time, compute time, memory time) in seconds of a (grouped) GEMM: y[m,n] = x[m,k] @ W[k,n].

    Bytes: the weights once per group, activations in and out (roofline, Williams et al. 2009).
    """
    m, n, k, groups = (np.asarray(a, dtype=float) for a in (m, n, k, groups))
    compute = gemm_compute_s(m, n, k, hw, dtype, groups)
    memory = memory_s(groups * (n * k * weight_bytes + m * (k + n) * act_bytes), hw)
    eff = hw.efficiency
    return eff.kernel_overhead_us * 1e-6 + _join(compute, memory, eff.ridge_sharpness), compute, memory


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
    """Ring / NVLS all-reduce: latency + 2(n-1)/n * bytes / bus bandwidth (nccl-tests PERFORMANCE.md).

    Zero for a single GPU.
    """
    n = np.asarray(world_size, dtype=float)
    ic = hw.interconnect
    t = ic.allreduce_latency_s + 2.0 * (n - 1.0) / np.maximum(n, 1.0) * np.asarray(bytes_, dtype=float) / (
        ic.allreduce_busbw_bytes_per_s
    )
    return np.where(n > 1, t, 0.0)
