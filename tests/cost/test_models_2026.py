"""The models of 2026 (issue 19): every bundled config loads to its published size and prices a speculative
pass; hybrid models' recurrent state and sparse attention's indexer against hand counts."""

from __future__ import annotations

import numpy as np
import pytest

from specsim.cost.dtypes import Precision, check_precision
from specsim.cost.forward import breakdown
from specsim.cost.hardware import load_hardware
from specsim.cost.mixers import TOPK_ROW_NS_PER_KEY, state_slots
from specsim.cost.model import load_model
from specsim.cost.ops import make_shape
from specsim.errors import SpecsimError

# (catalogue name, total B, active B or None): the model cards / recipes quoted in
# /work/shared/research/models-2026.md (sections 1-11); the tolerance covers rounding on the cards and the
# parts the cost model leaves out (vision towers, norms, DeepSeek-V4's hyper-connections).
SIZES = [
    ("qwen3.5-397b-a17b", 397, 17), ("qwen3.5-35b-a3b", 35, 3), ("qwen3.5-122b-a10b", 122, 10),
    ("qwen3.5-9b", 9, None), ("qwen3-next-80b-a3b", 80, 3), ("deepseek-v3.2", 671, 37), ("kimi-k2.5", 1000, 32),
    ("glm-5", 744, 40), ("glm-5.2", 743, 39), ("glm-4.6", 355, 32), ("minimax-m2", 230, 10),
    ("minimax-m3", 427, 26), ("nemotron-h-56b", 56, None), ("nemotron-nano-9b-v2", 9, None),
    ("nemotron-3-super-120b-a12b", 120, 12), ("deepseek-v4-flash", 284, 13), ("deepseek-v4-pro", 1600, 49),
]


@pytest.mark.parametrize(("name", "total_b", "active_b"), SIZES)
def test_sizes_match_the_cards(name: str, total_b: float, active_b: float | None) -> None:
    m = load_model(name)
    assert m.n_params() / 1e9 == pytest.approx(total_b, rel=0.08)
    if active_b is not None:
        # "A3B"-style labels round and often leave the embeddings out: a looser check that top-k routing is right
        assert m.n_active_params() / 1e9 == pytest.approx(active_b, rel=0.3)


@pytest.mark.parametrize("name", [s[0] for s in SIZES])
def test_every_model_prices_a_verification_pass(name: str) -> None:
    m = load_model(name)
    br = breakdown(m, load_hardware("b200"), make_shape(8, np.array([1.0, 4.0]), 8192, 8, "fp8", "fp8", "custom"))
    t = br.time_s
    assert np.all(np.isfinite(t)) and t[1] > t[0] > 0


def test_gated_deltanet_state_against_a_hand_count() -> None:
    # Qwen3.5-397B-A17B at tp 8 (models-2026.md section 1): 45 GDN layers; per GPU 64 / 8 = 8 value heads
    # with a 128 x 128 fp32 state (mamba_ssm_dtype float32), and a 4-tap conv over q, k, v: (2 x 16 x 128
    # + 64 x 128) / 8 = 1,536 channels keeping 3 bf16 inputs.
    m = load_model("qwen3.5-397b-a17b")
    state, conv = 8 * 128 * 128 * 4, 1536 * 3 * 2
    assert (m.n_linear_layers, m.n_attn_layers, m.linear_state_bytes) == (45, 15, 4.0)
    assert m.linear_state_bytes_per_sequence(8) == 45 * (state + conv)
    # verification of q tokens reads the state once and writes one per token (rollback slots); the
    # projections' activations ride along: in_proj 20,608 / 8 and out_proj 8 x 128 columns, bf16
    hw = load_hardware("h200")
    for b, q in ((1, 1), (16, 4), (32, 8)):
        br = breakdown(m, hw, make_shape(b, q, 4096, 8, "bf16"))
        (mixer,) = [o for o in br.ops if o.name == "linear_mixer"]
        writes = q if q > 1 else 1
        assert mixer.count == 45
        assert float(mixer.bytes_) == pytest.approx(b * ((1 + writes) * (state + conv) + q * (2576 + 1024) * 2))
    assert [state_slots(k) for k in (0, 1, 3, 7)] == [1, 2, 4, 8]


def test_hybrid_memory_grows_with_k_by_the_state_slots() -> None:
    from specsim.drafts.build import make_draft
    from specsim.step.memory import memory_per_gpu

    m = load_model("qwen3.5-35b-a3b")
    d = make_draft("mtp", m)
    per_seq = m.linear_state_bytes_per_sequence(1)
    kv0 = memory_per_gpu(141e9, 0.9, m, d, 0, 16, 4096, 1, "bf16", "bf16").kv_cache
    kv3 = memory_per_gpu(141e9, 0.9, m, d, 3, 16, 4096, 1, "bf16", "bf16", 4.0).kv_cache
    kv_tokens = 16 * (m.kv_bytes_per_sequence(4096 + 4, "bf16") - m.kv_bytes_per_sequence(4096 + 1, "bf16"))
    assert float(kv3 - kv0) == pytest.approx(16 * 3 * per_seq + float(kv_tokens))


