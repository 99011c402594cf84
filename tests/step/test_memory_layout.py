"""Memory per GPU under expert parallelism, DP attention and pipelines: hand calculations, and the engines' own
reports (tests/step/data/engine_memory.yaml, each quoted from its source)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from specsim.cost.dtypes import Precision
from specsim.cost.hardware import load_hardware
from specsim.cost.layout import Layout
from specsim.cost.model import load_model
from specsim.drafts.build import make_draft
from specsim.step.evaluate import Target, memory_per_gpu

DSV3 = load_model("deepseek-v3")
H200 = load_hardware("h200")
REPORTS = yaml.safe_load((Path(__file__).parent / "data" / "engine_memory.yaml").read_text())["entries"]


def _report(entry_id: str) -> dict:
    return next(e for e in REPORTS if e["id"] == entry_id)


def test_weights_split_as_each_part_is_split() -> None:
    # DP attention over 8 GPUs with EP 8: attention, shared experts and embeddings whole on every GPU, routed
    # experts an eighth each, the three dense layers' MLPs tensor-parallel over the 8 (SGLang's gather)
    c = DSV3.param_counts()
    p = Precision.parse("fp8_block", DSV3.native_precision)
    shared = DSV3.n_moe_layers * 3 * DSV3.hidden * DSV3.shared_width
    want = (c["attention"] * p.bytes_of("attention") + c["dense_mlp"] * p.bytes_of("dense") / 8
            + (c["experts"] - shared) * p.bytes_of("experts") / 8 + shared * p.bytes_of("experts")
            + (c["embedding"] + c["lm_head"]) * p.bytes_of("head"))
    assert DSV3.weight_bytes_per_gpu("fp8_block", Layout(1, dp=8, ep=8)) == pytest.approx(want, rel=1e-12)
    # tensor parallelism alone divides everything by tp but MLA's latent down-projections (replicated, as vLLM's
    # and SGLang's fused_qkv_a_proj_with_mqa is: h x (q_lora_rank + kv_lora_rank + rope) per layer); a pipeline
    # divides the layers again
    whole = DSV3.n_attn_layers * DSV3.hidden * (DSV3.q_lora_rank + DSV3.kv_lora_rank + DSV3.qk_rope_head_dim)
    extra = whole * (1 - 1 / 8) * p.bytes_of("attention")
    assert DSV3.weight_bytes_per_gpu("fp8_block", 8) == pytest.approx(DSV3.weight_bytes("fp8_block") / 8 + extra)
    assert DSV3.weight_bytes_per_gpu("fp8_block", Layout(8, pp=2)) == pytest.approx(
        (DSV3.weight_bytes("fp8_block") / 8 + extra) / 2)


def test_dp_attention_caches_its_own_sequences() -> None:
    none = make_draft({"method": "none"}, DSV3, "test")
    tp = memory_per_gpu(Target(H200, DSV3, 8, "fp8_block"), none, 0, 64, 8192)
    dp = memory_per_gpu(Target(H200, DSV3, 1, "fp8_block", layout=Layout(1, dp=8, ep=8)), none, 0, 64, 8192)
    # MLA's latent is replicated over tp: 64 sequences on every GPU at tp 8, 8 per GPU at dp 8
    per_seq = float(DSV3.kv_bytes_per_sequence(8193.0, "bf16", 1))
    assert float(tp.kv_cache) == pytest.approx(64 * per_seq) and float(dp.kv_cache) == pytest.approx(8 * per_seq)


def test_dp_attention_holds_what_vllm_reports_against_tp() -> None:
    """vLLM's maximum concurrency at 1M context for DeepSeek-V4-Flash on 8x B200, DP 8 + EP against TP 8 + EP
    (vllm-project/vllm#51454): 156.9x and 20.43x. The ratio checks the layout's memory (each DP group caches
    its own sequences, the attention weights replicated); the absolute figures depend on vLLM's own KV layout
    for DeepSeek-V4's compressed layers. Both runs at the DP run's stated gpu_memory_utilization 0.95 and fp8 KV
    (the TP run's utilisation is not stated)."""
    dp_run, tp_run = _report("vllm-51454-b200-dsv4flash-dp8-ep"), _report("vllm-51454-b200-dsv4flash-tp8-ep")
    published = float(dp_run["reported"]["max_concurrency_at_1M"].rstrip("x")) / float(
        tp_run["reported"]["max_concurrency_at_1M"].rstrip("x"))
    m, hw = load_model("deepseek-v4-flash"), load_hardware("b200")
    none = make_draft({"method": "none"}, m, "test")
    conc = []
    for lay in (Layout(1, dp=8, ep=8), Layout(8, ep=8)):
        mem = memory_per_gpu(Target(hw, m, lay.tp, "native", "fp8", 0.95, layout=lay), none, 0, 1, 1_000_000)
        conc.append(float(mem.kv_capacity) / float(mem.kv_cache) * lay.dp)
    assert conc[0] / conc[1] == pytest.approx(published, rel=0.05)
    assert np.isfinite(conc).all()
