"""The importer of NVIDIA's measured kernel tables (specsim/cost/aiconfigurator.py).

A small synthetic tree in the package's layout checks every convention (pyarrow needed); the real
tables are checked when aiconfigurator-core is installed (``pip install ".[tables]"``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from specsim.cost import aiconfigurator as aic
from specsim.cost.measurements import read_measurements
from specsim.errors import SpecsimError
from tests._cli import run

pq = pytest.importorskip("pyarrow.parquet")
pa = pytest.importorskip("pyarrow")
HAVE_TABLES = importlib.util.find_spec("aiconfigurator_core") is not None
needs_tables = pytest.mark.skipif(not HAVE_TABLES, reason="aiconfigurator-core is not installed (.[tables])")


def _write(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)


def _fake_tree(root: Path) -> Path:
    data = root / "aiconfigurator_core" / "systems" / "data"
    h = data / "h100_sxm"
    base = {"framework": "SGLang", "version": "0.5.14", "device": "NVIDIA H100"}
    _write(h / "gemm" / "sglang" / "0.5.14" / "gemm_perf.parquet", [
        {**base, "op_name": "gemm", "kernel_source": "sglang_torch_linear", "gemm_dtype": "bfloat16",
         "m": m, "n": 4096, "k": 8192, "latency": 0.05 + 0.001 * m} for m in (1, 16, 256)])
    _write(h / "gemm" / "trtllm" / "1.3.0rc20" / "gemm_perf.parquet", [
        {"framework": "TRTLLM", "version": "1.3.0rc20", "device": "x", "op_name": "gemm", "kernel_source": "torch_flow",
         "gemm_dtype": "bfloat16", "m": 1, "n": n, "k": 1024, "latency": 0.01} for n in (512, 65536)])
    att = {**base, "op_name": "generation_attention", "kernel_source": "fa3", "attn_dtype": "bfloat16",
           "kv_cache_dtype": "bfloat16", "isl": 1, "num_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
           "beam_width": 1, "window_size": 0}
    _write(h / "attention" / "sglang" / "0.5.14" / "generation_attention_perf.parquet", [
        {**att, "batch_size": 4, "step": 1023, "latency": 0.02},
        {**att, "batch_size": 4, "step": 1023, "window_size": 128, "latency": 0.01}])  # sliding window: dropped
    _write(h / "attention" / "sglang" / "0.5.14" / "context_attention_perf.parquet", [
        {**att, "op_name": "context_attention", "batch_size": 1, "isl": 512, "step": 0, "latency": 0.05}])
    moe = {**base, "op_name": "moe", "kernel_source": "sglang_fused_moe_triton", "moe_dtype": "bfloat16",
           "hidden_size": 4096, "inter_size": 14336, "topk": 2, "num_experts": 8, "moe_tp_size": 2, "moe_ep_size": 1,
           "distribution": "balanced"}
    _write(h / "moe" / "sglang" / "0.5.10" / "moe_perf.parquet", [{**moe, "version": "0.5.10", "num_tokens": t,
                                                                   "latency": 1.0} for t in (1, 128)])
    _write(h / "moe" / "sglang" / "0.5.14" / "moe_perf.parquet", [{**moe, "num_tokens": 128, "latency": 0.5},
                                                                  {**moe, "num_tokens": 128, "latency": 0.7}])
    ar = {**base, "op_name": "all_reduce", "allreduce_dtype": "bfloat16", "num_gpus": 8}
    _write(h / "comm" / "sglang" / "0.5.14" / "custom_allreduce_perf.parquet", [
        {**ar, "kernel_source": "SGLang_CustomAllReduce_graph", "backend": "SGLang_CustomAllReduce_graph",
         "message_size": 8192, "latency": 0.004},
        {**ar, "kernel_source": "SGLang_CustomAllReduce_eager", "backend": "SGLang_CustomAllReduce_eager",
         "message_size": 8192, "latency": 0.03},
        {**ar, "framework": "TRTLLM", "kernel_source": "TRTLLM", "backend": None, "message_size": 8192,
         "latency": 0.0035}])  # a copied TRT-LLM row inside the SGLang folder: dropped
    _write(h / "comm" / "nccl" / "2.29.2" / "nccl_perf.parquet", [
        {"framework": "TRTLLM", "version": "2.29.2", "device": "x", "op_name": op, "kernel_source": "NCCL",
         "nccl_dtype": "half", "num_gpus": 8, "message_size": 8192, "latency": 0.0166}
        for op in ("all_reduce", "all_gather")])
    (data / "l4").mkdir(parents=True)  # a system with no tables
    return data


@pytest.fixture()
def fake(tmp_path: Path) -> Path:
    return _fake_tree(tmp_path)


def test_conventions_of_every_family(fake: Path) -> None:
    df = aic.import_aiconfigurator(["h100-sxm"], root=fake)
    assert set(df.columns) == set(aic.OUTPUT_COLUMNS) and set(df["device"]) == {"h100-sxm"}
    gemm = df[(df["op"] == "gemm") & (df["framework"] == "sglang")]
    assert list(gemm["tokens"]) == [1, 16, 256] and set(gemm["d_in"]) == {8192} and set(gemm["d_out"]) == {4096}
    assert set(gemm["buffer_sets"]) == {6.0} and set(gemm["kernel"]) == {"sglang_torch_linear"}
    # TRT-LLM's collector: max(1, min(5, ceil(L2 / weight bytes))) copies; H100 L2 = 50 MB
    trt = df[(df["op"] == "gemm") & (df["framework"] == "trtllm")].set_index("d_out")["buffer_sets"]
    assert trt[512] == 5 and trt[65536] == 1
    att = df[df["op"] == "attention"].set_index("phase")
    assert att.loc["generation", "context_len"] == 1024 and att.loc["generation", "q_per_seq"] == 1  # step + 1 keys
    assert att.loc["context", "context_len"] == 512 and att.loc["context", "q_per_seq"] == 512
    assert len(att) == 2  # the sliding-window row is another kernel
    moe = df[df["op"] == "moe"]
    assert set(moe["d_out"]) == {7168}  # inter / tp
    # newest version per key; the older one only for keys it alone measured; repeats -> median
    assert sorted(zip(moe["tokens"], moe["framework_version"], moe["time_ms"], strict=True)) == [
        (1, "0.5.10", 1.0), (128, "0.5.14", pytest.approx(0.6))]
    ar = df[df["op"] == "allreduce"].set_index("impl")
    assert set(ar.index) == {"custom", "custom_eager", "nccl_graph"}  # copied TRT-LLM row dropped, all_gather too
    assert (ar["bytes"] == 16384).all()  # message_size is elements of 2 bytes
    assert ar.loc["nccl_graph", "framework"] == "nccl"
    assert df["source"].str.startswith("aiconfigurator-core").all()


def test_selection_and_errors(fake: Path) -> None:
    only = aic.import_aiconfigurator(["h100_sxm"], ["nccl"], ["allreduce"], root=fake)
    assert set(only["framework"]) == {"nccl"} and len(only) == 1
    every = aic.import_aiconfigurator(["h100_sxm"], ["sglang"], ["moe"], latest=False, root=fake)
    assert len(every) == 3
    assert aic.available_systems(fake) == ["h100_sxm"]
    with pytest.raises(SpecsimError, match=r"no aiconfigurator tables for system\(s\) l4"):
        aic.import_aiconfigurator(["l4"], root=fake)
    with pytest.raises(SpecsimError, match="unknown framework"):
        aic.import_aiconfigurator(frameworks=["tgi"], root=fake)
    with pytest.raises(SpecsimError, match="unknown table family"):
        aic.import_aiconfigurator(families=["mla2"], root=fake)
    with pytest.raises(SpecsimError, match="no aiconfigurator data folder"):
        aic.data_root(fake / "nope")
    assert aic.version_key("1.3.0rc10") < aic.version_key("1.3.0rc20") < aic.version_key("1.3.0")
    assert aic.version_key("0.5.6.post2") < aic.version_key("0.5.10")


def test_cli_writes_a_measurement_table(fake: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AICONFIGURATOR_DATA_ROOT", str(fake))
    out = tmp_path / "aic.csv"
    code, stdout, _ = run(capsys, "import", "aiconfigurator", "--system", "h100_sxm", "--framework", "sglang",
                          "--family", "gemm", "-o", str(out))
    assert code == 0 and "h100-sxm gemm: 3" in stdout
    df = read_measurements(out)
    assert list(df["framework"].unique()) == ["sglang"] and list(df["kernel"].unique()) == ["sglang_torch_linear"]
    code, _, err = run(capsys, "import", "aiconfigurator", "--system", "l4", "-o", str(tmp_path / "x.csv"))
    assert code == 2 and "no aiconfigurator tables" in err and not (tmp_path / "x.csv").exists()


@needs_tables
def test_real_tables_h100() -> None:
    df = aic.import_aiconfigurator(["h100-sxm"], ["trtllm", "nccl"], ["gemm", "allreduce"])
    g = df[(df["op"] == "gemm") & (df["dtype"] == "bf16")]
    big = g[(g["tokens"] == 8192) & (g["d_in"] == 8192) & (g["d_out"] == 8192)]["time_ms"].iloc[0]
    assert 1.2 < big < 1.8  # 8192^3 at ~650-800 TFLOP/s (notes §2)
    assert len(g) > 30000 and g["buffer_sets"].between(1, 5).all()
    ar = df[(df["op"] == "allreduce") & (df["impl"] == "nccl_graph") & (df["world_size"] == 8)]
    big = ar.loc[ar["bytes"].idxmax()]
    busbw = 2 * 7 / 8 * big["bytes"] / (big["time_ms"] * 1e-3)
    assert 300e9 < busbw < 500e9  # NVLink4: elements read as 2-byte values, not bytes
    assert np.isfinite(df["time_ms"]).all()
