"""Each engine prices with its own framework's measured tables (NVIDIA's aiconfigurator-core), checked against the
tables' own rows: TensorRT-LLM's GEMMs are not vLLM's, block-scaled fp8 has its own GEMM and MoE tables, the MoE
tables are read at the layer's expert-parallel degree, MLA decode from the MLA tables, and eagerly timed rows
(vLLM's block fp8 GEMMs) are left out."""

from __future__ import annotations

import dataclasses
import importlib.util

import numpy as np
import pandas as pd
import pytest

from specsim.cost import aiconfigurator as aic
from specsim.cost.costmodel import cost_model, describe
from specsim.cost.dtypes import WEIGHT_BYTES
from specsim.cost.hardware import load_hardware
from specsim.cost.hardware_profile import HardwareProfile

HAVE_TABLES = importlib.util.find_spec("aiconfigurator_core") is not None and importlib.util.find_spec(
    "pyarrow") is not None
pytestmark = pytest.mark.skipif(not HAVE_TABLES, reason="aiconfigurator-core / pyarrow not installed (.[tables])")
BLOCK = WEIGHT_BYTES["fp8_block"]


def run_by(hw: HardwareProfile, framework: str) -> HardwareProfile:
    """`hw` as an engine of `framework` runs it: its fitted kernels and its framework's tables (what
    `HardwareProfile.for_framework` gives once it carries the framework into the cost-model choice)."""
    out = hw.for_framework(framework)
    choice = dataclasses.replace(out.cost_model, backend="table", framework=framework)
    return dataclasses.replace(out, cost_model=choice)


@pytest.fixture(scope="module")
def h100():
    return load_hardware("h100-sxm").with_cost_model("table")


@pytest.fixture(scope="module")
def sglang(h100):
    return cost_model(run_by(h100, "sglang"))


def _unpadded(rows: pd.DataFrame, by: list[str], along: str = "tokens") -> pd.DataFrame:
    """Rows no larger size of the same shape (`by`) measured faster: where the table's padding (a kernel costs at
    most what a larger one does: RatioGrid.padded) leaves the measurement as it is."""
    rows = rows.sort_values([*by, along], ascending=False)
    least = rows.groupby(by)["time_ms"].cummin()
    return rows[rows["time_ms"].to_numpy() <= least.to_numpy() * (1 + 1e-12)]


def _err(cm, rows: pd.DataFrame) -> np.ndarray:
    """The table model's time for measured rows under their own benchmark conditions, relative to the row."""
    rows = rows.reset_index(drop=True)
    return cm.predict_ms(rows) / rows["time_ms"].to_numpy(float) - 1.0


def test_each_engine_reads_its_own_frameworks_gemm_tables(h100) -> None:
    """bf16 GEMMs both frameworks measured at M <= 64, more than 10% apart (where padding leaves each measurement
    as it is): each framework's model is never above its own measurement and lies closer to it than to the other
    framework's."""
    rows = aic.import_aiconfigurator(["h100_sxm"], ["trtllm", "vllm"], ["gemm"])
    rows = rows[rows["dtype"] == "bf16"]
    rows = _unpadded(rows, ["framework", "d_out", "d_in"])
    rows = rows[rows["tokens"] <= 64]
    both = rows.pivot_table(index=["tokens", "d_out", "d_in"], columns="framework", values="time_ms").dropna()
    apart = both[np.abs(np.log(both["trtllm"] / both["vllm"])) > np.log(1.1)].reset_index()
    assert len(apart) > 20
    models = {fw: cost_model(run_by(h100, fw)) for fw in ("trtllm", "vllm")}
    assert {m.tables.framework for m in models.values()} == {"trtllm", "vllm"}
    for fw, other in (("trtllm", "vllm"), ("vllm", "trtllm")):
        own = rows[rows["framework"] == fw].merge(apart[["tokens", "d_out", "d_in"]]).reset_index(drop=True)
        err = _err(models[fw], own)
        assert np.all(err < 1e-6) and np.median(np.abs(err)) < 0.02, fw
        pred = models[fw].predict_ms(own)
        theirs = own[["tokens", "d_out", "d_in"]].merge(apart)[other].to_numpy(float)
        closer = np.abs(np.log(pred / own["time_ms"].to_numpy(float))) < np.abs(np.log(pred / theirs))
        assert closer.mean() > 0.9, (fw, closer.mean())
    assert "TensorRT-LLM" in describe(run_by(h100, "trtllm")) and "vLLM" in describe(run_by(h100, "vllm"))


def test_no_tables_is_the_roofline_and_says_so(h100) -> None:
    """A GPU aiconfigurator-core ships no tables for (H100 PCIe) and an engine it does not measure (ATOM: framework
    ""): the roofline, stated, never another framework's tables."""
    pcie = cost_model(run_by(load_hardware("h100-pcie").with_cost_model("table"), "vllm"))
    assert "no vLLM tables for h100-pcie" in pcie.tables.missing and not pcie.tables.gemm_grid
    assert pcie.gemm(16.0, 4096, 4096)[0] == pytest.approx(pcie.roofline.gemm(16.0, 4096, 4096)[0], rel=1e-12)
    atom = cost_model(run_by(h100, ""))
    assert atom.tables.missing and not atom.tables.decode
    assert describe(run_by(load_hardware("h100-pcie"), "trtllm")).endswith("roofline throughout)")


