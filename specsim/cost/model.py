"""ModelSpec: a transformer's architecture, read from a Hugging Face config.json.

Families: llama, mistral, qwen2, mixtral, phi, qwen (the original QWen), internlm, deepseek_v3,
qwen3, qwen3_moe, gpt_oss, llama4 (and its text-only llama4_text), kimi_k2 (the DeepSeek-V3 architecture).
Only the shapes that decide FLOPs and bytes are kept; `specsim/cost/models/` bundles configs, and
`models/aliases.yaml` maps Hugging Face ids (case-insensitive) to catalogue names.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from specsim.cost.dtypes import kv_bytes
from specsim.errors import SpecsimError
from specsim.files import is_file, parsed_once, read_mapping, require

FAMILIES = ("llama", "mistral", "qwen2", "mixtral", "phi", "qwen", "internlm", "deepseek_v3",
            "qwen3", "qwen3_moe", "gpt_oss", "llama4", "llama4_text", "kimi_k2")


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
    # dense (non-MoE) layers of an MoE model, wherever they sit: leading in DeepSeek/Kimi
    # (first_k_dense_replace), interleaved in Llama-4 Maverick (interleave_moe_layer_step 2: every
    # other layer). Only the count matters to cost; `intermediate` is their MLP width.
    n_dense_layers: int = 0
    # MLA (DeepSeek-V2/V3); kv_lora_rank 0 = ordinary multi-head / grouped-query attention
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    mtp_layers: int = 0
    # Local attention: n_sliding_layers of the n_layers attend to at most sliding_window tokens
    # (gpt-oss: 128-token sliding window on every other layer; Llama-4: 8192-token chunks on 3 of 4
    # layers, chunked_attention = True: a token sees only its own chunk, i.e. position mod 8192 + 1
    # tokens). 0 = every layer attends to the whole context (all models before these; Mistral-7B's
    # sliding window is deliberately not read, to leave its costs unchanged).
    sliding_window: int = 0
    n_sliding_layers: int = 0
    chunked_attention: bool = False
    attention_sinks: bool = False  # gpt-oss: one learned sink logit per head (negligible FLOPs)

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def n_moe_layers(self) -> int:
        return self.n_layers - self.n_dense_layers if self.is_moe else 0

    def check_tp(self, tp: int, where: str = "--tp") -> None:
        """SpecsimError unless tensor parallelism `tp` splits this model as vLLM requires: tp divides the
        attention heads, and the KV heads divide by tp or tp is a multiple of them (replication);
        vllm/config (verify_with_parallel_config) and vllm/model_executor/models/llama.py."""
        if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
            raise SpecsimError(f"{where}: tensor parallelism must be an integer >= 1, got {tp!r}")
        if self.n_heads % tp:
            ok = ", ".join(str(d) for d in range(1, min(self.n_heads, 64) + 1) if not self.n_heads % d)
            raise SpecsimError(f"{where}: tp {tp} does not divide {self.name}'s {self.n_heads} attention heads "
                               f"(use one of {ok})")
        kv = self.n_kv_heads
        if not self.is_mla and (kv % tp if kv >= tp else tp % kv):
            raise SpecsimError(f"{where}: tp {tp} must divide {self.name}'s {kv} KV heads or be a multiple of them")

    @property
    def n_full_attention_layers(self) -> int:
        """Layers whose attention reads the whole context (all of them unless sliding_window is set)."""
        return self.n_layers - (self.n_sliding_layers if self.sliding_window else 0)

    def attended_tokens(self, context_len: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """Tokens one query attends to in (full-attention layers, local layers), for a KV cache of
        context_len tokens: the whole context, and at most sliding_window (upper bound for chunked
        attention). The two are equal for models without local attention."""
        ctx = np.asarray(context_len, dtype=float)
        return ctx, (np.minimum(ctx, self.sliding_window) if self.sliding_window else ctx)

    def kv_bytes_per_sequence(self, context_len: ArrayLike, kv_dtype: str = "bf16", tp: int = 1) -> np.ndarray:
        """KV-cache bytes one sequence of context_len tokens holds on one GPU of `tp`: full-attention
        layers keep every token, local layers at most sliding_window (vLLM's hybrid KV-cache manager).
        Equals context_len * kv_bytes_per_token() when the model has no local attention."""
        full, local = self.attended_tokens(context_len)
        per_layer = self.kv_bytes_per_token(kv_dtype, tp) / self.n_layers
        n_local = self.n_layers - self.n_full_attention_layers
        return per_layer * (self.n_full_attention_layers * full + n_local * local)

    def kv_heads_per_gpu(self, tp: int = 1) -> float:
        """KV heads each GPU caches under tensor parallelism: n_kv_heads / tp, replicated (at least one
        per GPU) when tp exceeds the KV heads (vLLM / Megatron GQA replication)."""
        return max(self.n_kv_heads / tp, 1.0)

    def kv_bytes_per_token(self, kv_dtype: str = "bf16", tp: int = 1) -> float:
        """KV-cache bytes one token adds over all layers on one GPU of `tp` (tp = 1: the whole model).

        GQA/MHA: K and V for each KV head; MLA caches the latent + rope key (DeepSeek-V2 §2.1.2),
        replicated on every GPU. The one implementation of KV bytes in specsim. For models with local
        attention (sliding_window) this counts every layer: the full-context upper bound that
        kv_bytes_per_sequence refines."""
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


@lru_cache(maxsize=1)
def aliases() -> dict[str, str]:
    """Hugging Face ids (lower case) -> catalogue names, from models/aliases.yaml. Instruct/chat
    variants map to their base architecture; not listed by available()."""
    where = catalogue_dir() / "aliases.yaml"
    data = read_mapping(where)
    table: dict[str, str] = {}
    for key, value in data.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise SpecsimError(f"{where}: each entry must be 'hf-org/name: catalogue-name', got {key!r}: {value!r}")
        table[key.lower()] = value.lower()
    return table


def resolve_name(name: str) -> str:
    """The catalogue name for a catalogue name or a Hugging Face id (case-insensitive); the input
    lower-cased when it is neither."""
    key = name.lower()
    if is_file(catalogue_dir() / f"{key}.json"):
        return key
    return aliases().get(key, key)


def load_model(name_or_path: str | Path) -> ModelSpec:
    """A catalogue model by name or Hugging Face id (case-insensitive), or a config.json by path."""
    text = str(name_or_path)
    path = Path(text)
    if is_file(path / "config.json"):
        path = path / "config.json"
    elif not (text.endswith(".json") or is_file(path)):
        path = catalogue_dir() / f"{resolve_name(text)}.json"
        if not is_file(path):
            raise SpecsimError(f"unknown model '{text}' (known: {', '.join(available())}; a Hugging Face id "
                               "listed in specsim/cost/models/aliases.yaml; or a path to a config.json)")
    return _load_model_file(path)


@parsed_once
def _load_model_file(path: Path) -> ModelSpec:
    name = path.stem if path.name != "config.json" else path.parent.name
    cfg = read_mapping(path)
    try:
        return parse_config(cfg, name, str(path))
    except SpecsimError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError, ZeroDivisionError) as exc:
        # an optional field of the wrong type (e.g. a list where a count belongs): bad input, not a crash
        raise SpecsimError(f"{path}: malformed config ({type(exc).__name__}: {exc})") from None


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
    if family == "llama4":  # multimodal wrapper: the language model's shapes are in text_config
        tied_outer = bool(cfg.get("tie_word_embeddings", False))
        cfg = dict(require(cfg, "text_config", where, dict))
        cfg.setdefault("tie_word_embeddings", tied_outer)
        where = f"{where}: text_config"
    hidden = _int(cfg, "hidden_size", where)
    n_heads = _int(cfg, "num_attention_heads", where)
    layers = _int(cfg, "num_hidden_layers", where)
    vocab = _int(cfg, "vocab_size", where)
    n_kv = cfg.get("num_key_value_heads") or n_heads
    head_dim = cfg.get("head_dim") or cfg.get("kv_channels") or hidden // n_heads
    for key, value in (("num_key_value_heads", n_kv), ("head_dim", head_dim)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise SpecsimError(f"{where}: field '{key}' must be an integer > 0, got {value!r}")
    if n_heads % n_kv:
        raise SpecsimError(f"{where}: field 'num_key_value_heads' ({n_kv}) must divide num_attention_heads "
                           f"({n_heads})")
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
    if family == "qwen3_moe":
        return _qwen3_moe(cfg, name, where, hidden, layers, n_heads, int(n_kv), int(head_dim), inter, vocab, tied)
    if family == "gpt_oss":
        return _gpt_oss(cfg, name, where, hidden, layers, n_heads, int(n_kv), int(head_dim), inter, vocab, tied)
    if family in ("llama4", "llama4_text"):
        return _llama4(cfg, name, where, hidden, layers, n_heads, int(n_kv), int(head_dim), inter, vocab, tied)
    if family in ("deepseek_v3", "kimi_k2"):  # Kimi-K2 is the DeepSeek-V3 architecture (MLA + MoE)
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


def _qwen3_moe(cfg: dict[str, Any], name: str, where: str, hidden: int, layers: int, n_heads: int, n_kv: int,
               head_dim: int, inter: int, vocab: int, tied: bool) -> ModelSpec:
    """Qwen3-MoE: every layer MoE (no shared expert) except `mlp_only_layers` and those skipped by
    `decoder_sparse_step` (HF Qwen3MoeDecoderLayer); `intermediate_size` is the dense-layer width."""
    step = int(cfg.get("decoder_sparse_step") or 1)
    mlp_only = set(cfg.get("mlp_only_layers") or [])
    n_dense = sum(1 for i in range(layers) if i in mlp_only or (i + 1) % step)
    return ModelSpec(name, "qwen3_moe", hidden, layers, n_heads, n_kv, head_dim, inter, vocab, True, tied,
                     n_experts=_int(cfg, "num_experts", where), top_k=_int(cfg, "num_experts_per_tok", where),
                     moe_intermediate=_int(cfg, "moe_intermediate_size", where), n_dense_layers=n_dense)


def _gpt_oss(cfg: dict[str, Any], name: str, where: str, hidden: int, layers: int, n_heads: int, n_kv: int,
             head_dim: int, inter: int, vocab: int, tied: bool) -> ModelSpec:
    """gpt-oss: every layer MoE (SwiGLU experts of width intermediate_size, no shared expert);
    `layer_types` alternates sliding_attention (window `sliding_window`) and full_attention; each
    head has a learned attention-sink logit (OpenAI gpt-oss model card)."""
    types = cfg.get("layer_types") or ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)]
    if len(types) != layers:
        raise SpecsimError(f"{where}: field 'layer_types' has {len(types)} entries for {layers} layers")
    return ModelSpec(name, "gpt_oss", hidden, layers, n_heads, n_kv, head_dim, inter, vocab, True, tied,
                     n_experts=_int(cfg, "num_local_experts", where),
                     top_k=_int(cfg, "num_experts_per_tok", where), moe_intermediate=inter,
                     sliding_window=_int(cfg, "sliding_window", where),
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
                     n_experts=_int(cfg, "num_local_experts", where),
                     top_k=_int(cfg, "num_experts_per_tok", where), n_shared_experts=1, moe_intermediate=inter,
                     n_dense_layers=layers - len(moe_layers), **local)
