"""What the bench measures: its ops, dtypes, token sweep, and the model's GEMM and attention shapes."""

from __future__ import annotations

from specsim.cost.dtypes import TORCH_NAMES
from specsim.cost.model import ModelSpec

OPS = ("gemm", "attention", "memcpy", "peak", "allreduce")
DTYPES = TORCH_NAMES
# Token counts: every count to 16, then steps of 8 to 512 (where decode and verification live),
# then a coarser sweep to 8192.
FULL_TOKENS = (*range(1, 17), *range(24, 513, 8), 576, 640, 768, 896, 1024, 1280, 1536, 2048, 3072, 4096, 6144, 8192)
QUICK_TOKENS = (1, 16, 128)


def linear_shapes(model: ModelSpec, tp: int) -> list[tuple[str, int, int]]:
    """(name, K, N) of one layer's linear ops on one GPU (Megatron column/row split), plus the LM head."""
    h = model.hidden
    heads = model.n_heads / tp
    branches = 2 if model.gated_mlp else 1
    if model.is_mla:
        qk = model.qk_nope_head_dim + model.qk_rope_head_dim
        shapes = [("q_a", h, model.q_lora_rank), ("q_b", model.q_lora_rank, heads * qk),
                  ("kv_a", h, model.kv_lora_rank + model.qk_rope_head_dim), ("o", heads * model.v_head_dim, h)]
    else:
        kvh = max(model.n_kv_heads / tp, 1.0)
        shapes = [("qkv", h, (heads + 2 * kvh) * model.head_dim), ("o", heads * model.head_dim, h)]
    inter = (model.moe_intermediate if model.is_moe else model.intermediate) / tp
    shapes += [("up", h, branches * inter), ("down", inter, h), ("lm_head", h, model.vocab / tp)]
    return [(name, int(k), int(n)) for name, k, n in shapes if k >= 1 and n >= 1]


def attention_configs(quick: bool) -> list[tuple[int, int, int]]:
    """(batch, context, new tokens per sequence): decode (q = 1) and verification (q > 1)."""
    if quick:
        return [(b, ctx, q) for b in (1, 8) for ctx in (256, 1024) for q in (1, 4)]
    return [(b, ctx, q) for b in (1, 4, 16, 64) for ctx in (512, 2048, 8192, 32768) for q in (1, 2, 4, 8)]
