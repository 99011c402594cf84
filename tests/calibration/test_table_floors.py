"""The shipped profiles against NVIDIA's measured kernel tables (aiconfigurator-core, vLLM's kernels),
scored on shapes held out of their fit (specsim/calibration/tables.py: GEMM (N, K) checkerboard, every
other attention head configuration, every other MoE model shape; all-reduce curves in-sample).

Issue #11's floors: GEMM core shapes <= 8% (H100, H200, B200, B300, GB200, A100) and <= 12% (L40S), no token band
over 12%; decode attention (KV > 128) <= 12% per batch band; all-reduce <= 15% per implementation and
GPU count; MoE <= 15% per token band. Where a floor is not met the pin is today's figure (and why is
in the comment), so a regression still fails. Skipped without ``pip install ".[tables]"``."""

from __future__ import annotations

import importlib.util

import numpy as np
import pandas as pd
import pytest

from specsim.cost.hardware import load_hardware
from tests._memo import Lazy

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("aiconfigurator_core") is None or importlib.util.find_spec("pyarrow") is None,
    reason="aiconfigurator-core / pyarrow not installed (.[tables])")

GPUS = ("h100-sxm", "h200", "b200", "b300", "gb200", "a100-sxm-80gb", "l40s")
GEMM = {"h100-sxm": 8.0, "h200": 8.0, "b200": 8.0, "b300": 8.0, "gb200": 8.0, "a100-sxm-80gb": 8.0, "l40s": 12.0}
# Decode attention, batch 1-16, KV > 128: floor 12% on every GPU. A100 and L40S (vLLM's FA2) met it once
# the model followed FA2's split rule: MHA decode is never split (one CTA walks a head's whole KV at
# ~22-27 GB/s), GQA decode is split by num_splits_heuristic (roofline.attention_num_splits).
DECODE_SMALL_BATCH = {"h100-sxm": 12.0, "h200": 12.0, "b200": 12.0, "b300": 12.0, "gb200": 12.0, "a100-sxm-80gb": 12.0,
                      "l40s": 12.0}
# MoE per token band: floor 15% on every GPU. A100 has no balanced vLLM MoE table; its SGLang 0.5.10 Triton
# kernel met the floor once the model ran SGLang's default config (moe_kernel triton_sglang: 16 x 32 blocks
# while tokens <= experts, else 64-row blocks padding every expert's rows; tuned shapes exempt).
# B300 and GB200 run FlashInfer's TRT-LLM-gen bf16 MoE; they met the floor (held-out bands <= 7.0% / 7.3%, were
# <= 12.1% / 15.3%) once the model ran it as it runs untuned (moe_kernel trtllm_gen): tokens per expert in tiles of
# half nextPowerOfTwo(T x k / E) (the smallest of computeSelectedTileN's candidates: the step at 48 tokens on 8
# experts, top-2), each token tile re-streaming its expert's weights past what L2 keeps (the ~550-600 TFLOP/s
# ceiling of 8-expert widths 8192-16384, against ~1000 where an expert's weights stay in L2).
MOE = {"h100-sxm": 15.0, "h200": 15.0, "b200": 15.0, "b300": 15.0, "gb200": 15.0, "a100-sxm-80gb": 15.0,
       "l40s": 15.0}
# W8A8 fp8 GEMMs (vLLM's CUTLASS scaled_mm with its per-token activation quantisation): floor 8% (L40S 12%), no token
# band over 12%. Met nowhere yet; pins are today's held-out figures (+0.5). Hopper runs vLLM's fixed sm90 tile
# dispatch (gemm_dispatch.py) and every GPU the quantisation's per-token cost (quant_row_ns, 5.3-6.6 ns): 16-22%
# became 8.6-13.0%. Left: Blackwell's swap-AB and 2-SM tiles (B200 1-16 tokens 15.0%), L40S's CUTLASS 2 sm89 dispatch.
FP8 = {"h100-sxm": (9.1, 10.1), "h200": (9.7, 11.5), "b200": (13.5, 15.5), "b300": (10.2, 11.7), "gb200": (11.0, 12.6),
       "l40s": (18.4, 19.2)}
# GPU counts with all-reduce tables: GB200's hold 2 and 4 GPUs only (one compute tray).
ALLREDUCE_SIZES = {"gb200": (2, 4)}


