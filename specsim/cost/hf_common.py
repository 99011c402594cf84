"""What every config.json parser shares: the common fields, positive integers, DeepSeek-V3's MLA + MoE
fields, and the checkpoint's weight formats (its quantization_config) as a precision spec."""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from specsim.cost.dtypes import PARTS, WEIGHT_BYTES, Precision
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


# --- the context window -----------------------------------------------------------------------------------

#: The config keys vLLM reads a model's length from, smallest wins (vllm-project/vllm@0052a5b8
#: vllm/config/model.py `_get_and_verify_max_len`, `possible_keys`).
_MAX_LEN_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
                 "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len")


def context_window(cfg: dict[str, Any]) -> int:
    """The longest context (prompt + output) vLLM serves the model at, from its (text) config, as vLLM's
    `_get_and_verify_max_len` derives `max_model_len` (vllm-project/vllm@0052a5b8 vllm/config/model.py): the
    smallest of `_MAX_LEN_KEYS` (`model_max_length` when set), then RoPE scaling other than su / longrope /
    llama3 multiplies it by its factor, from `original_max_position_embeddings` for yarn (DeepSeek-V3: 4,096 x 40
    = 163,840). 0 when the config states no length (vLLM then assumes 2,048; specsim checks nothing)."""
    lengths = [v for k in _MAX_LEN_KEYS if isinstance(v := cfg.get(k), int | float) and not isinstance(v, bool)]
    if not lengths:
        return 0
    derived = float(cfg["model_max_length"]) if isinstance(cfg.get("model_max_length"), int) else float(min(lengths))
    rope = cfg.get("rope_parameters") or cfg.get("rope_scaling")
    if isinstance(rope, dict) and "gemma3" not in str(cfg.get("model_type")):  # Gemma3's length is scaled already
        params = list(rope.values()) if rope and all(isinstance(v, dict) for v in rope.values()) else [rope]
        factor = 1.0
        for rp in params:
            kind = str(rp.get("rope_type", rp.get("type", "default")))
            if kind not in ("su", "longrope", "llama3"):
                factor = float(rp.get("factor", factor))
                if kind == "yarn":
                    derived = float(rp.get("original_max_position_embeddings", derived))
        derived *= factor
    return int(derived)


# --- the checkpoint's weight formats ---------------------------------------------------------------------

#: The quant_method values specsim prices, each a name vLLM accepts (vllm-project/vllm@05d90956
#: vllm/model_executor/layers/quantization/__init__.py QUANTIZATION_METHODS); any other is refused.
PRICED_METHODS = ("fp8", "fbgemm_fp8", "modelopt", "modelopt_fp4", "compressed-tensors", "awq", "awq_marlin",
                  "gptq", "gptq_marlin", "mxfp4")
#: ModelOpt quant_algo -> weight format: vLLM's ModelOpt QUANT_ALGOS (vllm-project/vllm@00155cde
#: modelopt.py) plus TensorRT-LLM's W4A8_AWQ. W4A16_NVFP4 is NVFP4 weights on bf16 activations (priced at
#: nvfp4's bytes); MXFP8 one E8M0 scale per 32 fp8 values (priced as fp8: its 3% of scales left out).
_MODELOPT_ALGOS = {"FP8": "fp8", "FP8_PER_CHANNEL_PER_TOKEN": "fp8", "FP8_PB_WO": "fp8_block", "NVFP4": "nvfp4",
                   "W4A16_NVFP4": "nvfp4", "MXFP8": "fp8", "W4A8_AWQ": "w4a8"}


class Quant(NamedTuple):
    """What a quantization config says: the format of weights it does not list (None: unquantized), the
    modules it lists with their formats ("bf16": left unquantized), the lm_head's format when unlisted, and
    a short label of the method ("modelopt NVFP4")."""

    default: str | None
    listed: list[tuple[str, str]]
    head: str
    label: str


def _names(q: dict[str, Any], *keys: str) -> list[str]:
    out: list[str] = []
    for key in keys:
        value = q.get(key)
        out += [str(v) for v in value] if isinstance(value, list) else []
    return out


