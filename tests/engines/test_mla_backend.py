"""MLA verification on a backend that takes one-token queries only (issue 33): vLLM's SINGLE_ONLY MLA backends
(TRITON_MLA, CUTLASS_MLA) schedule a k + 1 token verification as a prefill, whose attention up-projects every
cached token's latent (_compute_prefill_context: kv_b_proj) before attending in the per-head (MHA) form."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from specsim.cost.hardware import load_hardware
from specsim.cost.model import load_model
from specsim.cost.ops import _mla_context_up, layer_ops, make_shape
from specsim.cost.ops_core import context
from specsim.engines.mla import mla_single_query, vllm_default_mla_backend
from specsim.engines.passes import clear_pass_cache, pass_time_s
from specsim.engines.profile import engines_dir, load_engine, parse_engine
from specsim.errors import SpecsimError
from specsim.files import read_mapping
from tests.corpus.harness import invoke


@pytest.fixture(scope="module")
def dsv3():
    return load_model("deepseek-v3")


def test_vllm_default_backend_per_gpu() -> None:
    """cuda.py's priorities: FA-MLA on Hopper, FlashInfer-MLA on sm100, Triton-MLA on sm8x / sm120; AMD not read."""
    assert vllm_default_mla_backend(load_hardware("h200")) == "flash_attn_mla"
    assert vllm_default_mla_backend(load_hardware("h100-sxm")) == "flash_attn_mla"
    assert vllm_default_mla_backend(load_hardware("b200")) == "flashinfer_mla"
    assert vllm_default_mla_backend(load_hardware("a100-sxm-80gb")) == "triton_mla"
    assert vllm_default_mla_backend(load_hardware("rtx-pro-6000")) == "triton_mla"
    assert vllm_default_mla_backend(load_hardware("mi300x")) == ""
    assert mla_single_query("vllm_auto", load_hardware("a100-sxm-80gb"))
    assert not mla_single_query("vllm_auto", load_hardware("h200"))
    assert mla_single_query("cutlass_mla", load_hardware("b200"))
    assert not mla_single_query("", load_hardware("a100-sxm-80gb"))


def test_profiles_select() -> None:
    assert load_engine("vllm").mla_backend == "vllm_auto"
    assert load_engine("vllm-0.10").mla_backend == "vllm_auto"
    for name in ("sglang", "trtllm", "atom", "hf"):
        assert load_engine(name).mla_backend == ""
    data = dict(read_mapping(engines_dir() / "sglang.yaml"))
    with pytest.raises(SpecsimError, match="mla_backend"):
        parse_engine({**data, "mla_backend": "nope"}, "x")
    with pytest.raises(SpecsimError, match="missing sources"):
        parse_engine({**data, "mla_backend": "triton_mla"}, "x")


def test_context_up_projection_by_hand(dsv3) -> None:
    """DeepSeek-V3 (kv_lora_rank 512, 128 heads, qk_nope 128, v 128) verifying k = 3 (q = 4) at 64k context, tp 8,
    on an A100 (roofline): kv_b_proj over 65,536 - 4 cached tokens = 2 x 512 x 16 x 256 FLOPs per token per GPU
    = 4.19 MFLOP, 274.9 GFLOP per layer per sequence, >= 0.88 ms a layer at the A100's 312 TFLOPS bf16."""
    hw = load_hardware("a100-sxm-80gb")
    s = make_shape(1, 4, 65536, 8, "bf16", "bf16", mla_single_query=True)
    c = context(dsv3, hw, s)
    t, comp, _mem, flops, bytes_ = _mla_context_up(c, np.asarray(1.0), np.asarray(65532.0))
    per_token = 2 * 512 * (128 / 8) * (128 + 128)
    assert per_token == 4_194_304
    assert float(flops) == pytest.approx(65532 * per_token)  # 2.749e11
    assert float(flops) == pytest.approx(2.7487e11, rel=1e-4)
    peak = hw.peak_flops_per_s["bf16"]
    assert float(comp) >= float(flops) / peak * 0.999
    assert float(t) >= float(flops) / peak
    # the latent gather: 576 bf16 read + 576 bf16 written per cached token, and the GEMM's own traffic
    assert float(bytes_) >= 65532 * 576 * 2 * 2
    assert float(t) < 5e-3