def test_dsa_reads_top_k_and_its_indexer_grows_with_context() -> None:
    # DeepSeek-V3.2: attention reads the top 2,048 latent entries per query; the indexer scores every
    # cached fp8 key (128 values + a 4-byte scale) with 64 heads x 128 and writes / reads fp32 logits.
    m = load_model("deepseek-v3.2")
    hw = load_hardware("h200")
    assert (m.sparse_topk, m.index_heads, m.index_dim, m.index_key_bytes) == (2048, 64, 128, 132.0)
    ctx = np.array([8192.0, 65536.0])
    b, q = 4.0, 2.0
    br = breakdown(m, hw, make_shape(b, q, ctx, 8, "fp8", "fp8"))
    ops = {o.name: o for o in br.ops}
    assert np.allclose(ops["attention_sparse"].bytes_[0], ops["attention_sparse"].bytes_[1])
    hand = b * ctx * 132.0 + b * q * 64 * 128 * 2.0 + b * q * ctx * 4.0 * 2.0
    assert np.allclose(ops["indexer"].bytes_, hand)
    assert np.allclose(ops["attention_sparse"].time_s[0], ops["attention_sparse"].time_s[1])
    # the top-k: one CTA per query row (b x q = 8 rows: one wave over H200's 132 SMs) walks the row's scores
    # at TOPK_ROW_NS_PER_KEY, so the indexer grows by at least that per token of context
    grow = float(np.diff(ops["indexer"].time_s)[0])
    assert grow >= np.diff(ctx)[0] * TOPK_ROW_NS_PER_KEY * 1e-9 > 0
    # past the top-k the step grows only by the indexer: less than MLA's 576-entry latent read by dense
    # attention (DeepSeek-V3), and far less once many rows share the top-k's waves (0.38 at batch 64 since dense MLA
    # decode's matmuls run at the prefill-fitted MMA rate with the softmax apart: H200 MLA rows' bias +19% -> +7..13%)
    for batch, ratio in ((b, 1.0), (64.0, 0.4)):
        sparse = breakdown(m, hw, make_shape(batch, q, ctx, 8, "fp8", "fp8")).time_s
        dense = breakdown(load_model("deepseek-v3"), hw, make_shape(batch, q, ctx, 8, "fp8", "fp8")).time_s
        assert 0 < float(np.diff(sparse)[0]) < ratio * float(np.diff(dense)[0])


def test_glm_5_2_shares_its_indexer_over_four_layers() -> None:
    m = load_model("glm-5.2")
    assert (m.n_sparse_layers, m.n_index_layers, m.n_dense_layers) == (78, 21, 3)
    br = breakdown(m, load_hardware("b200"), make_shape(1, 1, 32768, 8, "fp8", "fp8"))
    assert [o.count for o in br.ops if o.name == "indexer"] == [21]


def test_precision_per_part() -> None:
    assert load_model("gpt-oss-120b").native_precision == "bf16,experts=mxfp4"
    assert load_model("kimi-k2.5").native_precision == "bf16,experts=int4"
    assert load_model("deepseek-v4-pro").native_precision == "fp8_block,experts=mxfp4,head=bf16"
    p = Precision.parse("bf16,experts=nvfp4,dense=nvfp4")
    assert (p.attention, p.dense, p.experts, p.mtp) == ("bf16", "nvfp4", "nvfp4", "bf16")
    assert check_precision("bf16, experts=mxfp4") == "bf16,experts=mxfp4"
    m = load_model("deepseek-v3")
    c = m.param_counts()
    assert m.weight_bytes("bf16,experts=nvfp4") == pytest.approx(
        2 * (c["attention"] + c["dense_mlp"] + c["embedding"] + c["lm_head"]) + 0.5625 * c["experts"])
    for bad in ("fp5", "bf16,moe=fp8", ""):
        with pytest.raises(SpecsimError):
            check_precision(bad)


def test_nvfp4_runs_on_fp4_tensor_cores_where_the_gpu_has_them() -> None:
    m = load_model("deepseek-v3")
    fast = {}
    for gpu in ("b200", "h200"):
        t = {wd: float(breakdown(m, load_hardware(gpu), make_shape(256, 1, 2048, 8, wd, "fp8", "custom")).time_s)
             for wd in ("fp8", "nvfp4")}
        fast[gpu] = t["fp8"] / t["nvfp4"]
    # on B200 nvfp4 streams fewer bytes and computes at twice fp8's peak; on H200 it runs weight-only
    # (dequantised to bf16 MMAs), which at batch 256 gives back part of the saving
    assert fast["b200"] > 1.2 and fast["b200"] > fast["h200"]