def _fp8(q: dict[str, Any]) -> Quant:
    """vLLM Fp8Config: every Linear and fused MoE layer but `ignored_layers` (HF: `modules_to_not_convert`); the
    lm_head (a ParallelLMHead, not a LinearBase) stays bf16. `weight_block_size` (DeepSeek-V3: [128, 128]):
    block-scaled. NVIDIA's DeepSeek-V4 NVFP4 adds `moe_quant_algo` NVFP4 on the routed experts; its `ignore`
    lists what that pass skipped (left fp8)."""
    block = q.get("weight_block_size")
    fmt = "fp8_block" if block else "fp8"
    listed = [(n, "bf16") for n in _names(q, "ignored_layers", "modules_to_not_convert")]
    label = "fp8 block" if block else "fp8"
    moe = str(q.get("moe_quant_algo") or "").upper()
    if moe:
        listed.append(("experts", _modelopt_format(moe, "moe_quant_algo")))
        label += f" + {moe} experts"
    else:
        listed += [(n, "bf16") for n in _names(q, "ignore")]
    return Quant(fmt, listed, "bf16", label)


def _fbgemm_fp8(q: dict[str, Any]) -> Quant:
    """vLLM FBGEMMFp8Config (Llama-3.1-405B-FP8): per-channel fp8 Linear layers but `modules_to_not_convert`."""
    return Quant("fp8", [(n, "bf16") for n in _names(q, "modules_to_not_convert")], "bf16", "fbgemm fp8")


def _mxfp4(q: dict[str, Any]) -> Quant:
    """vLLM Mxfp4Config (gpt-oss): only the fused MoE experts are MXFP4; Linear layers stay unquantized."""
    return Quant(None, [("experts", "mxfp4")] + [(n, "bf16") for n in _names(q, "modules_to_not_convert")],
                 "bf16", "mxfp4 experts")


def _awq(q: dict[str, Any]) -> Quant:
    """AutoAWQ (vLLM AWQConfig): 4-bit weight-only on the decoder's Linear layers but `modules_to_not_convert`."""
    if q.get("bits", q.get("w_bit")) != 4:
        raise ValueError(f"AWQ with {q.get('bits', q.get('w_bit'))} bits")
    return Quant("int4", [(n, "bf16") for n in _names(q, "modules_to_not_convert")], "bf16", "AWQ 4-bit")


def _gptq(q: dict[str, Any]) -> Quant:
    """GPTQ (vLLM GPTQConfig): 4- or 8-bit weight-only Linear layers; the lm_head only with `lm_head: true`."""
    bits = q.get("bits")
    if bits not in (4, 8):
        raise ValueError(f"GPTQ with {bits} bits")
    fmt = "int4" if bits == 4 else "int8"
    return Quant(fmt, [], fmt if q.get("lm_head") else "bf16", f"GPTQ {bits}-bit")


def _modelopt_format(algo: str, what: str) -> str:
    if algo not in _MODELOPT_ALGOS:
        raise ValueError(f"{what} {algo}")
    return _MODELOPT_ALGOS[algo]


def _modelopt(q: dict[str, Any]) -> Quant:
    """NVIDIA ModelOpt, as vLLM's ModelOptQuantConfigBase.from_config reads it: hf_quant_config.json's
    {"quantization": {"quant_algo", "exclude_modules", "quantized_layers"}} or config.json's {"quant_algo",
    "ignore"}. MIXED_PRECISION: each of `quantized_layers` in its own quant_algo, the rest unquantized; else
    every Linear, MoE and the lm_head in quant_algo but the excluded modules."""
    body = q["quantization"] if isinstance(q.get("quantization"), dict) else q
    algo = str(body.get("quant_algo") or "").upper()
    excluded = [(n, "bf16") for n in _names(body, "exclude_modules", "ignore")]
    if algo == "MIXED_PRECISION":
        layers = body.get("quantized_layers") or {}
        listed = [(str(n), _modelopt_format(str(v.get("quant_algo", "")).upper(), "quant_algo"))
                  for n, v in layers.items() if isinstance(v, dict)]
        return Quant(None, listed + excluded, "bf16", "modelopt mixed")
    fmt = _modelopt_format(algo, "quant_algo")
    return Quant(fmt, excluded, fmt, f"modelopt {algo}")


