from __future__ import annotations

from specsim.calibration.bench_shapes import FULL_TOKENS, linear_shapes
from specsim.cost.model import load_model


def test_linear_shapes_follow_the_megatron_split() -> None:
    m = load_model("llama-3.1-8b")  # hidden 4096, 32 heads, 8 KV heads, intermediate 14336, vocab 128256
    shapes = {name: (k, n) for name, k, n in linear_shapes(m, tp=2)}
    assert shapes["qkv"] == (4096, (16 + 2 * 4) * 128)  # q heads + K and V heads, per GPU
    assert shapes["o"] == (16 * 128, 4096)
    assert shapes["up"] == (4096, 2 * 7168) and shapes["down"] == (7168, 4096)
    assert shapes["lm_head"] == (4096, 128256 // 2)


def test_token_sweep_is_dense_below_512() -> None:
    t = FULL_TOKENS
    assert t[0] == 1 and t[-1] == 8192 and list(t) == sorted(set(t))
    assert set(range(1, 17)) <= set(t) and all(x in t for x in range(24, 513, 8))
    assert sum(1 for x in t if x > 512) < 15
