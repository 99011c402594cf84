from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from specsim.cost.measurements import mape_by, predict_table, read_measurements, resolver, token_band
from specsim.errors import SpecsimError


def test_default_profiles_against_real_vidur_linear_layers(vidur_table: pd.DataFrame) -> None:
    """The shipped H100 and A100 profiles are fitted to NVIDIA's measured tables (CUDA-graph replays of
    vLLM's kernels, aiconfigurator-core); Vidur's eager PyTorch timings of the same GEMMs run 1.1-1.3x
    slower on H100 between 129 and 2048 tokens (the stack, not the model: calibrated on Vidur's own
    rows the model is within 8.5%, test_fit). Pinned: A100 <= 12% overall and <= 20% per token band;
    H100 <= 20% overall, and the shipped profile faster than Vidur's stack where the gap is known."""
    gemm = vidur_table[vidur_table["op"] == "gemm"]
    out = predict_table(gemm, resolver(None))
    limits = {"a100-sxm-80gb": (12.0, 20.0), "h100-sxm": (20.0, 25.0)}
    for device, rows in out.groupby("device"):
        assert len(rows) > 20000
        overall, per_band = limits[device]
        assert mape_by(rows) <= overall, device
        bands = mape_by(rows.assign(band=token_band(rows["tokens"])), "band")
        assert len(bands) == 5 and bands.max() <= per_band, (device, bands.to_dict())
    h100 = out[out["device"] == "h100-sxm"]
    mid = h100[(h100["tokens"] > 128) & (h100["tokens"] <= 2048)]
    assert 0.7 < float((mid["predicted_ms"] / mid["time_ms"]).median()) < 0.95


def test_bare_roofline_is_much_worse(vidur_table: pd.DataFrame) -> None:
    """The fitted shape earns its keep: a bare max() at datasheet peaks is far off on the same rows,
    even with the shipped profile fitted to another stack (NVIDIA's tables)."""
    from specsim.cost.hardware import load_hardware

    gemm = vidur_table[(vidur_table["op"] == "gemm") & (vidur_table["device"] == "h100-sxm")]
    hw = load_hardware("h100-sxm")
    flops = 2 * gemm["tokens"] * gemm["d_in"] * gemm["d_out"]
    bytes_ = 2 * (gemm["d_in"] * gemm["d_out"] + gemm["tokens"] * (gemm["d_in"] + gemm["d_out"]))
    bare = np.maximum(flops / hw.peak("bf16"), bytes_ / hw.mem_bw_bytes_per_s) * 1e3
    bare_mape = float(((bare / gemm["time_ms"]) - 1).abs().mean() * 100)
    ours = mape_by(predict_table(gemm, resolver(None)))
    assert bare_mape > 30 and ours < bare_mape / 2


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "m.csv"
    p.write_text(text)
    return p


def test_schema_errors(tmp_path: Path) -> None:
    with pytest.raises(SpecsimError, match="missing column"):
        read_measurements(_write(tmp_path, "device,tokens\nh100-sxm,1\n"))
    with pytest.raises(SpecsimError, match="no rows"):
        read_measurements(_write(tmp_path, "op,time_ms\n"))
    with pytest.raises(SpecsimError, match=r"row 3: time_ms must be a positive"):
        read_measurements(_write(tmp_path, "op,time_ms\ngemm,1\ngemm,-1\n"))
    with pytest.raises(SpecsimError, match=r"row 2: time_ms"):
        read_measurements(_write(tmp_path, "op,time_ms\ngemm,nan\n"))
    with pytest.raises(SpecsimError, match=r"column 'tokens' is not a number"):
        read_measurements(_write(tmp_path, "op,tokens,time_ms\ngemm,abc,1\n"))


def test_predict_keeps_extra_columns_and_leaves_unknown_ops_empty(tmp_path: Path) -> None:
    df = read_measurements(_write(tmp_path, (
        "op,device,dtype,tokens,d_in,d_out,bytes,world_size,time_ms,note\n"
        "gemm,h100-sxm,bf16,1,8192,8192,,,0.05,a\n"
        "memcpy,h100-sxm,,,,,1e9,,0.35,b\n"
        "allreduce,h100-sxm,,,,,1e6,8,0.03,c\n"
        "softmax,h100-sxm,,,,,,,0.01,d\n")))
    out = predict_table(df, resolver(None))
    assert list(out["note"]) == ["a", "b", "c", "d"]
    assert out["predicted_ms"].iloc[:3].notna().all() and np.isnan(out["predicted_ms"].iloc[3])
    # memcpy of 1 GB at ~3.3 TB/s is ~0.3 ms
    assert 0.25 < out["predicted_ms"].iloc[1] < 0.45


def test_the_kernel_column_names_the_family_a_row_is_priced_with() -> None:
    """A TensorRT-LLM decode row is priced on the H200's trtllm block with XQA (its decode kernel) unless its `kernel`
    names another family; an fp8 GEMM row naming vLLM's CUTLASS kernel runs vLLM's Hopper dispatch, one naming cuBLAS
    the best configuration; a name the table does not know leaves the framework's own."""
    import dataclasses

    from specsim.cost.attention import attention_time_s
    from specsim.cost.hardware import load_hardware
    from specsim.cost.measurements import with_kernel

    rows = pd.DataFrame({"op": "attention", "device": "h200", "framework": "trtllm", "dtype": "bf16", "batch": 8,
                         "context_len": 8192, "q_per_seq": 1, "n_heads": 32, "n_kv_heads": 8, "head_dim": 128,
                         "kernel": ["torch_flow", "xqa", "fa3"], "time_ms": 0.1})
    got = predict_table(rows, resolver(None))["predicted_ms"].to_numpy()
    trt = load_hardware("h200").for_framework("trtllm")
    assert trt.attention_kernel == "xqa"
    args = (8, 1, 8192, 32, 8, 128, 128, 8 * 128 * 2 * 2)
    xqa = float(attention_time_s(*args, trt)[0]) * 1e3
    fa3 = float(attention_time_s(*args, dataclasses.replace(trt, attention_kernel="fa3"))[0]) * 1e3
    assert got.tolist() == pytest.approx([xqa, xqa, fa3]) and xqa != pytest.approx(fa3)
    h100 = load_hardware("h100-sxm")
    assert with_kernel(h100, "CutlassFP8ScaledMMLinearKernel").gemm_dispatch == {"fp8": "vllm_sm90_fp8"}
    assert with_kernel(h100, "sglang_sgl_kernel_fp8_scaled_mm").gemm_dispatch == {"fp8": "sglang_sm90_fp8"}
    assert with_kernel(h100, "cublas_lt").gemm_dispatch == {}
    assert with_kernel(load_hardware("b200"), "CutlassFP8ScaledMMLinearKernel").gemm_dispatch == {}
    assert with_kernel(h100, "my_kernel") is h100
