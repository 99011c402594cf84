"""Fit a profile to NVIDIA's measured kernel tables (aiconfigurator-core) and score it.

The fit runs in stages, each op family on its own rows with the earlier stages' parameters fixed
(their kernels share the GEMM's tile model): GEMMs (bf16, core shapes 512 <= N, K <= 16384; then
the fp8 tile rate and the quantisation's fixed cost on fp8 rows), then attention (decode rows with
KV > 128: streaming and fixed costs; prefill rows: the MMA rate), then fused MoE (balanced routing,
ep = 1), then all-reduce per implementation and GPU count (custom all-reduce under CUDA graphs from the
framework's table, NCCL from nccl-tests). Each family keeps one kernel per dtype (the framework's most-measured one);
MoE shapes whose rows cannot be physical are left out (`suspect_moe_shapes`).

Scoring holds out shapes the fit did not see ("model shapes you did not fit"): GEMM (N, K) pairs
on a checkerboard of the grid, attention head configurations (every other (heads, KV heads, head
size)), MoE model shapes (every other (hidden, width, experts, top-k)). All-reduce curves have one
(latency, bandwidth, sharpness) triple per GPU count, fitted to all sizes and scored in-sample.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pandas as pd

from specsim.calibration.allreduce import fit_allreduce
from specsim.calibration.efficiency import fit_efficiency_params
from specsim.calibration.params import ATTENTION_PARAMS, GEMM_PARAMS, MOE_PARAMS
from specsim.cost.hardware_profile import HardwareProfile
from specsim.cost.measurements import BAND_LABELS, RowSet, check_measurements, token_band
from specsim.errors import SpecsimError

CORE = (512.0, 16384.0)  # GEMM core shapes: 512 <= N, K <= 16384 (the scoring set)
FALLBACK = ("vllm", "sglang", "trtllm")  # where a family comes from when the chosen framework lacks it
DECODE_MIN_KV = 128  # decode attention is scored above this KV length
# The decode-attention kernel family a framework runs where it differs from the profile's (vLLM's): TensorRT-LLM
# decodes with XQA and its MMHA fallback (attention.xqa_paths) on every GPU it supports; on Blackwell its trtllm-gen
# kernels are priced in XQA's form (the B200 tables fit it best: 8.4% held out against 12.5% in FA3's)
FRAMEWORK_ATTENTION_KERNEL = {"trtllm": "xqa"}
# The fixed W8A8 fp8 GEMM tile dispatch a framework runs on Hopper (gemm_dispatch.DISPATCH; TensorRT-LLM's autotuned
# kernels and every framework on other GPUs: none, the best configuration). The Hopper profiles' own (vLLM's) name it.
HOPPER_FP8_DISPATCH = {"vllm": "vllm_sm90_fp8", "sglang": "sglang_sm90_fp8"}
# What fp8 GEMM rows fit on top of the bf16 tile model: the fp8 tile rate and the activation quantisation's fixed and
# per-token costs (vLLM's per-token quant kernel runs a thread block per token: ~5-6 ns a token, SGLang's < 1 ns)
FP8_PARAMS = ("fp8_compute", "quant_overhead_us", "quant_row_ns")
# What prefill rows fit (attention.attention_time_s): the matmuls' share of the tensor-core peak, the softmax's MUFU
# slots per score and the cost per wave of query-tile CTAs; decode rows fit the streaming and fixed costs before them
PREFILL_PARAMS = ("attention_compute", "attention_softmax_ops", "attention_prefill_cta_us")


def framework_kernels(hw: HardwareProfile, framework: str) -> HardwareProfile:
    """`hw` with the kernel families `framework` runs on it: its decode attention and its fp8 GEMM dispatch."""
    dispatch = {"fp8": HOPPER_FP8_DISPATCH[framework]} if hw.is_hopper and framework in HOPPER_FP8_DISPATCH else {}
    return dataclasses.replace(hw, attention_kernel=FRAMEWORK_ATTENTION_KERNEL.get(framework, hw.attention_kernel),
                               gemm_dispatch=dispatch)
FLOORS = {"gemm": 8.0, "gemm_l40s": 12.0, "gemm_band": 12.0, "decode": 12.0, "allreduce": 15.0, "moe": 15.0}


@dataclass
class TableRows:
    """Measurement rows of one GPU and framework, by op family, with their hold-out masks."""

    device: str
    framework: str
    gemm: pd.DataFrame
    attention: pd.DataFrame
    moe: pd.DataFrame
    allreduce: pd.DataFrame

    def held(self, op: str) -> np.ndarray:
        return holdout_mask(op, getattr(self, op))


def _one_kernel(d: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Per group (e.g. dtype), only the rows of the most-measured (version, kernel): one kernel each."""
    keep = []
    for _, g in d.groupby(list(by), dropna=False):
        top = g.groupby(["framework_version", "kernel"]).size().sort_values(kind="stable").index[-1]
        keep.append(g[(g["framework_version"] == top[0]) & (g["kernel"] == top[1])])
    return pd.concat(keep, ignore_index=True) if keep else d.iloc[:0]


