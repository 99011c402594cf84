"""Fitting and scoring the MoE all-to-all (specsim/cost/alltoall.py) on NVIDIA's tables.

The rows come from aiconfigurator-core (specsim.cost.aiconfigurator.alltoall_tables), in the model's
domain: one scale-up domain (node_num 1: EP 8, or EP 4 on GB200/GB300), >= 64 experts (DeepEP's LL
kernels run one SM per expert, so few experts starve the sends), normal mode at DeepEP's default 20
SMs (Buffer.num_sms; TensorRT-LLM's rows record 0, not set by its collector). Each implementation has
its tables: "deepep" SGLang's DeepEP tables (DeepEP's own tests, tests/test_low_latency.py and
tests/test_intranode.py, run by aiconfigurator's collector; the newest SGLang version), "vllm" and
"trtllm" the unified moe_a2a_perf tables of vLLM 0.24.0 (comm_backend deepep_ll / deepep_ht) and
TensorRT-LLM 1.3.0rc11 (trtllm_deepep_ll / trtllm_deepep_ht). Per (implementation, mode) every third
token count (by rank) is held out. DeepEP is fitted first; a framework's fit then takes DeepEP's
latency and caps its efficiencies at DeepEP's (alltoall_phases_s).
"""

from __future__ import annotations

import dataclasses
from typing import cast

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from specsim.cost.alltoall import ALLTOALL_IMPLEMENTATIONS, ALLTOALL_MODES, alltoall_params, alltoall_phases_s
from specsim.cost.hardware_profile import HardwareProfile
from specsim.errors import SpecsimError

#: Bytes per hidden element of a dispatch row's payload dtype: nvfp4/fp4 carry one fp8 scale per 16
#: elements; "default" is vLLM's collector, which dispatches bf16 (collect_moe_a2a.py: bf16 tokens,
#: FusedMoEQuantConfig.make(None), DeepEPLLPrepareAndFinalize(use_fp8_dispatch=False)). A combine sends
#: bf16 whatever its row's dtype (that names the case's quantisation: TensorRT-LLM's bf16, fp8 and
#: nvfp4 cases combine in the same time, e.g. H200 HT at 65536 tokens 11594 / 11510 us).
PAYLOAD_BYTES = {"fp8": 1.0, "bf16": 2.0, "fp16": 2.0, "nvfp4": 0.5 + 1 / 16, "fp4": 0.5 + 1 / 16,
                 "default": 2.0}
COMBINE_BYTES = 2.0
#: Rows left out: TensorRT-LLM's combine of its NVFP4 LL case (dtype "fp4", Blackwell only) runs
#: 10-30% slower than its bf16 combine at <= 128 tokens with no payload the table names (the
#: collector sets use_low_precision_moe_combine=False), so its bytes are ambiguous.
DROPPED_COMBINE_DTYPES = ("fp4",)
#: framework (alltoall_tables) -> implementation (ALLTOALL_IMPLEMENTATIONS)
IMPL_OF = {"sglang": "deepep", "vllm": "vllm", "trtllm": "trtllm"}
#: the tables each implementation is fitted to (yaml_block's comments)
TABLES = {"deepep": "comm/sglang/{version}/wideep_deepep_{{ll,normal}}_perf (DeepEP's own tests)",
          "vllm": "comm/vllm/{version}/moe_a2a_perf (deepep_ll, deepep_ht; bf16 dispatch)",
          "trtllm": "comm/trtllm/{version}/moe_a2a_perf (trtllm_deepep_ll, trtllm_deepep_ht)"}
MIN_EXPERTS = 64
DEFAULT_SMS = 20
#: Bounds of DeepEP's (latency us, efficiency) per phase.
_LO = np.array([0.5, 0.01, 0.5, 0.01])
_HI = np.array([500.0, 1.0, 500.0, 1.0])
#: Bounds of a framework's (overhead us, efficiency, overhead us, efficiency, sharpness, copy ns, copy
#: ns); the efficiencies' upper bounds are DeepEP's.
_FW_LO = np.array([0.0, 0.01, 0.0, 0.01, 1.0, 0.0, 0.0])
_FW_HI = np.array([1000.0, 1.0, 1000.0, 1.0, 8.0, 200.0, 200.0])