def _ct_format(group: dict[str, Any], fmt: str) -> str:
    """A compressed-tensors scheme's weight format: float 8 (block strategy: block-scaled) fp8; float 4 nvfp4
    (group 16) or mxfp4 (group 32 or an mxfp4 format); int 8 int8; int 4 int4, or w4a8 over fp8 activations."""
    w = group.get("weights") or {}
    acts = group.get("input_activations") or {}
    bits, kind = w.get("num_bits"), str(w.get("type", "int"))
    if kind == "float" and bits == 8:
        return "fp8_block" if w.get("strategy") == "block" else "fp8"
    if kind == "float" and bits == 4:
        return "mxfp4" if "mxfp4" in fmt or w.get("group_size") == 32 else "nvfp4"
    if kind == "int" and bits == 8:
        return "int8"
    if kind == "int" and bits == 4:
        return "w4a8" if acts.get("type") == "float" and acts.get("num_bits") == 8 else "int4"
    raise ValueError(f"compressed-tensors weights of {bits} bits, type {kind}")


def _compressed_tensors(q: dict[str, Any]) -> Quant:
    """llm-compressor's compressed-tensors: each config group's weight scheme on its targets (a class name such
    as "Linear": every such layer; "FusedMoE": the routed experts; else module names or "re:" patterns), the
    `ignore` list unquantized."""
    default: str | None = None
    listed: list[tuple[str, str]] = []
    for group in (q.get("config_groups") or {}).values():
        if not isinstance(group, dict):
            continue
        fmt = _ct_format(group, str(group.get("format") or q.get("format") or ""))
        for target in group.get("targets") or ["Linear"]:
            if target == "FusedMoE":  # vLLM's fused experts as a class
                listed.append(("experts", fmt))
            elif re.fullmatch(r"[A-Z]\w*", str(target)):  # a module class (Linear), not a name
                default = default or fmt
            else:
                listed.append((str(target), fmt))
    if default is None and not listed:
        raise ValueError("compressed-tensors without config_groups")
    formats = sorted({f for f in [default, *(f for _, f in listed)] if f})
    listed += [(n, "bf16") for n in _names(q, "ignore")]
    return Quant(default, listed, default or "bf16", f"compressed-tensors {'/'.join(formats)}")


_READERS = {"fp8": _fp8, "fbgemm_fp8": _fbgemm_fp8, "mxfp4": _mxfp4, "awq": _awq, "awq_marlin": _awq,
            "gptq": _gptq, "gptq_marlin": _gptq, "modelopt": _modelopt, "modelopt_fp4": _modelopt,
            "compressed-tensors": _compressed_tensors}


def read_quantization(q: dict[str, Any], model: str, where: str) -> Quant:
    """The Quant of a quantization_config (or of ModelOpt's hf_quant_config.json: quant_method "modelopt");
    SpecsimError naming the method and the model when specsim does not price it."""
    method = str(q.get("quant_method") or ("modelopt" if "quantization" in q else "")).lower()
    if method not in _READERS:
        raise SpecsimError(f"{where}: {model}'s quantization method '{method}' is not priced by specsim "
                           f"(it prices {', '.join(PRICED_METHODS)}); give --weight-dtype explicitly")
    try:
        return _READERS[method](q)
    except ValueError as exc:
        raise SpecsimError(f"{where}: {model}'s quantization ({method}: {exc}) is not priced by specsim; "
                           "give --weight-dtype explicitly") from None


# --- modules to parts -------------------------------------------------------------------------------------

#: A listed module name's part, by the first rule it matches (names as HF / vLLM / ModelOpt spell them;
#: regex entries "re:..." read as text). None: a piece specsim does not price apart (norms, routers,
#: embeddings: never quantized by these methods; the vision tower; MTP's small eh_proj).
_SKIP = re.compile(r"vision|visual|mm_projector|multi_modal|patch_merge|embed|wte|norm|e_score|router|conv1d|"
                   r"shared_head|eh_proj|(^|\.)gate$|shared_expert_gate|a_log|dt_bias")