def load_rows(device: str, framework: str = "vllm", gemm_dtypes: Sequence[str] = ("bf16", "fp8"),
              df: pd.DataFrame | None = None) -> TableRows:
    """The rows the fit and the scores use, from the installed tables (or `df` in the same schema)."""
    from specsim.cost import aiconfigurator as aic

    if df is None:
        aic.require_tables("fitting to NVIDIA's tables")  # else every family reads as empty (KeyError: 'rows')
    cache: dict[tuple[str, str], pd.DataFrame] = {}

    def table(fw: str, family: str) -> pd.DataFrame:
        if (fw, family) not in cache:
            if df is not None:
                d = df[(df["device"] == device) & (df["framework"] == fw)]
                cache[(fw, family)] = d[d["op"] == family]
            else:
                try:
                    cache[(fw, family)] = aic.import_aiconfigurator([device], [fw], [family])
                except SpecsimError:  # no such table for this GPU and framework
                    cache[(fw, family)] = pd.DataFrame(columns=list(aic.OUTPUT_COLUMNS))
        return cache[(fw, family)]

    def pick(family: str, select: Callable[[pd.DataFrame], pd.DataFrame]) -> pd.DataFrame:
        """`select` on the framework's rows; when it has none, on the first of FALLBACK that has some
        (each family from one framework; provenance records which)."""
        for fw in (framework, *(f for f in FALLBACK if f != framework)):
            d = table(fw, family)
            got = select(d) if len(d) else d
            if len(got):
                return got
        return table(framework, family).iloc[:0]

    gemm = pick("gemm", lambda fw: fw[fw["dtype"].isin(list(gemm_dtypes)) & fw["d_in"].between(*CORE)
                                      & fw["d_out"].between(*CORE)])
    att = pick("attention", lambda fw: fw[(fw["dtype"] == "bf16") & (fw["kv_dtype"] == "bf16")])
    moe = pick("moe", lambda fw: fw[(fw["distribution"] == "balanced") & (fw["ep"] == 1) & (fw["dtype"] == "bf16")])
    moe = moe[~suspect_moe_shapes(moe, device)]
    custom = pick("allreduce", lambda fw: fw[fw["impl"] == "custom"])
    nccl = table("nccl", "allreduce")
    nccl = nccl[(nccl["impl"] == "nccl_graph") & (nccl["dtype"] != "int8")]
    ar = pd.concat([custom, nccl])
    out = [_one_kernel(d, by) if len(d) else d for d, by in
           ((gemm, ["dtype"]), (att, ["phase"]), (moe, ["dtype"]), (ar, ["impl"]))]
    return TableRows(device, framework, *(check_measurements(d.reset_index(drop=True), f"{device} {framework}")
                                          if len(d) else d.reset_index(drop=True) for d in out))