def alltoall_rows(hw: HardwareProfile | str) -> pd.DataFrame:
    """NVIDIA's all-to-all rows of this GPU in the model's domain with `impl` (deepep | vllm |
    trtllm) and `split`: "fit" / "held-out" (every third token count per implementation and mode)."""
    from specsim.cost import aiconfigurator as aic

    name = hw if isinstance(hw, str) else hw.name
    system = aic.system_name(name)
    df = aic.alltoall_tables([system])
    df = df[df["dtype"].isin(list(PAYLOAD_BYTES)) & (df["node_num"] == 1) & (df["num_experts"] >= MIN_EXPERTS)
            & df["framework"].isin(list(IMPL_OF))]
    df = df[(df["mode"] == "ll") | df["sms"].isin([DEFAULT_SMS, 0]) | df["sms"].isna()]
    df = df[~((df["phase"] == "combine") & df["dtype"].isin(DROPPED_COMBINE_DTYPES))]
    if df.empty:
        raise SpecsimError(f"{name}: no all-to-all rows in the model's domain")
    sg = df["framework"] == "sglang"
    newest = df[sg]["version"].map(aic.version_key).max() if sg.any() else None
    sg &= df["version"].map(aic.version_key) == newest
    df = df[sg | (df["framework"] != "sglang")].copy()
    df["impl"] = df["framework"].map(IMPL_OF)
    df["split"] = "fit"
    for (_, _), g in df.groupby(["impl", "mode"]):
        rank = g["tokens_per_rank"].rank(method="dense").astype(int)
        df.loc[g.index, "split"] = np.where(rank % 3 == 0, "held-out", "fit")
    return df.reset_index(drop=True)


def predict(hw: HardwareProfile, rows: pd.DataFrame) -> np.ndarray:
    """Seconds of each row's phase under the profile's parameters, each row priced as its
    implementation (`impl`) runs it."""
    out = np.empty(len(rows))
    impl = rows["impl"] if "impl" in rows else rows["framework"].map(IMPL_OF)
    cols = ["mode", "phase", "ep", "hidden", "topk", "dtype"]
    for keys, g in rows.assign(impl=impl).groupby([*cols, "impl"], sort=False):
        mode, phase, ep, hidden, topk, dtype, im = cast("tuple[str, str, float, float, float, str, str]", keys)
        d, c = alltoall_phases_s(hw, g["tokens_per_rank"].to_numpy(float), float(hidden), float(topk), int(ep),
                                 str(mode), PAYLOAD_BYTES[str(dtype)], COMBINE_BYTES, str(im))
        idx = rows.index.get_indexer(g.index)
        out[idx] = d if phase == "dispatch" else c
    return out


def _with(hw: HardwareProfile, impl: str, mode: str, params: tuple[float, ...]) -> HardwareProfile:
    a2a = {k: dict(v) for k, v in hw.interconnect.alltoall.items()}
    a2a.setdefault(impl, {})[mode] = params
    ic = dataclasses.replace(hw.interconnect, alltoall=a2a)
    return dataclasses.replace(hw, interconnect=ic)


def _deepep_params(x: np.ndarray) -> tuple[float, ...]:
    return float(x[0]) * 1e-6, float(x[1]), float(x[2]) * 1e-6, float(x[3])


def _framework_params(x: np.ndarray) -> tuple[float, ...]:
    return (float(x[0]) * 1e-6, float(x[1]), float(x[2]) * 1e-6, float(x[3]), float(x[4]), float(x[5]) * 1e-9,
            float(x[6]) * 1e-9)


