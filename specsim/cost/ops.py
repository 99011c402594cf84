"""A forward pass as a list of ops, each with FLOPs, bytes, time and kernel launches on a profile.

One layer of a dense or MoE transformer under tensor parallelism (Megatron-LM column/row split,
Shoeybi et al. 2019), for B sequences with q new tokens each attending to a KV cache of L tokens; hybrid
models' linear mixers and sparse attention's indexer are `mixers.py`'s. Every quantity broadcasts over
numpy arrays of B, q and L. Kernel times come from the profile's cost model (costmodel.py: the roofline,
or measured tables with the roofline outside them). Ops that depend only on the token count T = B x q
(GEMMs, MoE, element-wise, collectives) are timed once per distinct T and broadcast back, so a sweep over
batch, draft length and context stays cheap.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from specsim.cost.alltoall import alltoall_time_s
from specsim.cost.attention import attention_num_splits, wide_head_profile
from specsim.cost.dtypes import ACT_BYTES, LOGIT_BYTES
from specsim.cost.envelope import Q_ENVELOPE, monotone_in_q
from specsim.cost.hardware_profile import HardwareProfile
from specsim.cost.mixers import indexer_ops, linear_mixer_ops
from specsim.cost.model_spec import ModelSpec
from specsim.cost.moe import distinct_experts, moe_routing_bytes
from specsim.cost.ops_core import Ctx, Op, PassShape, context, gemm, make_shape, moe_gemm, op, sum_ops
from specsim.cost.roofline import Array

#: Tokens per rank DeepEP's low-latency dispatch takes (num_max_dispatch_tokens_per_rank: 128 in SGLang's
#: DeepEPConfig and vLLM's deepep_low_latency prepare/finalize defaults).
LL_MAX_TOKENS = 128.0

__all__ = ["ACT_BYTES", "Op", "PassShape", "head_ops", "layer_ops", "make_shape"]


def _projections(c: Ctx, count: int) -> tuple[Op, Op, float, float, float]:
    """(qkv, o, KV heads, qk dim, v dim) of one attention layer on one GPU."""
    model, s = c.model, c.s
    t_, tp, h = c.tokens, s.tp, model.hidden
    heads = model.n_heads / tp

    def g(name: str, n: float, k: float, groups: float = 1.0) -> Op:
        return gemm(c, name, t_, n, k, groups=groups, count=count, part="attention")

    if model.is_mla:
        # DeepSeek-V2/V3 MLA with weight absorption for decode (DeepSeek-V2 §2.1; FlashMLA):
        # queries go through the low-rank q path, keys/values live in a shared 512+64 latent.
        qk = model.qk_nope_head_dim + model.qk_rope_head_dim
        lat = model.kv_lora_rank
        qkv = sum_ops("qkv", [g("q_a", model.q_lora_rank, h), g("q_b", heads * qk, model.q_lora_rank),
                              g("kv_a", lat + model.qk_rope_head_dim, h),
                              g("absorb_k", lat, model.qk_nope_head_dim, heads)])
        o = sum_ops("o", [g("absorb_v", model.v_head_dim, lat, heads), g("o", h, heads * model.v_head_dim)])
        return qkv, o, 1.0, float(lat + model.qk_rope_head_dim), float(lat)
    hd = model.head_dim
    if model.compressed_layers:
        # DeepSeek-V4: low-rank q, one KV entry shared by K and V, grouped low-rank output (o_groups x
        # o_lora_rank, then o_groups x o_lora_rank -> hidden); the KV entry is replicated over tp
        groups = model.o_groups / tp
        qkv = sum_ops("qkv", [g("q_a", model.q_lora_rank, h), g("q_b", heads * hd, model.q_lora_rank),
                              g("kv", hd, h)])
        o = sum_ops("o", [g("o_a", model.o_lora_rank, heads * hd / groups, groups),
                          g("o_b", h, groups * model.o_lora_rank)])
        return qkv, o, 1.0, float(hd), float(hd)
    kvh = model.kv_heads_per_gpu(tp)
    q_width = heads * hd * (2.0 if model.attn_output_gate else 1.0)  # gated attention: q and its gate
    return g("qkv", q_width + 2 * kvh * hd, h), g("o", h, heads * hd), kvh, float(hd), float(hd)


_GROUP_NAMES = {"full": "attention", "sparse": "attention_sparse", "local": "attention_local"}


def _attention_ops(c: Ctx) -> list[Op]:
    """Projections, attention per group of layers that read alike (model.attention_groups: full, local,
    sparse top-k, compressed), the KV-cache write and the sparse-attention indexer.

    Decode context parallelism (cp > 1, vLLM's DCP) splits each sequence's KV over cp GPUs of the tp group
    that would hold duplicate KV heads: each reads 1/cp of the context for the queries of the cp GPUs
    (all-gathered), and the partial outputs are combined by their log-sum-exp (one all-gather of the queries
    and one reduce-scatter of the outputs over the cp group, priced as one all-reduce of both)."""
    model, s = c.model, c.s
    cp = s.layout.cp
    count = model.n_attn_layers
    qkv, o, kvh, dqk, dv = _projections(c, count)
    heads = model.n_heads / s.tp
    kv_tok = model.kv_bytes_per_layer_token(s.kv_dtype, s.tp)
    ops = [qkv]
    for label, n, _, read in model.attention_groups(s.context_len):
        read = read / cp
        at, ac, am, af, ab = c.cm.attention(s.batch, s.q_per_seq, read, heads * cp, kvh, dqk, dv, kv_tok)
        at = monotone_in_q(lambda b, q, ctx: c.cm.attention(b, q, ctx, heads * cp, kvh, dqk, dv, kv_tok)[0],
                           s.batch, s.q_per_seq, read, heads * cp / kvh, wide_head_profile(c.hw, dqk).attention_kernel,
                           at)
        if model.is_mla and label == "full":
            at, ac, am, af, ab = _mla_prefill_form(c, read, heads * cp, (at, ac, am, af, ab))
        # Split-KV decode (flash-decoding) adds a combine kernel when the GPU's kernel splits the KV
        # (attention.attention_num_splits: units that do not fill the SMs; FA2 only for GQA decode).
        _, splits, _ = attention_num_splits(s.batch, s.q_per_seq, read, heads * cp, kvh, dqk, c.hw)
        ops.append(Op(_GROUP_NAMES.get(label, f"attention_{label}"), "attention", af, ab, at, ac, am, n,
                      np.where(splits > 1, 2.0, 1.0)))
    t_ = c.tokens
    write_bytes = t_ * kv_tok * 2.0 / cp  # KV-cache write (reshape_and_cache): read the new K/V, write the cache
    ops.append(op(c, "kv_write", "attention", 0.0 * t_, write_bytes, c.cm.memory_op(write_bytes), 0.0 * t_,
                  c.cm.memory_op(write_bytes, 0.0), count))
    if cp > 1:
        comm = t_ * heads * cp * (dqk + dv) * ACT_BYTES
        ar = c.cm.allreduce(comm, cp, s.allreduce)
        ops.append(op(c, "context_parallel", "communication", 0.0 * t_, comm, ar, 0.0 * t_, ar, count, 2.0))
    return ops + indexer_ops(c) + [o]


def _mla_prefill_form(c: Ctx, read: Array, heads: float, absorbed: tuple[Array, ...]) -> tuple[Array, ...]:
    """MLA attention as the engines run a prefill chunk (q > Q_ENVELOPE, wider than any verification): in its MHA
    form, the latent up-projected to per-head keys of qk_nope + rope = 192 and values of 128 (kvh = heads), not in
    the absorbed form decode and verification run (one 576-wide latent KV head, 512-wide values: 3.4x the FLOPs per
    key). vLLM's MLA _forward_prefill / _compute_prefill_context (vllm/v1/attention/backends/mla/common.py, since
    model_executor/layers/attention/mla_attention.py: kv_b_proj, then FlashAttention varlen over 192 / 128), SGLang's
    DeepseekV2AttentionMLA forward_normal (MHA for extend, absorbed for decode and target_verify), TensorRT-LLM's
    context MLA (fmha over the up-projected K/V). NVIDIA's context_mla tables bear it out: TensorRT-LLM's H200
    kernel at isl 16k-32k runs 570-600 TFLOPS counted in the MHA form, 1.9-2.0 PFLOPS (twice the dense peak)
    counted absorbed. The up-projected K / V are read in bf16; the up-projection of a prefill chunk's cached prefix
    is not priced.

    Verification (1 < q <= Q_ENVELOPE) runs this form too where the engine's MLA decode kernel takes one-token
    queries only (`PassShape.mla_single_query`: vLLM's QueryLenSupport.SINGLE_ONLY backends, engines/mla.py): vLLM's
    MLACommonMetadataBuilder (vllm/model_executor/layers/attention/mla_attention.py @90b0a26e) splits a batch at
    reorder_batch_threshold = 1, so every sequence verifying k + 1 tokens is a prefill, and its
    _compute_prefill_context gathers each cached token's latent (gather_and_maybe_dequant_cache into a bf16
    workspace of 576-wide rows, chunked to <= 64k tokens) and up-projects it, kv_b_proj: kv_lora_rank ->
    heads x (qk_nope + v_head_dim), before attending over it. Those rows add that GEMM over the B x (context - q)
    cached tokens (`_mla_context_up`)."""
    model, s = c.model, c.s
    q = np.asarray(s.q_per_seq, dtype=float)
    verify = (q > 1.0) & (q <= Q_ENVELOPE) & s.mla_single_query
    prefill = (q > Q_ENVELOPE) | verify
    if not prefill.any():
        return absorbed
    dqk = float(model.qk_nope_head_dim + model.qk_rope_head_dim)
    dv = float(model.v_head_dim)
    mha: tuple[Array, ...] = c.cm.attention(s.batch, s.q_per_seq, read, heads, heads, dqk, dv,
                                            heads * (dqk + dv) * ACT_BYTES)
    if verify.any():
        up = _mla_context_up(c, np.where(verify, s.batch, 0.0), np.maximum(s.context_len - q, 0.0))
        mha = tuple(m + u for m, u in zip(mha, up, strict=True))
    return tuple(np.where(prefill, m, a) for m, a in zip(mha, absorbed, strict=True))


def _mla_context_up(c: Ctx, batch: Array, cached: Array) -> tuple[Array, ...]:
    """(time, compute, memory, FLOPs, bytes) of MLA's prefill path over each sequence's cached context on one GPU
    (vLLM's _compute_prefill_context): the gather of the cached latents (kv_lora_rank + rope per token, as stored,
    written to a bf16 workspace) and kv_b_proj over them, a GEMM of B x cached rows, kv_lora_rank -> heads / tp x
    (qk_nope + v_head_dim) with the attention weights' format: 2 x kv_lora_rank x heads x (qk_nope + v) FLOPs per
    cached token. Every rank of a decode-context-parallel group up-projects the whole context (vLLM all-gathers
    it into the workspace), so `cached` is not divided by cp."""
    model, s = c.model, c.s
    m = np.asarray(batch * cached, dtype=float)
    lat = float(model.kv_lora_rank)
    width = model.n_heads / s.tp * float(model.qk_nope_head_dim + model.v_head_dim)
    part = "attention"
    wb, dtype = c.weight_bytes(part), c.gemm_dtype(part)
    gt, gc, gm = c.cm.gemm(np.maximum(m, 1.0), width, lat, dtype, wb, ACT_BYTES, np.asarray(1.0))
    gflops = 2.0 * m * width * lat
    gbytes = width * lat * wb + m * (lat + width) * ACT_BYTES
    latent = lat + float(model.qk_rope_head_dim)
    gather_bytes = m * (model.kv_bytes_per_layer_token(s.kv_dtype, s.tp) + latent * ACT_BYTES)
    gather = c.cm.memory_op(gather_bytes)
    on = m > 0
    zero = 0.0 * m
    return (np.where(on, gt + gather, zero), np.where(on, gc, zero),
            np.where(on, gm + c.cm.memory_op(gather_bytes, 0.0), zero),
            np.where(on, gflops, zero), np.where(on, gbytes + gather_bytes, zero))


def _mlp_ops(c: Ctx, cl: Ctx, moe: bool, count: int) -> list[Op]:
    """The FFN of `count` layers: `c` prices what sees every DP-attention group's tokens (the experts; an MoE
    model's dense layers, tensor-parallel over the stage as SGLang runs them under DP attention), `cl` what one
    group runs on its own tokens (a dense model's MLP, the router, shared experts)."""
    model, s = c.model, c.s
    lay = s.layout
    h = model.hidden
    branches = 2 if model.gated_mlp else 1
    if not moe:
        gathered = model.is_moe and lay.dp > 1
        cc, width = (c, lay.world) if gathered else (cl, lay.tp)
        inter = model.intermediate / width
        return [gemm(cc, "up", cc.tokens, branches * inter, h, count=count),
                gemm(cc, "down", cc.tokens, h, inter, count=count)]
    t_ = c.tokens
    e, k = float(model.n_experts), float(model.top_k)
    xh = model.expert_hidden  # a latent MoE's experts read and write its latent
    # Expected number of distinct experts T tokens route to (moe.distinct_experts): the
    # "expert tax" that makes verification of B(k+1) tokens read more expert weights than decode.
    # Under expert parallelism each GPU holds E / ep experts (each expert's width split over moe_tp GPUs)
    # and runs the ones its share of the T x k assignments reach.
    distinct = distinct_experts(t_, e, k)
    rows = t_ * k / distinct
    local = distinct / lay.ep
    inter = model.moe_intermediate / lay.moe_tp
    act_bytes = moe_routing_bytes(t_, xh, inter, k, lay.ep, model.gated_mlp, ACT_BYTES)
    # the fused-MoE grouped GEMMs as moe.moe_time_s prices them (the GPU's MoE kernel family)
    up = moe_gemm(c, "up", rows, local, branches * inter, xh, e / lay.ep, inter, count)
    down = moe_gemm(c, "down", rows, local, xh, inter, e / lay.ep, inter, count)
    # token sort / block alignment, activation and weighted combine (vLLM / SGLang fused_moe)
    fixed = c.cm.moe_fixed(act_bytes, t_ * k * xh * ACT_BYTES / lay.ep, local)
    routing = op(c, "moe_routing", "linear", 0.0 * t_, act_bytes, fixed, 0.0 * t_, c.cm.memory_op(act_bytes, 0.0),
                 count, 4.0)
    # measured fused-MoE kernels (table cost model) correct the three parts alike, at the layer's monotone
    # envelope over tokens (a layer over more tokens never costs less: table_model.monotone_envelope)
    ratio = c.cm.moe_ratio(t_, xh, inter, e, k, c.gemm_dtype("experts"), c.weight_bytes("experts"), ep=float(lay.ep))
    if c.cm.name == "table":
        def layer_s(tk: Array) -> Array:
            return _moe_layer_s(c, tk, branches * inter, inter)

        raw = layer_s(t_)
        env = c.cm.monotone_tokens(("moe", xh, inter, branches, e, k, lay.ep, c.gemm_dtype("experts"),
                                    c.weight_bytes("experts")), layer_s, t_, raw)
        ratio = ratio * env / np.where(raw > 0, raw, 1.0)
    scale = c.expand(ratio)
    ops = [gemm(cl, "router", cl.tokens, e, h, count=count),
           *(replace(o, time_s=o.time_s * scale) for o in (up, down, routing))]
    if model.moe_latent:
        ops += [gemm(c, "latent_down", t_, xh, h, count=count, part="experts"),
                gemm(c, "latent_up", t_, h, xh, count=count, part="experts")]
    if model.shared_width:
        shared = model.shared_width / lay.tp  # shared experts run with the group's tokens, split as attention
        ops += [gemm(cl, "shared_up", cl.tokens, branches * shared, h, count=count, part="experts"),
                gemm(cl, "shared_down", cl.tokens, h, shared, count=count, part="experts")]
    return ops


def _moe_layer_s(c: Ctx, tokens: Array, up_width: float, inter: float) -> Array:
    """Seconds of one fused-MoE layer's grouped GEMMs and fixed work over `tokens` tokens, times the measured
    tables' correction (the parts `_mlp_ops` builds as ops, at any token count)."""
    model, lay = c.model, c.s.layout
    e, k, xh = float(model.n_experts), float(model.top_k), model.expert_hidden
    wb, dtype = c.weight_bytes("experts"), c.gemm_dtype("experts")
    distinct = distinct_experts(tokens, e, k)
    rows, local = tokens * k / distinct, distinct / lay.ep
    up = c.cm.moe_gemm(tokens, rows, local, up_width, xh, e / lay.ep, inter, dtype, wb, ACT_BYTES)[0]
    down = c.cm.moe_gemm(tokens, rows, local, xh, inter, e / lay.ep, inter, dtype, wb, ACT_BYTES)[0]
    act = moe_routing_bytes(tokens, xh, inter, k, lay.ep, model.gated_mlp, ACT_BYTES)
    fixed = c.cm.moe_fixed(act, tokens * k * xh * ACT_BYTES / lay.ep, local)
    return (up + down + fixed) * c.cm.moe_ratio(tokens, xh, inter, e, k, dtype, wb, ep=float(lay.ep))


def _ffn_comm(c: Ctx, cl: Ctx, moe: bool) -> tuple[Array, Array, float]:
    """(seconds, bytes, kernels) per layer, in the pass's shape, of the collective that joins the FFN to the rest:
    the all-reduce of a row-parallel MLP under tensor parallelism alone; with DP attention, DeepEP's dispatch and
    combine all-to-all when the experts are split by EP (alltoall.py), else the all-gather of every group's
    tokens before the FFN and the reduce-scatter after it (SGLang's DP-attention gather: priced as one
    all-reduce of all the tokens over the stage, the same bytes on the wire)."""
    model, s = c.model, c.s
    lay = s.layout
    if lay.dp == 1 or not model.is_moe:
        comm = cl.tokens * model.hidden * ACT_BYTES
        on = float(lay.tp > 1)
        return cl.expand(cl.cm.allreduce(comm, lay.tp, s.allreduce) * on), cl.expand(comm * on), on
    if moe and lay.ep > 1:
        per_rank = c.tokens / lay.world
        # DeepEP's low-latency kernels take at most LL_MAX_TOKENS tokens per rank; larger passes (prefill) run the
        # normal (high-throughput) kernels, as SGLang's --deepep-mode auto and vLLM's deepep backends choose
        args = (c.hw, per_rank, float(model.hidden), float(model.top_k), lay.ep)
        t = np.where(per_rank > LL_MAX_TOKENS, alltoall_time_s(*args, "normal", impl=s.alltoall),
                     alltoall_time_s(*args, lay.a2a, impl=s.alltoall))
        # bytes on the wire per rank: fp8 dispatch (1 byte + scales) and bf16 combine of T x k rows
        return c.expand(t), c.expand(per_rank * model.top_k * model.hidden * (1.0 + ACT_BYTES)), 2.0
    comm = c.tokens * model.hidden * ACT_BYTES
    return c.expand(c.cm.allreduce(comm, lay.world, s.allreduce)), c.expand(comm), 2.0


def _elementwise(c: Ctx, cl: Ctx, moe: bool, count: int) -> list[Op]:
    """Norms, rotary embedding and the activation of a dense MLP on one group's tokens, and the layer's
    collectives: the attention output's all-reduce over tp and the FFN's (`_ffn_comm`)."""
    model, s = cl.model, cl.s
    t_ = cl.tokens
    h = model.hidden
    rope = t_ * (model.n_heads + model.n_kv_heads) / s.tp * model.head_dim * ACT_BYTES * 2
    norms = 2 * t_ * h * ACT_BYTES * 3  # two fused residual-add + RMSNorm kernels: read x, r; write
    if moe:  # the MoE activation runs inside the fused-MoE kernels (moe_routing)
        bytes_, kernels = norms + rope, 3.0
    else:
        act = t_ * model.intermediate / s.tp * ACT_BYTES * (3 if model.gated_mlp else 2)
        bytes_, kernels = norms + rope + act, 4.0  # add+norm x2, rope, activation
    ops = [op(cl, "elementwise", "elementwise", 0.0 * t_, bytes_, cl.cm.memory_op(bytes_, kernels), 0.0 * t_,
              cl.cm.memory_op(bytes_, 0.0), count, kernels)]
    comm = t_ * h * ACT_BYTES  # the row-parallel attention output is all-reduced over tp
    on = 1.0 if s.tp > 1 else 0.0
    ar = cl.expand(cl.cm.allreduce(comm, s.tp, s.allreduce) * on)
    ffn_t, ffn_bytes, ffn_kernels = _ffn_comm(c, cl, moe)
    zero = 0.0 * ar
    ops.append(Op("allreduce", "communication", zero, cl.expand(comm * on) + ffn_bytes, ar + ffn_t, zero,
                  ar + ffn_t, count, on + ffn_kernels))
    return ops


def _mixer_ops(c: Ctx) -> list[Op]:
    """Every layer's token mixer: attention where the model has it, linear mixers on hybrid layers, and the
    all-reduce of mixer blocks beyond one per FFN sublayer (Nemotron-H's blocks are one sublayer each)."""
    ops = _attention_ops(c) + linear_mixer_ops(c)
    model, s = c.model, c.s
    extra = model.n_attn_layers + model.n_linear_layers - model.n_layers
    if extra > 0 and s.tp > 1:
        t_ = c.tokens
        comm = t_ * model.hidden * ACT_BYTES
        ar = c.cm.allreduce(comm, s.tp, s.allreduce)
        ops.append(op(c, "allreduce_mixer", "communication", 0.0 * t_, comm, ar, 0.0 * t_, ar, extra, 1.0))
    return ops


def layer_ops(model: ModelSpec, hw: HardwareProfile, s: PassShape, moe: bool | None = None,
              mixers: bool = True) -> list[Op]:
    """The ops of the model's layers of one FFN kind (MoE if the model has experts, unless moe=False):
    their FFN and element-wise ops, each with that kind's layer count, and (mixers=True) every layer's
    token mixer with its own count."""
    moe = model.is_moe if moe is None else moe
    count = model.n_moe_layers if moe else (model.n_dense_layers if model.is_moe else model.n_layers)
    c = context(model, hw, s)
    cl = c if s.layout.dp == 1 else context(model, hw, s.local())
    return (_mixer_ops(cl) if mixers else []) + _mlp_ops(c, cl, moe, count) + _elementwise(c, cl, moe, count)


def head_ops(model: ModelSpec, hw: HardwareProfile, s: PassShape) -> list[Op]:
    """Embedding, final norm, LM head over every new token, logits gather and sampling (each DP-attention
    group over its own tokens)."""
    c = context(model, hw, s.local())
    t_ = c.tokens
    h, v = model.hidden, model.vocab
    # Collectives outside the layers: the embedding's all-reduce and the logits gather run as the
    # engine runs NCCL (a custom all-reduce handles only the layers' all-reduces).
    impl = "nccl" if s.allreduce == "nccl" else "nccl_graph"
    on = 1.0 if s.tp > 1 else 0.0
    embed_bytes = t_ * h * ACT_BYTES * 2 + t_ * h * ACT_BYTES * 3
    embed = op(c, "embedding", "head", 0.0 * t_, embed_bytes,
               c.cm.memory_op(embed_bytes, 2.0) + c.cm.allreduce(t_ * h * ACT_BYTES, s.tp, impl), 0.0 * t_,
               c.cm.memory_op(embed_bytes, 0.0), 1, 2.0 + on)
    lm = gemm(c, "lm_head", t_, v / s.tp, h, family="head", part="head")
    # Logits are gathered to one rank (vLLM's LogitsProcessor) and sampled there: softmax,
    # top-k/p and the draw read the T x V fp32 logits about three times.
    logit_bytes = t_ * v * LOGIT_BYTES
    gather = c.cm.allreduce(logit_bytes / 2, s.tp, impl)
    sample_bytes = 3 * logit_bytes
    sample = op(c, "sampling", "head", 5.0 * t_ * v, sample_bytes, c.cm.memory_op(sample_bytes, 3.0) + gather,
                0.0 * t_, c.cm.memory_op(sample_bytes, 0.0), 1, 3.0 + on)
    return [embed, lm, sample]
