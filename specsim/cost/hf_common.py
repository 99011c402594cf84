"""What every config.json parser shares: the common fields, positive integers, DeepSeek-V3's MLA + MoE
fields, and the checkpoint's weight formats (its quantization_config) as a precision spec."""

from __future__ import annotations

from typing import Any, NamedTuple

from specsim.cost.model_spec import ModelSpec
from specsim.errors import SpecsimError
from specsim.files import require


class Base(NamedTuple):
    hidden: int
    layers: int
    n_heads: int
    n_kv: int
    head_dim: int
    vocab: int
    tied: bool


def positive(cfg: dict[str, Any], key: str, where: str) -> int:
    value = require(cfg, key, where, int)
    if value <= 0:
        raise SpecsimError(f"{where}: field '{key}' must be > 0, got {value}")
    return int(value)


def base_fields(cfg: dict[str, Any], where: str) -> Base:
    hidden = positive(cfg, "hidden_size", where)
    n_heads = positive(cfg, "num_attention_heads", where)
    layers = positive(cfg, "num_hidden_layers", where)
    vocab = positive(cfg, "vocab_size", where)
    n_kv = cfg.get("num_key_value_heads") or n_heads
    head_dim = cfg.get("head_dim") or cfg.get("attention_head_dim") or cfg.get("kv_channels") or hidden // n_heads
    for key, value in (("num_key_value_heads", n_kv), ("head_dim", head_dim)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise SpecsimError(f"{where}: field '{key}' must be an integer > 0, got {value!r}")
    if n_heads % n_kv:
        raise SpecsimError(f"{where}: field 'num_key_value_heads' ({n_kv}) must divide num_attention_heads "
                           f"({n_heads})")
    return Base(hidden, layers, n_heads, int(n_kv), int(head_dim), vocab, bool(cfg.get("tie_word_embeddings", False)))


def mla_moe(cfg: dict[str, Any], name: str, where: str, family: str, b: Base, inter: int) -> ModelSpec:
    """DeepSeek-V3's MLA + MoE fields (shared by Kimi-K2, DeepSeek-V3.2 and GLM-5)."""
    hidden, layers, n_heads, _, _, vocab, tied = b
    return ModelSpec(
        name, family, hidden, layers, n_heads, n_heads,
        positive(cfg, "qk_nope_head_dim", where) + positive(cfg, "qk_rope_head_dim", where),
        inter, vocab, True, tied,
        n_experts=positive(cfg, "n_routed_experts", where),
        top_k=positive(cfg, "num_experts_per_tok", where),
        n_shared_experts=int(cfg.get("n_shared_experts") or 0),
        moe_intermediate=positive(cfg, "moe_intermediate_size", where),
        n_dense_layers=int(cfg.get("first_k_dense_replace") or 0),
        q_lora_rank=int(cfg.get("q_lora_rank") or 0),
        kv_lora_rank=positive(cfg, "kv_lora_rank", where),
        qk_nope_head_dim=positive(cfg, "qk_nope_head_dim", where),
        qk_rope_head_dim=positive(cfg, "qk_rope_head_dim", where),
        v_head_dim=positive(cfg, "v_head_dim", where),
        mtp_layers=int(cfg.get("num_nextn_predict_layers") or 0),
    )




def native_precision(cfg: dict[str, Any]) -> str:
    """The checkpoint's weight formats as a precision spec (dtypes.Precision), from quantization_config:
    fp8 (block-scaled with weight_block_size: DeepSeek-V3, GLM-5-FP8, MiniMax-M2.5); mxfp4 experts
    (gpt-oss: quant_method mxfp4, attention / router / embeddings bf16); compressed-tensors int4 or mxfp4
    on the routed experts (Kimi-K2.5 / K2-Thinking INT4 QAT, Kimi-K3: `ignore` lists attention, shared
    experts, dense MLP and lm_head); DeepSeek-V4's `expert_dtype` fp4 over fp8 (the fp4 sub-format is not in
    the config: its ue8m0 scales are MX-style, read as mxfp4). No quantization_config: bf16."""
    q = cfg.get("quantization_config")
    experts = cfg.get("expert_dtype")
    if not isinstance(q, dict):
        return "bf16,experts=mxfp4" if experts == "fp4" else "bf16"
    method = str(q.get("quant_method", "")).lower()
    if method == "fp8":
        base = "fp8_block" if q.get("weight_block_size") else "fp8"
        return f"{base},experts=mxfp4,head=bf16" if experts == "fp4" else f"{base},head=bf16"
    if method == "mxfp4":
        return "bf16,experts=mxfp4"
    if method == "compressed-tensors":
        groups = q.get("config_groups") or {}
        weights = next((g.get("weights") or {} for g in groups.values() if isinstance(g, dict)), {})
        bits, kind = weights.get("num_bits"), str(weights.get("type", "int"))
        fmt = "mxfp4" if "mxfp4" in str(q.get("format", "")) else ("int4" if bits == 4 and kind == "int" else
                                                                    "fp8" if bits == 8 else "bf16")
        return f"bf16,experts={fmt}" if fmt != "bf16" else "bf16"
    return "bf16"
