"""Time of one attention kernel (decode, verification, prefill) from its shape on a HardwareProfile,
as the GPU's kernel family launches it (FlashAttention-2 / FlashAttention-3 / FlashInfer split-KV).
Pure numpy, broadcasting over any array arguments; the roofline pieces are roofline.py's."""

from __future__ import annotations

from dataclasses import replace
from typing import cast

import numpy as np
import numpy.typing as npt
from numpy.typing import ArrayLike, NDArray

from specsim.cost.hardware_profile import HardwareProfile
from specsim.cost.memo import unique_rows
from specsim.cost.roofline import Array, _join, l2_hit_fraction, stream_s

# Query rows per MMA tile of FlashAttention-2/3 decode and prefill kernels (FA3: 64-row warpgroup
# tiles; FlashInfer / FA2 on Ampere: 16-row MMAs grouped in 64-row tiles).
ATTENTION_Q_TILE = 64.0
SPLIT_KV_MIN_KEYS = 128.0  # one KV block (kBlockN = 128): a split needs at least two
FA_MAX_SPLITS = 128  # flash_api.cpp: num_splits <= 128
# FA2's split-KV kernels run 4 warps (128 threads) per CTA: its heuristic counts 2 CTAs per SM
FA2_CTAS_PER_SM = 2
# TensorRT-LLM XQA's multi-block mode (decoderXQAImplCommon.h, computeMultiBlockCount; constants in
# xqaParams.h / decoderXQAConstants.h): sub-sequences of >= 128 history tokens, at most round(sqrt(8 m)) of
# them, cut back until the CTAs make <= 8 waves over the SMs, and within a 6000 sub-sequence workspace
XQA_MIN_TOKENS_PER_BLOCK = 128.0
XQA_TARGET_WAVES = 8.0
XQA_MAX_SUB_SEQ = 6000.0
XQA_MAX_GROUP = 32.0  # head_grp_size <= 32 (supportConfigHMMA)
XQA_MIN_BLOCK_FACTOR = 4.0  # kEnableMinBlockFactor
XQA_MAX_Q = 16.0  # verification tokens per sequence XQA's speculative mode takes; prefill runs context FMHA
# Widest head MMHA and XQA are built for (MMHA's head sizes 32-256, XQA's supportConfigHMMA): MLA's latent + rope
# key (576 wide) runs neither. TensorRT-LLM sends an MLA layer's generation to AttentionOp::mlaGeneration (FlashMLA
# on Hopper, its trtllm-gen / fmha MLA kernels elsewhere: cpp/tensorrt_llm/thop/attentionOp.cpp, "mlaGeneration
# ... we don't go into enqueueGeneration"), a split-KV kernel reading the latent once for all query heads
XQA_MAX_HEAD_DIM = 256.0
# Special-function (MUFU) results per SM per clock, exp2 among them: 16 on every NVIDIA architecture from sm50 to
# sm120 (CUDA C++ Programming Guide, "Arithmetic Instructions" throughput table); H100: 132 x 16 x 1.83 GHz = 3.9 T/s,
# the figure FlashAttention-3 (Shah et al. 2024, sec. 3) sets against its 989 TFLOPS of bf16 matmul
MUFU_PER_SM_CLOCK = 16.0
# Query rows of one prefill CTA (FlashAttention-3's kBlockM for the forward pass, tile_size_fwd_sm90: 128 for head
# sizes 64-256 under a causal mask; FA2's and FlashInfer's prefill tiles alike): the unit a causal prefill's last
# tile, which sees every key, is cut into
PREFILL_Q_TILE = 128.0


