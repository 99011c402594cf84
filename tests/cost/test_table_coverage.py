"""How much of a pass the measured tables priced (specsim/cost/table_coverage.py), checked against the ops of the
pass and the measured grid's own bounds; the real tables' share on a dense and a DP/EP pass."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from specsim.cost.costmodel import describe
from specsim.cost.forward import breakdown
from specsim.cost.hardware import load_hardware
from specsim.cost.hardware_profile import CostModelChoice
from specsim.cost.layout import Layout
from specsim.cost.measured_tables import build_tables
from specsim.cost.measurements import RowSet, check_measurements
from specsim.cost.model import load_model
from specsim.cost.moe import moe_time_s
from specsim.cost.ops import make_shape
from specsim.cost.table_coverage import _Uncovered, coverage_label, pass_coverage, table_coverage
from specsim.cost.table_model import TableCostModel

HAVE_TABLES = importlib.util.find_spec("aiconfigurator_core") is not None and importlib.util.find_spec(
    "pyarrow") is not None
M = [1, 2, 4, 8, 16, 64, 256, 1024, 4096]
NK = [(4096, 4096), (4096, 8192), (8192, 4096), (8192, 8192)]


@pytest.fixture(scope="module")
def h100():
    return load_hardware("h100-sxm")


def _rows(hw, factor: float = 1.25) -> pd.DataFrame:
    """GEMMs over N, K in 4096..8192 and decode attention of Llama-3.1-8B's heads, `factor` x the roofline."""
    rows = [{"op": "gemm", "device": hw.name, "dtype": "bf16", "tokens": m, "d_in": k, "d_out": n, "time_ms": 1.0,
             "framework": "x", "kernel": "k"} for n, k in NK for m in M]
    rows += [{"op": "attention", "device": hw.name, "dtype": "bf16", "kv_dtype": "bf16", "batch": b, "q_per_seq": 1,
              "context_len": c, "n_heads": 32, "n_kv_heads": 8, "head_dim": 128, "time_ms": 1.0, "framework": "x",
              "kernel": "a"} for b in (1, 8, 64) for c in (1024, 4096, 16384)]
    df = check_measurements(pd.DataFrame(rows), "synthetic")
    df["time_ms"] = RowSet(df).predict_ms(hw) * factor
    return df


def test_the_share_is_the_time_of_the_ops_the_grids_cover(h100, tmp_path: Path) -> None:
    """Llama-3.1-8B at batch 1, 4 tokens over 4096: the grid covers QKV (N 6144 between 4096 and 8192, K 4096), the
    output projection (4096 x 4096) and decode attention (32 heads, 8 KV heads at batch 1, KV 4096); the MLP (N 28672,
    K 14336), the LM head (N 128256), element-wise kernels and KV writes lie outside it."""
    csv = tmp_path / "t.csv"
    _rows(h100).to_csv(csv, index=False)
    table = h100.with_cost_model("table", measurements=str(csv))
    model = load_model("llama-3.1-8b")
    cov = pass_coverage(model, table, 1, 4, 4096)
    full = breakdown(model, table, make_shape(1, 4, 4096))
    time = {op.name: float(op.time_s * op.count) for op in full.ops}
    covered = time["qkv"] + time["o"] + time["attention"]
    assert float(cov.table_s) == pytest.approx(covered, rel=1e-9)
    assert float(cov.kernel_s) == pytest.approx(sum(time.values()), rel=1e-12)
    assert float(cov.share) == pytest.approx(covered / sum(time.values()), rel=1e-9)
    assert 0.05 < float(cov.share) < 0.5  # the MLP dominates a Llama-8B pass and is outside the grid
    by = {o.label: o for o in cov.ops}
    assert float(by["MLP / expert GEMMs"].table_s) == 0.0 and float(by["attention"].roofline_s) == 0.0
    assert cov.ops[0].label == "MLP / expert GEMMs"  # largest first
    label = coverage_label(cov)
    assert label.startswith(f"table (measured tables {csv}: ") and f"{float(cov.share):.0%} of the verify pass" in label
    assert "roofline: MLP / expert GEMMs" in label and "attention" not in label.split("roofline:")[1]


