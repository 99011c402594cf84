"""Long-context attention (KV >= 16k) against NVIDIA's measured kernel tables (aiconfigurator-core), per GPU and
framework: the error of specsim's attention time on each row, by family (issue 33).

Families: GQA / MHA decode (generation_attention rows, q = 1), MLA decode (generation_mla rows: DeepSeek-V3's latent
attention kernel alone, SGLang and TensorRT-LLM), and prefill (context_attention rows, q = isl, no prefix). The
tables time no generation row with more than one query token (isl = 1 in every generation_attention and
generation_mla file of aiconfigurator-core 0.12; the SDK prices MTP as decode at batch x (nextn + 1)), so
verification (q > 1) has no measured row here: `q_gt1_rows` says so per GPU and framework.

Each framework's rows are priced on the profile as that framework's kernels run on the GPU
(`HardwareProfile.for_framework` with `tables.framework_kernels`), the way `calibrate-tables` scores them."""

from __future__ import annotations

import numpy as np
import pandas as pd

from specsim.calibration import tables as tab
from specsim.cost.attention import attention_time_s
from specsim.cost.hardware import load_hardware
from specsim.cost.hardware_profile import HardwareProfile
from specsim.cost.measurements import RowSet
from specsim.cost.table_grids import MLA_QK_DIM, MLA_V_DIM
from specsim.errors import SpecsimError

LONG_KV = 16384.0  # the "long context": KV >= 16k tokens
GPUS = ("h100-sxm", "h200", "b200", "gb200", "b300", "gb300", "a100-sxm-80gb", "l40s", "rtx-pro-6000")
FRAMEWORKS = ("vllm", "sglang", "trtllm")
KV_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0}
COLUMNS = ("gpu", "framework", "family", "kernel", "n", "median_pct", "p90_pct", "bias_pct")


def framework_profile(gpu: str, framework: str) -> HardwareProfile:
    """The GPU's profile as `framework`'s kernels run on it (its fitted block and decode-attention family)."""
    return tab.framework_kernels(load_hardware(gpu).for_framework(framework), framework)


def mla_rows(gpu: str, framework: str) -> pd.DataFrame:
    """The framework's generation_mla rows on the GPU (bf16 queries; empty when it has none)."""
    from specsim.cost import aiconfigurator as aic

    try:
        d = aic.import_aiconfigurator([gpu], [framework], ["mla"])
    except SpecsimError:
        return pd.DataFrame(columns=list(aic.OUTPUT_COLUMNS))
    return d[(d["framework"] == framework) & (d["dtype"] == "bf16")].reset_index(drop=True)


def mla_predict_ms(d: pd.DataFrame, hw: HardwareProfile) -> np.ndarray:
    """specsim's time (ms) of MLA decode rows: one latent KV head of MLA_QK_DIM per token, values MLA_V_DIM wide, in
    the rows' KV dtype (as cost/ops.py prices MLA decode and verification)."""
    kvb = d["kv_dtype"].map(KV_BYTES).to_numpy(float)
    t = attention_time_s(d["batch"].to_numpy(float), d["q_per_seq"].to_numpy(float), d["context_len"].to_numpy(float),
                         d["n_heads"].to_numpy(float), 1.0, MLA_QK_DIM, MLA_V_DIM, MLA_QK_DIM * kvb, hw,
                         buffer_sets=1.0)[0]
    return np.asarray(t, dtype=float) * 1e3


def _summary(gpu: str, framework: str, family: str, kernel: str, pred: np.ndarray, meas: np.ndarray
             ) -> dict[str, object]:
    e = pred / meas - 1.0
    e = e[np.isfinite(e)]
    if not len(e):
        return {"gpu": gpu, "framework": framework, "family": family, "kernel": kernel, "n": 0,
                "median_pct": np.nan, "p90_pct": np.nan, "bias_pct": np.nan}
    return {"gpu": gpu, "framework": framework, "family": family, "kernel": kernel, "n": len(e),
            "median_pct": float(np.median(np.abs(e)) * 100), "p90_pct": float(np.percentile(np.abs(e), 90) * 100),
            "bias_pct": float(np.median(e) * 100)}


def _kernels(d: pd.DataFrame) -> str:
    return ",".join(sorted({str(k) for k in d["kernel"]}))


def score_gpu(gpu: str, framework: str, min_kv: float = LONG_KV) -> list[dict[str, object]]:
    """Per family, the error of the framework's long-KV rows on one GPU (no entry for a family without rows)."""
    hw = framework_profile(gpu, framework)
    out: list[dict[str, object]] = []
    att = tab.load_rows(gpu, framework).attention
    att = att[(att["framework"] == framework) & (att["context_len"] >= min_kv)]
    for family, sel in (("decode q=1", att["q_per_seq"] == 1), ("prefill", att["q_per_seq"] > 1)):
        d = att[sel.to_numpy()]
        if len(d):
            out.append(_summary(gpu, framework, family, _kernels(d), RowSet(d).predict_ms(hw),
                                d["time_ms"].to_numpy(float)))
    mla = mla_rows(gpu, framework)
    mla = mla[(mla["q_per_seq"] == 1) & (mla["context_len"] >= min_kv)]
    for kv, d in mla.groupby("kv_dtype"):
        out.append(_summary(gpu, framework, f"mla decode q=1 kv {kv}", _kernels(d), mla_predict_ms(d, hw),
                            d["time_ms"].to_numpy(float)))
    return out


def q_gt1_rows(gpu: str, framework: str) -> int:
    """Generation rows (GQA and MLA) timing more than one query token per sequence: 0 in aiconfigurator-core 0.12."""
    att = tab.load_rows(gpu, framework).attention
    gen = att[(att["framework"] == framework) & (att["phase"] == "generation")]
    mla = mla_rows(gpu, framework)
    return int((gen["q_per_seq"] > 1).sum() + (mla["q_per_seq"] > 1).sum())


def long_context_table(gpus: tuple[str, ...] = GPUS, frameworks: tuple[str, ...] = FRAMEWORKS,
                       min_kv: float = LONG_KV) -> pd.DataFrame:
    """`score_gpu` over every GPU and framework the installed tables cover (columns COLUMNS)."""
    rows: list[dict[str, object]] = []
    for gpu in gpus:
        for fw in frameworks:
            try:
                rows += score_gpu(gpu, fw, min_kv)
            except SpecsimError:  # no tables for this GPU and framework
                continue
    return pd.DataFrame(rows, columns=list(COLUMNS))


__all__ = ["COLUMNS", "FRAMEWORKS", "GPUS", "LONG_KV", "framework_profile", "long_context_table", "mla_predict_ms",
           "mla_rows", "q_gt1_rows", "score_gpu"]
