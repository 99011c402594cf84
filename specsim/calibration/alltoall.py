"""Fitting and scoring the MoE all-to-all (specsim/cost/alltoall.py) on NVIDIA's DeepEP tables.

The rows come from aiconfigurator-core (specsim.cost.aiconfigurator.alltoall_tables). The fit uses
SGLang's DeepEP tables (DeepEP's own tests, tests/test_low_latency.py and tests/test_intranode.py, run
by aiconfigurator's collector) in the model's domain: one scale-up domain (node_num 1: EP 8, or EP 4
on GB200/GB300), >= 64 experts (DeepEP's LL kernels run one SM per expert, so few experts starve the
sends), normal mode at DeepEP's default 20 SMs (Buffer.num_sms), the newest SGLang version. Every
third token count (by rank) is held out. vLLM's and TensorRT-LLM's tables (their own DeepEP builds,
other shapes and payloads) are scored as an out-of-sample check ("check"), never fitted.
"""

from __future__ import annotations

import dataclasses
from typing import cast

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from specsim.cost.alltoall import ALLTOALL_MODES, alltoall_phases_s
from specsim.cost.hardware_profile import HardwareProfile
from specsim.errors import SpecsimError

#: Bytes per hidden element of a row's payload dtype: nvfp4/fp4 carry one fp8 scale per 16 elements;
#: "default" (vLLM's collector, no quantisation) is taken as bf16 (an assumption: the table does not
#: say; its times match a bf16 payload better than fp8, see score_alltoall's "check" rows).
PAYLOAD_BYTES = {"fp8": 1.0, "bf16": 2.0, "fp16": 2.0, "nvfp4": 0.5 + 1 / 16, "fp4": 0.5 + 1 / 16,
                 "default": 2.0}
MIN_EXPERTS = 64
DEFAULT_SMS = 20
#: Bounds of (latency us, efficiency) per phase.
_LO = np.array([0.5, 0.01, 0.5, 0.01])
_HI = np.array([500.0, 1.0, 500.0, 1.0])


def alltoall_rows(hw: HardwareProfile | str) -> pd.DataFrame:
    """NVIDIA's all-to-all rows of this GPU with `split`: "fit" / "held-out" (SGLang, the fitted
    domain) or "check" (vLLM, TensorRT-LLM, and SGLang rows outside the domain are dropped)."""
    from specsim.cost import aiconfigurator as aic

    name = hw if isinstance(hw, str) else hw.name
    system = aic.system_name(name)
    try:
        df = aic.alltoall_tables([system])
    except SpecsimError:
        raise
    df = df[df["dtype"].isin(list(PAYLOAD_BYTES)) & (df["node_num"] == 1) & (df["num_experts"] >= MIN_EXPERTS)]
    df = df[(df["mode"] == "ll") | df["sms"].isin([DEFAULT_SMS, 0]) | df["sms"].isna()]
    if df.empty:
        raise SpecsimError(f"{name}: no all-to-all rows in the model's domain")
    sg = df["framework"] == "sglang"
    newest = df[sg]["version"].map(aic.version_key).max() if sg.any() else None
    sg &= df["version"].map(aic.version_key) == newest
    others = df["framework"] != "sglang"
    df = df[sg | others].copy()
    df["split"] = "check"
    for mode in ALLTOALL_MODES:
        m = ((df["framework"] == "sglang") & (df["mode"] == mode)).to_numpy()
        rank = df.loc[m, "tokens_per_rank"].rank(method="dense").astype(int)
        df.loc[m, "split"] = np.where(rank % 3 == 0, "held-out", "fit")
    return df.reset_index(drop=True)


