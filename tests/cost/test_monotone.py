"""A pass over more tokens never costs less than one over fewer (issue 22): an engine runs a smaller problem at a
larger one's cost by padding it, so measured tables are made non-decreasing in tokens where they are built
(`RatioGrid.padded`), the table model prices token-count kernels at their monotone envelope
(`table_model.monotone_envelope`), attention at its envelope over the new tokens per sequence (`cost.envelope`), and
no speculative step comes out cheaper than the plain step it verifies for.

Checked: the padding on a hand-made grid; both envelopes against brute force over every larger size; the case that
exposed it (DeepSeek-R1 on 8x B200, TensorRT-LLM, `--cost-model table`, fp8: a plain step priced above the k = 1 MTP
step, speedup 2.64 at tau 1.92); and over every bundled GPU, weight format and cost model, dense (GQA and MHA), MoE,
MLA, sparse-attention and hybrid targets: every pass over q + 1 tokens per sequence against the pass over q, q up to
64."""

from __future__ import annotations

import json

import numpy as np
import pytest

from specsim.cost.forward import breakdown
from specsim.cost.hardware import available, load_hardware
from specsim.cost.model import load_model
from specsim.cost.ops_core import make_shape
from specsim.cost.ratio_grid import RatioGrid
from specsim.errors import SpecsimError
from tests.corpus.harness import invoke


def test_padding_makes_times_non_decreasing_in_tokens() -> None:
    tokens = np.array([1.0, 2.0, 4.0, 8.0])
    # measured / roofline: the one-token kernel 3x slow, the rest close to the roofline
    grid = RatioGrid.build([tokens], np.log(np.array([3.0, 1.0, 1.1, 1.0])))
    roof = lambda m: 1.0 + 0.1 * m  # noqa: E731 (a roofline rising with tokens)
    padded = grid.padded(roof)
    times = roof(tokens) * np.exp(padded.lookup(tokens))
    assert np.all(np.diff(times) >= -1e-12)
    assert times[0] == pytest.approx(roof(2.0) * 1.0)  # one token runs at two tokens' cost (padded)
    assert times[2] == pytest.approx(roof(4.0) * 1.1)  # a point already below its successors keeps its measurement


@pytest.mark.parametrize("k", [1, 2, 3])
def test_no_speedup_beyond_the_tokens_per_step_on_blackwell_fp8_tables(k: int) -> None:
    pytest.importorskip("aiconfigurator_core")
    r = invoke("evaluate", "-H", "b200", "-m", "deepseek-r1", "--tp", "8", "-d", "mtp", "--k", str(k), "--batch", "1",
               "--context", "1024", "--acceptance-length", "1.92", "-e", "trtllm", "--cost-model", "table",
               "--weight-dtype", "fp8", "-f", "json")
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert d["baseline_step_ms"] <= d["step_ms"]
    assert d["speedup"] <= d["tokens_per_step"]


def test_the_table_envelope_is_the_least_time_over_every_larger_size() -> None:
    from specsim.cost.table_model import monotone_envelope

    rng = np.random.default_rng(0)
    f = np.cumsum(rng.uniform(-1.0, 1.5, 200)) + 300.0  # rising with dips
    price = lambda x: np.interp(x, np.arange(1.0, 201.0), f)  # noqa: E731
    x = np.arange(1.0, 201.0)
    env = monotone_envelope(price, x, price(x), 1.0, 150)
    brute = np.array([f[i:150].min() for i in range(150)])
    assert np.array_equal(env[:150], brute)  # inside the grid: min over every larger size
    assert np.all(np.diff(env[:150]) >= 0)
    assert np.array_equal(env[150:], np.maximum(f[150:], brute[-1]))  # beyond it never below the grid's last value