def suspect_moe_shapes(moe: pd.DataFrame, device: str) -> np.ndarray:
    """Rows of MoE model shapes whose small-batch rows (T <= 4) imply streaming their active experts'
    weights (over twice the L2) faster than 95% of the datasheet HBM bandwidth: the collector cannot have read the bytes
    the shape says (shared or L2-warm expert weights), so the rows do not time that shape. On H100
    these are (hidden 2048, 512 experts, top-22) at up to 4.5 TB/s and (2688, 128, top-6) at 3.8 TB/s."""
    from specsim.cost.hardware import load_hardware

    if moe.empty:
        return np.zeros(0, bool)
    hw = load_hardware(device)
    small = moe[moe["tokens"] <= 4]
    active = np.minimum(small["n_experts"], small["tokens"] * small["top_k"])
    weights = active * 3.0 * small["d_in"] * small["d_out"] * 2.0
    bw = weights / (small["time_ms"] * 1e-3)
    key = ["d_in", "n_experts", "top_k"]
    cold = weights > 2.0 * hw.l2_bytes  # far beyond the L2: these bytes must come from HBM
    bad = set(small[((bw > 0.95 * hw.mem_bw_bytes_per_s) & cold).to_numpy()][key].itertuples(index=False, name=None))
    return np.array([k in bad for k in moe[key].itertuples(index=False, name=None)], dtype=bool)


def holdout_mask(op: str, d: pd.DataFrame) -> np.ndarray:
    """Shapes held out of the fit (see the module docstring)."""
    if d.empty or op == "allreduce":
        return np.zeros(len(d), bool)
    if op == "gemm":
        grid = {v: i for i, v in enumerate(sorted(set(d["d_in"]) | set(d["d_out"])))}
        return ((d["d_in"].map(grid) + d["d_out"].map(grid)) % 2 == 1).to_numpy()
    cols = ["n_heads", "n_kv_heads", "head_dim"] if op == "attention" else ["d_in", "d_out", "n_experts", "top_k"]
    keys = list(zip(*(d[c] for c in cols), strict=True))
    held = set(sorted(set(keys))[1::2])
    return np.array([k in held for k in keys])


# --------------------------------------------------------------------------------------------------
# Fitting


def _stage(rows: pd.DataFrame, hw: HardwareProfile, params: Sequence[str], starts: int) -> HardwareProfile:
    if rows.empty:
        return hw
    fitted, _ = fit_efficiency_params(rows, hw, list(params), starts=starts, lenient=list(params))
    return fitted


def fit_to_tables(hw: HardwareProfile, rows: TableRows, starts: int = 1, holdout: bool = True,
                  stages: Sequence[str] = ("gemm", "attention", "moe", "allreduce")) -> HardwareProfile:
    """`hw` with its efficiencies (and all-reduce tables) fitted stage by stage to `rows`; held-out
    shapes stay out of the fit unless `holdout` is False. Stage "fp8" refits only the fp8 GEMM parameters."""
    def train(op: str) -> pd.DataFrame:
        d = getattr(rows, op)
        return d[~rows.held(op)] if holdout and len(d) else d

    params = {
        "gemm": [p for p in GEMM_PARAMS if p not in ("dequant_tera_per_s", *FP8_PARAMS)],
        "attention": list(ATTENTION_PARAMS),
        "moe": list(MOE_PARAMS),
    }
    for op in stages:
        if op == "allreduce":
            if len(rows.allreduce):
                hw = fit_allreduce(rows.allreduce, hw)
        elif op in ("gemm", "fp8"):  # bf16 sets the tile model; fp8 rows then only their tile rate and quantisation
            d = train("gemm")
            if op == "gemm":
                hw = _stage(d[d["dtype"] == "bf16"], hw, params["gemm"], starts)
            hw = _stage(d[d["dtype"] == "fp8"], hw, list(FP8_PARAMS), starts)
        elif op == "attention":  # decode rows set streaming and fixed costs; prefill rows the MMA rate
            d = train("attention")
            decode = [p for p in params["attention"] if p not in PREFILL_PARAMS]
            hw = _stage(d[(d["q_per_seq"] == 1) & (d["context_len"] > DECODE_MIN_KV)], hw, decode, starts)
            hw = _stage(d[d["q_per_seq"] > 1], hw, list(PREFILL_PARAMS), starts)
        else:
            hw = _stage(train(op), hw, params[op], starts)
    return hw