def test_a_roofline_profile_and_an_engine_without_tables_price_nothing_from_tables(h100) -> None:
    model = load_model("llama-3.1-8b")
    roof = pass_coverage(model, h100, 1, 4, 1024)
    assert float(roof.table_s) == 0.0 and roof.missing == "the roofline cost model" and float(roof.kernel_s) > 0
    assert coverage_label(roof) == "roofline"
    # ATOM and the research loops run kernels NVIDIA's tables do not measure (EngineProfile.framework == ""): no
    # other framework's tables stand in for them (no table is read: this runs without the `tables` extra)
    own = dataclasses.replace(h100, cost_model=CostModelChoice("table", ""))  # framework "": EngineProfile's for ATOM
    atom = pass_coverage(model, own, 1, 4, 1024)
    assert float(atom.table_s) == 0.0 and "not this engine's kernels" in atom.missing
    assert coverage_label(atom).endswith(": roofline throughout)")
    assert describe(own).endswith(": roofline throughout)")
    assert float(atom.kernel_s) == pytest.approx(float(roof.kernel_s), rel=1e-12)  # the roofline's own pass


def test_the_moe_layers_envelope_is_masked_after_it_is_taken(h100) -> None:
    """`_Uncovered.monotone_tokens` answers 0 where the MoE table covers the tokens and the table model's own envelope
    of the layer where it does not (the table grid holds 1..64 tokens)."""
    shape = dict(hid=4096.0, inter=7168.0, experts=8.0, top=2.0)
    rows = pd.DataFrame([{"op": "moe", "device": h100.name, "dtype": "bf16", "tokens": t, "d_in": shape["hid"],
                          "d_out": shape["inter"], "n_experts": shape["experts"], "top_k": shape["top"], "ep": 1.0,
                          "distribution": "balanced", "time_ms": 1.0, "framework": "x", "kernel": "m"}
                         for t in (1, 2, 4, 8, 16, 32, 64)])
    rows = check_measurements(rows, "synthetic")
    rows["time_ms"] = RowSet(rows).predict_ms(h100) * np.array([1.6, 1.5, 1.4, 1.3, 1.2, 1.1, 1.0])
    tm = TableCostModel(h100, build_tables(rows, h100, "synthetic"))
    unc = _Uncovered(tm)
    tokens = np.array([1.0, 3.0, 64.0, 65.0, 300.0])

    def layer(t, cm) -> np.ndarray:
        base = moe_time_s(t, shape["hid"], shape["inter"], shape["experts"], shape["top"], h100)[0]
        return base * cm.moe_ratio(t, shape["hid"], shape["inter"], shape["experts"], shape["top"], "bf16", 2.0,
                                   ep=1.0)

    truth = tm.monotone_tokens("k", lambda t: layer(t, tm), tokens, layer(tokens, tm))
    left = unc.monotone_tokens("k2", lambda t: layer(t, unc), tokens, layer(tokens, unc))
    inside = tokens <= 64.0  # the grid's measured range
    assert np.all(left[inside] == 0.0) and np.allclose(left[~inside], truth[~inside], rtol=1e-12)
    assert np.all(tm.moe_ratio(tokens, shape["hid"], shape["inter"], shape["experts"], shape["top"], "bf16", 2.0)
                  == 1.0)  # no expert-parallel degree given: no table assumed


@pytest.mark.skipif(not HAVE_TABLES, reason="aiconfigurator-core / pyarrow not installed (.[tables])")
def test_real_tables_dense_and_dp_ep_passes() -> None:
    """NVIDIA's SGLang tables on H100: most of a dense Llama-8B verify pass comes from them (its GEMMs and attention;
    the roofline keeps element-wise kernels and the 128k-wide LM head, beyond the tables' N <= 65536); DeepSeek-V3
    under DP attention and EP 16 has its MLA attention from the MLA tables and its all-to-all from the roofline side."""
    hw = load_hardware("h100-sxm").for_framework("sglang").with_cost_model("table", "sglang")
    dense = pass_coverage(load_model("llama-3.1-8b"), hw, 1, 4, 1024)
    assert dense.framework == "sglang" and 0.8 < float(dense.share) < 0.95
    assert set(dense.roofline_ops()) == {"element-wise", "LM head"}
    moe = table_coverage(load_model("deepseek-v3"), hw, make_shape(64, 4, 1024, Layout(tp=1, dp=16, ep=16),
                                                                    "fp8_block", "bf16", "custom"))
    by = {o.label: o for o in moe.ops}
    assert float(by["attention"].roofline_s) == pytest.approx(0.0, abs=1e-12)  # MLA decode: SGLang's MLA tables
    assert float(by["all-reduce / MoE all-to-all"].table_s) == 0.0
    assert "all-reduce / MoE all-to-all" in moe.roofline_ops() and 0.1 < float(moe.share) < 0.9
