from __future__ import annotations

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
    """A per-tensor fp8 GEMM pays the quantisation kernel: its streaming, the engine's fixed cost and a cost per token
    (vLLM's kernel runs a thread block a token, `quant_row_ns`); a block-scaled fp8 GEMM streaming only."""
    e = h100.efficiency
    with_q = rl.gemm_time_s(4096, 8192, 8192, h100, "fp8", 1.0)[0]
    without = rl.gemm_time_s(4096, 8192, 8192, h100, "fp8", 1.0, act_quant=False)[0]
    streaming = rl.activation_quant_s(4096, 8192, h100)
    assert with_q == pytest.approx(without + streaming + 4096 * e.quant_row_ns * 1e-9 + e.quant_overhead_us * 1e-6)
    assert e.quant_row_ns > 1.0  # the H100 fit: ~5 ns a token
    assert streaming > e.kernel_overhead_us * 1e-6 + 4096 * 8192 * 3 / h100.mem_bw_bytes_per_s
    wb = 1.0 + 4.0 / 128**2  # block-scaled: another quantisation kernel, not fitted
    block = rl.gemm_time_s(4096, 8192, 8192, h100, "fp8", wb)[0] - rl.gemm_time_s(4096, 8192, 8192, h100, "fp8", wb,
                                                                                  act_quant=False)[0]
    assert block == pytest.approx(streaming)


def test_l2_resident_weights_only_in_benchmark_replays(h100) -> None:
    """A benchmark cycling 6 copies of a 1 MB weight runs it from L2; a forward pass (no buffer_sets)
    streams it from HBM."""
    cold = rl.gemm_time_s(1, 1024, 512, h100)[2]
    warm = rl.gemm_time_s(1, 1024, 512, h100, buffer_sets=6)[2]
    assert warm < cold
    assert rl.l2_hit_fraction(np.array([1e6, 10 * h100.l2_bytes, np.nan]), h100).tolist() == pytest.approx(
        [1.0, 0.0, 0.0], abs=1e-3)


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