# --------------------------------------------------------------------------------------------------
# Scoring


def _mape(e: pd.Series) -> float:
    return float(e.mean()) if len(e) else float("nan")


def score(hw: HardwareProfile, rows: TableRows) -> pd.DataFrame:
    """Mean absolute error (%) of `hw` on the rows: per family and band, on held-out and fitted shapes.

    Groups: GEMM core shapes per dtype, overall and per token band; decode attention with KV > 128,
    overall and per batch band; prefill attention; MoE overall and per token band; all-reduce per
    implementation and GPU count (fitted to every size: in-sample)."""
    out: list[dict[str, Any]] = []

    def add(op: str, group: str, sel: np.ndarray, held: np.ndarray, e: np.ndarray) -> None:
        for subset, mask in (("held-out", sel & held), ("fitted", sel & ~held)):
            if mask.any():
                out.append({"device": rows.device, "framework": rows.framework, "op": op, "group": group,
                            "rows": subset, "n": int(mask.sum()), "mape_pct": float(e[mask].mean()),
                            "p90_pct": float(np.percentile(e[mask], 90))})

    for op in ("gemm", "attention", "moe", "allreduce"):
        d = getattr(rows, op)
        if d.empty:
            continue
        held = rows.held(op)
        e = np.abs(RowSet(d).predict_ms(hw) / d["time_ms"].to_numpy(float) - 1.0) * 100.0
        ok = np.isfinite(e)
        if op == "gemm":
            band = token_band(d["tokens"]).astype(str).to_numpy()
            for dtype in sorted(set(d["dtype"])):
                is_d = ok & (d["dtype"] == dtype).to_numpy()
                add(op, f"{dtype} all", is_d, held, e)
                for b in BAND_LABELS:
                    add(op, f"{dtype} tokens={b}", is_d & (band == b), held, e)
        elif op == "attention":
            dec = ok & (d["q_per_seq"] == 1).to_numpy() & (d["context_len"] > DECODE_MIN_KV).to_numpy()
            band = token_band(d["batch"]).astype(str).to_numpy()
            add(op, f"decode kv>{DECODE_MIN_KV} all", dec, held, e)
            for b in BAND_LABELS:
                add(op, f"decode kv>{DECODE_MIN_KV} batch={b}", dec & (band == b), held, e)
            add(op, "decode all", ok & (d["q_per_seq"] == 1).to_numpy(), held, e)
            add(op, "prefill all", ok & (d["q_per_seq"] > 1).to_numpy(), held, e)
        elif op == "moe":
            band = token_band(d["tokens"]).astype(str).to_numpy()
            add(op, "all", ok, held, e)
            for b in BAND_LABELS:
                add(op, f"tokens={b}", ok & (band == b), held, e)
        else:
            impl = d["impl"].astype(str).to_numpy()
            for i in sorted(set(impl)):
                for n in sorted(set(d["world_size"])):
                    add(op, f"{i} world_size={int(n)}", ok & (impl == i) & (d["world_size"] == n).to_numpy(), held, e)
    return pd.DataFrame(out)


