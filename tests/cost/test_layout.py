"""The parallel layout (cost/layout.py) in the forward pass and the memory model, each against a hand calculation."""

from __future__ import annotations

import numpy as np
import pytest

from specsim.cost.alltoall import alltoall_time_s
from specsim.cost.dtypes import ACT_BYTES
from specsim.cost.forward import breakdown, forward_time_s
from specsim.cost.hardware import load_hardware
from specsim.cost.layout import Layout, check_layout, make_layout
from specsim.cost.model import load_model
from specsim.cost.ops import make_shape
from specsim.errors import SpecsimError

H200 = load_hardware("h200")
A100 = load_hardware("a100-sxm-80gb")
DSV3 = load_model("deepseek-v3")
LLAMA70 = load_model("llama-3.1-70b")
BATCH = np.array([1.0, 8.0, 64.0, 256.0])


@pytest.mark.parametrize(("model", "tp"), [(LLAMA70, 4), (DSV3, 8)])
def test_tensor_parallelism_alone_is_the_plain_tp(model, tp) -> None:
    for q in (1.0, 4.0):
        a = forward_time_s(H200, model, BATCH, q, 4096.0, tp, "fp8")
        b = forward_time_s(H200, model, BATCH, q, 4096.0, Layout(tp), "fp8")
        np.testing.assert_array_equal(a, b)


def test_bad_layouts_say_what_is_wrong() -> None:
    with pytest.raises(SpecsimError, match="ep 3 must divide"):
        Layout(8, ep=3)
    with pytest.raises(SpecsimError, match="context parallelism 3 must divide tp 8"):
        Layout(8, cp=3)
    with pytest.raises(SpecsimError, match="--pp >= 2"):
        make_layout(1, layer_split=True)
    with pytest.raises(SpecsimError, match="needs an MoE model"):
        check_layout(Layout(8, ep=8), LLAMA70.n_experts)
    with pytest.raises(SpecsimError, match="must divide the model's 256 experts"):
        check_layout(Layout(3, dp=2, ep=6), DSV3.n_experts)
    assert str(Layout(1, dp=8, ep=8)) == "tp 1, dp 8, ep 8" and Layout(4).simple and not Layout(4, pp=2).simple


def _family(model, layout, batch, q=1.0, ctx=4096.0) -> dict[str, float]:
    br = breakdown(model, H200, make_shape(batch, q, ctx, layout, "fp8_block"))
    return {k: float(v) for k, v in br.by_family().items()}


def test_ep_with_dp_attention_prices_the_all_to_all_per_moe_layer() -> None:
    # 64 sequences over 8 groups of one GPU: no tensor-parallel all-reduce, the dense layers' gather over the 8
    # GPUs, and DeepEP's dispatch + combine of each GPU's 64 / 8 tokens in every MoE layer
    lay = Layout(1, dp=8, ep=8)
    comm = _family(DSV3, lay, 64.0)["communication"]
    a2a = float(alltoall_time_s(H200, 8.0, DSV3.hidden, DSV3.top_k, 8, "ll"))
    from specsim.cost.costmodel import cost_model

    gather = float(cost_model(H200).allreduce(64.0 * DSV3.hidden * ACT_BYTES, 8, "nccl"))
    assert comm == pytest.approx(DSV3.n_moe_layers * a2a + DSV3.n_dense_layers * gather, rel=1e-9)


def test_dp_attention_reads_each_groups_kv_only() -> None:
    # attention at batch 64 over 8 groups costs what one GPU pays for its 8 sequences at tp 1
    dp = _family(DSV3, Layout(1, dp=8, ep=8), 64.0, ctx=32768.0)["attention"]
    one = _family(DSV3, Layout(1), 8.0, ctx=32768.0)["attention"]
    assert dp == pytest.approx(one, rel=1e-9)


def test_a_layer_split_costs_one_gpu_plus_the_hand_offs() -> None:
    # device_map over 4 GPUs: every layer in sequence at one GPU's speed, and 3 sends of the hidden states
    split = forward_time_s(A100, LLAMA70, BATCH, 1.0, 1024.0, make_layout(1, pp=4, layer_split=True), "fp8")
    one = forward_time_s(A100, LLAMA70, BATCH, 1.0, 1024.0, 1, "fp8")
    link = A100.interconnect
    sends = 3 * (link.allreduce_latency_s + BATCH * LLAMA70.hidden * ACT_BYTES * 2 / link.link_bw_bytes_per_s)
    np.testing.assert_allclose(split - one, sends, rtol=1e-9)