def predict(hw: HardwareProfile, rows: pd.DataFrame) -> np.ndarray:
    """Seconds of each row's phase under the profile's parameters."""
    out = np.empty(len(rows))
    cols = ["mode", "phase", "ep", "hidden", "topk", "dtype"]
    for keys, g in rows.groupby(cols, sort=False):
        mode, phase, ep, hidden, topk, dtype = cast("tuple[str, str, float, float, float, str]", keys)
        width = PAYLOAD_BYTES[str(dtype)]
        d, c = alltoall_phases_s(hw, g["tokens_per_rank"].to_numpy(float), float(hidden), float(topk), int(ep),
                                 str(mode), width, width)
        idx = rows.index.get_indexer(g.index)
        out[idx] = d if phase == "dispatch" else c
    return out


def _with(hw: HardwareProfile, mode: str, x: np.ndarray) -> HardwareProfile:
    params = (float(x[0]) * 1e-6, float(x[1]), float(x[2]) * 1e-6, float(x[3]))
    ic = dataclasses.replace(hw.interconnect, alltoall={**hw.interconnect.alltoall, mode: params})
    return dataclasses.replace(hw, interconnect=ic)


def fit_alltoall(hw: HardwareProfile, rows: pd.DataFrame | None = None) -> HardwareProfile:
    """The profile with `interconnect.alltoall` fitted per mode on the "fit" rows: least squares on
    log(predicted / measured) (soft-L1), dispatch and combine parameters together."""
    rows = alltoall_rows(hw) if rows is None else rows
    fitted = hw
    for mode in ALLTOALL_MODES:
        g = rows[(rows["split"] == "fit") & (rows["mode"] == mode)].reset_index(drop=True)
        if g["phase"].nunique() < 2 or g["tokens_per_rank"].nunique() < 3:
            continue
        y = g["time_s"].to_numpy(float)

        def resid(x: np.ndarray, g: pd.DataFrame = g, y: np.ndarray = y, mode: str = mode) -> np.ndarray:
            return np.asarray(np.log(predict(_with(hw, mode, x), g) / y))

        x0 = np.array([10.0, 0.5, 10.0, 0.5])
        fit = least_squares(resid, x0, bounds=(_LO, _HI), loss="soft_l1", f_scale=0.1, x_scale="jac")
        fitted = _with(fitted, mode, fit.x)
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


def yaml_block(hw: HardwareProfile, rows: pd.DataFrame, report: pd.DataFrame) -> str:
    """The `alltoall:` block for the profile's interconnect, naming the tables it was fitted to, each
    mode with its in-sample and held-out median |error| of dispatch + combine (as bundled profiles
    carry it)."""
    from specsim.cost.aiconfigurator import installed_version

    fit_rows = rows[rows["split"] != "check"]
    version = ", ".join(sorted(set(fit_rows["version"].astype(str))))
    ep = ", ".join(str(int(e)) for e in sorted(set(fit_rows["ep"])))
    lines = [f"  alltoall:   # MoE all-to-all (specsim/cost/alltoall.py): fitted by specsim/calibration/alltoall.py "
             f"to aiconfigurator-core {installed_version()} comm/sglang/{version}/wideep_deepep_{{ll,normal}}_perf "
             f"(DeepEP, EP {ep}, >= {MIN_EXPERTS} experts, normal at {DEFAULT_SMS} SMs; every third token count "
             "held out)"]
    for mode, p in hw.interconnect.alltoall.items():
        sel = report[(report["framework"] == "sglang") & (report["mode"] == mode) & (report["phase"] == "total")]
        fit = sel[sel["split"] == "fit"]["median"]
        held = sel[sel["split"] == "held-out"]["median"]
        note = (f"median |error| of dispatch+combine: in-sample {fit.iloc[0]:.1f}%, "
                f"held-out {held.iloc[0]:.1f}%") if len(fit) and len(held) else ""
        lines.append(f"    {mode}: {{dispatch_latency_us: {p[0] * 1e6:.3g}, dispatch_efficiency: {p[1]:.3g}, "
                     f"combine_latency_us: {p[2] * 1e6:.3g}, combine_efficiency: {p[3]:.3g}}}   # {note}")
    return "\n".join(lines)