def _report(dev: str) -> pd.DataFrame:
    from specsim.calibration import tables

    return tables.score(load_hardware(dev), tables.load_rows(dev, "vllm"))


@pytest.fixture(scope="module")
def reports() -> Lazy[str, pd.DataFrame]:
    """Each GPU's scores on first use (a worker scores only its own GPUs: tests/_xdist.py)."""
    return Lazy(_report)


def _held(rep: pd.DataFrame, op: str, prefix: str) -> pd.Series:
    r = rep[(rep["op"] == op) & (rep["rows"] == "held-out") & rep["group"].str.startswith(prefix)]
    return r.set_index("group")["mape_pct"]


@pytest.mark.parametrize("device", GPUS)
def test_gemm_core_shapes(device: str, reports: dict[str, pd.DataFrame]) -> None:
    g = _held(reports[device], "gemm", "bf16")
    assert g["bf16 all"] <= GEMM[device], g.to_dict()
    assert g.drop("bf16 all").max() <= 12.0, g.to_dict()


@pytest.mark.parametrize("device", [g for g in GPUS if g in FP8])
def test_fp8_gemm_core_shapes(device: str, reports: dict[str, pd.DataFrame]) -> None:
    g = _held(reports[device], "gemm", "fp8")
    overall, band = FP8[device]
    assert g["fp8 all"] <= overall, g.to_dict()
    assert g.drop("fp8 all").max() <= band, g.to_dict()


@pytest.mark.parametrize("device", GPUS)
def test_decode_attention(device: str, reports: dict[str, pd.DataFrame]) -> None:
    a = _held(reports[device], "attention", "decode kv>128 batch=")
    assert len(a) == 4, a.to_dict()
    assert a["decode kv>128 batch=1-16"] <= DECODE_SMALL_BATCH[device], a.to_dict()
    assert a.drop("decode kv>128 batch=1-16").max() <= 12.0, a.to_dict()


@pytest.mark.parametrize("device", GPUS)
def test_allreduce_per_implementation(device: str, reports: dict[str, pd.DataFrame]) -> None:
    r = reports[device]
    ar = r[r["op"] == "allreduce"].set_index("group")["mape_pct"]
    sizes = ALLREDUCE_SIZES.get(device, (2, 4, 8))
    assert {f"{i} world_size={n}" for i in ("custom", "nccl_graph") for n in sizes} <= set(ar.index)
    assert ar.max() <= 15.0, ar.to_dict()


@pytest.mark.parametrize("device", GPUS)
def test_moe_per_token_band(device: str, reports: dict[str, pd.DataFrame]) -> None:
    m = _held(reports[device], "moe", "tokens=")
    assert len(m) == 5 and m.max() <= MOE[device], m.to_dict()


def test_custom_allreduce_under_graphs_vs_eager_nccl() -> None:
    """The issue's example: 8x H100, 16 KiB: custom all-reduce under CUDA graphs 3.7 us measured."""
    from specsim.cost import roofline as rl

    h100 = load_hardware("h100-sxm")
    custom = float(rl.allreduce_time_s(16384, 8, h100, "custom")) * 1e6
    assert 3.7 * 0.8 < custom < 3.7 * 1.6
    assert float(rl.allreduce_time_s(16384, 8, h100, "nccl")) * 1e6 > 20  # eager NCCL (Vidur's stack)
    l40s = load_hardware("l40s")  # PCIe: 4-8 GPUs reach a few GB/s of bus bandwidth, not 22
    assert np.all([l40s.interconnect.allreduce_by_implementation["nccl_graph"][n][1] < 10e9 for n in (4, 8)])


def test_calibrate_tables_command_scores_a_profile(capsys: pytest.CaptureFixture[str]) -> None:
    from tests._cli import run

    code, out, _ = run(capsys, "calibrate-tables", "--hardware", "h100-sxm", "--score-only", "--format", "csv")
    assert code == 0
    df = pd.read_csv(__import__("io").StringIO(out))
    assert {"gemm", "attention", "moe", "allreduce"} <= set(df["op"])
    code, _, err = run(capsys, "calibrate-tables", "--hardware", "h100-sxm")
    assert code == 2 and "--output is needed" in err