def softmax_s(scores: ArrayLike, hw: HardwareProfile) -> Array:
    """Seconds the softmax of `scores` score elements spends on the SMs' special-function units beside the matmuls:
    `attention_softmax_ops` MUFU slots each (one exp2 a score, ~1; less where a kernel emulates part of its exps on
    the FMA units, as FlashAttention-4 does on Blackwell; more where the rescaling and conversions also queue there),
    at `MUFU_PER_SM_CLOCK` a clock on every SM. Priced in series with the MMAs: the matmul and the exp of one tile
    depend on each other, and FA3's ping-pong overlap is what `attention_compute` already credits (FA3: 2 x 128 x 128
    x d matmul FLOPs a tile against 128 x 128 exps, so the exp costs ~50% of the matmul at d = 128 on H100)."""
    rate = hw.sm_count * MUFU_PER_SM_CLOCK * hw.clock_mhz * 1e6
    ops = hw.efficiency.attention_softmax_ops
    if ops <= 0.0 or rate <= 0.0:
        return np.zeros(np.shape(scores))
    return np.asarray(scores, dtype=float) * ops / rate


def wide_head_profile(hw: HardwareProfile, head_dim: ArrayLike) -> HardwareProfile:
    """The profile that times attention of heads wider than XQA takes (`XQA_MAX_HEAD_DIM`: MLA's latent) on a "xqa"
    profile: the GPU's split-KV decode fit it holds (`HardwareProfile.split_kv`: FlashMLA on Hopper, trtllm-gen MLA
    on Blackwell), else `hw` itself. The same object each call (the cost model's memos key on a profile's identity)."""
    if hw.attention_kernel != "xqa" or hw.split_kv is None or not np.all(np.asarray(head_dim) > XQA_MAX_HEAD_DIM):
        return hw
    if (hit := hw.__dict__.get("_wide_head")) is None:  # beside the fields, as for_framework's derived profiles
        eff, kernel = hw.split_kv
        hit = hw.__dict__["_wide_head"] = replace(hw, efficiency=eff, attention_kernel=kernel, split_kv=None)
    return cast(HardwareProfile, hit)


def fa_block_n(head_dim: ArrayLike) -> Array:
    """kBlockN of FlashAttention-2's split-KV forward kernel (run_mha_fwd_splitkv_dispatch; mirrored in
    set_params_splitkv): 256 keys per block for head size <= 64, 128 for <= 128, 64 above."""
    d = np.asarray(head_dim, dtype=float)
    return np.where(d <= 64, 256.0, np.where(d <= 128, 128.0, 64.0))


def fa_num_splits(work: ArrayLike, slots: ArrayLike, n_blocks: ArrayLike, max_splits: int = FA_MAX_SPLITS) -> Array:
    """FlashAttention's `num_splits_heuristic` (flash_api.cpp), vectorised: 1 split when the
    (batch x heads x query blocks) CTAs fill >= 80% of the `slots` (SMs x CTAs per SM); otherwise the
    fewest splits, up to min(128, slots, KV blocks), whose wave efficiency n/ceil(n) (n = CTAs x splits
    / slots) is >= 85% of the best, skipping split counts that leave the blocks per split unchanged.
    Worked out once per distinct (CTAs, slots, blocks) of the process (`_splits_seen`)."""
    w, sl, nb = np.broadcast_arrays(*(np.ceil(np.asarray(a, dtype=float)) for a in (work, slots, n_blocks)))
    out = np.ones(w.shape)
    need = (w < 0.8 * sl) & (nb > 1)
    if not need.any():
        return out
    keys, inverse = unique_rows(w[need], sl[need], nb[need])
    out[need] = _splits_seen(keys, max_splits)[inverse]
    return out


#: The splits `fa_num_splits` has worked out in this process, per max splits: (sorted key codes, splits). A pure
#: function of (CTAs, slots, KV blocks), asked of the same few thousand keys over and over (a plan's grids over batch
#: and context; `validate --modules`: 1.4 million keys, 4,600 distinct). A key's code packs its three whole numbers,
#: each below 2**SPLITS_KEY_BITS (other keys are worked out every time); at most SPLITS_SEEN_MAX are kept.
_SEEN: dict[int, tuple[npt.NDArray[np.int64], Array]] = {}
SPLITS_KEY_BITS = 20
SPLITS_SEEN_MAX = 1 << 16


