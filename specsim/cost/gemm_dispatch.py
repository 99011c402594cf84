"""Fixed GEMM tile dispatch: the engines' W8A8 fp8 CUTLASS kernels pick one tile configuration per M bucket (and N),
not the best of all configurations as an autotuned library does (roofline._gemm_configs' default).

A configuration is the tile's extent along the tokens and along the weight rows, the cluster multiples the grid is
rounded up to along each (a cluster of 2 along M launches its tiles in pairs: 129 tokens on 128-row tiles run two),
and whether it swaps A and B (the weights take the MMA's wide side; swap-AB tiles run at `swap_tile_efficiency`).
NVIDIA's H100 vLLM table steps 1.9-2.2x from 512 to 513 tokens on 8192-16384-wide weights, where one more pair of
128-row tiles prices 1.4x (the autotuned model: 1.1x); the rest of the step (an additive 40-100 us at every 256 j + 1
tokens, none at 160 -> 161) is not modelled: counting a ping-pong kernel's two tiles an SM as one wave of 2 x SMs
fit the tables worse (8.6% -> 17.2% held out).

Sources (the table each name reads; the engine version NVIDIA's tables time is newer, the dispatch unchanged in kind):
* "vllm_sm90_fp8": vLLM csrc/quantization/w8a8/cutlass/c3x/scaled_mm_sm90_fp8_dispatch.cuh (vllm-project/vllm@68f442eb).
* "sglang_sm90_fp8": sgl-kernel csrc/gemm/fp8_gemm_kernel.cu, sm90_fp8_dispatch_shape (sgl-project/sglang@04ec0bc2).
Blackwell's tables (vLLM's scaled_mm_sm100_fp8_dispatch.cuh, SGLang's sm100_fp8_dispatch_bias: swap-AB and 2-SM tiles)
priced this way fit NVIDIA's B200 tables worse than the best configuration does (vLLM: 13.0% held out became 41%), so
Blackwell keeps the autotuned model until their 2-SM and swap-AB tiles are modelled.
They apply to per-tensor / per-channel fp8 weights; block-scaled fp8 (DeepSeek's 128 x 128 scales) runs other kernels
(DeepGEMM, CUTLASS blockwise) and keeps the autotuned model.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

Array = NDArray[np.float64]
INF = float("inf")

# A rule: (largest M, largest N it covers; its configuration). A configuration: (tokens tile, weights tile, tokens
# cluster, weights cluster, swap-AB). The first rule covering (M, N) is the kernel.
Rule = tuple[float, float, tuple[float, float, float, float, bool]]

DISPATCH: dict[str, tuple[Rule, ...]] = {
    # m <= 16: swap-AB 64(N) x 16(M) x 256, cluster 1x2 for N <= 1280 else 1x1; m <= 64: swap-AB 64x16 (cluster 1x4)
    # for N <= 1280, else 64 x 64 x 256 (basic schedule); m <= 128: 64 x 128 x 128, cluster 2x1; above: 128 x 128 x
    # 128, cluster 2x1 (both ping-pong)
    "vllm_sm90_fp8": (
        (16, 1280, (16.0, 64.0, 2.0, 1.0, True)),
        (16, INF, (16.0, 64.0, 1.0, 1.0, True)),
        (64, 1280, (16.0, 64.0, 4.0, 1.0, True)),
        (64, INF, (64.0, 64.0, 1.0, 1.0, True)),
        (128, INF, (64.0, 128.0, 2.0, 1.0, False)),
        (INF, INF, (128.0, 128.0, 2.0, 1.0, False)),
    ),
    # m <= 1: 64 x 64 x 128, cluster 1x8 (basic schedule); m <= 64: cluster 1x4; m <= 256: 64 x 64, 1x1;
    # m <= 1024: 128 x 128, 1x1; above: 128 x 128, cluster 2x1 (all ping-pong)
    "sglang_sm90_fp8": (
        (1, INF, (64.0, 64.0, 1.0, 8.0, False)),
        (64, INF, (64.0, 64.0, 1.0, 4.0, False)),
        (256, INF, (64.0, 64.0, 1.0, 1.0, False)),
        (1024, INF, (128.0, 128.0, 1.0, 1.0, False)),
        (INF, INF, (128.0, 128.0, 2.0, 1.0, False)),
    ),
}


def bucket_starts(name: str) -> list[float]:
    """The first M of each bucket after the first (every rule's M bound + 1)."""
    return sorted({m_max + 1.0 for m_max, _, _ in DISPATCH[name] if m_max < INF})


def dispatch_configs(name: str, m: ArrayLike, n: ArrayLike) -> tuple[Array, Array, Array, Array, Array]:
    """(tokens tile, weights tile, tokens cluster, weights cluster, swap flag) arrays of the configuration table
    `name` runs at each (m, n): the first rule that covers it."""
    rules = DISPATCH[name]
    mm, nn = np.broadcast_arrays(np.asarray(m, dtype=float), np.asarray(n, dtype=float))
    rule = np.full(mm.shape, len(rules))  # past the last: no rule covers (m, n), all five 0
    for i in reversed(range(len(rules))):
        rule = np.where((mm <= rules[i][0]) & (nn <= rules[i][1]), i, rule)
    flat = rule.reshape(-1)
    return tuple(_CONFIGS[name][flat, i].reshape(mm.shape) for i in range(5))


#: Each table's configurations as rows (swap-AB as 1.0), then a row of zeros
_CONFIGS = {name: np.array([[float(x) for x in c] for _, _, c in rules] + [[0.0] * 5])
            for name, rules in DISPATCH.items()}