def test_block_fp8_gemms_have_their_own_table(sglang) -> None:
    """SGLang's DeepGEMM block-fp8 rows are reproduced by the block-fp8 key and are a different table from the
    per-tensor fp8 rows; vLLM's block-fp8 rows, timed eagerly (50+ us for a 1536 x 7168 GEMM at M = 1), are not
    used: those GEMMs stay on the roofline."""
    rows = aic.import_aiconfigurator(["h100_sxm"], ["sglang", "vllm"], ["gemm"])
    shape = (rows["d_out"] == 1536) & (rows["d_in"] == 7168) & (rows["tokens"] <= 256)
    newest = (rows["framework"] == "sglang") & (rows["framework_version"] == "0.5.14")  # the grids' (most rows)
    core = rows["d_out"].between(1024, 8192) & rows["d_in"].between(1024, 8192) & (rows["tokens"] <= 256)
    block = rows[core & (rows["dtype"] == "fp8_block") & newest]
    tensor = rows[core & (rows["dtype"] == "fp8") & newest]
    for measured in (block, tensor):
        assert len(measured) > 10 and np.all(_err(sglang, measured) < 1e-6)  # padding only ever lowers a time
        kept = _err(sglang, _unpadded(measured, ["d_out", "d_in"]))
        assert len(kept) > 100 and np.median(np.abs(kept)) < 0.02
    m = np.array([1.0, 16.0, 64.0])
    t_block = sglang.gemm(m, 1536, 7168, "fp8", BLOCK)[0]
    t_tensor = sglang.gemm(m, 1536, 7168, "fp8", 1.0)[0]
    assert np.all(sglang.gemm_covered(m, 1536, 7168, "fp8", BLOCK)) and not np.allclose(t_block, t_tensor, rtol=0.02)
    eager = rows[shape & (rows["dtype"] == "fp8_block") & (rows["framework"] == "vllm")]
    assert len(eager) and not eager["graph"].astype(bool).any() and eager["time_ms"].min() > 0.04
    vllm = cost_model(run_by(sglang.hw, "vllm"))
    assert not np.any(vllm.gemm_covered(m, 1536, 7168, "fp8", BLOCK))


def test_moe_tables_at_the_layers_expert_parallel_degree(sglang) -> None:
    """DeepSeek-V3's block-fp8 MoE layer (hidden 7168, width 2048, 256 experts, top 8): the rows of EP 1 and EP 16
    are each reproduced at their own degree, the two degrees' corrections differ (the tables' rows: measured over
    roofline at EP 16 vs at EP 1), and a caller that states no degree gets the roofline."""
    rows = aic.import_aiconfigurator(["h100_sxm"], ["sglang"], ["moe"])
    ds = rows[(rows["dtype"] == "fp8_block") & (rows["d_in"] == 7168) & (rows["d_out"] == 2048)
              & (rows["n_experts"] == 256) & (rows["distribution"] == "balanced") & (rows["tokens"] <= 1024)]
    ratios = {}
    for ep in (1, 16):
        part = ds[ds["ep"] == ep]
        assert len(part) > 5 and np.all(_err(sglang, part) < 1e-6), ep
        kept = _err(sglang, _unpadded(part, ["ep"]))
        assert len(kept) > 3 and np.median(np.abs(kept)) < 0.02, ep
        t = part["tokens"].to_numpy(float)
        ratios[ep] = sglang.moe_ratio(t, 7168, 2048, 256, 8, "fp8", BLOCK, ep=float(ep))
        assert np.all(sglang.moe_covered(t, 7168, 2048, 256, 8, "fp8", BLOCK, ep=float(ep)))
    assert np.max(np.abs(np.log(ratios[16] / ratios[1]))) > np.log(1.5)
    assert np.all(sglang.moe_ratio(np.array([16.0, 256.0]), 7168, 2048, 256, 8, "fp8", BLOCK) == 1.0)


def test_mla_decode_from_the_mla_tables(sglang) -> None:
    """SGLang's MLA decode rows (128 heads per GPU, bf16 KV) are reproduced by the table model's MLA attention;
    vLLM's MLA tables time the whole module, so vLLM's MLA attention stays on the roofline."""
    rows = aic.import_aiconfigurator(["h100_sxm"], ["sglang"], ["mla"])
    rows = rows[(rows["n_heads"] == 128) & (rows["kv_dtype"] == "bf16")]
    assert len(rows) > 20 and np.all(np.abs(_err(sglang, rows)) < 0.02)
    b, ctx = rows["batch"].to_numpy(float), rows["context_len"].to_numpy(float)
    assert np.all(sglang.attention_covered(b, 1.0, ctx, 128.0, 1.0, 576.0, 512.0, 576.0 * 2.0))
    vllm = cost_model(run_by(sglang.hw, "vllm"))
    assert not np.any(vllm.attention_covered(b, 1.0, ctx, 128.0, 1.0, 576.0, 512.0, 576.0 * 2.0))


def test_engines_price_with_their_frameworks_tables(h100) -> None:
    """End to end: the verify pass as TensorRT-LLM runs it reads TensorRT-LLM's tables (engines/passes.py prices with
    `hw.for_framework(engine.framework)`), and its coverage says whose."""
    from specsim.cost.model import load_model
    from specsim.cost.table_coverage import pass_coverage

    if h100.for_framework("trtllm").cost_model.framework != "trtllm":
        pytest.skip("HardwareProfile.for_framework does not yet carry the framework into the table cost model")
    cov = pass_coverage(load_model("llama-3.1-8b"), h100, 1, 4, 1024, framework="trtllm")
    assert cov.framework == "trtllm" and cov.tables.startswith("TensorRT-LLM ")
    assert h100.for_framework("").cost_model.framework == ""  # ATOM, research loops: no NVIDIA tables