def _fit_mode(hw: HardwareProfile, impl: str, mode: str, g: pd.DataFrame) -> HardwareProfile:
    """`hw` with (impl, mode) fitted on rows `g`: least squares on log(predicted / measured) (soft-L1),
    dispatch and combine together. A framework's per-copy cost of a phase is fitted only where its
    rows of that phase carry two message sizes or more (hidden sizes, payloads; else it is the
    efficiency's twin: 0)."""
    y = g["time_s"].to_numpy(float)
    if impl == "deepep":
        lo, hi, x0, free = _LO, _HI, np.array([10.0, 0.5, 10.0, 0.5]), np.ones(4, bool)
        to_params = _deepep_params
    else:
        _, eff_d, _, eff_c = alltoall_params(hw, mode)
        lo, hi = _FW_LO.copy(), _FW_HI.copy()
        hi[1], hi[3] = eff_d, eff_c
        sizes = [g[g["phase"] == ph][["hidden", "dtype"]].drop_duplicates().shape[0] >= 2
                 for ph in ("dispatch", "combine")]
        x0 = np.array([30.0, 0.9 * eff_d, 30.0, 0.9 * eff_c, 1.5, 10.0 * sizes[0], 10.0 * sizes[1]])
        free = np.array([True, True, True, True, True, *sizes])
        to_params = _framework_params

    def full(xf: np.ndarray) -> np.ndarray:
        x = x0.copy()
        x[free] = xf
        return x

    def resid(xf: np.ndarray) -> np.ndarray:
        return np.asarray(np.log(predict(_with(hw, impl, mode, to_params(full(xf))), g) / y))

    fit = least_squares(resid, x0[free], bounds=(lo[free], hi[free]), loss="soft_l1", f_scale=0.1, x_scale="jac")
    return _with(hw, impl, mode, to_params(full(fit.x)))


def fit_alltoall(hw: HardwareProfile, rows: pd.DataFrame | None = None) -> HardwareProfile:
    """The profile with `interconnect.alltoall` fitted per implementation and mode on the "fit" rows
    (DeepEP first: the frameworks' kernels build on it)."""
    rows = alltoall_rows(hw) if rows is None else rows
    fitted = hw
    for impl in ALLTOALL_IMPLEMENTATIONS:
        for mode in ALLTOALL_MODES:
            g = rows[(rows["split"] == "fit") & (rows["impl"] == impl) & (rows["mode"] == mode)]
            if g["phase"].nunique() < 2 or g["tokens_per_rank"].nunique() < 3:
                continue
            fitted = _fit_mode(fitted, impl, mode, g.reset_index(drop=True))
    return fitted


def _errors(hw: HardwareProfile, rows: pd.DataFrame) -> pd.DataFrame:
    """One row per measured phase plus a "total" row per shape with both phases: |error| in %."""
    r = rows.copy()
    r["pred_s"] = predict(hw, r)
    key = ["framework", "version", "mode", "ep", "hidden", "topk", "num_experts", "tokens_per_rank", "split"]
    pairs = r[r["phase"].isin(["dispatch", "combine"])]
    # a total needs one row of each phase at the shape (TRT-LLM pairs payloads per phase: take each
    # phase's first dtype, bf16 sorted first)
    pairs = pairs.sort_values("dtype").drop_duplicates([*key, "phase"])
    tot = pairs.groupby(key, as_index=False).agg(time_s=("time_s", "sum"), pred_s=("pred_s", "sum"),
                                                 n=("phase", "nunique"))
    tot = tot[tot["n"] == 2].drop(columns="n").assign(phase="total")
    out = pd.concat([r[[*key, "phase", "time_s", "pred_s"]], tot], ignore_index=True)
    out["err_pct"] = 100.0 * (out["pred_s"] / out["time_s"] - 1.0)
    return out