_RULES = (("mtp", re.compile(r"(^|[.*])mtp([.*_]|$)")), ("head", re.compile(r"lm_head|(^|[.*])head$")),
          ("shared", re.compile(r"shared_expert")), ("experts", re.compile(r"expert")),
          ("attention", re.compile(r"attn|attention|index|(^|\.)(q|k|v|o|qkv|q_a|q_b|kv_a|kv_b)_proj|"
                                   r"mixer\.(in|out)_proj")),
          ("dense", re.compile(r"mlp|feed_forward|ffn|(gate|up|down)_proj|fc[12]|\.w[123]$")))
_LAYER = re.compile(r"layers\.(\d+)")
_WHOLE_LAYER = re.compile(r".*layers\.\d+\.?\*?")
#: Sub-modules by the text that names them, tried in order (in_proj_qkv is a linear mixer's input).
_SUBS = {"attention": (("in", "in_proj"), ("out", "out_proj"), ("kv_a", "kv_a"), ("kv_b", "kv_b"),
                       ("q_a", "q_a_"), ("q_b", "q_b_"), ("index", "index"), ("qkv", "qkv"), ("q", "q_proj"),
                       ("k", "k_proj"), ("v", "v_proj"), ("o", "o_proj")),
         "ffn": (("gate_up", "gate_up"), ("gate", "gate_proj"), ("gate", ".w1"), ("up", "up_proj"),
                 ("up", ".w3"), ("up", "fc1"), ("down", "down_proj"), ("down", ".w2"), ("down", "fc2"))}


def _shares(spec: ModelSpec) -> dict[str, float]:
    """Each sub-module's share of its layer's parameters (attention: MLA or GQA, and a linear mixer's in / out
    projections; FFN: gate, up, down), from the model's shapes (ModelSpec._attention_params' terms)."""
    h, nh = spec.hidden, spec.n_heads
    branches = 3 if spec.gated_mlp else 2
    out = {"gate_up": 2 / branches, "gate": 1 / branches, "up": 1 / branches, "down": 1 / branches}
    if spec.is_mla:
        qk = spec.qk_nope_head_dim + spec.qk_rope_head_dim
        index = spec.q_lora_rank * spec.index_heads * spec.index_dim + h * (spec.index_dim + spec.index_heads)
        sizes = {"q_a": h * spec.q_lora_rank, "q_b": (spec.q_lora_rank or h) * nh * qk,
                 "kv_a": h * (spec.kv_lora_rank + spec.qk_rope_head_dim),
                 "kv_b": spec.kv_lora_rank * nh * (spec.qk_nope_head_dim + spec.v_head_dim),
                 "o": nh * spec.v_head_dim * h, "index": index if spec.index_heads else 0}
        sizes["q"] = sizes["q_b"]
    else:
        q = h * nh * spec.head_dim * (2 if spec.attn_output_gate else 1)
        kv = h * spec.n_kv_heads * spec.head_dim
        sizes = {"q": q, "k": kv, "v": kv, "o": nh * spec.head_dim * h}
        sizes["qkv"] = q + 2 * kv
    total = sum(v for k, v in sizes.items() if k not in ("q" if spec.is_mla else "qkv",))
    out.update({k: v / total for k, v in sizes.items()})
    if spec.n_linear_layers:
        i, o = h * spec.linear_in_width, spec.linear_v_heads * spec.linear_v_dim * h
        out.update({"in": i / (i + o), "out": o / (i + o)})
    return out


