"""A pass over more tokens never costs less than one over fewer (issue 22): an engine runs a smaller problem at a
larger one's cost by padding it, so measured tables are made non-decreasing in tokens where they are built
(`RatioGrid.padded`), and no speculative step comes out cheaper than the plain step it verifies for.

Checked: the padding on a hand-made grid; the case that exposed it (DeepSeek-R1 on 8x B200, TensorRT-LLM,
`--cost-model table`, fp8: a plain step priced above the k = 1 MTP step, speedup 2.64 at tau 1.92); and over every
bundled GPU, weight format and cost model, a pass over q > 1 tokens per sequence against the one-token pass."""

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


MODELS = {"llama-3.1-8b": 1, "deepseek-r1": 8}


@pytest.mark.parametrize("gpu", available())
def test_a_pass_over_more_tokens_never_costs_less_than_the_one_token_pass(gpu: str) -> None:
    """Every weight format and cost model the GPU has (the table model where its tables are installed), dense and
    MoE targets, batch 1 and 64: q = 2..16 tokens per sequence cost at least the q = 1 pass (to 1%: between
    measured points the table's interpolation may dip by a fraction of a percent)."""
    q = np.arange(1, 17, dtype=float)
    checked = 0
    for cm in ("roofline", "table"):
        try:
            hw = load_hardware(gpu).with_cost_model(cm)
        except SpecsimError:
            continue  # the table model without its tables installed
        for dtype in ("bf16", "fp8", "nvfp4", "int4"):
            for name, tp in MODELS.items():
                for b in (1, 64):
                    try:
                        shape = make_shape(b, q, 1024.0, tp, dtype, "bf16", "custom")
                        t = breakdown(load_model(name), hw, shape).time_s
                    except SpecsimError:
                        continue  # a format the GPU lacks, a model that does not split over tp
                    assert (t[1:] >= 0.99 * t[0]).all(), (gpu, cm, dtype, name, b, np.round(t / t[0], 3))
                    checked += 1
    assert checked > 0