def _splits_seen(keys: Array, max_splits: int) -> Array:
    """`_splits_heuristic` of each row of `keys`, from `_SEEN` where it is there (and kept there when it was not)."""
    # whole numbers (ceil'd) in range, not NaN
    fits = cast(NDArray[np.bool_], ((keys >= 0.0) & (keys < 2.0**SPLITS_KEY_BITS)).all(axis=1))
    whole = np.where(fits[:, None], keys, 0.0).astype(np.int64)
    codes = (whole[:, 0] << 2 * SPLITS_KEY_BITS) | (whole[:, 1] << SPLITS_KEY_BITS) | whole[:, 2]
    seen_codes, seen_splits = _SEEN.get(max_splits, (np.zeros(1, dtype=np.int64), np.zeros(1)))
    at = np.minimum(np.searchsorted(seen_codes, codes), len(seen_codes) - 1)
    hit = fits & (seen_codes[at] == codes) & (seen_splits[at] > 0.0)  # (0: the empty memo's placeholder)
    out = np.where(hit, seen_splits[at], 0.0)
    if not hit.all():
        miss = ~hit
        out[miss] = _splits_heuristic(keys[miss], max_splits)
        new = miss & fits
        if new.any() and len(seen_codes) < SPLITS_SEEN_MAX:
            codes_, splits_ = np.concatenate([seen_codes, codes[new]]), np.concatenate([seen_splits, out[new]])
            order = np.argsort(codes_, kind="stable")
            _SEEN[max_splits] = codes_[order], splits_[order]
    return out


def _splits_heuristic(keys: Array, max_splits: int) -> Array:
    """`fa_num_splits` of each row (CTAs, slots, KV blocks) of `keys` that may split."""
    kw, ksl, knb = (keys[:, i, None] for i in range(3))
    s = np.arange(1, max_splits + 1, dtype=float)[None, :]
    top = np.minimum(np.minimum(float(max_splits), ksl), knb)
    eligible = (s <= top) & ((s == 1) | (np.ceil(knb / s) != np.ceil(knb / np.maximum(s - 1, 1))))
    waves = kw * s / ksl
    eff = np.where(eligible, waves / np.ceil(waves), 0.0)
    ok = eligible & (eff >= 0.85 * eff.max(axis=-1, keepdims=True))
    return (np.argmax(ok, axis=-1) + 1).astype(float)


def xqa_num_splits(batch: ArrayLike, kv_heads: ArrayLike, context_len: ArrayLike, sms: float) -> Array:
    """Sub-sequences per (sequence x KV head) of TensorRT-LLM's XQA decode kernel (computeMultiBlockCount,
    vectorised): m = floor(L / 128), at most round(sqrt(8 m)); when the B x KV heads x m CTAs exceed 8 waves
    over the SMs, m = floor(m / (waves / 8)); at least 1 and at most 6000 // B."""
    b, kvh, ctx = (np.asarray(a, dtype=float) for a in (batch, kv_heads, context_len))
    m = np.floor(ctx / XQA_MIN_TOKENS_PER_BLOCK)
    m = np.maximum(np.minimum(m, np.round(np.sqrt(m * 8.0))), 1.0)
    adj = b * kvh * m / sms / XQA_TARGET_WAVES
    m = np.maximum(np.where(adj > 1.0, np.floor(m / np.maximum(adj, 1.0)), m), 1.0)
    return np.maximum(np.minimum(m, np.floor(XQA_MAX_SUB_SEQ / np.maximum(b, 1.0))), 1.0)


