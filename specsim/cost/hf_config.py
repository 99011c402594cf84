"""Hugging Face config.json -> ModelSpec: dispatch on `model_type` (a multimodal wrapper's language model
under `text_config`), each family's fields as its modelling code reads them. The families of 2026
(hybrid linear attention, sparse and compressed attention) are read in `hf_families`."""

from __future__ import annotations

import dataclasses
from typing import Any

from specsim.cost.hf_common import Base, base_fields, checkpoint_precision, context_window, mla_moe, positive
from specsim.cost.hf_families import FAMILIES_2026
from specsim.cost.model_spec import ModelSpec
from specsim.errors import SpecsimError
from specsim.files import require

_CLASSIC = ("llama", "mistral", "qwen2", "mixtral", "phi", "qwen", "internlm", "deepseek_v3", "qwen3", "qwen3_moe",
            "gpt_oss", "llama4", "llama4_text", "kimi_k2")
#: Multimodal wrappers whose language model sits under text_config.
_WRAPPERS = ("llama4", "qwen3_5", "qwen3_5_moe", "kimi_k25", "kimi_k3")
FAMILIES = tuple(sorted({*_CLASSIC, *FAMILIES_2026, *_WRAPPERS}))


def parse_config(cfg: dict[str, Any], name: str, where: str) -> ModelSpec:
    """ModelSpec from a Hugging Face config.json mapping; errors name the file and the field. The
    checkpoint's quantization_config becomes the model's native precision, its (text) config's length and
    RoPE scaling its context window."""
    family = cfg.get("model_type")
    if family not in FAMILIES:
        archs = cfg.get("architectures")
        named = f" ({', '.join(map(str, archs))})" if isinstance(archs, list) and archs else ""
        raise SpecsimError(f"{where}: model_type {family!r}{named} is not supported; supported: "
                           f"{', '.join(FAMILIES)}")
    quant, outer = cfg.get("quantization_config"), cfg
    if family in _WRAPPERS and (family == "llama4" or "hidden_size" not in cfg):
        require(cfg, "text_config", where, dict)
        tied_outer = bool(cfg.get("tie_word_embeddings", False))
        inner = dict(cfg["text_config"])
        inner.setdefault("tie_word_embeddings", tied_outer)
        quant = inner.get("quantization_config", quant)
        cfg, where = inner, f"{where}: text_config"
        family = str(inner.get("model_type") or family).removesuffix("_text")  # qwen3_5_text, llama4_text
    if family == "nemotron_h" and isinstance(cfg.get("layers_block_type"), list):  # Nemotron-3.5 / Ultra spelling
        kinds = {"mamba": "M", "attention": "*", "moe": "E", "mlp": "-"}
        pattern = "".join(kinds.get(str(t), "?") for t in cfg["layers_block_type"])
        cfg = {**cfg, "hybrid_override_pattern": pattern, "num_hidden_layers": len(pattern)}
    b = base_fields(cfg, where)
    spec = _classic(cfg, name, where, str(family), b) if family in _CLASSIC else \
        FAMILIES_2026[str(family)](cfg, name, where, b)
    native, method = checkpoint_precision(quant, spec, b.layers, where, outer.get("expert_dtype"))
    return dataclasses.replace(spec, native_precision=native, native_method=method,
                               checkpoint=str(outer.get("_specsim_source") or ""),
                               max_context_tokens=context_window(cfg))


def decoder_blocks(spec: ModelSpec) -> int:
    """The decoder's layer count as config.json numbers them (num_hidden_layers): Nemotron-H's blocks are one
    sublayer each (a mixer or an FFN), every other family's layers hold both."""
    return spec.n_layers + (spec.n_attention_layers + spec.n_linear_layers if spec.family == "nemotron_h" else 0)