def test_an_engine_pipeline_runs_its_microbatches_in_flight() -> None:
    # 2 stages with 2 microbatches: a sequence advances once per traversal of one microbatch of B / 2
    pp = forward_time_s(H200, LLAMA70, BATCH[1:], 1.0, 2048.0, Layout(4, pp=2), "fp8")
    half = forward_time_s(H200, LLAMA70, BATCH[1:] / 2, 1.0, 2048.0, Layout(4), "fp8")
    link = H200.interconnect
    send = link.allreduce_latency_s + BATCH[1:] / 2 * LLAMA70.hidden * ACT_BYTES * 2 / link.link_bw_bytes_per_s
    np.testing.assert_allclose(pp - half, send, rtol=1e-9)


def test_context_parallelism_splits_the_kv_read() -> None:
    ops = {o.name: o for o in breakdown(LLAMA70, H200, make_shape(64.0, 1.0, 65536.0, Layout(8), "fp8")).ops}
    cp = {o.name: o for o in breakdown(LLAMA70, H200, make_shape(64.0, 1.0, 65536.0, Layout(8, cp=8), "fp8")).ops}
    # Llama-3.1-70B has 8 KV heads: at tp 8 each GPU caches one; cp 8 spreads each context over the 8
    assert float(cp["attention"].bytes_) < 0.2 * float(ops["attention"].bytes_)
    assert float(cp["attention"].flops) == pytest.approx(float(ops["attention"].flops), rel=1e-9)
    assert "context_parallel" in cp and "context_parallel" not in ops


@pytest.mark.parametrize("layout", [Layout(8), Layout(8, ep=8), Layout(1, dp=8), Layout(1, dp=8, ep=8),
                                    Layout(2, dp=4, ep=8), Layout(4, pp=2), Layout(8, cp=2)])
def test_more_tokens_never_cost_less(layout: Layout) -> None:
    q = np.arange(1.0, 17.0)[:, None]
    t = forward_time_s(H200, DSV3, BATCH[None, :], q, 8192.0, layout, "fp8_block")
    assert np.all(np.diff(t, axis=0) >= -1e-12)


def test_prefill_sized_passes_take_deepeps_normal_kernels() -> None:
    # 2048 tokens over 8 GPUs = 256 per rank, past the low-latency kernels' 128: the normal mode prices them
    from specsim.cost.costmodel import cost_model

    lay = Layout(1, dp=8, ep=8)
    comm = _family(DSV3, lay, 2048.0)["communication"]
    normal = float(alltoall_time_s(H200, 256.0, DSV3.hidden, DSV3.top_k, 8, "normal"))
    gather = float(cost_model(H200).allreduce(2048.0 * DSV3.hidden * ACT_BYTES, 8, "nccl"))
    assert comm == pytest.approx(DSV3.n_moe_layers * normal + DSV3.n_dense_layers * gather, rel=1e-9)


def test_an_engines_own_all_to_all_runs_outside_graphs_only() -> None:
    # NVIDIA's vLLM table times vLLM's eager call: never cheaper than DeepEP's kernels; a graphed pass replays those
    from specsim.engines.passes import pass_time_s
    from specsim.engines.profile import load_engine

    lay = Layout(1, dp=8, ep=8)
    deepep = _family(DSV3, lay, 64.0)["communication"]
    shape = make_shape(64.0, 1.0, 4096.0, lay, "fp8_block", alltoall="vllm")
    vllm = float(breakdown(DSV3, H200, shape).by_family()["communication"])
    assert vllm > deepep
    e = load_engine("vllm")
    graphed = pass_time_s(e, H200, DSV3, 64.0, 1.0, 4096.0, lay, "fp8_block")
    eager = pass_time_s(e, H200, DSV3, 64.0, 1.0, 4096.0, lay, "fp8_block", graphs=False)
    assert float(eager) > float(graphed)