def xqa_runs_mmha(batch: ArrayLike, q_per_seq: ArrayLike, context_len: ArrayLike, heads: ArrayLike,
                  kv_heads: ArrayLike, head_dim: ArrayLike, sms: float) -> NDArray[np.bool_]:
    """Where TensorRT-LLM decodes with its masked multi-head attention kernel (MMHA: one CTA per query head,
    each reading its KV head's cache) instead of XQA: XQA's HMMA kernel takes head sizes of multiples of 16 up
    to 256 and up to 32 query heads per KV head (supportConfigHMMA), and runs only where its CTAs, counted
    with one per 128 history tokens, make at least a quarter wave (mayHavePerfGain: blocks x 4 >= SMs).
    Verification (q > 1) always runs XQA's speculative mode. Heads wider than 256 (MLA) run neither."""
    b, q, ctx, h, kvh, d = (np.asarray(a, dtype=float) for a in (batch, q_per_seq, context_len, heads, kv_heads,
                                                                   head_dim))
    supported = (h / kvh <= XQA_MAX_GROUP) & (d % 16 == 0) & (d <= XQA_MAX_HEAD_DIM)
    gain = kvh * b * np.floor(ctx / XQA_MIN_TOKENS_PER_BLOCK) * XQA_MIN_BLOCK_FACTOR >= sms
    return (q == 1) & ~(supported & gain) & (d <= XQA_MAX_HEAD_DIM)


def xqa_paths(b: Array, q: Array, ctx: Array, h: Array, kvh: Array, d: Array, sms: float
              ) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """(MMHA, XQA) masks of a "xqa" profile's attention: MMHA per `xqa_runs_mmha`, XQA for the other decode and
    verification shapes it takes, the rest (prefill, and MLA's 576-wide latent at any q: `XQA_MAX_HEAD_DIM`) the
    split-KV ("fa3") form of the context FMHA / FlashMLA kernels."""
    mmha = xqa_runs_mmha(b, q, ctx, h, kvh, d, sms)
    return mmha, ~mmha & (q <= XQA_MAX_Q) & (h / kvh <= XQA_MAX_GROUP) & (d <= XQA_MAX_HEAD_DIM)


def attention_num_splits(batch: ArrayLike, q_per_seq: ArrayLike, context_len: ArrayLike, heads: ArrayLike,
                         kv_heads: ArrayLike, head_dim: ArrayLike, hw: HardwareProfile) -> tuple[Array, Array, Array]:
    """(work units, KV splits, CTA slots) of one attention kernel as the GPU's kernel family launches it
    (`hw.attention_kernel`). A work unit is one CTA's (sequence x head x query tile) before splitting.

    * "fa2" (FlashAttention-2, vLLM on Ampere / Ada; flash_api.cpp mha_varlen_fwd): a decode step of a
      GQA model swaps its query heads into the query length (seqlenq_ngroups_swapped: the heads sharing
      a KV head ride one 64-row tile) and only then splits the KV (`fa_num_splits` over 2 x SMs slots,
      KV blocks of `fa_block_n` keys). MHA decode (heads = KV heads) is not swapped and never split:
      one CTA per (sequence x head) walks its whole KV, so few sequences run on few SMs.
    * "fa3" (FA3 / FlashInfer): query heads packed per KV head for every layout, the KV split when the
      units do not fill the SMs and span more than one 128-key block; `fa_num_splits` over the SMs.
    * "xqa" (TensorRT-LLM's decode kernels): XQA runs one CTA per (sequence x KV head) with its query heads,
      the KV cut into `xqa_num_splits` sub-sequences aiming at 8 waves of CTAs over the SMs (not one); where
      `xqa_runs_mmha` (the caller has already widened the KV to one head per query head), MMHA's split-KV
      fills the SMs as "fa3" does; prefill runs the context FMHA kernel, as "fa3"; heads wider than XQA takes
      (MLA) the GPU's split-KV kernel where the profile holds it (`wide_head_profile`)."""
    hw = wide_head_profile(hw, head_dim)
    b, q, ctx, h, kvh, d = (np.asarray(a, dtype=float) for a in (batch, q_per_seq, context_len, heads, kv_heads,
                                                                   head_dim))
    sms = float(hw.sm_count)
    if hw.attention_kernel == "xqa":  # MMHA: one CTA per query head, as an MHA of `heads` heads
        mmha, xqa = xqa_paths(b, q, ctx, h, kvh, d, sms)
        kvh = np.where(mmha, h, kvh)
    units = b * kvh * np.ceil(q * (h / kvh) / ATTENTION_Q_TILE)
    if hw.attention_kernel == "fa2":
        slots = sms * FA2_CTAS_PER_SM
        swapped = (q == 1) & (h > kvh)
        units = np.where((q == 1) & ~swapped, b * h, units)
        splits = np.where(swapped, fa_num_splits(units, slots, np.ceil(ctx / fa_block_n(d))), 1.0)
        return units, splits, np.full(np.shape(splits), slots)
    split = attention_splits_kv(units, ctx, hw)
    splits = np.where(split, np.maximum(fa_num_splits(units, sms, np.ceil(ctx / SPLIT_KV_MIN_KEYS)), 2.0), 1.0)
    if hw.attention_kernel == "xqa":
        splits = np.where(xqa, xqa_num_splits(b, kvh, ctx, sms), splits)
        splits = np.where(fmha_generation(hw, d), 1.0, splits)
    return units, splits, np.full(np.shape(splits), sms)