def _places(name: str, spec: ModelSpec, n_blocks: int) -> list[tuple[str, int | None, str]]:
    """(part, layer index or None for every layer, sub-module or "" for the whole) a listed name covers."""
    text = name.lower().removeprefix("re:").replace("\\", "")
    if _SKIP.search(text):
        return []
    named = next((p for p, rule in _RULES[:2] if rule.search(text)), None)  # MTP ("mtp.layers.0*") or the head
    if named:
        return [(named, None, "")]
    found = _LAYER.search(text)
    layer = int(found.group(1)) if found else None
    if layer is not None and layer >= n_blocks:  # DeepSeek / GLM number their MTP layers after the decoder's
        return [("mtp", None, "")] if _WHOLE_LAYER.fullmatch(text) else []
    if layer is not None and _WHOLE_LAYER.fullmatch(text):  # a whole layer: its mixer and its FFN
        return [("attention", layer, ""), ("dense" if layer < spec.n_dense_layers or not spec.is_moe else
                                           "experts", layer, "")]
    part = next((p for p, rule in _RULES[2:] if rule.search(text)), None)
    if part in (None, "shared"):  # shared experts are priced with the routed ones (ops: part "experts")
        return []
    if re.search(r"[(|]", text):  # a regex alternation ("mlp.(gate|up|down)_proj") names whole modules
        return [(str(part), layer, "")]
    subs = _SUBS["attention" if part == "attention" else "ffn"]
    sub = next((key for key, word in subs if word in text), "")
    return [(str(part), layer, sub)]


def _coverage(q: Quant, spec: ModelSpec, n_blocks: int) -> dict[str, dict[str, float]]:
    """Per part, the share of its weights each listed format covers (whole-part entries cover every layer)."""
    layers = {"attention": spec.n_attn_layers + spec.n_linear_layers,
              "dense": spec.n_dense_layers if spec.is_moe else spec.n_layers, "experts": spec.n_moe_layers,
              "head": 1, "mtp": 1}
    shares = _shares(spec)
    cover: dict[str, dict[str, float]] = {p: {} for p in PARTS}
    seen: set[tuple[str, int | None, str]] = set()
    for name, fmt in q.listed:
        for part, layer, sub in _places(name, spec, n_blocks):
            if (part, layer, sub) in seen or not layers[part]:
                continue
            seen.add((part, layer, sub))
            share = shares.get(sub, 0.0) if sub else 1.0
            cover[part][fmt] = cover[part].get(fmt, 0.0) + share * (1 if layer is not None else layers[part])
    for part, formats in cover.items():  # entries that overlap (a whole layer and its q_proj) cover it once
        denominator = max(sum(formats.values()), layers[part]) or 1.0
        cover[part] = {f: v / denominator for f, v in formats.items()}
    return cover


def checkpoint_precision(q: dict[str, Any] | None, spec: ModelSpec, n_blocks: int, where: str,
                         expert_dtype: object = None) -> tuple[str, str]:
    """(precision spec, method label) of a checkpoint: per part (dtypes.PARTS) the format that covers most of
    its weights under its quantization config (ties: the wider format); the lm_head alone decides the head (its
    GEMM reads the whole matrix every step; the embedding reads a row per token); shared experts follow the
    routed ones. Parts the model lacks take its commonest format. No config: bf16; DeepSeek-V4's `expert_dtype`
    fp4 puts MXFP4-style experts (ue8m0 scales) over the rest."""
    fp4 = expert_dtype == "fp4"
    if not isinstance(q, dict):
        return ("bf16,experts=mxfp4", "fp4 experts") if fp4 else ("bf16", "")
    quant = read_quantization(q, spec.name, where)
    if fp4:
        quant = quant._replace(listed=[*quant.listed, ("experts", "mxfp4")], label=f"{quant.label} + fp4 experts")
    cover = _coverage(quant, spec, n_blocks)
    formats: dict[str, str] = {}
    for part in PARTS:
        given = cover[part]
        rest = (quant.head if part == "head" else quant.default) or "bf16"
        share = {**given, rest: given.get(rest, 0.0) + max(0.0, 1.0 - sum(given.values()))}
        formats[part] = max(share, key=lambda f: (round(share[f], 9), WEIGHT_BYTES[f]))
    used = [formats[p] for p in spec.parts]
    common = max(dict.fromkeys(used), key=used.count)
    return Precision(**{p: formats[p] if p in spec.parts else common for p in PARTS}).spec, quant.label
