"""Each engine's own kernels (issue 22): the `frameworks` blocks of the bundled profiles against NVIDIA's tables of that
framework, scored on shapes held out of their fit (specsim/calibration/tables.py), beside the profile's own (vLLM's)
parameters on the same rows. Skipped without ``pip install ".[tables]"``."""

from __future__ import annotations

import importlib.util

import pandas as pd
import pytest

from specsim.cost.hardware import load_hardware
from tests._memo import Lazy

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("aiconfigurator_core") is None or importlib.util.find_spec("pyarrow") is None,
    reason="aiconfigurator-core / pyarrow not installed (.[tables])")

GPUS = ("h100-sxm", "h200", "b200", "gb200", "b300", "gb300", "a100-sxm-80gb", "l40s", "rtx-pro-6000")
PAIRS = [(gpu, fw) for gpu in GPUS for fw in ("sglang", "trtllm")]
# Issue 22's floors (GEMM bf16 and fp8 8%, L40S 12%; decode attention (KV > 128) 12%; MoE 15%; custom all-reduce 15%);
# where a pair misses one the bound is today's held-out figure (+0.5), so a regression still fails. Why they miss:
# SGLang's fp8 GEMMs (its fixed sm90 tiles are priced, gemm_dispatch.py: H100 12.2% -> 10.8%, H200 14.8% -> 12.4%; the
# 129-512 band's 64 x 64 tiles stay 0.8x; RTX PRO 6000's sm120 kernel not modelled), SGLang's bf16 GEMMs on Blackwell
# (8.1-8.7%), TensorRT-LLM's XQA decode (its split rule and MMHA fallback priced, attention.xqa_paths: Hopper 18.8-22.0%
# -> 12.7-13.9%; A100 and L40S 21-24%: their MMHA rows read from L2 faster than priced), SGLang's decode on A100, L40S
# and RTX PRO 6000 (FlashInfer; the RTX PRO 6000's 128 MB L2 holds the tables' replayed caches), SGLang's Triton fused
# MoE without its tuned configs (Hopper, L40S), TensorRT-LLM's custom all-reduce on the L40S's host-bridged PCIe.
FLOORS = {"gemm_bf16": 8.0, "gemm_fp8": 8.0, "decode": 12.0, "moe": 15.0}
L40S_GEMM = 12.0
MISSES = {("b200", "sglang", "gemm_bf16"): 9.2, ("gb200", "sglang", "gemm_bf16"): 8.6,
          ("b300", "sglang", "gemm_bf16"): 8.8, ("rtx-pro-6000", "trtllm", "gemm_bf16"): 8.7,
          ("h100-sxm", "sglang", "gemm_fp8"): 11.3, ("h200", "sglang", "gemm_fp8"): 12.9,
          ("b200", "sglang", "gemm_fp8"): 11.0, ("gb200", "sglang", "gemm_fp8"): 10.8,
          ("b300", "sglang", "gemm_fp8"): 11.1, ("gb300", "sglang", "gemm_fp8"): 9.8,
          ("l40s", "sglang", "gemm_fp8"): 13.7, ("rtx-pro-6000", "sglang", "gemm_fp8"): 23.6,
          ("h100-sxm", "trtllm", "decode"): 13.2, ("h200", "trtllm", "decode"): 14.4,
          ("a100-sxm-80gb", "sglang", "decode"): 13.0, ("a100-sxm-80gb", "trtllm", "decode"): 24.2,
          ("l40s", "sglang", "decode"): 14.0, ("l40s", "trtllm", "decode"): 21.4,
          ("rtx-pro-6000", "sglang", "decode"): 16.6, ("rtx-pro-6000", "trtllm", "decode"): 12.7,
          ("h100-sxm", "sglang", "moe"): 16.2, ("h200", "sglang", "moe"): 18.3, ("l40s", "sglang", "moe"): 16.5}
ALLREDUCE_MISSES = {("l40s", "trtllm"): 16.9}
FAMILIES = {"gemm_bf16": ("gemm", "bf16 all"), "gemm_fp8": ("gemm", "fp8 all"),
            "decode": ("attention", "decode kv>128 all"), "moe": ("moe", "all")}


def _score(pair: tuple[str, str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The pair's tables scored on its framework's block and on the profile's own (vLLM's) parameters."""
    from specsim.calibration import tables

    gpu, fw = pair
    hw = load_hardware(gpu)
    rows = tables.load_rows(gpu, fw)
    return tables.score(hw.for_framework(fw), rows), tables.score(hw, rows)


@pytest.fixture(scope="module")
def scores() -> Lazy[tuple[str, str], tuple[pd.DataFrame, pd.DataFrame]]:
    """Each pair scored on first use (a worker scores only its own pairs: tests/_xdist.py)."""
    return Lazy(_score)


def _held(rep: pd.DataFrame, op: str, group: str) -> float:
    r = rep[(rep["op"] == op) & (rep["rows"] == "held-out") & (rep["group"] == group)]
    return float(r["mape_pct"].iloc[0])


@pytest.mark.parametrize(("gpu", "fw"), PAIRS)
def test_a_framework_prices_its_own_tables_better_than_vllms_fit(gpu: str, fw: str, scores) -> None:  # type: ignore[no-untyped-def]
    own, base = scores[(gpu, fw)]
    assert load_hardware(gpu).for_framework(fw) is not load_hardware(gpu)  # the profile holds the framework's block
    for family, (op, group) in FAMILIES.items():
        if not ((own["op"] == op) & (own["group"] == group)).any():
            continue  # a family the GPU's tables lack (A100: no fp8)
        floor = L40S_GEMM if gpu == "l40s" and family.startswith("gemm") else FLOORS[family]
        assert _held(own, op, group) <= _held(base, op, group) + 0.5, family  # never worse than vLLM's fit
        assert _held(own, op, group) <= MISSES.get((gpu, fw, family), floor), family


@pytest.mark.parametrize(("gpu", "fw"), PAIRS)
def test_the_frameworks_in_graph_all_reduce_holds_the_floor(gpu: str, fw: str, scores) -> None:  # type: ignore[no-untyped-def]
    own, _ = scores[(gpu, fw)]
    custom = own[(own["op"] == "allreduce") & own["group"].str.startswith("custom")]["mape_pct"]
    assert len(custom) and float(custom.max()) <= ALLREDUCE_MISSES.get((gpu, fw), 15.0)


def test_an_engine_runs_its_frameworks_kernels() -> None:
    """A TensorRT-LLM pass is priced on the profile's trtllm block, the same object every time (the memos key on
    it); ATOM and research loops on the profile's own."""
    from specsim.cost.model import load_model
    from specsim.engines.passes import pass_time_s
    from specsim.engines.profile import load_engine

    hw, m = load_hardware("h100-sxm"), load_model("llama-3.1-8b")
    trt, atom = load_engine("trtllm"), load_engine("atom")
    assert trt.framework == "trtllm" and load_engine("sglang-0.4").framework == "sglang" and atom.framework == ""
    assert hw.for_framework("trtllm") is hw.for_framework("trtllm") and hw.for_framework("") is hw
    mine = pass_time_s(trt, hw, m, 8.0, 4.0, 2048.0)
    assert float(mine) == float(pass_time_s(trt, hw.for_framework("trtllm"), m, 8.0, 4.0, 2048.0))
    import dataclasses

    plain = dataclasses.replace(hw, frameworks={})
    assert float(mine) != float(pass_time_s(trt, plain, m, 8.0, 4.0, 2048.0))