def test_the_attention_envelope_is_the_least_time_over_every_larger_q() -> None:
    """`monotone_in_q` tries only the first q of each launch configuration; brute force over every q' from q to 64 of
    the same kernels (A100's FlashAttention-2, H100's FA3, XQA) gives the same times."""
    import dataclasses

    from specsim.cost.attention import attention_time_s
    from specsim.cost.envelope import Q_ENVELOPE, monotone_in_q, step_points

    assert step_points(8.0, "fa3").tolist() == [2.0, 9.0, 17.0, 25.0, 33.0, 41.0, 49.0, 57.0]
    assert step_points(8.0, "xqa").tolist() == [2.0, *range(3, 64, 2)]  # 16-row tiles: every 2 q; and q = 17
    h100 = load_hardware("h100-sxm")
    for hw in (load_hardware("a100-sxm-80gb"), h100, dataclasses.replace(h100, attention_kernel="xqa")):
        for heads, kvh in ((32.0, 8.0), (64.0, 1.0), (8.0, 8.0)):
            def price(b, q, ctx, hw=hw, heads=heads, kvh=kvh):  # type: ignore[no-untyped-def]
                return attention_time_s(b, q, ctx, heads, kvh, 128, 128, kvh * 512, hw)[0]

            b, ctx = np.array([1.0, 7.0, 64.0]), np.array([300.0, 4096.0, 20000.0])
            q = np.arange(1.0, Q_ENVELOPE + 1.0)
            bb, qq, cc = (a.ravel() for a in np.meshgrid(b, q, ctx, indexing="ij"))
            got = monotone_in_q(price, bb, qq, cc, heads / kvh, hw.attention_kernel, price(bb, qq, cc))
            raw = price(bb, qq, cc).reshape(len(b), len(q), len(ctx))
            brute = np.flip(np.minimum.accumulate(np.flip(raw, axis=1), axis=1), axis=1)
            assert np.allclose(got, brute.ravel(), rtol=1e-12), (hw.name, hw.attention_kernel, heads, kvh)


MODELS = {"llama-3.1-8b": 1, "llama-2-7b": 1, "deepseek-r1": 8, "deepseek-v3.2": 8, "qwen3-next-80b-a3b": 1,
          "gpt-oss-120b": 2}


@pytest.mark.parametrize("gpu", available())
def test_a_pass_over_more_tokens_never_costs_less(gpu: str) -> None:
    """Every weight format and cost model the GPU has (the table model where its tables are installed); dense GQA and
    MHA, MLA MoE, sparse attention, hybrid linear attention and sliding-window MoE targets; batch 1 and 32, context
    300 and 8192: the pass over q + 1 tokens per sequence costs at least the pass over q, for q = 1..63, exactly."""
    q = np.arange(1, 65, dtype=float)
    batch, context = np.array([1.0, 32.0]), np.array([300.0, 8192.0])
    checked = 0
    for cm in ("roofline", "table"):
        try:
            hw = load_hardware(gpu).with_cost_model(cm)
        except SpecsimError:
            continue  # the table model without its tables installed
        for dtype in ("bf16", "fp8", "nvfp4", "int4"):
            for name, tp in MODELS.items():
                for (b, ctx), t in _pass_times(load_model(name), hw, batch, q, context, tp, dtype):
                    assert (np.diff(t) >= 0).all(), (gpu, cm, dtype, name, b, ctx, int(np.argmin(np.diff(t))) + 1)
                    checked += 1
    assert checked > 0


def _pass_times(model, hw, batch, q, context, tp, dtype):  # type: ignore[no-untyped-def]
    """((batch, context), pass times over q) for each batch and context the pass prices: every point in one
    vectorised pass (each point priced as on its own: breakdown is elementwise), point by point where that one
    refuses (a format the GPU lacks, a model that does not split over tp: then every point does, or only some)."""
    points = [(b, ctx) for b in batch for ctx in context]
    try:
        shape = make_shape(batch[:, None, None], q, context[None, :, None], tp, dtype, "bf16", "custom")
        t = breakdown(model, hw, shape).time_s.reshape(len(points), len(q))
        return list(zip(points, t, strict=True))
    except SpecsimError:
        pass
    out = []
    for b, ctx in points:
        try:
            out.append(((b, ctx), breakdown(model, hw, make_shape(b, q, ctx, tp, dtype, "bf16", "custom")).time_s))
        except SpecsimError:
            continue
    return out