def fmha_generation(hw: HardwareProfile, head_dim: ArrayLike) -> NDArray[np.bool_]:
    """Where a "xqa" profile (TensorRT-LLM) runs an MLA generation step through its context FMHA kernel: heads wider
    than XQA takes on a GPU with neither FlashMLA nor trtllm-gen MLA (sm80, sm89, sm120: the profile holds no
    `split_kv`, so `wide_head_profile` left it as it is). AttentionOp::mlaGeneration (cpp/tensorrt_llm/common/
    attentionOp.cpp) falls through to "Use FMHA otherwise": numGroupedHeads = heads, qSeqLen = heads x q (the query
    heads ride the query axis of one latent KV head), kvSeqLen = the past length, and fmha_v2 has no multi-block
    mode, so each (sequence x 64-row tile) CTA walks the whole latent cache on one SM: no KV split, and the step
    lasts as many waves of such walks as the CTAs make (`attention_time_s`). An fp8 cache is read into its bf16 MMAs
    (NVIDIA's tables: fp8 and bf16 KV rows alike, 7.8 ms at batch 1-16 and 65k tokens on A100)."""
    return np.asarray((hw.attention_kernel == "xqa") & (np.asarray(head_dim, dtype=float) > XQA_MAX_HEAD_DIM))


def attention_splits_kv(units: ArrayLike, context_len: ArrayLike, hw: HardwareProfile) -> NDArray[np.bool_]:
    """Whether a split-KV ("fa3") kernel splits the KV across CTAs (and runs a combine kernel): the
    (sequence x KV head x query tile) work units do not fill the SMs and the KV spans more than one
    block (FlashAttention's num_splits heuristic, flash_api.cpp; FlashInfer's split-KV scheduler alike).
    The kernel family's own rule is `attention_num_splits`."""
    return (np.asarray(units, dtype=float) < hw.sm_count) & (np.asarray(context_len, dtype=float) > SPLIT_KV_MIN_KEYS)


def _xqa_time_s(b: Array, q: Array, ctx: Array, group: Array, kvh: Array, dqk: Array, dv: Array, kvt: Array,
                hbm_s: Array, units: Array, splits: Array, hw: HardwareProfile) -> Array:
    """TensorRT-LLM's XQA kernel: its B x KV heads x m CTAs (`xqa_num_splits`) run in waves of one per SM; a CTA
    pays `attention_cta_us` and streams its L / m keys of one KV head at `xqa_cta_gb_per_s` while its
    mma.sync tiles (16-row, over the q x group query rows) run at `xqa_compute` of the SM's dense peak, in series
    (one CTA per SM leaves nothing to overlap); the waves are joined with the whole cache's HBM stream by a p-norm
    of p = `attention_cta_overlap`. Fitted to NVIDIA's TensorRT-LLM tables (tools/framework_kernels.py): on Hopper
    1.2-1.3 us a CTA with the mma.sync at 6-7% of dense peak and the CTA's own stream not binding; on B200, A100,
    L40S and RTX PRO 6000 105-240 GB/s a CTA."""
    eff = hw.efficiency
    sms = float(hw.sm_count)
    keys = ctx / splits
    rows = np.ceil(q * group / 16.0) * 16.0
    cta_s = (eff.attention_cta_us * 1e-6 + keys * (kvt / kvh) / (eff.xqa_cta_gb_per_s * 1e9)
             + 2.0 * rows * keys * (dqk + dv) / (hw.peak("bf16") / sms * eff.xqa_compute))
    waves = np.ceil(units * splits / sms)
    return eff.attention_overhead_us * 1e-6 + _join(waves * cta_s, hbm_s, eff.attention_cta_overlap)


