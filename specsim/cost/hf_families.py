"""config.json parsers of the model families of 2026: hybrid linear attention (Gated DeltaNet in Qwen3-Next
/ Qwen3.5, Kimi Delta Attention in Kimi-K3, Mamba-2 in Nemotron-H), sparse attention (DeepSeek-V3.2 and
GLM-5.x DSA, MiniMax-M3 MSA), compressed attention (DeepSeek-V4), and the GQA MoE models GLM-4.6 and
MiniMax-M2. Field names and meanings: /work/shared/research/models-2026.md (each with its source)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from specsim.cost.hf_common import Base, mla_moe, positive
from specsim.cost.model_spec import ModelSpec
from specsim.errors import SpecsimError


#: DSA's indexer keys: fp8 values plus one fp32 scale per 128 (DeepSeek-V3.2-Exp inference/model.py:
#: k_cache float8_e4m3fn [.., index_head_dim], k_scale_cache float32 [.., index_head_dim // 128]).
def _fp8_index_key_bytes(index_dim: int) -> float:
    return index_dim + 4.0 * max(index_dim // 128, 1)


def _state_bytes(cfg: dict[str, Any]) -> float:
    """Bytes per recurrent-state element: the config's mamba_ssm_dtype / mamba_ssm_cache_dtype (float32 in
    Qwen3.5 and Nemotron-3), else the model dtype (vLLM's mamba_ssm_cache_dtype "auto")."""
    text = str(cfg.get("mamba_ssm_dtype") or cfg.get("mamba_ssm_cache_dtype") or "bfloat16")
    return 4.0 if "32" in text else 2.0


def _int0(cfg: dict[str, Any], key: str) -> int:
    return int(cfg.get(key) or 0)


def _layer_types(cfg: dict[str, Any], where: str, layers: int) -> list[str]:
    """Qwen3-Next / Qwen3.5 layer_types, or every full_attention_interval-th layer full (default 4)."""
    types = cfg.get("layer_types")
    if types is None:
        every = int(cfg.get("full_attention_interval") or 4)
        types = ["full_attention" if (i + 1) % every == 0 else "linear_attention" for i in range(layers)]
    if not isinstance(types, list) or len(types) != layers:
        raise SpecsimError(f"{where}: field 'layer_types' must list {layers} layer types")
    return [str(t) for t in types]


def _gdn(cfg: dict[str, Any], name: str, where: str, b: Base) -> ModelSpec:
    """Qwen3-Next / Qwen3.5 (dense and MoE): Gated DeltaNet on 3 of 4 layers, gated GQA on the rest; MoE
    with one gated shared expert (HF Qwen3NextSparseMoeBlock). MTP: mtp_num_hidden_layers (Qwen3.5), or
    vLLM's default of one layer for Qwen3-Next (qwen3_next_mtp.py)."""
    types = _layer_types(cfg, where, b.layers)
    moe = "num_experts" in cfg
    family = str(cfg.get("model_type", "qwen3_next")).replace("_text", "")
    mtp = int(cfg.get("mtp_num_hidden_layers", cfg.get("num_nextn_predict_layers", 1 if family == "qwen3_next" else 0))
              or 0)
    spec = ModelSpec(
        name, family, b.hidden, b.layers, b.n_heads, b.n_kv, b.head_dim,
        int(cfg.get("intermediate_size") or cfg.get("moe_intermediate_size") or 0), b.vocab, True, b.tied,
        attn_output_gate=bool(cfg.get("attn_output_gate", True)), mtp_layers=mtp,
        n_linear_layers=sum(1 for t in types if t == "linear_attention"), linear_kind="gdn",
        linear_k_heads=positive(cfg, "linear_num_key_heads", where),
        linear_v_heads=positive(cfg, "linear_num_value_heads", where),
        linear_k_dim=positive(cfg, "linear_key_head_dim", where),
        linear_v_dim=positive(cfg, "linear_value_head_dim", where),
        linear_conv=positive(cfg, "linear_conv_kernel_dim", where), linear_state_bytes=_state_bytes(cfg))
    if not moe:
        return spec
    mlp_only = set(cfg.get("mlp_only_layers") or [])
    step = int(cfg.get("decoder_sparse_step") or 1)
    return dataclasses.replace(
        spec, n_experts=positive(cfg, "num_experts", where), top_k=positive(cfg, "num_experts_per_tok", where),
        moe_intermediate=positive(cfg, "moe_intermediate_size", where), n_shared_experts=1,
        shared_intermediate=_int0(cfg, "shared_expert_intermediate_size"),
        n_dense_layers=sum(1 for i in range(b.layers) if i in mlp_only or (i + 1) % step))


def _dsa(cfg: dict[str, Any], name: str, where: str, b: Base) -> ModelSpec:
    """DeepSeek-V3.2 / GLM-5.x: DeepSeek-V3's MLA + MoE with DeepSeek Sparse Attention on every layer;
    GLM-5.2's `indexer_types` runs the indexer on the `full` layers only (the `shared` ones reuse the last
    top-k); GLM-5.2's `mlp_layer_types` marks its dense layers."""
    spec = mla_moe(cfg, name, where, str(cfg.get("model_type")), b, positive(cfg, "intermediate_size", where))
    kinds = cfg.get("indexer_types")
    mlp_types = cfg.get("mlp_layer_types")
    dense = sum(1 for t in mlp_types if t == "dense") if isinstance(mlp_types, list) else spec.n_dense_layers
    index_dim = positive(cfg, "index_head_dim", where)
    return dataclasses.replace(
        spec, n_dense_layers=dense, n_sparse_layers=b.layers, index_heads=positive(cfg, "index_n_heads", where),
        index_dim=index_dim, sparse_topk=positive(cfg, "index_topk", where),
        n_index_layers=sum(1 for t in kinds if t == "full") if isinstance(kinds, list) else 0,
        index_key_bytes=_fp8_index_key_bytes(index_dim))


def _kimi_linear(cfg: dict[str, Any], name: str, where: str, b: Base) -> ModelSpec:
    """Kimi Linear / Kimi-K3: Kimi Delta Attention (linear_attn_config.kda_layers) with MLA on
    full_attn_layers; a latent MoE (routed experts at routed_expert_hidden_size) with shared experts."""
    lin = cfg.get("linear_attn_config")
    if not isinstance(lin, dict):
        raise SpecsimError(f"{where}: field 'linear_attn_config' must be a mapping")
    n_kda = len(lin.get("kda_layers") or [])
    heads, dim = positive(lin, "num_heads", where), positive(lin, "head_dim", where)
    mla_cfg = {**cfg, "n_routed_experts": cfg.get("num_experts"),
               "num_experts_per_tok": cfg.get("num_experts_per_token"),
               "n_shared_experts": cfg.get("num_shared_experts")}
    spec = mla_moe(mla_cfg, name, where, "kimi_linear", b, positive(cfg, "intermediate_size", where))
    return dataclasses.replace(
        spec, n_attention_layers=b.layers - n_kda, n_linear_layers=n_kda, linear_kind="kda",
        linear_k_heads=heads, linear_v_heads=heads, linear_k_dim=dim, linear_v_dim=dim,
        linear_conv=int(lin.get("short_conv_kernel_size") or 4), linear_state_bytes=_state_bytes(cfg),
        moe_latent=_int0(cfg, "routed_expert_hidden_size"),
        shared_intermediate=spec.n_shared_experts * spec.moe_intermediate)


def _glm4_moe(cfg: dict[str, Any], name: str, where: str, b: Base) -> ModelSpec:
    """GLM-4.5 / 4.6 / 4.7 (HF Glm4MoeConfig): GQA with first_k_dense_replace dense layers, then MoE with
    n_shared_experts shared experts; one MTP layer (num_nextn_predict_layers)."""
    return ModelSpec(
        name, "glm4_moe", b.hidden, b.layers, b.n_heads, b.n_kv, b.head_dim,
        positive(cfg, "intermediate_size", where), b.vocab, True, b.tied,
        n_experts=positive(cfg, "n_routed_experts", where), top_k=positive(cfg, "num_experts_per_tok", where),
        n_shared_experts=_int0(cfg, "n_shared_experts"), moe_intermediate=positive(cfg, "moe_intermediate_size", where),
        n_dense_layers=_int0(cfg, "first_k_dense_replace"), mtp_layers=_int0(cfg, "num_nextn_predict_layers"))


def _minimax(cfg: dict[str, Any], name: str, where: str, b: Base) -> ModelSpec:
    """MiniMax-M2.x: GQA on every layer, num_local_experts of intermediate_size, no shared expert, MTP
    modules (num_mtp_modules). MiniMax-M3: first_k_dense_replace dense layers (dense_intermediate_size), one
    shared expert, and MSA block-sparse attention on the layers sparse_attention_freq marks: an indexer of
    sparse_num_index_heads x sparse_index_dim scores every token, attention reads the top sparse_topk_blocks
    blocks of sparse_block_size plus sparse_local_block (and sparse_init_block) blocks; its index keys are
    taken as cached at the KV dtype's 2 bytes (bf16 model; not stated)."""
    m3 = cfg.get("model_type") == "minimax_m3"
    inter = positive(cfg, "moe_intermediate_size" if m3 else "intermediate_size", where)
    mtp = _int0(cfg, "num_nextn_predict_layers") if m3 else (_int0(cfg, "num_mtp_modules") if cfg.get("use_mtp") else 0)
    spec = ModelSpec(
        name, str(cfg.get("model_type")), b.hidden, b.layers, b.n_heads, b.n_kv, b.head_dim,
        int(cfg.get("dense_intermediate_size") or inter), b.vocab, True, b.tied,
        n_experts=positive(cfg, "num_local_experts", where), top_k=positive(cfg, "num_experts_per_tok", where),
        moe_intermediate=inter, n_shared_experts=_int0(cfg, "n_shared_experts"),
        shared_intermediate=_int0(cfg, "shared_intermediate_size"),
        n_dense_layers=_int0(cfg, "first_k_dense_replace"), mtp_layers=mtp)
    sparse = cfg.get("sparse_attention_config")
    if not (m3 and isinstance(sparse, dict) and cfg.get("use_sparse_attention", sparse.get("use_sparse_attention"))):
        return spec
    block = positive(sparse, "sparse_block_size", where)
    blocks = positive(sparse, "sparse_topk_blocks", where) + _int0(sparse, "sparse_local_block") \
        + _int0(sparse, "sparse_init_block")
    freq = sparse.get("sparse_attention_freq")
    n_sparse = sum(1 for f in freq if f) if isinstance(freq, list) else b.layers
    index_dim = positive(sparse, "sparse_index_dim", where)
    return dataclasses.replace(
        spec, n_sparse_layers=n_sparse, index_heads=positive(sparse, "sparse_num_index_heads", where),
        index_dim=index_dim, sparse_topk=blocks * block, index_key_bytes=2.0 * index_dim)


def _nemotron_h(cfg: dict[str, Any], name: str, where: str, b: Base) -> ModelSpec:
    """Nemotron-H / Nano-v2 / Nemotron-3: one sublayer per block of hybrid_override_pattern (M Mamba-2,
    * attention, - squared-ReLU MLP, E MoE of moe_intermediate_size with a shared expert and, in Nemotron-3
    Super, a moe_latent_size latent); MTP: num_nextn_predict_layers."""
    pattern = cfg.get("hybrid_override_pattern")
    if not isinstance(pattern, str) or len(pattern) != b.layers or set(pattern) - set("M*-E"):
        raise SpecsimError(f"{where}: field 'hybrid_override_pattern' must be {b.layers} of M * - E")
    ffn = pattern.count("-") + pattern.count("E")
    moe = pattern.count("E") > 0
    heads = positive(cfg, "mamba_num_heads", where)
    spec = ModelSpec(
        name, "nemotron_h", b.hidden, ffn, b.n_heads, b.n_kv, b.head_dim,
        int(cfg.get("intermediate_size") or 0), b.vocab, False, b.tied,
        n_attention_layers=pattern.count("*"), n_linear_layers=pattern.count("M"), linear_kind="mamba2",
        linear_k_heads=positive(cfg, "n_groups", where), linear_groups=positive(cfg, "n_groups", where),
        linear_v_heads=heads, linear_k_dim=positive(cfg, "ssm_state_size", where),
        linear_v_dim=positive(cfg, "mamba_head_dim", where), linear_conv=int(cfg.get("conv_kernel") or 4),
        linear_state_bytes=_state_bytes(cfg), mtp_layers=_int0(cfg, "num_nextn_predict_layers"))
    if not moe:
        return spec
    return dataclasses.replace(
        spec, n_experts=positive(cfg, "n_routed_experts", where), top_k=positive(cfg, "num_experts_per_tok", where),
        moe_intermediate=positive(cfg, "moe_intermediate_size", where), n_shared_experts=_int0(cfg, "n_shared_experts"),
        shared_intermediate=_int0(cfg, "moe_shared_expert_intermediate_size"), moe_latent=_int0(cfg, "moe_latent_size"),
        n_dense_layers=pattern.count("-"))


def _deepseek_v4(cfg: dict[str, Any], name: str, where: str, b: Base) -> ModelSpec:
    """DeepSeek-V4: one 512-wide KV entry per token shared by K and V (num_key_value_heads 1), pooled every
    compress_ratios[i] tokens (4: CSA, its indexer picks index_topk entries; 128: HCA, every entry read; 0:
    the sliding window only), a raw sliding window on every layer; low-rank q (q_lora_rank) and grouped
    low-rank output (o_groups x o_lora_rank); MoE on every layer (3 hash-routed: same cost). The
    hyper-connections (hc_mult 4 residual streams) and compressor weights are left out: small next to
    the rest (models-2026.md, section 11)."""
    ratios = cfg.get("compress_ratios")
    if not isinstance(ratios, list) or len(ratios) < b.layers:
        raise SpecsimError(f"{where}: field 'compress_ratios' must list at least {b.layers} ratios")
    counts: dict[int, int] = {}
    for r in ratios[:b.layers]:
        counts[int(r)] = counts.get(int(r), 0) + 1
    index_dim = positive(cfg, "index_head_dim", where)
    return ModelSpec(
        name, "deepseek_v4", b.hidden, b.layers, b.n_heads, 1, b.head_dim, 0, b.vocab, True, b.tied,
        n_experts=positive(cfg, "n_routed_experts", where), top_k=positive(cfg, "num_experts_per_tok", where),
        n_shared_experts=_int0(cfg, "n_shared_experts"), moe_intermediate=positive(cfg, "moe_intermediate_size", where),
        q_lora_rank=positive(cfg, "q_lora_rank", where), qk_rope_head_dim=_int0(cfg, "qk_rope_head_dim"),
        o_lora_rank=positive(cfg, "o_lora_rank", where), o_groups=positive(cfg, "o_groups", where),
        mtp_layers=_int0(cfg, "num_nextn_predict_layers"), sliding_window=positive(cfg, "sliding_window", where),
        compressed_layers=tuple(sorted(counts.items())), compressed_index_ratio=4,
        index_heads=positive(cfg, "index_n_heads", where), index_dim=index_dim,
        sparse_topk=positive(cfg, "index_topk", where), index_key_bytes=_fp8_index_key_bytes(index_dim))


FAMILIES_2026: dict[str, Callable[[dict[str, Any], str, str, Base], ModelSpec]] = {
    "qwen3_next": _gdn, "qwen3_5": _gdn, "qwen3_5_moe": _gdn, "deepseek_v32": _dsa, "glm_moe_dsa": _dsa,
    "kimi_linear": _kimi_linear, "glm4_moe": _glm4_moe, "minimax_m2": _minimax, "minimax_m3": _minimax,
    "nemotron_h": _nemotron_h, "deepseek_v4": _deepseek_v4,
}