def score_alltoall(hw: HardwareProfile, rows: pd.DataFrame | None = None) -> pd.DataFrame:
    """Error of the profile's all-to-all parameters on NVIDIA's tables: per (framework, mode, phase
    or total, ep, split) the row count, the mean and the median |error| in %."""
    rows = alltoall_rows(hw) if rows is None else rows
    e = _errors(hw, rows)
    e["abs"] = e["err_pct"].abs()
    g = e.groupby(["framework", "mode", "phase", "ep", "split"], sort=False)["abs"]
    out = g.agg(n="size", mape="mean", median="median").reset_index()
    order = {"fit": 0, "held-out": 1, "check": 2}
    phase_order = {"dispatch": 0, "combine": 1, "total": 2}
    out = out.sort_values(["split", "framework", "mode", "phase"],
                          key=lambda s: s.map(order) if s.name == "split"
                          else s.map(phase_order) if s.name == "phase" else s)
    out["ep"] = out["ep"].astype(int)
    out[["mape", "median"]] = out[["mape", "median"]].round(1)
    return out.reset_index(drop=True)


def _note(report: pd.DataFrame, framework: str, mode: str) -> str:
    sel = report[(report["framework"] == framework) & (report["mode"] == mode) & (report["phase"] == "total")]
    fit = sel[sel["split"] == "fit"]["median"]
    held = sel[sel["split"] == "held-out"]["median"]
    if not (len(fit) and len(held)):
        return ""
    return f"median |error| of dispatch+combine: in-sample {fit.iloc[0]:.1f}%, held-out {held.iloc[0]:.1f}%"


def yaml_block(hw: HardwareProfile, rows: pd.DataFrame, report: pd.DataFrame) -> str:
    """The `alltoall:` block for the profile's interconnect: DeepEP's modes at the top level, then one
    block per framework, each naming the tables it was fitted to, each mode with its in-sample and
    held-out median |error| of dispatch + combine (as bundled profiles carry it)."""
    from specsim.cost.aiconfigurator import installed_version

    def versions(framework: str) -> str:
        return ", ".join(sorted(set(rows[rows["framework"] == framework]["version"].astype(str))))

    sg = rows[rows["framework"] == "sglang"]
    ep = ", ".join(str(int(e)) for e in sorted(set(sg["ep"])))
    lines = [f"  alltoall:   # MoE all-to-all (specsim/cost/alltoall.py): fitted by specsim/calibration/alltoall.py "
             f"to aiconfigurator-core {installed_version()} "
             f"{TABLES['deepep'].format(version=versions('sglang'))} (EP {ep}, >= {MIN_EXPERTS} experts, normal at "
             f"{DEFAULT_SMS} SMs; every third token count held out)"]
    for mode, p in hw.interconnect.alltoall.get("deepep", {}).items():
        lines.append(f"    {mode}: {{dispatch_latency_us: {p[0] * 1e6:.3g}, dispatch_efficiency: {p[1]:.3g}, "
                     f"combine_latency_us: {p[2] * 1e6:.3g}, combine_efficiency: {p[3]:.3g}}}   "
                     f"# {_note(report, 'sglang', mode)}")
    for impl in ALLTOALL_IMPLEMENTATIONS[1:]:
        modes = hw.interconnect.alltoall.get(impl, {})
        if not modes:
            continue
        lines.append(f"    {impl}:   # fitted to {TABLES[impl].format(version=versions(impl))}: the framework's "
                     "op timed eagerly, DeepEP's kernel + a p-norm-joined overhead (same held-out scheme)")
        for mode, p in modes.items():
            lines.append(f"      {mode}: {{dispatch_overhead_us: {p[0] * 1e6:.3g}, dispatch_efficiency: {p[1]:.3g}, "
                         f"combine_overhead_us: {p[2] * 1e6:.3g}, combine_efficiency: {p[3]:.3g}, "
                         f"sharpness: {p[4]:.3g}, dispatch_copy_ns: {round(p[5] * 1e9, 2):.3g}, "
                         f"combine_copy_ns: {round(p[6] * 1e9, 2):.3g}}}   # {_note(report, impl, mode)}")
    return "\n".join(lines)
