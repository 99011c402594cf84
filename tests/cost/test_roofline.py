from __future__ import annotations

import numpy as np
import pytest

from specsim.cost import roofline as rl
from specsim.cost.hardware import load_hardware


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
    assert t4[3] == pytest.approx(4 * t1[3])  # FLOPs grow with the query tokens


def test_allreduce_formula(h100) -> None:
    ic = h100.interconnect
    t = rl.allreduce_time_s(64e6, 8, h100)
    assert t == pytest.approx(ic.allreduce_latency_s + 2 * 7 / 8 * 64e6 / ic.allreduce_busbw_bytes_per_s)
    assert rl.allreduce_time_s(64e6, 1, h100) == 0
