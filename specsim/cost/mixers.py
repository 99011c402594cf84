"""The token mixers beside softmax attention: the linear-attention / SSM layers of hybrid models and the
lightning indexer of sparse attention, as ops of a pass (B sequences x q new tokens over a context L).

Linear mixers (Gated DeltaNet, Kimi Delta Attention, Mamba-2) keep a fixed-size recurrent state per
sequence instead of a KV cache. A decode step reads it and writes it back once per layer. A verification
pass of q = k + 1 tokens runs the recurrence token by token and writes the state after every token, each
into its own slot, so that a rejection rolls back to the state after the last accepted token: vLLM keeps
1 + num_speculative_tokens state slots per request (`spec_state_indices_tensor`, the GDN / Mamba
backends' `num_accepted_tokens`) and SGLang an intermediate SSM state per draft token
(`MambaPool.intermediate_ssm_state_cache`). The state traffic of verification is therefore (1 + q)
states, and its memory 1 + k slots per sequence (`state_slots`). Longer passes (prefill chunks) run the
chunked scan (Yang et al. 2024, chunk 64) and write the final state only.
"""

from __future__ import annotations

import numpy as np

from specsim.cost.dtypes import ACT_BYTES
from specsim.cost.envelope import monotone_in_q
from specsim.cost.ops_core import Ctx, Op, gemm, op
from specsim.cost.roofline import Array, _join

#: Tokens per sequence up to which a pass is a verification (per-token state slots written); above, a
#: prefill chunk (chunked scan, final state only). Engines verify at most a few dozen tokens per sequence.
VERIFY_MAX_Q = 64.0
#: The chunked scan's chunk (FLA's chunk_gated_delta_rule, Mamba-2's chunk_size 128 is of the same order).
SCAN_CHUNK = 64.0


def state_slots(k: int) -> int:
    """Recurrent-state slots a sequence holds when speculating k tokens (1 when not): the state after the
    last accepted token and one per draft position (vLLM: 1 + num_speculative_tokens)."""
    return 1 + max(int(k), 0)


def linear_mixer_ops(c: Ctx) -> list[Op]:
    """Input projection, the recurrence (conv + state update) and output projection of each linear layer."""
    m, s = c.model, c.s
    if not m.n_linear_layers:
        return []
    n, tp, t_ = m.n_linear_layers, s.tp, c.tokens
    heads = m.linear_v_heads / tp
    state = heads * m.linear_k_dim * m.linear_v_dim * m.linear_state_bytes  # per sequence per layer
    conv = max(m.linear_conv - 1, 0) * m.linear_conv_channels / tp * ACT_BYTES
    b, q = s.batch, s.q_per_seq
    verify = q <= VERIFY_MAX_Q
    writes = np.where(verify & (q > 1), q, 1.0)
    width_in = m.linear_in_width / tp
    bytes_ = b * ((1.0 + writes) * (state + conv) + q * (width_in + heads * m.linear_v_dim) * ACT_BYTES)
    # per token and value head: the delta rule's S k, rank-1 update and S q (~6 k v); the chunked scan
    # adds the intra-chunk attention (2 C (k + v)) on tensor cores
    chunk = np.where(verify, 0.0, np.minimum(q, SCAN_CHUNK))
    flops = b * q * heads * (6.0 * m.linear_k_dim * m.linear_v_dim + 2.0 * chunk * (m.linear_k_dim + m.linear_v_dim))
    hw = c.hw
    peak = np.where(verify, hw.peak("fp32"), hw.peak("bf16") * hw.efficiency.attention_compute)
    compute = flops / peak
    memory = c.cm.memory_op(bytes_, 0.0)
    t = c.cm.memory_op(0.0 * bytes_, 2.0) + _join(compute, memory, hw.efficiency.ridge_sharpness)
    mixer = Op("linear_mixer", "attention", flops, bytes_, t, compute, memory, n, 2.0)
    return [gemm(c, "linear_in", t_, width_in, m.hidden, count=n, part="attention"), mixer,
            gemm(c, "linear_out", t_, m.hidden, heads * m.linear_v_dim, count=n, part="attention")]


#: Nanoseconds one CTA spends per score when it selects a query row's top-k (a radix select over the row's
#: fp32 scores, several passes, in one CTA: SGLang's / DeepGEMM's per-row top-k). Fitted to NVIDIA's SGLang
#: 0.5.14 B200 DSA generation-module tables (aiconfigurator-core 0.12.0; its DeepSeek-V3.2 and GLM-5 rows are
#: in-sample); H100, H200, B300 and GB200 are held out (`specsim validate --modules`).
TOPK_ROW_NS_PER_KEY = 0.4


def topk_rows_s(rows: Array, keys: Array, sms: float) -> Array:
    """Seconds of a per-row top-k: one CTA per query row, the rows in waves over the SMs, each CTA walking
    its row's scores at TOPK_ROW_NS_PER_KEY."""
    return np.ceil(np.asarray(rows, dtype=float) / sms) * np.asarray(keys, dtype=float) * TOPK_ROW_NS_PER_KEY * 1e-9


def indexer_ops(c: Ctx) -> list[Op]:
    """The lightning indexer of sparse attention (DeepSeek-V3.2 tech report; DeepGEMM fp8_mqa_logits): its
    projections, then for every query token a score against every cached index key (an MQA of index_heads
    over keys of index_dim, read at index_key_bytes each), then a top-k over the scores (fp32 logits written
    and read once). The indexer is replicated under tensor parallelism (its projections are not split)."""
    m, s = c.model, c.s
    out: list[Op] = []
    t_ = c.tokens
    for i, (n, keys) in enumerate(m.index_groups(s.context_len)):
        tag = "" if i == 0 else f"_{i}"
        out += [gemm(c, f"index_q{tag}", t_, m.index_heads * m.index_dim, m.q_lora_rank or m.hidden, count=n,
                     part="attention"),
                gemm(c, f"index_k{tag}", t_, m.index_dim + m.index_heads, m.hidden, count=n, part="attention")]
        at, ac, am, af, ab = c.cm.attention(s.batch, s.q_per_seq, np.maximum(keys, 1.0), m.index_heads, 1.0,
                                            m.index_dim, 0.0, m.index_key_bytes)
        at = monotone_in_q(lambda b, q, ctx: c.cm.attention(b, q, ctx, m.index_heads, 1.0, m.index_dim, 0.0,
                                                             m.index_key_bytes)[0],
                           s.batch, s.q_per_seq, np.maximum(keys, 1.0), m.index_heads, c.hw.attention_kernel, at)
        logits = s.batch * s.q_per_seq * keys * 4.0 * 2.0
        topk = c.cm.memory_op(logits, 1.0) + topk_rows_s(s.batch * s.q_per_seq, keys, c.hw.sm_count)
        out.append(Op(f"indexer{tag}", "attention", af, ab + logits, at + topk, ac, am + c.cm.memory_op(logits, 0.0),
                      n, 2.0))
        write = t_ * m.index_key_bytes * 2.0  # the new tokens' index keys into the cache, as kv_write
        out.append(op(c, f"index_write{tag}", "attention", 0.0 * t_, write, c.cm.memory_op(write), 0.0 * t_,
                      c.cm.memory_op(write, 0.0), n))
    return out
