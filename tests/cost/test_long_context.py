"""Long-context attention (issue 33): MLA's kernels (never TensorRT-LLM's MMHA / XQA), MLA prefill in its MHA form,
checked by hand and against NVIDIA's tables where they are installed."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from specsim.cost import attention as at
from specsim.cost.hardware import load_hardware
from specsim.cost.model import load_model
from specsim.cost.ops import layer_ops, make_shape

LAT = 576.0  # DeepSeek-V3's latent + rope key per token (one KV head)


@pytest.fixture(scope="module")
def h200_xqa():
    return dataclasses.replace(load_hardware("h200"), attention_kernel="xqa")


def test_mla_never_runs_mmha_or_xqa(h200_xqa) -> None:
    """MMHA and XQA take heads up to 256 wide: a 576-wide MLA latent runs neither, at q = 1 or in verification."""
    sms = float(h200_xqa.sm_count)
    assert not at.xqa_runs_mmha(1, 1, 131072, 16, 1, LAT, sms)
    mmha, xqa = at.xqa_paths(np.array(8.0), np.array(4.0), np.array(65536.0), np.array(16.0), np.array(1.0),
                             np.array(LAT), sms)
    assert not mmha and not xqa
    assert at.xqa_runs_mmha(1, 1, 4096, 64, 1, 128, sms)  # an MQA head of 128 still may (few CTAs)


def test_mla_latent_read_once_for_all_heads(h200_xqa) -> None:
    """The MLA decode kernel (FlashMLA / trtllm-gen) reads the latent once for all 128 query heads: the bytes are the
    cache's, not 128 copies (MMHA's one CTA per query head), and the time is of that order at HBM speed."""
    b, ctx, h = 64.0, 131072.0, 128.0
    t, _, _, _, bytes_ = at.attention_time_s(b, 1, ctx, h, 1, LAT, 512, LAT * 2, h200_xqa)
    cache = b * ctx * LAT * 2
    assert bytes_ == pytest.approx(cache + b * h * (LAT + 512) * 2)
    flops = 2 * b * ctx * h * (LAT + 512)  # compute-bound at 128 heads: FLOPs at the dense peak bound it below
    assert max(flops / h200_xqa.peak("bf16"), cache / h200_xqa.mem_bw_bytes_per_s) < t < 3 * flops / h200_xqa.peak(
        "bf16")


def _attention_flops(model, hw, q: float, ctx: float) -> float:
    ops = layer_ops(model, hw, make_shape(1, q, ctx, 8, "fp8_block"))
    return float(np.sum([np.asarray(o.flops) for o in ops if o.name == "attention"]))


def test_mla_prefill_runs_mha_form_verification_absorbed() -> None:
    """Decode and verification attend over the latent (576 / 512 per head), a prefill chunk over the up-projected
    keys and values (qk_nope + rope = 192, v 128 per head: vLLM's _forward_prefill, SGLang's forward_normal)."""
    model, hw = load_model("deepseek-v3"), load_hardware("h200")
    heads = model.n_heads / 8
    for q, width in ((4.0, 576.0 + 512.0), (64.0, 576.0 + 512.0), (8192.0, 192.0 + 128.0)):
        ctx = 65536.0
        expect = 2 * q * (ctx - (q - 1) / 2) * heads * width
        assert _attention_flops(model, hw, q, ctx) == pytest.approx(expect, rel=1e-9)


def test_mla_context_tables_are_mha_form() -> None:
    """NVIDIA's context_mla tables (TensorRT-LLM, H200, 16 heads per GPU, isl 16k-32k, bf16): the measured time
    implies a rate under the dense peak counted in the MHA form and above it (impossible) counted absorbed."""
    pytest.importorskip("pyarrow")
    from specsim.cost import aiconfigurator as aic

    if aic.installed_version() is None:
        pytest.skip("aiconfigurator-core not installed")
    path = aic.data_root() / "h200_sxm" / "mla" / "trtllm"
    files = sorted(path.glob("*/context_mla_perf.parquet"))
    if not files:
        pytest.skip("no TensorRT-LLM context_mla table for h200")
    d = aic.parquet().read_table(str(files[-1])).to_pandas()
    d = d[(d["batch_size"] == 1) & (d["num_heads"] == 16) & (d["isl"] >= 16384)
          & (d["kv_cache_dtype"].astype(str) == "bfloat16")]
    assert len(d)
    peak = load_hardware("h200").peak("bf16")
    for isl, ms in zip(d["isl"].astype(float), d["latency"].astype(float), strict=True):
        causal = 2 * isl * (isl + 1) / 2 * 16
        assert causal * (192 + 128) / (ms * 1e-3) < peak < causal * (576 + 512) / (ms * 1e-3)


def test_long_context_scorer_matches_row_prices() -> None:
    """The long-context scorer's MLA price is attention_time_s's on the row, and the tables time no q > 1
    generation row (verification is unmeasured there)."""
    pytest.importorskip("pyarrow")
    from specsim.calibration import long_context as lc
    from specsim.cost import aiconfigurator as aic

    if aic.installed_version() is None:
        pytest.skip("aiconfigurator-core not installed")
    d = lc.mla_rows("h200", "sglang")
    d = d[(d["context_len"] >= lc.LONG_KV) & (d["kv_dtype"] == "bf16")].head(5)
    hw = lc.framework_profile("h200", "sglang")
    by_hand = [at.attention_time_s(r.batch, 1, r.context_len, r.n_heads, 1, LAT, 512, LAT * 2, hw, buffer_sets=1.0)[0]
               * 1e3 for r in d.itertuples()]
    assert lc.mla_predict_ms(d, hw) == pytest.approx(by_hand)
    assert (lc.mla_rows("h200", "trtllm")["q_per_seq"] == 1).all()


def test_trtllm_mla_decode_runs_the_gpus_split_kv_fit() -> None:
    """TensorRT-LLM's MLA generation (FlashMLA on Hopper, trtllm-gen MLA on Blackwell) is priced with the GPU's own
    split-KV ("fa3") fit, not the XQA / MMHA block; heads XQA takes keep the block, and an "fa2" GPU (A100) has no
    split-KV fit to hand over."""
    for gpu in ("h100-sxm", "b200"):
        base = load_hardware(gpu)
        trt = base.for_framework("trtllm")
        assert trt.attention_kernel == "xqa" and trt.split_kv == (base.efficiency, base.attention_kernel)
        wide = at.wide_head_profile(trt, LAT)
        assert wide is at.wide_head_profile(trt, LAT)  # one object: the cost model's memos key on it
        assert wide.efficiency is base.efficiency and wide.attention_kernel == "fa3"
        assert at.wide_head_profile(trt, 128.0) is trt
        args = (8.0, 1.0, 65536.0, 16.0, 1.0, LAT, 512.0)
        assert at.attention_time_s(*args, LAT * 2, trt)[0] == pytest.approx(
            at.attention_time_s(*args, LAT * 2, base)[0])
    assert load_hardware("a100-sxm-80gb").for_framework("trtllm").split_kv is None


def test_trtllm_fp8_mla_decode_computes_in_fp8() -> None:
    """Over an fp8 KV cache TensorRT-LLM quantises MLA generation's queries to fp8 (mFP8GenerationMLA): the
    tensor-core bound is the fp8 peak's; over a bf16 cache, and in the GPU's own (vLLM) kernels, it stays bf16's."""
    base = load_hardware("h200")
    trt = base.for_framework("trtllm")
    args = (256.0, 1.0, 65536.0, 128.0, 1.0, LAT, 512.0, LAT)
    ratio = base.peak("bf16") / base.peak("fp8")
    # the matmuls scale with the peak; the softmax's exps (128 padded rows x 65536 keys a sequence) run on the MUFU
    # units whatever the MMA dtype
    exps = float(at.softmax_s(256.0 * 128.0 * 65536.0, base))

    def mma(hw, kv: float) -> float:
        return float(at.attention_time_s(*args[:-1], kv, hw)[1]) - exps

    assert mma(trt, LAT) == pytest.approx(mma(base, LAT) * ratio)
    assert mma(trt, LAT * 2) == pytest.approx(mma(base, LAT * 2))
