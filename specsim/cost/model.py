"""ModelSpec: a transformer's architecture, read from a Hugging Face config.json.

Families: llama, mistral, qwen2, mixtral, phi, qwen (the original QWen), internlm, deepseek_v3.
Only the shapes that decide FLOPs and bytes are kept; `specsim/cost/models/` bundles configs.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from specsim.cost.dtypes import kv_bytes
from specsim.errors import SpecsimError
from specsim.files import read_mapping, require

FAMILIES = ("llama", "mistral", "qwen2", "mixtral", "phi", "qwen", "internlm", "deepseek_v3")


@dataclass(frozen=True)
class ModelSpec:
    name: str
    family: str
    hidden: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    intermediate: int  # width of one MLP branch (dense layers)
    vocab: int
    gated_mlp: bool = True
    tied_embeddings: bool = False
    # MoE (0 experts = dense model)
    n_experts: int = 0
    top_k: int = 0
    n_shared_experts: int = 0
    moe_intermediate: int = 0
    n_dense_layers: int = 0  # leading dense layers before the MoE ones (DeepSeek first_k_dense_replace)
    # MLA (DeepSeek-V2/V3); kv_lora_rank 0 = ordinary multi-head / grouped-query attention
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    mtp_layers: int = 0

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def n_moe_layers(self) -> int:
        return self.n_layers - self.n_dense_layers if self.is_moe else 0

    def kv_heads_per_gpu(self, tp: int = 1) -> float:
        """KV heads each GPU caches under tensor parallelism: n_kv_heads / tp, replicated (at least one
        per GPU) when tp exceeds the KV heads (vLLM / Megatron GQA replication)."""
        return max(self.n_kv_heads / tp, 1.0)

    def kv_bytes_per_token(self, kv_dtype: str = "bf16", tp: int = 1) -> float:
        """KV-cache bytes one token adds over all layers on one GPU of `tp` (tp = 1: the whole model).

        GQA/MHA: K and V for each KV head; MLA caches the latent + rope key (DeepSeek-V2 §2.1.2),
        replicated on every GPU. The one implementation of KV bytes in specsim."""
        b = kv_bytes(kv_dtype)
        if self.is_mla:
            return self.n_layers * (self.kv_lora_rank + self.qk_rope_head_dim) * b
        return 2 * self.n_layers * self.kv_heads_per_gpu(tp) * self.head_dim * b

    def param_counts(self) -> dict[str, float]:
        """Parameters by part: attention, dense MLP, experts (all), embeddings, lm head."""
        h = self.hidden
        if self.is_mla:
            nh = self.n_heads
            qk = self.qk_nope_head_dim + self.qk_rope_head_dim
            q = (h * self.q_lora_rank + self.q_lora_rank * nh * qk) if self.q_lora_rank else h * nh * qk
            kv = h * (self.kv_lora_rank + self.qk_rope_head_dim)
            kv += self.kv_lora_rank * nh * (self.qk_nope_head_dim + self.v_head_dim)
            attn = q + kv + nh * self.v_head_dim * h
        else:
            attn = h * (self.n_heads + 2 * self.n_kv_heads) * self.head_dim
            attn += self.n_heads * self.head_dim * h
        branches = 3 if self.gated_mlp else 2
        dense_mlp = branches * h * self.intermediate
        n_dense = self.n_dense_layers if self.is_moe else self.n_layers
        expert = branches * h * self.moe_intermediate
        experts = self.n_moe_layers * (self.n_experts + self.n_shared_experts) * expert
        router = self.n_moe_layers * h * self.n_experts
        embed = self.vocab * h
        return {
            "attention": self.n_layers * attn,
            "dense_mlp": n_dense * dense_mlp,
            "experts": experts + router,
            "embedding": embed,
            "lm_head": 0.0 if self.tied_embeddings else embed,
        }

    def n_params(self) -> float:
        return float(sum(self.param_counts().values()))

    def n_active_params(self) -> float:
        """Parameters one token touches (MoE: top-k routed + shared experts)."""
        c = self.param_counts()
        if not self.is_moe:
            return self.n_params()
        branches = 3 if self.gated_mlp else 2
        per_token = (self.top_k + self.n_shared_experts) * branches * self.hidden * self.moe_intermediate
        return c["attention"] + c["dense_mlp"] + self.n_moe_layers * per_token + c["embedding"] + c["lm_head"]




def catalogue_dir() -> Path:
    return Path(str(resources.files("specsim.cost"))) / "models"


def available() -> list[str]:
    return sorted(p.stem for p in catalogue_dir().glob("*.json"))


def load_model(name_or_path: str | Path) -> ModelSpec:
    """A catalogue model by name (case-insensitive), or a config.json by path."""
    text = str(name_or_path)
    path = Path(text)
    if path.is_dir() and (path / "config.json").is_file():
        path = path / "config.json"
    elif not (text.endswith(".json") or path.is_file()):
        path = catalogue_dir() / f"{text.lower()}.json"
        if not path.is_file():
            raise SpecsimError(f"unknown model '{text}' (known: {', '.join(available())}; or a path to a config.json)")
    name = path.stem if path.name != "config.json" else path.parent.name
    return parse_config(read_mapping(path), name, str(path))


def _int(cfg: dict[str, Any], key: str, where: str) -> int:
    value = require(cfg, key, where, int)
    if value <= 0:
        raise SpecsimError(f"{where}: field '{key}' must be > 0, got {value}")
    return int(value)


def parse_config(cfg: dict[str, Any], name: str, where: str) -> ModelSpec:
    """ModelSpec from a Hugging Face config.json mapping; errors name the file and the field."""
    family = cfg.get("model_type")
    if family not in FAMILIES:
        raise SpecsimError(f"{where}: field 'model_type' is {family!r}; supported: {', '.join(FAMILIES)}")
    hidden = _int(cfg, "hidden_size", where)
    n_heads = _int(cfg, "num_attention_heads", where)
    layers = _int(cfg, "num_hidden_layers", where)
    vocab = _int(cfg, "vocab_size", where)
    n_kv = cfg.get("num_key_value_heads") or n_heads
    head_dim = cfg.get("head_dim") or cfg.get("kv_channels") or hidden // n_heads
    tied = bool(cfg.get("tie_word_embeddings", False))
    if family == "qwen":  # QWen v1: intermediate_size counts both gated branches (w1, w2)
        return ModelSpec(name, family, hidden, layers, n_heads, n_heads, int(head_dim),
                         _int(cfg, "intermediate_size", where) // 2, vocab, True, tied)
    if family == "phi":  # phi-2: plain GELU MLP (fc1, fc2), full multi-head attention
        return ModelSpec(name, family, hidden, layers, n_heads, int(n_kv), int(head_dim),
                         _int(cfg, "intermediate_size", where), vocab, False, tied)
    inter = _int(cfg, "intermediate_size", where)
    if family == "mixtral":
        return ModelSpec(name, family, hidden, layers, n_heads, int(n_kv), int(head_dim), inter, vocab,
                         True, tied, n_experts=_int(cfg, "num_local_experts", where),
                         top_k=_int(cfg, "num_experts_per_tok", where), moe_intermediate=inter)
    if family == "deepseek_v3":
        return ModelSpec(
            name, family, hidden, layers, n_heads, n_heads,
            _int(cfg, "qk_nope_head_dim", where) + _int(cfg, "qk_rope_head_dim", where),
            inter, vocab, True, tied,
            n_experts=_int(cfg, "n_routed_experts", where),
            top_k=_int(cfg, "num_experts_per_tok", where),
            n_shared_experts=int(cfg.get("n_shared_experts") or 0),
            moe_intermediate=_int(cfg, "moe_intermediate_size", where),
            n_dense_layers=int(cfg.get("first_k_dense_replace") or 0),
            q_lora_rank=int(cfg.get("q_lora_rank") or 0),
            kv_lora_rank=_int(cfg, "kv_lora_rank", where),
            qk_nope_head_dim=_int(cfg, "qk_nope_head_dim", where),
            qk_rope_head_dim=_int(cfg, "qk_rope_head_dim", where),
            v_head_dim=_int(cfg, "v_head_dim", where),
            mtp_layers=int(cfg.get("num_nextn_predict_layers") or 0),
        )
    return ModelSpec(name, family, hidden, layers, n_heads, int(n_kv), int(head_dim), inter, vocab,
                     True, tied)