def _classic(cfg: dict[str, Any], name: str, where: str, family: str, b: Base) -> ModelSpec:
    hidden, layers, n_heads, n_kv, head_dim, vocab, tied = b
    if family == "qwen":  # QWen v1: intermediate_size counts both gated branches (w1, w2)
        return ModelSpec(name, family, hidden, layers, n_heads, n_heads, head_dim,
                         positive(cfg, "intermediate_size", where) // 2, vocab, True, tied)
    if family == "phi":  # phi-2: plain GELU MLP (fc1, fc2), full multi-head attention
        return ModelSpec(name, family, hidden, layers, n_heads, n_kv, head_dim,
                         positive(cfg, "intermediate_size", where), vocab, False, tied)
    inter = positive(cfg, "intermediate_size", where)
    if family == "mixtral":
        return ModelSpec(name, family, hidden, layers, n_heads, n_kv, head_dim, inter, vocab,
                         True, tied, n_experts=positive(cfg, "num_local_experts", where),
                         top_k=positive(cfg, "num_experts_per_tok", where), moe_intermediate=inter)
    if family == "qwen3_moe":
        return _qwen3_moe(cfg, name, where, hidden, layers, n_heads, n_kv, head_dim, inter, vocab, tied)
    if family == "gpt_oss":
        return _gpt_oss(cfg, name, where, hidden, layers, n_heads, n_kv, head_dim, inter, vocab, tied)
    if family in ("llama4", "llama4_text"):
        return _llama4(cfg, name, where, hidden, layers, n_heads, n_kv, head_dim, inter, vocab, tied)
    if family in ("deepseek_v3", "kimi_k2"):  # Kimi-K2 is the DeepSeek-V3 architecture (MLA + MoE)
        return mla_moe(cfg, name, where, family, b, inter)
    return ModelSpec(name, family, hidden, layers, n_heads, n_kv, head_dim, inter, vocab, True, tied)


def _qwen3_moe(cfg: dict[str, Any], name: str, where: str, hidden: int, layers: int, n_heads: int, n_kv: int,
               head_dim: int, inter: int, vocab: int, tied: bool) -> ModelSpec:
    """Qwen3-MoE: every layer MoE (no shared expert) except `mlp_only_layers` and those skipped by
    `decoder_sparse_step` (HF Qwen3MoeDecoderLayer); `intermediate_size` is the dense-layer width."""
    step = int(cfg.get("decoder_sparse_step") or 1)
    mlp_only = set(cfg.get("mlp_only_layers") or [])
    n_dense = sum(1 for i in range(layers) if i in mlp_only or (i + 1) % step)
    return ModelSpec(name, "qwen3_moe", hidden, layers, n_heads, n_kv, head_dim, inter, vocab, True, tied,
                     n_experts=positive(cfg, "num_experts", where), top_k=positive(cfg, "num_experts_per_tok", where),
                     moe_intermediate=positive(cfg, "moe_intermediate_size", where), n_dense_layers=n_dense)


def _gpt_oss(cfg: dict[str, Any], name: str, where: str, hidden: int, layers: int, n_heads: int, n_kv: int,
             head_dim: int, inter: int, vocab: int, tied: bool) -> ModelSpec:
    """gpt-oss: every layer MoE (SwiGLU experts of width intermediate_size, no shared expert);
    `layer_types` alternates sliding_attention (window `sliding_window`) and full_attention; each
    head has a learned attention-sink logit (OpenAI gpt-oss model card)."""
    types = cfg.get("layer_types") or ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)]
    if len(types) != layers:
        raise SpecsimError(f"{where}: field 'layer_types' has {len(types)} entries for {layers} layers")
    return ModelSpec(name, "gpt_oss", hidden, layers, n_heads, n_kv, head_dim, inter, vocab, True, tied,
                     n_experts=positive(cfg, "num_local_experts", where),
                     top_k=positive(cfg, "num_experts_per_tok", where), moe_intermediate=inter,
                     sliding_window=positive(cfg, "sliding_window", where),
                     n_sliding_layers=sum(1 for t in types if t == "sliding_attention"), attention_sinks=True)


def _llama4(cfg: dict[str, Any], name: str, where: str, hidden: int, layers: int, n_heads: int, n_kv: int,
            head_dim: int, inter: int, vocab: int, tied: bool) -> ModelSpec:
    """Llama 4 (text): MoE layers hold `num_local_experts` routed experts of width intermediate_size
    plus one shared expert of the same width (HF Llama4TextMoe); every `interleave_moe_layer_step`-th
    layer is MoE (`moe_layers` when given), the others dense of width intermediate_size_mlp. RoPE
    layers use chunked local attention (attention_chunk_size); every 4th layer is NoPE with global
    attention (`no_rope_layers`: 1 = RoPE + chunked, 0 = NoPE + global)."""
    step = cfg.get("interleave_moe_layer_step")
    step = 1 if step is None else int(step)
    moe_layers = cfg.get("moe_layers") or (list(range(step - 1, layers, step)) if step > 0 else [])
    no_rope = cfg.get("no_rope_layers") or [int((i + 1) % int(cfg.get("no_rope_layer_interval") or 4) != 0)
                                            for i in range(layers)]
    if len(no_rope) != layers:
        raise SpecsimError(f"{where}: field 'no_rope_layers' has {len(no_rope)} entries for {layers} layers")
    chunk = int(cfg.get("attention_chunk_size") or 0)
    local: dict[str, Any] = {"sliding_window": chunk, "n_sliding_layers": sum(1 for r in no_rope if r) if chunk else 0,
                             "chunked_attention": bool(chunk)}
    if not moe_layers:  # a dense llama4_text (interleave_moe_layer_step 0, e.g. MobileLLM-R1)
        return ModelSpec(name, "llama4", hidden, layers, n_heads, n_kv, head_dim,
                         int(cfg.get("intermediate_size_mlp") or inter), vocab, True, tied, **local)
    return ModelSpec(name, "llama4", hidden, layers, n_heads, n_kv, head_dim,
                     int(cfg.get("intermediate_size_mlp") or inter), vocab, True, tied,
                     n_experts=positive(cfg, "num_local_experts", where),
                     top_k=positive(cfg, "num_experts_per_tok", where), n_shared_experts=1, moe_intermediate=inter,
                     n_dense_layers=layers - len(moe_layers), **local)
