"""NVIDIA's measured kernel tables (aiconfigurator-core) in the measurement schema (measurements.py).

The data is read from the installed package (``pip install -e ".[tables]"``: aiconfigurator-core,
Apache-2.0, and pyarrow), ``aiconfigurator_core/systems/data/<system>/<family>/<framework>/<version>/
<table>.parquet``, and never copied anywhere: the package is only *located* (importing it would load
its Rust extension). Tested against aiconfigurator-core 0.12.0. What the tables hold and how each
column was pinned down (collector sources, arithmetic) is in the engineering notes
``aiconfigurator-tables.md``; the conventions used here:

* ``latency`` is milliseconds per kernel call. GEMM (but vLLM's block fp8: eager, ``graph`` False), attention,
  MoE and TRT-LLM all-reduce are CUDA-graph replays timed with CUDA events; SGLang / vLLM custom all-reduce
  come as ``*_graph`` and ``*_eager`` variants; NCCL rows are nccl-tests (back-to-back launches, no graph).
* GEMM is ``y[M,N] = x[M,K] @ W[N,K]^T``: tokens = M, d_in = K, d_out = N. fp8 / fp8_block / nvfp4
  rows include the dynamic activation-quantisation kernel.
* attention: ``isl`` new tokens per sequence, ``step`` tokens already cached; generation rows have
  isl = 1 and attend to step + 1 keys, context rows have step = 0 (causal prefill, no prefix), so
  q_per_seq = isl and context_len = isl + step. Head counts are per GPU.
* MoE: ``inter_size`` is the model's per-expert width (d_out here is the per-GPU shard inter/tp),
  ``num_tokens`` the tokens entering the layer before routing, over every EP rank (the collector routes them over
  all experts and times rank 0's share: ai-dynamo/aiconfigurator collector/helper.py build_rank0_local_workload,
  "in WideEP ... each DP rank has num_tokens/ep tokens"); the time is the expert computation
  (routing applied, grouped gate-up GEMM, activation, down GEMM), without router or communication.
* MLA (``mla`` family, op "mla"): the decode kernel alone (generation_mla_perf: SGLang, TensorRT-LLM; vLLM's MLA
  tables time the whole module), ``num_heads`` per GPU over DeepSeek-V3's 576-wide latent + rope key, isl = 1
  attending to step + 1 keys (head_dim = 576, one latent KV head).
* comm ``message_size`` counts ELEMENTS of the row's dtype: bytes = elements x width.

Each row gets ``framework`` (the directory: sglang | vllm | trtllm | nccl), ``kernel`` (the table's
kernel_source), ``source`` (package version and file), and for all-reduce ``impl``: ``custom``
(custom all-reduce or TRT-LLM AUTO under CUDA graphs), ``custom_eager``, or ``nccl_graph``
(nccl-tests: launches pipelined, so the GPU time of NCCL as a captured graph would run it; eager
NCCL called op by op, ``nccl``, is what the Vidur network files measure). GEMM rows get
``buffer_sets``, the weight/activation copies the collector cycles through (its L2 working set):
SGLang 6, vLLM 6 (1 for fp8_block and nvfp4), TRT-LLM max(1, min(5, ceil(L2 / weight bytes)));
attention and MoE rows 1 (the collectors replay one KV cache / one set of experts without flushing).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from specsim.cost.aiconfigurator_files import (
    DEFAULT_FAMILIES,
    DEVICE_MAP,
    FAMILIES,
    FRAMEWORKS,
    FrameMemo,
    available_systems,
    data_root,
    device_name,
    framework_tables,
    installed_version,
    parquet,
    require_tables,
    system_name,
    table_files,
    version_key,
)
from specsim.errors import SpecsimError

_DTYPES = {"bfloat16": "bf16", "bf16": "bf16", "float16": "fp16", "half": "fp16", "fp16": "fp16",
           "float32": "fp32", "float": "fp32", "fp8": "fp8", "fp8_block": "fp8_block", "int8": "int8",
           "sq": "int8_sq", "int8_wo": "int8_wo", "int4_wo": "int4_wo", "nvfp4": "nvfp4"}
_ELEM_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "int8": 1, "fp8": 1}
_FW_NAMES = {"sglang": "sglang", "vllm": "vllm", "trtllm": "trtllm", "tensorrt-llm": "trtllm"}
#: GEMM collectors' weight copies (notes §2): SGLang and vLLM cycle 6, vLLM only 1 for fp8_block/nvfp4.
_BUFFER_SETS = {"sglang": 6.0, "vllm": 6.0}

#: The columns every imported row has (measurement schema first).
OUTPUT_COLUMNS = (
    "op", "device", "dtype", "tokens", "d_in", "d_out", "batch", "context_len", "q_per_seq", "n_heads",
    "n_kv_heads", "head_dim", "bytes", "world_size", "time_ms", "framework", "kernel", "framework_version",
    "source", "system", "phase", "kv_dtype", "n_experts", "top_k", "ep", "tp", "distribution", "impl",
    "graph", "buffer_sets", "measured_framework",
)


# --------------------------------------------------------------------------------------------------
# One table -> measurement rows


def _read(path: str, wanted: Sequence[str]) -> pd.DataFrame:
    pq = parquet()
    names = set(pq.read_schema(path).names)
    df = pq.read_table(path, columns=[c for c in wanted if c in names]).to_pandas()
    for c in wanted:
        if c not in df.columns:
            df[c] = np.nan
    return df


def _per_value(s: pd.Series, mapping: Mapping[str, str]) -> pd.Series:
    """`s.map(lambda x: mapping.get(x, x))` (a string column's values renamed, the others kept), looked up once per
    distinct value: a table repeats a few names over 100,000s of rows."""
    codes, uniques = pd.factorize(s, use_na_sentinel=False)
    return pd.Series(np.array([mapping.get(u, u) for u in uniques], dtype=object)[codes], index=s.index,
                     dtype=s.dtype)


def _dtype(s: pd.Series) -> pd.Series:
    return _per_value(s.astype(str).str.lower(), _DTYPES)


def _l2_bytes(system: str) -> float:
    """The GPU's L2 in bytes (its specsim profile; 50 MB when there is none)."""
    from specsim.cost.hardware import load_hardware

    try:
        return load_hardware(device_name(system)).l2_bytes
    except SpecsimError:
        return 50e6


def _gemm(d: pd.DataFrame, rec: pd.Series) -> pd.DataFrame:
    dtype = _dtype(d["gemm_dtype"])
    if rec["framework"] == "trtllm":
        # TensorRT-LLM's collector: max(1, min(5, ceil(L2 / weight bytes))) weight copies
        # (collector/trtllm/collect_gemm.py, cudaDevAttrL2CacheSize): small weights stay L2-resident
        width = dtype.map({"fp8": 1.0, "fp8_block": 1.0, "nvfp4": 0.5}).fillna(2.0).to_numpy()
        weight = d["n"].to_numpy(float) * d["k"].to_numpy(float) * width
        sets = np.maximum(1.0, np.minimum(5.0, np.ceil(_l2_bytes(rec["system"]) / weight)))
    else:
        single = (rec["framework"] == "vllm") & dtype.isin(["fp8_block", "nvfp4"]).to_numpy()
        sets = np.where(single, 1.0, _BUFFER_SETS.get(rec["framework"], np.nan))
    # vLLM's block-fp8 GEMMs are timed eagerly (ai-dynamo/aiconfigurator collector/vllm/collect_gemm.py:
    # use_cuda_graph=gemm_type != "fp8_block"): their 50-280 us hold the host's launch work, not the kernel's time
    graph = ~((rec["framework"] == "vllm") & (dtype == "fp8_block")).to_numpy()
    return pd.DataFrame({"op": "gemm", "kernel": d["kernel_source"], "dtype": dtype, "tokens": d["m"],
                         "d_in": d["k"], "d_out": d["n"], "time_ms": d["latency"], "buffer_sets": sets,
                         "graph": graph})


def _attention(d: pd.DataFrame, rec: pd.Series) -> pd.DataFrame:
    d = d[pd.to_numeric(d["beam_width"], errors="coerce").fillna(1) == 1]
    window = pd.to_numeric(d["window_size"], errors="coerce").fillna(0)
    d = d[window == 0]  # sliding-window rows are another kernel; full attention only
    isl = d["isl"].astype(float)
    return pd.DataFrame({"op": "attention", "phase": rec["table"].split("_")[0], "kernel": d["kernel_source"],
                         "dtype": _dtype(d["attn_dtype"]), "kv_dtype": _dtype(d["kv_cache_dtype"]),
                         "batch": d["batch_size"], "q_per_seq": isl,
                         "context_len": isl + d["step"].astype(float).fillna(0), "n_heads": d["num_heads"],
                         "n_kv_heads": d["num_key_value_heads"], "head_dim": d["head_dim"],
                         "buffer_sets": 1.0,  # one KV cache replayed, not flushed (notes §2): L2-warm when small
                         "time_ms": d["latency"]})


def _moe(d: pd.DataFrame, rec: pd.Series) -> pd.DataFrame:
    tp = d["moe_tp_size"].astype(float)
    return pd.DataFrame({"op": "moe", "kernel": d["kernel_source"], "dtype": _dtype(d["moe_dtype"]),
                         "tokens": d["num_tokens"], "d_in": d["hidden_size"], "d_out": d["inter_size"] / tp,
                         "n_experts": d["num_experts"], "top_k": d["topk"], "ep": d["moe_ep_size"], "tp": tp,
                         "distribution": d["distribution"].astype(str), "time_ms": d["latency"],
                         "buffer_sets": 1.0})  # one set of expert weights replayed: L2-warm when small


def _mla(d: pd.DataFrame, rec: pd.Series) -> pd.DataFrame:
    isl = d["isl"].astype(float)
    return pd.DataFrame({"op": "mla", "phase": "generation", "kernel": d["kernel_source"],
                         "dtype": _dtype(d["mla_dtype"]), "kv_dtype": _dtype(d["kv_cache_dtype"]),
                         "batch": d["batch_size"], "q_per_seq": isl, "context_len": isl + d["step"].astype(float),
                         "n_heads": d["num_heads"], "n_kv_heads": 1.0, "head_dim": 576.0, "buffer_sets": 1.0,
                         "time_ms": d["latency"]})


def _elements_to_bytes(elements: pd.Series, dtype: pd.Series) -> pd.Series:
    return elements.astype(float) * dtype.map(_ELEM_BYTES).astype(float)


def _custom_allreduce(d: pd.DataFrame, rec: pd.Series) -> pd.DataFrame:
    dtype = _dtype(d["allreduce_dtype"])
    backend = d["backend"].astype(object)
    mode = backend.where(backend.notna(), d["kernel_source"]).astype(str).str.lower()
    graph = ~mode.str.endswith("eager")  # TRT-LLM's collector always times a captured graph
    return pd.DataFrame({"op": "allreduce", "kernel": d["kernel_source"], "dtype": dtype,
                         "bytes": _elements_to_bytes(d["message_size"], dtype), "world_size": d["num_gpus"],
                         "graph": graph, "impl": np.where(graph, "custom", "custom_eager"),
                         "time_ms": d["latency"]})


def _nccl(d: pd.DataFrame, rec: pd.Series) -> pd.DataFrame:
    d = d[d["op_name"].astype(str) == "all_reduce"]
    dtype = _dtype(d["nccl_dtype"])
    return pd.DataFrame({"op": "allreduce", "kernel": d["kernel_source"], "dtype": dtype,
                         "bytes": _elements_to_bytes(d["message_size"], dtype), "world_size": d["num_gpus"],
                         "graph": False, "impl": "nccl_graph", "time_ms": d["latency"]})


_CONVERT = {
    "gemm_perf": (("kernel_source", "gemm_dtype", "m", "n", "k", "latency"), _gemm),
    "generation_attention_perf": (("kernel_source", "attn_dtype", "kv_cache_dtype", "batch_size", "isl", "step",
                                   "num_heads", "num_key_value_heads", "head_dim", "window_size", "beam_width",
                                   "latency"), _attention),
    "moe_perf": (("kernel_source", "moe_dtype", "num_tokens", "hidden_size", "inter_size", "topk", "num_experts",
                  "moe_tp_size", "moe_ep_size", "distribution", "latency"), _moe),
    "custom_allreduce_perf": (("kernel_source", "allreduce_dtype", "num_gpus", "message_size", "latency",
                               "backend"), _custom_allreduce),
    "nccl_perf": (("op_name", "kernel_source", "nccl_dtype", "num_gpus", "message_size", "latency"), _nccl),
}
_CONVERT["context_attention_perf"] = _CONVERT["generation_attention_perf"]
_CONVERT["generation_mla_perf"] = (("kernel_source", "mla_dtype", "kv_cache_dtype", "batch_size", "isl", "step",
                                    "num_heads", "latency"), _mla)


def _load(rec: pd.Series, package_version: str) -> pd.DataFrame:
    columns, convert = _CONVERT[rec["table"]]
    raw = _read(rec["path"], [*columns, "framework", "version"])
    out = convert(raw, rec)
    in_rows = _per_value(raw.loc[out.index, "framework"].astype(str).str.lower(), _FW_NAMES)
    out["measured_framework"] = in_rows
    version = rec["version"]
    if rec["framework"] == "nccl" and rec["dir_framework"] != "nccl":  # nccl-tests data filed under trtllm
        version = str(raw["version"].dropna().iloc[0]) if raw["version"].notna().any() else version
    out["device"] = device_name(rec["system"])
    out["system"] = rec["system"]
    out["framework"] = rec["framework"]
    out["framework_version"] = version
    out["source"] = f"aiconfigurator-core {package_version}: {rec['relpath']}"
    return out


_KEY = ("op", "device", "framework", "kernel", "dtype", "kv_dtype", "phase", "tokens", "d_in", "d_out", "batch",
        "context_len", "q_per_seq", "n_heads", "n_kv_heads", "head_dim", "n_experts", "top_k", "ep", "tp",
        "distribution", "bytes", "world_size", "impl")


def _keys(df: pd.DataFrame, extra: Sequence[str] = ()) -> np.ndarray:
    return pd.util.hash_pandas_object(df[[*_KEY, *extra]], index=False).to_numpy()


def import_aiconfigurator(systems: Sequence[str] | None = None, frameworks: Sequence[str] | None = None,
                          families: Sequence[str] | None = None, *, latest: bool = True,
                          root: str | os.PathLike[str] | None = None) -> pd.DataFrame:
    """Rows of NVIDIA's tables in the measurement schema (columns ``OUTPUT_COLUMNS``).

    systems: aiconfigurator names (h100_sxm) or specsim profile names (h100-sxm); None = all with data.
    frameworks: sglang | vllm | trtllm | nccl (nccl-tests all-reduce); None = all.
    families: gemm | attention | moe | allreduce | mla; None = the first four (DEFAULT_FAMILIES).
    latest: keep, for every measured key, only the newest framework version that measured it (the
        overlay aiconfigurator itself applies: a version folder may hold only new shapes); repeated
        runs of one key in one file are collapsed to their median either way. Rows a framework folder
        holds but another framework measured (copied comm tables) are dropped.
    """
    files = table_files(systems, frameworks, families, root)
    version = installed_version() or "unknown"
    # TensorRT-LLM's GEMM rows depend on the GPU's L2 (its profile) beside the files
    l2 = tuple(_l2_bytes(system) for system in sorted(set(files["system"][files["framework"] == "trtllm"])))
    key = _READ.key(list(files["path"]), version, latest, l2)
    if (hit := _READ.get(key)) is not None:
        return hit
    parts = [p for _, rec in files.iterrows() if len(p := _load(rec, version))]
    if not parts:
        raise SpecsimError("no aiconfigurator rows for this selection")
    df = pd.concat(parts, ignore_index=True)
    for col in OUTPUT_COLUMNS:
        if col not in df.columns:
            df[col] = np.nan
    keep, time_ms = _kept_rows(df, latest)
    # one take of the kept rows at the end: the text columns are pyarrow strings, slow to filter step by step
    return _READ.put(key, df.iloc[keep].assign(time_ms=time_ms).loc[:, list(OUTPUT_COLUMNS)].reset_index(drop=True))


#: `import_aiconfigurator`'s frames of this process, by the files read (a GPU's full table set is ~340,000 rows)
_READ = FrameMemo(max_rows=1_000_000)


def _kept_rows(df: pd.DataFrame, latest: bool) -> tuple[np.ndarray, np.ndarray]:
    """The positions of the rows `import_aiconfigurator` keeps, in order, and their times: rows copied from another
    framework dropped; repeated runs of one key in one file as their median, once; with `latest`, the newest version
    of each key; times > 0."""
    copied = df["framework"].isin(["sglang", "vllm", "trtllm"]) & (df["measured_framework"] != df["framework"])
    pos = np.flatnonzero(~copied.to_numpy())
    # repeated runs of one key in one file -> their median (run-to-run noise 1-3%, notes §2)
    h = _keys(df, ("framework_version", "source"))[pos]
    median = df["time_ms"].iloc[pos].groupby(h).transform("median").to_numpy()
    first = ~pd.Series(h).duplicated().to_numpy()
    pos, median = pos[first], median[first]
    if latest:
        codes, versions = pd.factorize(df["framework_version"].astype(str).iloc[pos], use_na_sentinel=False)
        keys = [version_key(v) for v in versions]
        order = {v: i for i, v in enumerate(sorted(set(keys)))}
        r = np.array([order[k] for k in keys], dtype=np.int64)[codes]
        best = pd.Series(r).groupby(_keys(df)[pos]).transform("max").to_numpy()
        pos, median = pos[r == best], median[r == best]
    positive = pd.to_numeric(pd.Series(median), errors="coerce").to_numpy() > 0
    return pos[positive], median[positive]


# --------------------------------------------------------------------------------------------------
# MoE all-to-all (expert-parallel dispatch + combine): DeepEP "ll" (low-latency) and "normal" (ht)

#: The all-to-all tables: SGLang's DeepEP benchmarks (one file per mode) and the unified table of
#: vLLM and TensorRT-LLM (`comm_backend` names the mode).
ALLTOALL_TABLES = ("wideep_deepep_ll_perf", "wideep_deepep_normal_perf", "moe_a2a_perf")
#: comm_backend of moe_a2a_perf -> mode (aiconfigurator_core/sdk/operations/moe_comm.py: deepep_ht and
#: trtllm_deepep_ht serve context, the _ll backends generation); deepep_v2_* are left out.
_A2A_MODES = {"deepep_ll": "ll", "trtllm_deepep_ll": "ll", "deepep_ht": "normal", "trtllm_deepep_ht": "normal"}
#: The all-to-all frame's columns (alltoall_tables).
ALLTOALL_COLUMNS = ("system", "framework", "version", "mode", "phase", "ep", "hidden", "topk", "num_experts",
                    "tokens_per_rank", "dtype", "time_s", "sms", "node_num", "source")


def gpus_per_node(system: str, root: str | os.PathLike[str] | None = None) -> int:
    """`node.num_gpus_per_node` of aiconfigurator's system YAML (8 for HGX boards, 4 for a GB200/GB300
    compute tray); 8 when the file is missing."""
    import yaml

    path = data_root(root).parent / f"{system}.yaml"
    try:
        node = (yaml.safe_load(path.read_text()) or {}).get("node") or {}
        return int(node.get("num_gpus_per_node", 8))
    except (OSError, ValueError, TypeError, AttributeError):
        return 8


def _a2a_sglang(path: Path, mode: str) -> pd.DataFrame:
    """SGLang's DeepEP tables: one row per shape with dispatch and combine columns. The collector
    (ai-dynamo/aiconfigurator collector/deep_collector/test_low_latency.py, test_intranode.py, parsed
    by extract_data.py) runs DeepEP's own tests: `num_token` tokens on EVERY rank, LL dispatch with
    use_fp8=True (payload hidden + hidden/128 x 4 scale + 16 bytes per token copy), LL combine bf16;
    normal mode keeps the "Best dispatch (FP8)" line (fp8) and a bf16 combine, at each SM count
    `dispatch_sms` / `combine_sms` (DeepEP's Buffer.num_sms default is 20)."""
    d = parquet().read_table(str(path)).to_pandas()
    parts = []
    for phase, dtype in (("dispatch", "fp8"), ("combine", "bf16")):
        col = f"{phase}_avg_t_us" if mode == "ll" else f"{phase}_transmit_us"
        sms = d[f"{phase}_sms"] if f"{phase}_sms" in d.columns else np.nan
        parts.append(pd.DataFrame({
            "framework": "sglang", "mode": mode, "phase": phase, "hidden": d["hidden_size"],
            "topk": d["num_topk"], "num_experts": d["num_experts"], "tokens_per_rank": d["num_token"],
            "dtype": dtype, "time_s": pd.to_numeric(d[col], errors="coerce") * 1e-6, "sms": sms,
            "node_num": d["node_num"], "device_name": d["device"].astype(str)}))
    return pd.concat(parts, ignore_index=True)


def _a2a_unified(path: Path) -> pd.DataFrame:
    """vLLM's and TensorRT-LLM's moe_a2a_perf: one row per phase; `num_tokens` per rank (the SDK's
    MoEAllToAll looks it up with per-rank token counts), `latency` in microseconds, comm_dtype as
    collected ("default" for vLLM: the collector's unquantised default)."""
    d = parquet().read_table(str(path)).to_pandas()
    backend = d["comm_backend"].astype(str)
    d = d[backend.isin(list(_A2A_MODES))]
    fw = d["framework"].astype(str).str.lower().map(lambda x: _FW_NAMES.get(x, x))
    return pd.DataFrame({
        "framework": fw, "mode": d["comm_backend"].astype(str).map(_A2A_MODES), "phase": d["phase"].astype(str),
        "hidden": d["hidden_size"], "topk": d["topk"], "num_experts": d["num_experts"],
        "tokens_per_rank": d["num_tokens"], "dtype": _dtype(d["comm_dtype"]),
        "time_s": pd.to_numeric(d["latency"], errors="coerce") * 1e-6, "sms": d["sms"], "node_num": d["node_num"],
        "ep": d["ep_size"], "device_name": d["device"].astype(str)})


def alltoall_tables(systems: Sequence[str] | None = None, frameworks: Sequence[str] | None = None, *,
                    latest: bool = True, root: str | os.PathLike[str] | None = None) -> pd.DataFrame:
    """NVIDIA's MoE all-to-all tables as one tidy frame (columns ``ALLTOALL_COLUMNS``): one row per
    (shape, phase), time in seconds of one dispatch or combine kernel on one rank.

    ``ep`` is the table's ep_size, or for SGLang's files (which have none) node_num x the system's GPUs
    per node (`gpus_per_node`: the collector launches one process per GPU of each node).
    ``tokens_per_rank`` is the tokens each rank dispatches. ``latest`` keeps, per shape, the newest
    framework version that measured it (the same overlay as ``import_aiconfigurator``); rows the
    collector copied from another GPU (SGLang 0.5.6.post2's h200 normal table holds H100 rows) are
    dropped.
    """
    base = data_root(root)
    wanted = [system_name(s) for s in systems] if systems else available_systems(base)
    fws = None if frameworks is None else {f.lower() for f in frameworks}
    version = installed_version() or "unknown"
    parts = []
    for system in wanted:
        for path in sorted((base / system / "comm").glob("*/*/*.parquet")):
            table = path.stem
            if table not in ALLTOALL_TABLES:
                continue
            if table == "moe_a2a_perf":
                d = _a2a_unified(path)
            else:
                d = _a2a_sglang(path, "ll" if table.endswith("_ll_perf") else "normal")
                d["ep"] = pd.to_numeric(d["node_num"]) * gpus_per_node(system, base)
            if fws is not None:
                d = d[d["framework"].isin(fws)]
            d["system"] = system
            d["version"] = path.parts[-2]
            d["source"] = f"aiconfigurator-core {version}: {path.relative_to(base.parent.parent)}"
            parts.append(d)
    if not parts:
        raise SpecsimError("no aiconfigurator all-to-all rows for this selection")
    df = pd.concat(parts, ignore_index=True)
    # rows measured on another GPU than the folder's (0.5.6.post2 h200_sxm normal holds H100 rows):
    # the device name must contain the system's GPU ("h200_sxm" -> "H200")
    gpu = df["system"].str.split("_").str[0].str.upper()
    df = df[[g in d.upper() for g, d in zip(gpu, df["device_name"], strict=True)]]
    for col in ("ep", "hidden", "topk", "num_experts", "tokens_per_rank", "sms", "node_num"):
        df[col] = pd.to_numeric(df[col], errors="coerce")
    df = df[df["time_s"] > 0]
    key = ["system", "framework", "mode", "phase", "ep", "hidden", "topk", "num_experts", "tokens_per_rank",
           "dtype", "sms"]
    # repeated runs of one shape in one version -> their median
    hv = pd.util.hash_pandas_object(df[[*key, "version"]].fillna(-1), index=False).to_numpy()
    median = df["time_s"].groupby(hv).transform("median").to_numpy()
    df = df.assign(time_s=median)[~pd.Series(hv).duplicated().to_numpy()]
    h = pd.util.hash_pandas_object(df[key].fillna(-1), index=False).to_numpy()
    if latest:
        rank = df["version"].astype(str).map(version_key)
        order = {v: i for i, v in enumerate(sorted(set(rank)))}
        r = rank.map(order).to_numpy()
        df = df[r == pd.Series(r).groupby(h).transform("max").to_numpy()]
    return df.loc[:, list(ALLTOALL_COLUMNS)].reset_index(drop=True)


def measurements(systems: Sequence[str] | None = None, frameworks: Sequence[str] | None = None,
                 families: Sequence[str] | None = None, *, latest: bool = True,
                 root: str | os.PathLike[str] | None = None) -> pd.DataFrame:
    """`import_aiconfigurator`, checked as a measurement table (what `specsim import aiconfigurator` writes)."""
    from specsim.cost.measurements import check_measurements

    df = import_aiconfigurator(systems, frameworks, families, latest=latest, root=root)
    return check_measurements(df, "aiconfigurator tables")


__all__ = ["ALLTOALL_COLUMNS", "ALLTOALL_TABLES", "DEFAULT_FAMILIES", "DEVICE_MAP", "FAMILIES", "FRAMEWORKS",
           "OUTPUT_COLUMNS", "alltoall_tables", "available_systems", "data_root", "device_name",
           "framework_tables", "gpus_per_node", "import_aiconfigurator", "installed_version", "measurements",
           "parquet", "require_tables", "system_name", "table_files", "version_key"]
