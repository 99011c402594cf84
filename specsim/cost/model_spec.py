"""ModelSpec: the shapes of a transformer that decide its FLOPs and bytes (read from a config.json by
`hf_config`). A model is n_layers FFN sublayers (dense MLP or MoE) and its token mixers: full attention
(GQA / MHA, or MLA) on some layers, linear attention or an SSM on others (hybrid models), with sparse
attention, sliding windows or compressed KV where the architecture has them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from specsim.cost.dtypes import PARTS, Precision, kv_bytes
from specsim.cost.layout import Layout, as_layout
from specsim.errors import SpecsimError


@dataclass(frozen=True)
class ModelSpec:
    name: str
    family: str
    hidden: int
    n_layers: int  # FFN sublayers (dense MLP or MoE); also the attention layers unless set below
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
    # the shared experts' total width where the config states it apart (Qwen3.5 / Qwen3-Next
    # shared_expert_intermediate_size, Nemotron-3 moe_shared_expert_intermediate_size); 0: n_shared x moe_intermediate
    shared_intermediate: int = 0
    # latent MoE (Nemotron-3 Super moe_latent_size, Kimi-K3 routed_expert_hidden_size): the routed experts
    # work at this width, behind a down-projection from and an up-projection to the hidden size; 0: hidden
    moe_latent: int = 0
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
    # Local attention: n_sliding_layers of the attention layers attend to at most sliding_window tokens
    # (gpt-oss: 128-token sliding window on every other layer; Llama-4: 8192-token chunks on 3 of 4
    # layers, chunked_attention = True: a token sees only its own chunk, i.e. position mod 8192 + 1
    # tokens). 0 = every layer attends to the whole context (all models before these; Mistral-7B's
    # sliding window is deliberately not read, to leave its costs unchanged).
    sliding_window: int = 0
    n_sliding_layers: int = 0
    chunked_attention: bool = False
    attention_sinks: bool = False  # gpt-oss: one learned sink logit per head (negligible FLOPs)
    # gated attention (Qwen3-Next / Qwen3.5 attn_output_gate): q_proj also emits a sigmoid gate per head
    attn_output_gate: bool = False
    # Token mixers of hybrid models: full attention on n_attention_layers (0: every layer not linear), a
    # linear mixer on n_linear_layers: its recurrent state is linear_v_heads x linear_k_dim x linear_v_dim
    # (Mamba-2: heads x head_dim x d_state, linear_k_dim = d_state) in linear_state_bytes per element
    # (fp32: Qwen3.5 mamba_ssm_dtype, Nemotron-H mamba_ssm_cache_dtype), plus a short causal convolution
    # of linear_conv taps. Nemotron-H's blocks are one sublayer each (M, -, E, *): n_layers counts its FFN
    # blocks, n_attention_layers and n_linear_layers its mixers.
    n_attention_layers: int = 0
    n_linear_layers: int = 0
    linear_kind: str = ""  # gdn: Gated DeltaNet (Qwen3-Next, Qwen3.5); kda: Kimi Delta Attention; mamba2 (Nemotron-H)
    linear_k_heads: int = 0
    linear_v_heads: int = 0
    linear_k_dim: int = 0
    linear_v_dim: int = 0
    linear_conv: int = 0
    linear_groups: int = 0  # Mamba-2 n_groups (B, C shared per group)
    linear_state_bytes: float = 4.0
    # Sparse attention (DeepSeek Sparse Attention: DeepSeek-V3.2, GLM-5.x; MiniMax-M3's MSA): on
    # n_sparse_layers attention layers a lightning indexer of index_heads x index_dim scores every cached
    # token for each query token, and attention reads only the sparse_topk best (DeepSeek-V3.2 tech report:
    # 2,048). The indexer runs on n_index_layers of them (GLM-5.2 shares one layer's top-k with the next
    # three: 21 of 78; 0: all sparse layers); its keys are cached at index_key_bytes per token per layer
    # (DeepSeek-V3.2-Exp inference/model.py: fp8 keys + one fp32 scale per 128).
    n_sparse_layers: int = 0
    index_heads: int = 0
    index_dim: int = 0
    sparse_topk: int = 0
    n_index_layers: int = 0
    index_key_bytes: float = 0.0
    # Compressed attention (DeepSeek-V4): layers whose KV is pooled every `ratio` tokens, as (ratio, layers)
    # pairs; each also keeps a sliding window of raw tokens (sliding_window) and, when its ratio is at most
    # compressed_index_ratio, an indexer picks sparse_topk compressed entries (CSA); coarser layers attend
    # to every entry (HCA).
    compressed_layers: tuple[tuple[int, int], ...] = ()
    compressed_index_ratio: int = 0
    o_lora_rank: int = 0  # DeepSeek-V4's grouped low-rank output projection: o_groups x o_lora_rank
    o_groups: int = 0
    # the checkpoint's own weight formats per component (quantization_config): dtypes.Precision's spec, the
    # method that says so ("modelopt NVFP4", "fp8 block 128x128"; "": no quantization_config), and the Hugging
    # Face id it was loaded as (a catalogue name: its file's _specsim_source)
    native_precision: str = "bf16"
    native_method: str = ""
    checkpoint: str = ""
    # the longest context (prompt + output) it serves, as vLLM derives max_model_len from config.json
    # (hf_common.context_window); 0: the config states none
    max_context_tokens: int = 0

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def is_hybrid(self) -> bool:
        return self.n_linear_layers > 0

    @property
    def n_moe_layers(self) -> int:
        return self.n_layers - self.n_dense_layers if self.is_moe else 0

    @property
    def n_attn_layers(self) -> int:
        """Layers whose token mixer is attention (softmax over a KV cache)."""
        return self.n_attention_layers or self.n_layers - self.n_linear_layers

    @property
    def shared_width(self) -> int:
        """Total width of the shared experts of one MoE layer."""
        return self.shared_intermediate or self.n_shared_experts * self.moe_intermediate

    @property
    def expert_hidden(self) -> int:
        """The width the routed experts read and write (the latent of a latent MoE, else hidden)."""
        return self.moe_latent or self.hidden

    @property
    def parts(self) -> tuple[str, ...]:
        """The parts (dtypes.PARTS) whose weight format this model's cost depends on: attention and head always,
        dense MLPs, routed experts and MTP layers where it has them."""
        has = {"dense": not self.is_moe or self.n_dense_layers > 0, "experts": self.is_moe, "mtp": self.mtp_layers > 0}
        return tuple(p for p in PARTS if has.get(p, True))

    def resolve_precision(self, spec: str) -> str:
        """A weight precision spec with `native` replaced by this checkpoint's own formats, spelt canonically
        (dtypes.Precision.spec): what ops_core takes (it refuses an unresolved `native`)."""
        return Precision.parse(spec, self.native_precision).spec

    def precision_label(self, spec: str = "native") -> str:
        """What a weight precision spec prices on this model, short enough for an 80-column table: the commonest
        format of its parts, then the parts that differ ("bf16, experts nvfp4"), and for `native` the checkpoint's
        own method ("bf16, experts nvfp4 (as shipped: modelopt NVFP4)"); at most 76 characters."""
        p = Precision.parse(spec, self.native_precision)
        formats = [p.of(part) for part in self.parts]
        base = max(dict.fromkeys(formats), key=formats.count)
        text = ", ".join([base] + [f"{part} {f}" for part, f in zip(self.parts, formats, strict=True) if f != base])
        if str(spec).strip().lower() != "native":
            return text
        return f"{text} (as shipped{': ' + self.native_method if self.native_method else ''})"

    def check_context(self, tokens: ArrayLike, what: str = "context") -> None:
        """SpecsimError when a context of `tokens` (prompt + output, or a KV length; an array: its largest)
        exceeds the model's window (max_context_tokens, as vLLM refuses a longer max_model_len); nothing to
        check when the config states no window."""
        values = np.asarray(tokens, dtype=float)
        most = float(np.nanmax(values)) if values.size and not np.isnan(values).all() else 0.0
        if self.max_context_tokens and most > self.max_context_tokens:
            raise SpecsimError(f"{self.name}: {what} {most:,.0f} tokens exceeds its {self.max_context_tokens:,}-token "
                               "window")

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
        """Attention layers whose attention reads the whole context (all of them unless sliding_window is set)."""
        return self.n_attn_layers - (self.n_sliding_layers if self.sliding_window else 0)

    def attended_tokens(self, context_len: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """Tokens one query attends to in (full-attention layers, local layers), for a KV cache of
        context_len tokens: the whole context, and at most sliding_window (upper bound for chunked
        attention). The two are equal for models without local attention."""
        ctx = np.asarray(context_len, dtype=float)
        return ctx, (np.minimum(ctx, self.sliding_window) if self.sliding_window else ctx)

    def attention_groups(self, context_len: ArrayLike) -> list[tuple[str, int, np.ndarray, np.ndarray]]:
        """The attention layers in groups that read alike, for a KV cache of context_len tokens: (label,
        layers, cached entries each layer holds per sequence, entries one query reads). Ordinary models: one
        group reading everything; sliding windows and sparse or compressed attention read fewer."""
        ctx = np.asarray(context_len, dtype=float)
        if self.compressed_layers:  # DeepSeek-V4: pooled entries + a raw sliding window on every layer
            win = np.minimum(ctx, float(self.sliding_window))
            out = []
            for ratio, n in self.compressed_layers:
                if ratio <= 1:
                    out.append(("swa", n, win, win))
                    continue
                pooled = np.floor(ctx / ratio)
                read = np.minimum(pooled, self.sparse_topk) if ratio <= self.compressed_index_ratio else pooled
                out.append((f"c{ratio}", n, pooled + win, read + win))
            return out
        full, local = self.attended_tokens(ctx)
        n_local = self.n_attn_layers - self.n_full_attention_layers
        n_sparse = min(self.n_sparse_layers, self.n_full_attention_layers)
        groups = [("full", self.n_full_attention_layers - n_sparse, full, full)]
        if n_sparse:
            groups.append(("sparse", n_sparse, full, np.minimum(full, float(self.sparse_topk))))
        if n_local:
            groups.append(("local", n_local, local, local))
        return [g for g in groups if g[1] > 0]

    def index_groups(self, context_len: ArrayLike) -> list[tuple[int, np.ndarray]]:
        """(layers that run a lightning indexer, keys each scores per query) for a KV cache of context_len."""
        ctx = np.asarray(context_len, dtype=float)
        if self.compressed_layers:
            n = sum(n for r, n in self.compressed_layers if 1 < r <= self.compressed_index_ratio)
            ratio = self.compressed_index_ratio
            return [(n, np.floor(ctx / ratio))] if n and self.index_heads else []
        if not self.n_sparse_layers or not self.index_heads:
            return []
        return [(self.n_index_layers or self.n_sparse_layers, ctx)]

    def kv_bytes_per_sequence(self, context_len: ArrayLike, kv_dtype: str = "bf16", tp: int = 1) -> np.ndarray:
        """KV-cache bytes one sequence of context_len tokens holds on one GPU of `tp`: every attention group's
        cached entries (local layers at most sliding_window: vLLM's hybrid KV-cache manager; compressed
        layers their pooled entries), and the indexer's keys. Equals context_len * kv_bytes_per_token()
        for a model with one global attention kind."""
        per_layer = self.kv_bytes_per_layer_token(kv_dtype, tp)
        total = sum(n * held * per_layer for _, n, held, _ in self.attention_groups(context_len))
        index = sum((n * keys for n, keys in self.index_groups(context_len)), np.zeros(np.shape(context_len)))
        total = total + self.index_key_bytes * index  # one index key per scored entry and indexer layer
        return np.asarray(total, dtype=float)

    def kv_heads_per_gpu(self, tp: int = 1) -> float:
        """KV heads each GPU caches under tensor parallelism: n_kv_heads / tp, replicated (at least one
        per GPU) when tp exceeds the KV heads (vLLM / Megatron GQA replication)."""
        return max(self.n_kv_heads / tp, 1.0)

    def kv_bytes_per_layer_token(self, kv_dtype: str = "bf16", tp: int = 1) -> float:
        """KV-cache bytes one token adds in one attention layer on one GPU of `tp`.

        GQA/MHA: K and V for each KV head; MLA caches the latent + rope key (DeepSeek-V2 §2.1.2),
        replicated on every GPU; DeepSeek-V4 one 512-wide entry shared by K and V (num_key_value_heads 1)."""
        b = kv_bytes(kv_dtype)
        if self.is_mla:
            return (self.kv_lora_rank + self.qk_rope_head_dim) * b
        if self.compressed_layers:
            return self.head_dim * b
        return 2 * self.kv_heads_per_gpu(tp) * self.head_dim * b

    def kv_bytes_per_token(self, kv_dtype: str = "bf16", tp: int = 1) -> float:
        """KV-cache bytes one token adds over all attention layers on one GPU of `tp` (tp = 1: the whole
        model). The one implementation of KV bytes in specsim. For models with local, sparse or compressed
        attention this counts every attention layer in full: the upper bound kv_bytes_per_sequence refines."""
        index = self.index_key_bytes * sum(n for n, _ in self.index_groups(1.0))  # DSA / MSA index keys
        return self.n_attn_layers * self.kv_bytes_per_layer_token(kv_dtype, tp) + index

    def linear_state_bytes_per_sequence(self, tp: int = 1) -> float:
        """Bytes of one sequence's recurrent state over all linear-mixer layers on one GPU of `tp`: the
        state matrix per value head plus the convolution's last linear_conv - 1 inputs per channel (bf16)."""
        if not self.n_linear_layers:
            return 0.0
        heads = self.linear_v_heads / tp
        state = heads * self.linear_k_dim * self.linear_v_dim * self.linear_state_bytes
        conv = max(self.linear_conv - 1, 0) * self.linear_conv_channels / tp * 2.0
        return self.n_linear_layers * (state + conv)

    @property
    def linear_conv_channels(self) -> int:
        """Channels of the linear mixer's causal convolution: q, k and v (GDN / KDA), x, B and C (Mamba-2)."""
        if self.linear_kind == "mamba2":
            return self.linear_v_heads * self.linear_v_dim + 2 * self.linear_groups * self.linear_k_dim
        return 2 * self.linear_k_heads * self.linear_k_dim + self.linear_v_heads * self.linear_v_dim

    @property
    def linear_in_width(self) -> int:
        """Output width of the linear mixer's input projection (per GPU at tp 1)."""
        hv = self.linear_v_heads * self.linear_v_dim
        if self.linear_kind == "mamba2":  # z, x, B, C, dt (Mamba-2 in_proj)
            return 2 * hv + 2 * self.linear_groups * self.linear_k_dim + self.linear_v_heads
        if self.linear_kind == "kda":  # q, k, v, a full-rank decay gate, the output gate, beta
            return 2 * self.linear_k_heads * self.linear_k_dim + 3 * hv + self.linear_v_heads
        return 2 * self.linear_k_heads * self.linear_k_dim + 2 * hv + 2 * self.linear_v_heads  # GDN: qkvz, b, a

    def _attention_params(self) -> float:
        h = self.hidden
        if self.is_mla:
            nh = self.n_heads
            qk = self.qk_nope_head_dim + self.qk_rope_head_dim
            q = (h * self.q_lora_rank + self.q_lora_rank * nh * qk) if self.q_lora_rank else h * nh * qk
            kv = h * (self.kv_lora_rank + self.qk_rope_head_dim)
            kv += self.kv_lora_rank * nh * (self.qk_nope_head_dim + self.v_head_dim)
            return q + kv + nh * self.v_head_dim * h
        if self.compressed_layers:  # DeepSeek-V4: low-rank q, one shared KV entry, grouped low-rank output
            q = h * self.q_lora_rank + self.q_lora_rank * self.n_heads * self.head_dim
            o = self.n_heads * self.head_dim * self.o_lora_rank + self.o_groups * self.o_lora_rank * h
            return q + h * self.head_dim + o
        q_width = self.n_heads * self.head_dim * (2 if self.attn_output_gate else 1)
        return h * (q_width + 2 * self.n_kv_heads * self.head_dim) + self.n_heads * self.head_dim * h

    def param_counts(self) -> dict[str, float]:
        """Parameters by part: attention (every token mixer), dense MLP, experts (all), embeddings, lm head."""
        h = self.hidden
        attn = self.n_attn_layers * self._attention_params()
        if self.n_linear_layers:
            mixer = h * self.linear_in_width + self.linear_v_heads * self.linear_v_dim * h
            attn += self.n_linear_layers * (mixer + self.linear_conv * self.linear_conv_channels)
        if self.index_heads:
            q_in = self.q_lora_rank or h  # DSA: the indexer's queries come from the low-rank q (wq_b)
            per = q_in * self.index_heads * self.index_dim + h * self.index_dim + h * self.index_heads
            attn += sum(n for n, _ in self.index_groups(1.0)) * per
        branches = 3 if self.gated_mlp else 2
        dense_mlp = branches * h * self.intermediate
        n_dense = self.n_dense_layers if self.is_moe else self.n_layers
        expert = branches * self.expert_hidden * self.moe_intermediate
        shared = branches * h * self.shared_width
        latent = 2 * h * self.moe_latent
        experts = self.n_moe_layers * (self.n_experts * expert + shared + latent)
        router = self.n_moe_layers * h * self.n_experts
        embed = self.vocab * h
        return {
            "attention": float(attn),
            "dense_mlp": float(n_dense * dense_mlp),
            "experts": float(experts + router),
            "embedding": float(embed),
            "lm_head": 0.0 if self.tied_embeddings else float(embed),
        }

    def n_params(self) -> float:
        return float(sum(self.param_counts().values()))

    def n_active_params(self) -> float:
        """Parameters one token touches (MoE: top-k routed + shared experts)."""
        c = self.param_counts()
        if not self.is_moe:
            return self.n_params()
        branches = 3 if self.gated_mlp else 2
        per_token = self.top_k * branches * self.expert_hidden * self.moe_intermediate \
            + branches * self.hidden * self.shared_width + 2 * self.hidden * self.moe_latent
        return c["attention"] + c["dense_mlp"] + self.n_moe_layers * per_token + c["embedding"] + c["lm_head"]

    def replicated_attention_params(self) -> float:
        """Attention parameters every GPU of a tensor-parallel group holds whole, as the engines load them and
        `ops._projections` prices them: MLA's down-projections to the q and KV latents (vLLM / SGLang
        `fused_qkv_a_proj_with_mqa`, a ReplicatedLinear), DeepSeek-V4's q down-projection and its one KV head, and
        the sparse-attention indexer (replicated: `mixers.indexer_ops`)."""
        h = self.hidden
        per_layer = 0.0
        if self.is_mla:
            per_layer = h * (self.q_lora_rank + self.kv_lora_rank + self.qk_rope_head_dim)
        elif self.compressed_layers:
            per_layer = h * (self.q_lora_rank + self.head_dim)
        index = 0.0
        if self.index_heads:
            q_in = self.q_lora_rank or h
            index = sum(n for n, _ in self.index_groups(1.0)) * (
                q_in * self.index_heads * self.index_dim + h * self.index_dim + h * self.index_heads)
        return float(self.n_attn_layers * per_layer + index)

    def weight_bytes_per_gpu(self, precision: str, tp: int | Layout = 1) -> float:
        """Bytes of weights on one GPU under a layout (layout.py): attention (but its replicated pieces:
        `replicated_attention_params`), shared experts, embeddings and the head split over the attention tp
        (replicated over DP-attention groups); routed experts over every GPU
        of a stage (ep x moe_tp); dense MLPs over tp, or over the stage when DP attention gathers their tokens
        (an MoE model's dense layers, as SGLang runs them); the layers over the pipeline stages."""
        lay = as_layout(tp)
        p = Precision.parse(precision, self.native_precision)
        c = self.param_counts()
        branches = 3 if self.gated_mlp else 2
        shared = self.n_moe_layers * branches * self.hidden * self.shared_width
        dense_split = lay.world if self.is_moe else lay.tp
        whole = self.replicated_attention_params()
        per_stage = (((c["attention"] - whole) / lay.tp + whole) * p.bytes_of("attention")
                     + c["dense_mlp"] * p.bytes_of("dense") / dense_split
                     + (c["experts"] - shared) * p.bytes_of("experts") / lay.world
                     + shared * p.bytes_of("experts") / lay.tp) / lay.pp
        return per_stage + (c["embedding"] + c["lm_head"]) * p.bytes_of("head") / lay.tp / lay.pp

    def weight_bytes(self, precision: str) -> float:
        """Bytes of all weights under a precision spec (dtypes.Precision): each part in its own format."""
        p = Precision.parse(precision, self.native_precision)
        c = self.param_counts()
        return (c["attention"] * p.bytes_of("attention") + c["dense_mlp"] * p.bytes_of("dense")
                + c["experts"] * p.bytes_of("experts") + (c["embedding"] + c["lm_head"]) * p.bytes_of("head"))
