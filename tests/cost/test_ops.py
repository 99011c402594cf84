from __future__ import annotations

import numpy as np
import pytest

from specsim.cost.forward import breakdown, forward_time_s
from specsim.cost.hardware import load_hardware
from specsim.cost.model import load_model
from specsim.cost.ops import ACT_BYTES, layer_ops, make_shape
from specsim.errors import SpecsimError


def _op(model: str, name: str, tp: int = 1, tokens: int = 1, dtype: str = "bf16", ctx: int = 1024):
    ops = layer_ops(load_model(model), load_hardware("h100-sxm"), make_shape(1, [tokens], ctx, tp, dtype))
    return next(o for o in ops if o.name == name)


@pytest.mark.parametrize("tp", [1, 8])
def test_llama2_70b_qkv_by_hand(tp: int) -> None:
    # K = 8192; N = (64 query + 2 x 8 KV heads) x 128 / tp. tp 1: 8192 x 10240 weights.
    n = (64 + 2 * 8) * 128 // tp if tp == 1 else (64 // 8 + 2 * 1) * 128
    op = _op("llama-2-70b", "qkv", tp=tp, tokens=4)
    weights = 8192 * n * 2
    assert weights == (167_772_160 if tp == 1 else 20_971_520)
    assert op.bytes_[0] == pytest.approx(weights + 4 * (8192 + n) * ACT_BYTES)
    assert op.flops[0] == pytest.approx(2 * 4 * 8192 * n)


def test_tp_divides_weight_bytes_and_quantisation_shrinks_them() -> None:
    for name in ("up", "down", "o"):
        b1 = _op("llama-3.1-70b", name, tp=1).bytes_[0]
        b8 = _op("llama-3.1-70b", name, tp=8).bytes_[0]
        assert b1 / b8 == pytest.approx(8, rel=0.01)
    assert _op("llama-3.1-70b", "up", dtype="int4").bytes_[0] == pytest.approx(
        _op("llama-3.1-70b", "up").bytes_[0] / 4, rel=0.01)


def test_attention_flops_and_bytes_by_hand() -> None:
    # Llama-2-7B, one sequence, q=2 new tokens, 1000 keys: FLOPs 4*q*L'*heads*hd with L' = L - (q-1)/2
    # (the two new tokens see each other causally), KV bytes L*2*32*128*2
    op = _op("llama-2-7b", "attention", tokens=2, ctx=1000)
    assert op.flops[0] == pytest.approx(4 * 2 * 999.5 * 32 * 128)
    assert op.bytes_[0] == pytest.approx(1000 * 2 * 32 * 128 * 2 + 2 * 32 * 256 * 2)


def test_moe_expert_tax_matches_monte_carlo() -> None:
    # Expected distinct experts for T tokens picking top-k of E, against simulated routing.
    m = load_model("mixtral-8x7b")
    hw = load_hardware("h100-sxm")
    rng = np.random.default_rng(0)
    for tokens in (1, 2, 4, 16):
        sims = [len(set(np.concatenate([rng.choice(8, 2, replace=False) for _ in range(tokens)])))
                for _ in range(4000)]
        ops = layer_ops(m, hw, make_shape(1, [tokens], 512))
        up = next(o for o in ops if o.name == "up")
        weights_per_expert = 2 * 14336 * 4096 * 2
        distinct = (up.bytes_[0] - tokens * 2 * (4096 + 2 * 14336) * 2 / 1) / weights_per_expert
        assert distinct == pytest.approx(np.mean(sims), rel=0.02), tokens
    t = forward_time_s(hw, m, 1, np.array([1, 2, 4]), 512)
    dense = forward_time_s(hw, load_model("llama-2-13b"), 1, np.array([1, 2, 4]), 512)
    assert t[2] / t[0] > 1.3 > dense[2] / dense[0]  # verification is dearer for MoE targets


def test_forward_sums_families_and_is_vectorised() -> None:
    hw, m = load_hardware("h100-sxm"), load_model("llama-3.1-8b")
    shape = make_shape(np.array([1, 8, 64])[:, None], np.array([1, 5])[None, :], 2048)
    br = breakdown(m, hw, shape)
    assert br.time_s.shape == (3, 2)
    assert sum(br.by_family().values()) == pytest.approx(br.time_s)
    assert np.all(br.time_s[:, 1] >= br.time_s[:, 0])


def test_seed_claim_verification_costs_about_one_step_at_small_batch() -> None:
    # Seed chapter: at batch 8, k=4 (40 tokens) verification is still memory-bound (~1 step);
    # at batch 128 (640 tokens) it costs several steps.
    hw, m = load_hardware("h100-sxm"), load_model("llama-3.1-70b")
    small = forward_time_s(hw, m, 8, np.array([1, 5]), 1024, tp=8)
    large = forward_time_s(hw, m, 128, np.array([1, 5]), 1024, tp=8)
    assert small[1] / small[0] < 1.15
    assert large[1] / large[0] > 1.5