def source_line(rows: TableRows, report: pd.DataFrame, version: str | None) -> str:
    """The efficiency.source text of a profile fitted to these rows (what it was fitted on, how well)."""
    def get(op: str, group: str) -> str:
        hit = report[(report["op"] == op) & (report["group"] == group) & (report["rows"] == "held-out")]
        return f"{hit['mape_pct'].iloc[0]:.1f}%" if len(hit) else "n/a"

    def kernels(op: str) -> str:
        d = getattr(rows, op)
        return ", ".join(sorted({f"{f} {v} {k}" for f, v, k in zip(d["framework"], d["framework_version"], d["kernel"],
                                                                    strict=True)}))

    used = {op: kernels(op) for op in ("gemm", "attention", "moe") if len(getattr(rows, op))}
    return (f"fitted by `specsim calibrate-tables --framework {rows.framework}` to NVIDIA's measured kernel tables "
            f"(aiconfigurator-core {version or '?'}; " + "; ".join(f"{k}: {v}" for k, v in used.items())
            + f"): GEMM core shapes 512 <= N, K <= 16384, {len(rows.gemm)} rows (half the (N, K) pairs held out): "
            f"held-out error bf16 {get('gemm', 'bf16 all')}, fp8 {get('gemm', 'fp8 all')}; decode attention "
            f"(KV > {DECODE_MIN_KV}, every other head configuration held out) {get('attention', 'decode kv>128 all')};"
            f" fused MoE (balanced, every other model shape held out) {get('moe', 'all')}")


@dataclass(frozen=True)
class TablesProvenance:
    """What a profile was fitted to by `calibrate-tables` and how well it scores (the fields in the
    order the profile YAML lists them)."""

    fitted_by: str
    date: str  # UTC, ISO 8601 to the second
    measurements: str
    framework: str  # the framework asked for
    frameworks: dict[str, list[str]]  # op family -> the framework(s) its rows came from
    kernels: dict[str, list[str]]
    framework_versions: dict[str, list[str]]
    rows: dict[str, int]
    holdout: str
    mape_pct_held_out: dict[str, float]  # all-reduce: in-sample (one curve per GPU count, fitted to every size)


def provenance(rows: TableRows, report: pd.DataFrame, version: str | None) -> TablesProvenance:
    families = [op for op in ("gemm", "attention", "moe", "allreduce") if len(getattr(rows, op))]

    def values(column: str) -> dict[str, list[str]]:
        return {op: sorted(set(getattr(rows, op)[column])) for op in families}

    groups = {f"{r.op} {r.group}": round(float(cast(float, r.mape_pct)), 2) for r in report.itertuples()
              if r.rows == "held-out" or r.op == "allreduce"}
    return TablesProvenance(
        fitted_by="specsim calibrate-tables",
        date=dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        measurements=f"aiconfigurator-core {version} (installed package; data not copied)",
        framework=rows.framework,
        frameworks=values("framework"),
        kernels=values("kernel"),
        framework_versions=values("framework_version"),
        rows={op: len(getattr(rows, op)) for op in ("gemm", "attention", "moe", "allreduce")},
        holdout="GEMM (N, K) checkerboard; every other attention head configuration; every other MoE shape",
        mape_pct_held_out=groups,
    )


def calibrate_to_tables(hw: HardwareProfile, framework: str = "vllm", starts: int = 1,
                        df: pd.DataFrame | None = None, stages: Sequence[str] | None = None,
                        ) -> tuple[HardwareProfile, pd.DataFrame, TableRows]:
    """Fit `hw` to the tables of its GPU and `framework`; (profile with source and provenance, report, rows)."""
    from specsim.cost import aiconfigurator as aic

    rows = load_rows(hw.name, framework, df=df)
    if all(getattr(rows, op).empty for op in ("gemm", "attention", "moe", "allreduce")):
        raise SpecsimError(f"no measured tables for {hw.name} and {framework}")
    hw = framework_kernels(hw, framework)
    fitted = fit_to_tables(hw, rows, starts, stages=stages or ("gemm", "attention", "moe", "allreduce"))
    report = score(fitted, rows)
    version = aic.installed_version()
    eff = dataclasses.replace(fitted.efficiency, source=source_line(rows, report, version))
    prov = {**fitted.provenance, "tables": dataclasses.asdict(provenance(rows, report, version))}
    return dataclasses.replace(fitted, efficiency=eff, provenance=prov), report, rows


__all__ = ["CORE", "FLOORS", "FP8_PARAMS", "FRAMEWORK_ATTENTION_KERNEL", "HOPPER_FP8_DISPATCH", "TableRows",
           "calibrate_to_tables", "fit_to_tables", "framework_kernels", "holdout_mask", "load_rows", "score"]
