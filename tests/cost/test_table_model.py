"""The measured-table cost model: measured shapes reproduced, interpolated between, the roofline outside
(specsim/cost/table_model.py, measured_tables.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from specsim.cost import roofline as rl
from specsim.cost.costmodel import RooflineCostModel
from specsim.cost.forward import breakdown, forward_time_s
from specsim.cost.hardware import load_hardware
from specsim.cost.measured_tables import build_tables
from specsim.cost.measurements import RowSet, check_measurements
from specsim.cost.model import load_model
from specsim.cost.ops import make_shape
from specsim.cost.table_model import TableCostModel
from specsim.errors import SpecsimError

HAVE_TABLES = importlib.util.find_spec("aiconfigurator_core") is not None and importlib.util.find_spec(
    "pyarrow") is not None
M = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096])
NK = [(4096, 4096), (4096, 8192), (8192, 4096), (8192, 8192)]


@pytest.fixture(scope="module")
def h100():
    return load_hardware("h100-sxm")


def _synthetic(hw, factor) -> pd.DataFrame:
    """Measured rows made by the roofline itself times a known smooth factor (cold weights)."""
    rows = [{"op": "gemm", "device": hw.name, "dtype": "bf16", "tokens": m, "d_in": k, "d_out": n, "time_ms": 1.0,
             "framework": "x", "kernel": "k"} for n, k in NK for m in M]
    kv = 2 * 8 * 128 * 2
    rows += [{"op": "attention", "device": hw.name, "dtype": "bf16", "kv_dtype": "bf16", "batch": b, "q_per_seq": 1,
              "context_len": c, "n_heads": 32, "n_kv_heads": 8, "head_dim": 128, "time_ms": 1.0, "framework": "x",
              "kernel": "a"} for b in (1, 8, 64) for c in (1024, 4096, 16384)]
    rows += [{"op": "allreduce", "device": hw.name, "dtype": "bf16", "bytes": b, "world_size": 8, "impl": "custom",
              "time_ms": 1.0, "framework": "x", "kernel": "c"} for b in (4096, 65536, 1 << 20, 16 << 20)]
    df = check_measurements(pd.DataFrame(rows), "synthetic")
    base = RowSet(df).predict_ms(hw)
    df["time_ms"] = base * factor(df)
    assert kv  # (KV bytes per token of the synthetic attention rows: 2 x 8 heads x 128 x 2 bytes)
    return df


def test_table_reproduces_measured_shapes_and_interpolates_between(h100) -> None:
    factor = lambda d: 1.0 + 0.2 * np.log2(d["tokens"].fillna(d["batch"]).fillna(1) + 1) / 12  # noqa: E731
    df = _synthetic(h100, factor)
    cm = TableCostModel(h100, build_tables(df, h100, "synthetic"))
    assert np.allclose(cm.predict_ms(df), df["time_ms"], rtol=1e-9)  # measured shapes: the measurement
    # between measured token counts: the ratio interpolates (log-linear), so the answer lies between
    t = cm.gemm(np.array([3.0, 48.0, 3000.0]), 8192, 8192)[0]
    roof = rl.gemm_time_s(np.array([3.0, 48.0, 3000.0]), 8192, 8192, h100)[0]
    ratio = t / roof
    assert np.all(ratio > 1.0) and np.all(ratio < 1.0 + 0.2 * np.log2(4097) / 12 + 1e-9)
    # between measured (N, K): bilinear in log N, log K over the four corners
    mid = cm.gemm(256.0, 6000.0, 6000.0)[0] / rl.gemm_time_s(256.0, 6000.0, 6000.0, h100)[0]
    assert mid == pytest.approx(1.0 + 0.2 * np.log2(257) / 12, rel=1e-6)


def test_table_falls_back_to_the_roofline_outside(h100) -> None:
    df = _synthetic(h100, lambda d: 1.3)
    cm = TableCostModel(h100, build_tables(df, h100, "synthetic"))
    roof = RooflineCostModel(h100)
    for args in ((8192.0, 8192, 8192), (1.0, 16384, 8192), (1.0, 4096, 4096)):
        ratio = cm.gemm(*args)[0] / roof.gemm(*args)[0]
        assert ratio == pytest.approx(1.0 if args[0] > 4096 or args[1] > 8192 else 1.3)
    assert cm.gemm(16.0, 4096, 4096, "fp8", 1.0)[0] == pytest.approx(roof.gemm(16.0, 4096, 4096, "fp8", 1.0)[0])
    # attention: covered head shape -> ratio; other heads -> roofline; verification -> the decode ratio
    a = cm.attention(8, 1, 4096, 32, 8, 128, 128, 4096.0)[0] / roof.attention(8, 1, 4096, 32, 8, 128, 128, 4096.0)[0]
    assert a == pytest.approx(1.3)
    v = cm.attention(8, 4, 4096, 32, 8, 128, 128, 4096.0)[0] / roof.attention(8, 4, 4096, 32, 8, 128, 128, 4096.0)[0]
    assert v == pytest.approx(1.3)
    o = cm.attention(8, 1, 4096, 64, 8, 128, 128, 4096.0)[0] / roof.attention(8, 1, 4096, 64, 8, 128, 128, 4096.0)[0]
    assert o == pytest.approx(1.0)
    assert cm.allreduce(65536, 8, "custom") / roof.allreduce(65536, 8, "custom") == pytest.approx(1.3)
    assert cm.allreduce(65536, 4, "custom") / roof.allreduce(65536, 4, "custom") == pytest.approx(1.0)
    assert cm.allreduce(65536, 8, "nccl") / roof.allreduce(65536, 8, "nccl") == pytest.approx(1.0)


def test_backend_chosen_by_profile_and_named_in_the_breakdown(h100, tmp_path: Path) -> None:
    csv = tmp_path / "t.csv"
    _synthetic(h100, lambda d: 1.25).to_csv(csv, index=False)
    table = h100.with_cost_model("table", measurements=str(csv))
    m = load_model("llama-3.1-8b")
    s = make_shape(np.array([1, 16]), 1, 4096)
    br_t, br_r = breakdown(m, table, s), breakdown(m, h100, s)
    assert br_r.cost_model == "roofline" and br_t.cost_model.startswith("table (")
    up_t = next(o for o in br_t.ops if o.name == "up").time_s
    up_r = next(o for o in br_r.ops if o.name == "up").time_s
    assert np.all(up_t >= up_r)  # 14336 x 4096 is outside the synthetic grid -> roofline; qkv is inside
    qkv_t = next(o for o in br_t.ops if o.name == "o").time_s  # o: 4096 x 4096, covered
    qkv_r = next(o for o in br_r.ops if o.name == "o").time_s
    assert qkv_t / qkv_r == pytest.approx(np.full(2, 1.25))
    assert np.all(forward_time_s(table, m, np.array([1, 16]), 1, 4096) > forward_time_s(h100, m, np.array([1, 16]), 1,
                                                                                          4096))
    with pytest.raises(SpecsimError, match="unknown cost model"):
        h100.with_cost_model("oracle")


@pytest.mark.skipif(not HAVE_TABLES, reason="aiconfigurator-core / pyarrow not installed (.[tables])")
def test_real_tables_measured_and_unseen_shapes(h100) -> None:
    """NVIDIA's H100 vLLM tables: the table backend is within 2% on the shapes it holds (GEMMs: where no larger
    token count of the same shape was measured cheaper; elsewhere it returns that cheaper time, never more than
    the measurement: `RatioGrid.padded`), and on shapes held out of it (every other (N, K) pair, every other head
    configuration) never worse than the roofline alone."""
    from specsim.calibration import tables

    rows = tables.load_rows("h100-sxm", "vllm")
    for op in ("gemm", "attention", "allreduce"):
        d = getattr(rows, op).reset_index(drop=True)
        y = d["time_ms"].to_numpy(float)
        full = TableCostModel(h100, build_tables(d, h100, "all rows"))
        err = full.predict_ms(d) / y - 1
        assert np.nanmax(err) < 0.02, op  # padding only ever lowers a time
        kept = err > -0.02 if op == "gemm" else np.isfinite(err)
        assert kept.mean() > 0.5 and np.nanmean(np.abs(err[kept])) < 0.02, op
        held = rows.held(op)
        if not held.any():
            continue
        part = TableCostModel(h100, build_tables(d[~held], h100, "half the shapes"))
        seen = d[held].reset_index(drop=True)
        table_err = np.nanmean(np.abs(part.predict_ms(seen) / y[held] - 1))
        roof_err = np.nanmean(np.abs(RowSet(seen).predict_ms(h100) / y[held] - 1))
        assert table_err <= roof_err + 1e-9, (op, table_err, roof_err)
