"""The token mixers of 2026 against NVIDIA's measured module tables (aiconfigurator-core, `pip install
".[tables]"`; read in place, never copied): the Gated DeltaNet decode kernels (`linear_attention/gdn_perf`:
causal_conv1d_update + the fused recurrent decode, per model, batch and heads per GPU) and the DeepSeek Sparse
Attention generation module (`sparse_attention/dsa_generation_module_perf`: one layer's projections, indexer,
top-k and sparse MLA, per heads per GPU, batch, context, GEMM and KV dtypes). Each row is priced by specsim's
own ops of the model the table names (`cost.ops`) and scored per GPU, framework, family and band.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from specsim.cost.aiconfigurator import data_root, version_key
from specsim.cost.forward import breakdown
from specsim.cost.hardware import load_hardware
from specsim.cost.model import load_model
from specsim.cost.ops import make_shape
from specsim.errors import SpecsimError

#: NVIDIA's systems scored, as specsim's profiles.
SYSTEMS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200", "b200_sxm": "b200", "b300_sxm": "b300", "gb200": "gb200"}
FRAMEWORKS = ("vllm", "sglang", "trtllm")
_DSA_MODELS = {"DeepseekV32ForCausalLM": "deepseek-v3.2", "GlmMoeDsaForCausalLM": "glm-5"}
_DTYPES = {"bfloat16": "bf16", "fp8_block": "fp8_block", "nvfp4": "nvfp4", "fp8": "fp8"}
#: The ops of one DSA layer's attention sublayer (cost.ops / cost.mixers names).
_DSA_OPS = ("qkv", "attention", "attention_sparse", "kv_write", "o")
_INDEXER_OPS = ("index_q", "index_k", "indexer", "index_write")
BANDS = ((1, 16), (17, 128), (129, 1024))


def _table(system: str, family: str, framework: str, name: str) -> pd.DataFrame | None:
    """The newest version's table, or None when the package lacks it."""
    base = data_root() / system / family / framework
    if not base.is_dir():
        return None
    for version in sorted((d.name for d in base.iterdir() if d.is_dir()), key=version_key, reverse=True):
        path = base / version / f"{name}.parquet"
        if path.is_file():
            table = pd.read_parquet(path)
            table["version"] = version
            return table
    return None


def gdn_rows(system: str, framework: str) -> pd.DataFrame:
    """GDN decode: (model, tp, batch, measured_ms, predicted_ms), the two decode kernels summed."""
    t = _table(system, "linear_attention", framework, "gdn_perf")
    if t is None:
        return pd.DataFrame()
    t = t[t["phase"] == "generation"]
    keys = ["model_name", "num_v_heads", "num_k_heads", "batch_size"]
    t = t.groupby(keys, as_index=False).agg(latency=("latency", "sum"), kernels=("latency", "size"))
    hw = load_hardware(SYSTEMS[system])
    out = []
    for (name, hv, hk), g in t[t["kernels"] == 2].groupby(keys[:3]):
        try:
            m = load_model(str(name))
        except SpecsimError:
            continue
        v_heads, k_heads = int(str(hv)), int(str(hk))
        tp = m.linear_v_heads // v_heads if v_heads else 0
        if tp < 1 or m.linear_v_heads % v_heads or m.linear_k_heads // tp != k_heads:
            continue
        b = g["batch_size"].to_numpy(float)
        ops = breakdown(m, hw, make_shape(b, 1.0, 1024.0, tp, "bf16")).ops
        pred = sum(o.time_s for o in ops if o.name == "linear_mixer") * 1e3
        out.append(pd.DataFrame({"model": m.name, "tp": tp, "batch": b, "context": np.nan,
                                 "measured_ms": g["latency"].to_numpy(float), "predicted_ms": pred}))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


def dsa_rows(system: str, framework: str) -> pd.DataFrame:
    """DSA generation module: one layer's attention sublayer (with its indexer, or without where the kernel
    name says the layer reuses another's top-k: GLM-5.2's shared layers)."""
    t = _table(system, "sparse_attention", framework, "dsa_generation_module_perf")
    if t is None:
        return pd.DataFrame()
    hw = load_hardware(SYSTEMS[system])
    out = []
    keys = ["architecture", "num_heads", "gemm_type", "kv_cache_dtype", "kernel_source"]
    for (arch, nh, gemm_type, kv, kernel), g in t.groupby(keys):
        m = load_model(_DSA_MODELS[str(arch)])
        heads = int(str(nh))
        if m.n_heads % heads or not 1 <= m.n_heads // heads <= 64 or str(gemm_type) not in _DTYPES:
            continue
        tp = m.n_heads // heads
        b, ctx = g["batch_size"].to_numpy(float), g["step"].to_numpy(float)
        ops = breakdown(m, hw, make_shape(b, 1.0, ctx, tp, _DTYPES[str(gemm_type)], _DTYPES[str(kv)])).ops
        names = _DSA_OPS + (() if "skip_indexer" in str(kernel) else _INDEXER_OPS)
        pred = sum(o.time_s for o in ops if o.name in names) * 1e3
        out.append(pd.DataFrame({"model": m.name, "tp": tp, "batch": b, "context": ctx,
                                 "measured_ms": g["latency"].to_numpy(float), "predicted_ms": pred}))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


def score_modules(systems: tuple[str, ...] = tuple(SYSTEMS), frameworks: tuple[str, ...] = FRAMEWORKS
                  ) -> pd.DataFrame:
    """Median |error| and bias of the predicted module times per GPU, framework, family and batch band."""
    rows = []
    for system in systems:
        for fw in frameworks:
            for family, read in (("gdn decode", gdn_rows), ("dsa generation", dsa_rows)):
                df = read(system, fw)
                if df.empty:
                    continue
                err = df["predicted_ms"] / df["measured_ms"] - 1.0
                for lo, hi in ((1, 1024), *BANDS):
                    e = err[(df["batch"] >= lo) & (df["batch"] <= hi)]
                    if len(e):
                        rows.append({"hardware": SYSTEMS[system], "framework": fw, "family": family,
                                     "batch": "all" if (lo, hi) == (1, 1024) else f"{lo}-{hi}", "n": len(e),
                                     "median |error| %": round(100 * float(np.median(np.abs(e))), 1),
                                     "bias %": round(100 * float(np.median(e)), 1)})
    return pd.DataFrame(rows)