def test_mla_and_fp8_run() -> None:
    t = forward_time_s(load_hardware("h200"), load_model("deepseek-v3"), 32, np.array([1, 2]), 4096, tp=8,
                       weight_dtype="fp8", kv_dtype="fp8")
    assert np.all(np.isfinite(t)) and t[1] > t[0]


def test_bad_shapes() -> None:
    with pytest.raises(SpecsimError, match="batch"):
        make_shape(0, 1, 10)
    with pytest.raises(SpecsimError, match="weight dtype"):
        make_shape(1, 1, 10, weight_dtype="fp5")


def test_kernel_launches_per_op() -> None:
    """Each op says how many kernels it stands for (an eager engine's host launch time)."""
    ops = {o.name: o for o in layer_ops(load_model("llama-3.1-8b"), load_hardware("h100-sxm"),
                                        make_shape(np.array([1, 512]), 1, 4096, tp=2))}
    assert ops["elementwise"].kernels == 4 and ops["allreduce"].kernels == 2 and ops["qkv"].kernels == 1
    assert ops["attention"].kernels.tolist() == [2.0, 1.0]  # split-KV combine while the units don't fill the SMs
    fp8 = {o.name: o for o in layer_ops(load_model("llama-3.1-8b"), load_hardware("h100-sxm"),
                                        make_shape(1, 1, 4096, weight_dtype="fp8"))}
    assert fp8["up"].kernels == 2 and fp8["allreduce"].kernels == 0  # quantise + GEMM; no TP, no all-reduce
    br = breakdown(load_model("llama-3.1-8b"), load_hardware("h100-sxm"), make_shape(1, [1], 4096, tp=2))
    assert br.kernels()[0] == pytest.approx(sum(np.asarray(o.kernels, dtype=float).reshape(-1)[0] * o.count
                                                for o in br.ops))
    assert br.overhead_s[0] == load_hardware("h100-sxm").launch_overhead_s


def test_allreduce_implementation_is_the_callers_choice() -> None:
    hw, m = load_hardware("h100-sxm"), load_model("llama-3.1-70b")
    t = {impl: float(forward_time_s(hw, m, 8, 1, 2048, tp=8, allreduce=impl))
         for impl in ("nccl", "nccl_graph", "custom")}
    assert t["custom"] < t["nccl_graph"] < t["nccl"]
    assert float(forward_time_s(hw, m, 8, 1, 2048, tp=8)) == pytest.approx(t["nccl"])  # the default is unchanged
    with pytest.raises(SpecsimError, match="all-reduce implementation"):
        make_shape(1, 1, 10, allreduce="gloo")


def test_ops_time_each_distinct_token_count_once() -> None:
    """GEMMs depend only on B x q: a grid over context gives the same GEMM times in every column."""
    hw, m = load_hardware("h100-sxm"), load_model("llama-3.1-8b")
    s = make_shape(np.array([1, 2, 4])[:, None], 1, np.array([512, 4096, 32768])[None, :])
    up = next(o for o in layer_ops(m, hw, s) if o.name == "up")
    assert up.time_s.shape == (3, 3) and np.allclose(up.time_s, up.time_s[:, :1])
    single = next(o for o in layer_ops(m, hw, make_shape(4, 1, 512)) if o.name == "up")
    assert float(single.time_s) == pytest.approx(up.time_s[2, 0])


@pytest.mark.parametrize("gpu", ["a100-sxm-80gb", "h100-sxm", "b300"])
@pytest.mark.parametrize(("model", "tp"), [("mixtral-8x7b", 1), ("mixtral-8x7b", 4), ("qwen3-30b-a3b", 1)])
def test_forward_pass_moe_equals_moe_time_s(gpu: str, model: str, tp: int) -> None:
    """The forward pass prices a MoE layer's experts (up + down + routing) as moe.moe_time_s does for
    the same shape (random routing, the per-GPU expert width): one physics for the tables and the pass,
    both sides of SGLang's default-config switch at tokens = experts, tuned shapes (Mixtral at tp 4:
    width 3584 on the A100) and untuned, and on the B300 the TRT-LLM-gen kernel's token tiles (8 to 64
    tokens per expert tile across these token counts)."""
    from specsim.cost.moe import moe_time_s

    m, hw = load_model(model), load_hardware(gpu)
    tokens = np.array([1.0, 4.0, 8.0, 9.0, 64.0, 128.0, 129.0, 512.0, 4096.0])
    ops = {o.name: o for o in layer_ops(m, hw, make_shape(tokens, 1, 1024, tp=tp))}
    pass_s = ops["up"].time_s + ops["down"].time_s + ops["moe_routing"].time_s
    want = moe_time_s(tokens, m.hidden, m.moe_intermediate / tp, m.n_experts, m.top_k, hw)[0]
    assert pass_s == pytest.approx(want, rel=1e-9)