def _attention(ops):
    return next(o for o in ops if o.name == "attention")


def test_switch_only_for_verification(dsv3) -> None:
    """q = 1 decode is unchanged on a SINGLE_ONLY backend; q = 4 adds the MHA form plus the up-projection; without
    the flag (backends with q > 1 support) verification keeps the absorbed form."""
    hw = load_hardware("a100-sxm-80gb")
    for q in (1.0,):
        a = _attention(layer_ops(dsv3, hw, make_shape(8, q, 65536, 8, mla_single_query=True)))
        b = _attention(layer_ops(dsv3, hw, make_shape(8, q, 65536, 8)))
        assert np.allclose(a.time_s, b.time_s) and np.allclose(a.flops, b.flops)
    a = _attention(layer_ops(dsv3, hw, make_shape(8, 4, 65536, 8, mla_single_query=True)))
    b = _attention(layer_ops(dsv3, hw, make_shape(8, 4, 65536, 8)))
    s = make_shape(8, 4, 65536, 8, mla_single_query=True)
    c = context(dsv3, hw, s)
    mha = c.cm.attention(s.batch, s.q_per_seq, s.context_len, 16.0, 16.0, 192.0, 128.0, 16.0 * 320.0 * 2.0)
    up = _mla_context_up(c, np.asarray(8.0), np.asarray(65532.0))
    assert float(a.flops) == pytest.approx(float(mha[3] + up[3]))
    assert float(a.time_s) == pytest.approx(float(mha[0] + up[0]))
    assert float(a.time_s) > 3 * float(b.time_s)


def test_engine_passes(dsv3) -> None:
    """vLLM on an A100 (Triton-MLA) pays the prefill path in verification; on an H200 (FA-MLA, VARLEN) and SGLang
    nothing changes; q = 1 is the same whatever the backend."""
    clear_pass_cache()
    vllm = load_engine("vllm")
    plain = dataclasses.replace(vllm, mla_backend="")
    a100, h200 = load_hardware("a100-sxm-80gb"), load_hardware("h200")
    q = np.array([1.0, 4.0])
    on = pass_time_s(vllm, a100, dsv3, 8, q, 65536, 8, "bf16", "bf16")
    off = pass_time_s(plain, a100, dsv3, 8, q, 65536, 8, "bf16", "bf16")
    assert on[0] == pytest.approx(off[0])
    assert on[1] > off[1] * 1.5
    hop = pass_time_s(vllm, h200, dsv3, 8, q, 65536, 8, "fp8", "bf16")
    hop_off = pass_time_s(plain, h200, dsv3, 8, q, 65536, 8, "fp8", "bf16")
    assert np.allclose(hop, hop_off)


def test_evaluate_says_when_verification_runs_the_prefill_path(tmp_path: Path) -> None:
    """The answer names the path where vLLM's default MLA backend takes one-token queries (an MLA model on sm120),
    and is silent on Hopper and for a profile whose MLA kernel takes q > 1 (which then prices verification cheaper:
    the line names the path priced, it is not a caveat)."""
    def ask(*extra: str) -> dict[str, object]:
        r = invoke("evaluate", "-m", "deepseek-v3", "-d", "mtp", "-k", "3", "--acceptance-length", "2.5",
                   "--context", "65536", "--weight-dtype", "nvfp4", "-f", "json", *extra)
        assert r.code == 0, r.err
        return dict(json.loads(r.out))

    sm120 = ask("-H", "rtx-pro-6000", "--tp", "8")
    assert "TRITON_MLA takes one-token queries only" in str(sm120["verify_path"])
    assert "verify_path" not in ask("-H", "h200", "--tp", "8")
    uniform = tmp_path / "vllm-uniform.yaml"
    uniform.write_text('base: vllm\nname: vllm-uniform\nmla_backend: ""\nsources: {mla_backend: "test"}\n')
    patched = ask("-H", "rtx-pro-6000", "--tp", "8", "-e", str(uniform))
    assert "verify_path" not in patched
    assert float(patched["speedup"]) > float(sm120["speedup"])  # type: ignore[arg-type]