def _wide_head_peak(hw: HardwareProfile, wide: HardwareProfile, dtype: str, kv_elem_bytes: Array) -> Array | float:
    """Tensor-core peak of an attention's matmuls: `dtype`'s, but fp8's where `wide` (`wide_head_profile`) stands for
    TensorRT-LLM's MLA generation over an fp8 KV cache (<= 1 byte a latent element), which quantises the queries to
    fp8 and runs fp8 MMAs (mFP8GenerationMLA = quant_mode.hasFp8KvCache(), cpp/tensorrt_llm/thop/attentionOp.cpp;
    AttentionOp::mlaGeneration fills quant_q_buf, cpp/tensorrt_llm/common/attentionOp.cpp)."""
    if wide is hw:
        return hw.peak(dtype)
    return np.where(kv_elem_bytes <= 1.0, wide.peak("fp8"), wide.peak(dtype))


def tile_keys(q: ArrayLike, ctx: ArrayLike) -> Array:
    """Keys per query row the attention tiles compute under the causal mask: every KV block up to and including the
    diagonal one (FlashAttention's n_block_max for causal masking, blocks of `SPLIT_KV_MIN_KEYS` keys), so the
    visible keys L - (q - 1) / 2 on average plus half a block, at most the context L."""
    q_, c = np.asarray(q, dtype=float), np.asarray(ctx, dtype=float)
    return np.minimum(c, np.maximum(c - (q_ - 1.0) / 2.0 + (SPLIT_KV_MIN_KEYS - 1.0) / 2.0, 1.0))


def prefill_makespan(q: Array, ctx: Array, scores: Array, sms: float, longest_first: bool) -> Array:
    """Factor (>= 1) by which a prefill's (q > 1) matmul and softmax time exceeds its work spread evenly over the SMs.
    Its CTAs are query tiles of `PREFILL_Q_TILE` rows (one per query head); under the causal mask the last tile of a
    sequence walks all `ctx` keys, the first one tile's worth. FlashAttention-3's persistent scheduler hands out the
    longest tiles first (`longest_first`: hopper/tile_scheduler.hpp, causal m_blocks in reverse), so the others pack
    around them and the kernel lasts max(mean work per SM, the longest tile); a kernel launched as a plain grid
    (FlashAttention-2, FlashInfer, TensorRT-LLM's context FMHA) ends with a tail of, on average, half its longest
    tile. Few heads of a short prompt leave SMs idle (one head of 16k tokens: 128 tiles on H100's 132 SMs, the
    longest 2x the mean); many fill them and the factor is ~1. Co-resident CTAs share their SM's tensor cores, so
    the SMs, not the CTA slots, count. Decode (q = 1) keeps its split-KV form (1)."""
    longest = sms * np.minimum(q, PREFILL_Q_TILE) * ctx / np.maximum(scores, 1.0)  # one tile seeing every key
    return np.where(q > 1.0, np.maximum(1.0, longest) if longest_first else 1.0 + longest / 2.0, 1.0)


def attention_time_s(
    batch: ArrayLike, q_per_seq: ArrayLike, context_len: ArrayLike, heads: ArrayLike, kv_heads: ArrayLike,
    qk_dim: ArrayLike, v_dim: ArrayLike, kv_bytes_per_token: ArrayLike, hw: HardwareProfile,
    dtype: str = "bf16", act_bytes: float = 2.0, buffer_sets: ArrayLike | None = None,
) -> tuple[Array, Array, Array, Array, Array]:
    """Attention of B sequences x q new tokens over a KV cache of L tokens (L includes the q), for
    one layer on one GPU: decode (q = 1), verification (small q, long L) and prefill (q = L) in one
    form, FlashAttention / flash-decoding style (Dao et al. 2022-23).

    * Each sequence's KV cache (L tokens, kv_bytes_per_token each) is read once for all q new
      tokens (flash-decoding); Q and O are read and written once.
    * FLOPs = 2 * q * L' * (qk_dim + v_dim) per head, L' = L - (q - 1)/2: the prefix is visible to
      every new token, the new tokens see each other causally (a prefill does half the square).
    * The q * (heads / kv_heads) query rows that share a KV head are packed into 64-row tensor-core
      tiles (GQA packing), so a decode step pays for 64 rows and verification with q * group <= 64
      costs the same tensor-core time as decode — between the two regimes it is this padding, not q,
      that sets the compute; past the ridge it grows with q as prefill does.
    * Fixed costs: `attention_overhead_us` per kernel, `attention_split_us` more when the KV is
      split across CTAs (`attention_splits_kv`: the combine kernel; fading linearly as the units fill
      the SMs, so that time never drops where splitting stops), and
      `attention_cta_us` per wave of (sequence x KV head x query tile) work units over the SMs (never
      less than one: split-KV fills the GPU at small batch), joined with the streaming by a p-norm
      of p = `attention_cta_overlap` (1: in series, as one unit per SM; large: hidden by the other
      units). Measured: 9 us floor and ~3 us per wave of 132 units on H100 FA3 (NVIDIA's tables,
      aiconfigurator-core 0.12.0).
    * Compute at `attention_compute` of the dense peak, memory at `attention_memory` of HBM; a
      benchmark replaying one KV cache (`buffer_sets`, see `l2_hit_fraction`) reads it from L2.
    Returns (time, compute, memory, flops, bytes).
    """
    wide = wide_head_profile(hw, qk_dim)
    b, q, ctx, h, kvh, dqk, dv, kvt = (np.asarray(a, dtype=float) for a in (
        batch, q_per_seq, context_len, heads, kv_heads, qk_dim, v_dim, kv_bytes_per_token))
    peak, hw = _wide_head_peak(hw, wide, dtype, kvt / (kvh * dqk)), wide
    group = h / kvh
    keys = np.maximum(ctx - (q - 1.0) / 2.0, 1.0)
    flops = 2.0 * b * q * keys * h * (dqk + dv)
    rows = np.ceil(q * group / ATTENTION_Q_TILE) * ATTENTION_Q_TILE
    # keys the tiles compute: the KV blocks (SPLIT_KV_MIN_KEYS = kBlockN = 128 keys) above the causal diagonal are
    # skipped, the diagonal block is computed whole (half of it masked): on average a row computes its visible keys
    # plus half a block, never more than the context. Verification (q <= a block) computes every key; a prefill
    # the triangle plus a half-block strip (L = 1024: 12.5% over the exact half square, 16k: 0.8%)
    padded = 2.0 * b * kvh * rows * tile_keys(q, ctx) * (dqk + dv)
    xqa = np.zeros(np.shape(b * h), bool)
    reread: Array | float = 1.0
    if hw.attention_kernel == "xqa":  # MMHA reads a KV head's cache once per query head
        mmha, xqa = xqa_paths(b, q, ctx, h, kvh, dqk, float(hw.sm_count))
        reread = np.where(mmha, group, 1.0)
    kv = b * ctx * kvt * reread
    bytes_ = kv + b * q * h * (dqk + dv) * act_bytes
    eff = hw.efficiency
    # matmuls on the tensor cores, then the softmax of every score of the padded tiles on the MUFU units
    scores = padded / (2.0 * (dqk + dv))
    compute = (padded / (peak * eff.attention_compute) + softmax_s(scores, hw)) * prefill_makespan(
        q, ctx, scores, float(hw.sm_count), hw.is_hopper and hw.attention_kernel == "fa3")
    hit = 0.0 if buffer_sets is None else l2_hit_fraction(np.asarray(buffer_sets, dtype=float) * bytes_, hw)
    # MMHA's query heads of one KV head run side by side: all but the first read its cache from L2
    hit = np.maximum(hit, (1.0 - 1.0 / reread) * kv / bytes_)
    units, splits, slots = attention_num_splits(b, q, ctx, h, kvh, dqk, hw)
    # TensorRT-LLM's MLA generation on its context FMHA (`fmha_generation`): whole waves of unsplit CTAs, each on one SM
    compute = np.where(fmha_generation(hw, dqk) & (q == 1.0),
                       compute * np.ceil(units / hw.sm_count) * hw.sm_count / np.maximum(units, 1.0), compute)
    # split-KV spreads few (sequence x KV head) units over the SMs, but not at full bandwidth: a share
    # `attention_split_bw_loss` of it is lost as the units fall to none per SM (H100 FA3: batch 1 streams
    # its KV at ~86% of batch 8's rate, NVIDIA's tables)
    fill = np.clip(units / hw.sm_count, 0.0, 1.0)
    mem = stream_s(bytes_, hit, hw, hw.mem_bw_bytes_per_s * eff.attention_memory
                   * (1.0 - eff.attention_split_bw_loss * (1.0 - fill)))
    # Little's law per CTA: one CTA walks its share of the KV block after block at
    # `attention_cta_gb_per_s` (its loads in flight over the memory latency, with its MMAs in series), so
    # units x splits CTAs, at most `slots` at once, cannot stream faster than that many times the rate
    # (vLLM FA2 on A100: an MHA head alone streams ~22 GB/s, 64 heads ~1.3 TB/s, NVIDIA's tables)
    ctas = units * splits
    cta_s = np.ceil(ctas / slots) * bytes_ / np.maximum(ctas, 1.0) / (eff.attention_cta_gb_per_s * 1e9)
    mem = _join(mem, cta_s, eff.ridge_sharpness)
    per_unit = eff.attention_cta_us * 1e-6 * np.maximum(units / hw.sm_count, 1.0)
    split = splits > 1  # flash-decoding's combine kernel
    # the combine kernel's share fades as the units fill the SMs (fewer splits each): no cliff in batch
    combine = np.where(split, eff.attention_split_us * (1.0 - fill), 0.0)
    # a prefill's query tiles each load their Q tile and write their O and log-sum-exp: `attention_prefill_cta_us`
    # per wave of them over the SMs, in series with the rest. The query heads of a KV head share tiles where that
    # fills them better (FlashAttention-3's pack_gqa, flash_api.cpp get_pack_gqa: verification's k + 1 rows x the
    # group; MLA's 128 heads over one latent): b x KV heads x ceil(q x group / PREFILL_Q_TILE) CTAs, which is
    # b x heads x ceil(q / PREFILL_Q_TILE) for a prompt of whole tiles
    tiles = np.where(q > 1.0, b * kvh * np.ceil(q * group / PREFILL_Q_TILE), 0.0)
    t = (eff.attention_overhead_us + combine + eff.attention_prefill_cta_us * tiles / hw.sm_count) * 1e-6 \
        + _join(per_unit, _join(compute, mem, eff.ridge_sharpness), eff.attention_cta_overlap)
    if xqa.any():
        hbm = stream_s(bytes_, hit, hw, hw.mem_bw_bytes_per_s * eff.attention_memory)
        t = np.where(xqa, _xqa_time_s(b, q, ctx, group, kvh, dqk, dv, kvt, hbm, units, splits, hw), t)
    return t, compute, mem, flops, bytes_
