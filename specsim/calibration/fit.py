"""Fitting a profile's efficiency, overhead and interconnect parameters to measured kernel timings.

Robust least squares (scipy.optimize.least_squares, soft-L1 loss) on relative error, with rows
weighted so that each (op, token band) counts alike (a sweep has many more large-M rows than decode
rows, but decode rows decide speculation). Before fitting, every requested parameter is checked
against the rows: one that moves no prediction by more than `MIN_EFFECT` across its whole range is
refused, never invented.

All-reduce rows are fitted per world size (latency, bus bandwidth, sharpness of the p-norm joining
them; roofline.allreduce_time_s).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import os
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd
import yaml
from scipy.optimize import least_squares

from specsim.cost import roofline as rl
from specsim.cost.hardware import HardwareProfile, parse_hardware
from specsim.cost.measurements import BAND_LABELS, NEEDS, RowSet, token_band
from specsim.errors import SpecsimError

# Bounds of each fittable efficiency parameter (physical ranges).
BOUNDS: dict[str, tuple[float, float]] = {
    "gemm_compute": (0.2, 1.0),
    "memory": (0.3, 1.0),
    "kernel_overhead_us": (0.01, 50.0),
    "ridge_sharpness": (1.0, 20.0),
    "cta_k_overhead": (0.01, 4096.0),
    "attention_compute": (0.05, 1.0),
    "l2_bw_tb_per_s": (1.0, 100.0),
    "small_tile_efficiency": (0.3, 1.0),
    "streamk_fixup_tiles": (0.0, 4.0),
    "bw_ramp_ctas_frac": (0.02, 1.0),
    "power_throttle": (0.0, 1.0),
    "throttle_tau_ms": (0.01, 100.0),
    "swap_tile_efficiency": (0.05, 1.0),
    "splitk_overhead_us": (0.0, 30.0),
    "l2_resident_frac": (0.1, 1.2),
    "l2_stream_tb_per_s": (0.3, 100.0),
    "fp8_compute": (0.3, 1.0),
    "dequant_tera_per_s": (0.5, 50.0),
    "attention_memory": (0.3, 1.0),
    "attention_overhead_us": (0.5, 100.0),
    "attention_cta_us": (0.0, 30.0),
    "attention_cta_overlap": (1.0, 20.0),
    "attention_split_us": (0.0, 50.0),
    "attention_split_bw_loss": (0.0, 0.9),
    "attention_cta_gb_per_s": (1.0, 5000.0),
    "moe_compute": (0.05, 1.0),
    "moe_overhead_us": (0.0, 1000.0),
    "moe_permute_tb_per_s": (0.05, 50.0),
    "moe_expert_us": (0.0, 20.0),
    "moe_memory": (0.3, 1.0),
    "moe_default_tile_efficiency": (0.1, 1.0),
}
GEMM_PARAMS = ("gemm_compute", "memory", "kernel_overhead_us", "ridge_sharpness", "cta_k_overhead",
               "l2_bw_tb_per_s", "small_tile_efficiency", "streamk_fixup_tiles", "bw_ramp_ctas_frac",
               "power_throttle", "throttle_tau_ms", "swap_tile_efficiency", "splitk_overhead_us", "l2_resident_frac",
               "l2_stream_tb_per_s", "fp8_compute", "dequant_tera_per_s")
ATTENTION_PARAMS = ("attention_compute", "attention_memory", "attention_overhead_us", "attention_cta_us",
                    "attention_cta_overlap", "attention_split_us", "attention_split_bw_loss",
                    "attention_cta_gb_per_s")
MOE_PARAMS = ("moe_compute", "moe_overhead_us", "moe_permute_tb_per_s", "moe_expert_us", "moe_memory",
              "moe_default_tile_efficiency")
# Which parameters each op's rows can determine. Attention and MoE rows determine only their own
# parameters: their kernels share the GEMM's tile model, fitted on GEMM rows (calibrate GEMMs first).
DETERMINES: dict[str, tuple[str, ...]] = {
    "gemm": GEMM_PARAMS,
    "attention": ATTENTION_PARAMS,
    "moe": MOE_PARAMS,
    "memcpy": ("memory", "kernel_overhead_us"),
    "elementwise": ("memory", "kernel_overhead_us"),
}
# Ops whose rows time one library kernel each: a fit refuses rows of several (framework, kernel)
# pairs for one (op, dtype) unless asked (`mix_kernels`); elementwise rows are many small kernels.
SINGLE_KERNEL_OPS = ("gemm", "attention", "moe", "allreduce")
# Fitted unless asked otherwise (`--params`): the power-limit pair only on request, since only a
# sweep of long compute-bound kernels shows it (Vidur H100 rows do; its A100 rows stay flat).
DEFAULT_OFF = ("power_throttle", "throttle_tau_ms")
ALLREDUCE_PARAMS = ("allreduce_latency_us", "allreduce_busbw_gb_per_s", "allreduce_sharpness")
ALLREDUCE_BOUNDS = {"allreduce_latency_us": (0.5, 2000.0), "allreduce_busbw_gb_per_s": (1.0, 5000.0),
                    "allreduce_sharpness": (0.3, 8.0)}
MIN_EFFECT = 0.01  # a parameter must move some prediction by >= 1% across its range to be fitted
F_SCALE = 0.05  # soft-L1 knee: residuals beyond 5% count linearly (robust to heuristic outliers)


# --------------------------------------------------------------------------------------------------
# Fast predictions on fixed rows (the fit evaluates them hundreds of times)


_Rows = RowSet  # the prepared rows of one measurement table (measurements.RowSet)


def row_weights(df: pd.DataFrame) -> np.ndarray:
    """1/sqrt(rows in the same (op, token band)): bands count alike without drowning in noise."""
    band = token_band(df["tokens"].fillna(df["batch"].fillna(1) * df["q_per_seq"].fillna(1)))
    key = df["op"].astype(str) + ":" + band.astype(str)
    if "world_size" in df:
        key = key + ":" + df["world_size"].fillna(0).astype(str)
    if "impl" in df:
        key = key + ":" + df["impl"].fillna("").astype(str)
    return 1.0 / np.sqrt(key.map(key.value_counts()).to_numpy(dtype=float))


# --------------------------------------------------------------------------------------------------
# Efficiency parameters (GEMM, attention, memcpy rows)


def default_params(df: pd.DataFrame) -> list[str]:
    """Every efficiency parameter the rows' ops could determine, in BOUNDS order, less DEFAULT_OFF."""
    ops = set(df["op"]) & set(DETERMINES)
    determinable = {p for op in ops for p in DETERMINES[op]}
    return [p for p in BOUNDS if p in determinable and p not in DEFAULT_OFF]


def parse_params(spec: str | None, df: pd.DataFrame) -> tuple[list[str], list[str], bool]:
    """--params: None (defaults), 'a,b' (exactly these) or '+a,b' (defaults plus these).

    Returns (efficiency params, those named explicitly, fit all-reduce?). Named parameters the rows
    cannot determine are refused; defaults they cannot determine are left at the base profile's
    value. 'allreduce' stands for the three all-reduce parameters, fitted together per world size.
    """
    has_ar = bool((df["op"] == "allreduce").any())
    if spec is None or not spec.strip():
        return default_params(df), [], has_ar
    text = spec.strip()
    extend = text.startswith("+")
    names = [t.strip() for t in text.lstrip("+").split(",") if t.strip()]
    known = set(BOUNDS) | set(ALLREDUCE_PARAMS) | {"allreduce"}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SpecsimError(f"--params: unknown parameter(s) {', '.join(unknown)} "
                           f"(known: {', '.join([*BOUNDS, 'allreduce'])})")
    want_ar = any(n == "allreduce" or n in ALLREDUCE_PARAMS for n in names)
    named = [n for n in names if n in BOUNDS]
    eff = [*default_params(df), *[n for n in named if n not in default_params(df)]] if extend else named
    if want_ar and not has_ar:
        raise SpecsimError("the measurements cannot determine the all-reduce parameters: no allreduce rows")
    return eff, named, want_ar or (extend and has_ar)


def _probe_profile(hw: HardwareProfile, params: Sequence[str]) -> HardwareProfile:
    """The start profile with interacting parameters switched on, so that each one's effect shows."""
    changes: dict[str, float] = {}
    if "throttle_tau_ms" in params and hw.efficiency.power_throttle < 0.1:
        changes["power_throttle"] = 0.2
    return hw.with_efficiency(**changes) if changes else hw


def undetermined(rows: _Rows, hw: HardwareProfile, params: Sequence[str]) -> dict[str, float]:
    """Parameters that move no row's prediction by MIN_EFFECT across their range: {name: largest effect}."""
    probe = _probe_profile(hw, params)
    out: dict[str, float] = {}
    for p in params:
        lo, hi = BOUNDS[p]
        span = [lo + 0.05 * (hi - lo), hi - 0.05 * (hi - lo)]
        preds = [rows.predict_ms(probe.with_efficiency(**{p: v})) for v in span]
        ok = np.isfinite(preds[0]) & np.isfinite(preds[1]) & (preds[0] > 0)
        effect = float(np.max(np.abs(preds[1][ok] / preds[0][ok] - 1.0))) if ok.any() else 0.0
        if effect < MIN_EFFECT:
            out[p] = effect
    return out


POLISH_RESTARTS = 4  # restarts from the optimum while each lowers the cost by >= 0.01%
LOG_SPAN = 100.0  # a parameter whose bounds span >= 100x is fitted in log space (see _FitSpace)


@dataclass(frozen=True)
class _FitSpace:
    """Where the optimiser moves: log of a parameter whose range spans LOG_SPAN or more, else its value.

    A scale parameter (cta_k_overhead 0.01-4096, kernel_overhead_us, l2_bw_tb_per_s, throttle_tau_ms)
    moves timings by ratios, not differences: in linear space a trust-region step sized for its upper
    decades overshoots its lower one, the fit parks it on a bound (cta_k_overhead 80 -> 0.01) and stops
    in a valley 20x above the optimum, where which valley depends on the BLAS kernel's rounding (the
    GEMM fit's timing error 3.3% on AVX-512 kernels, 2.5% on Haswell's). In log space the same rows
    come back within 0.6% on every OPENBLAS_CORETYPE tried (tests/calibration/test_fit.py).
    """

    lo: np.ndarray
    hi: np.ndarray

    @property
    def log(self) -> np.ndarray:
        return (self.lo > 0) & (self.hi >= LOG_SPAN * np.where(self.lo > 0, self.lo, np.inf))

    def to_u(self, x: np.ndarray) -> np.ndarray:
        return np.where(self.log, np.log(np.where(self.log, x, 1.0)), x)

    def to_x(self, u: np.ndarray) -> np.ndarray:
        return np.clip(np.where(self.log, np.exp(np.where(self.log, u, 0.0)), u), self.lo, self.hi)

    @property
    def u_lo(self) -> np.ndarray:
        return self.to_u(self.lo)

    @property
    def u_hi(self) -> np.ndarray:
        return self.to_u(self.hi)


def fit_efficiency(df: pd.DataFrame, hw: HardwareProfile, params: Sequence[str] | None = None,
                   starts: int = 1, lenient: Sequence[str] = ()) -> HardwareProfile:
    """Profile with `params` fitted to the rows' time_ms (see `fit_efficiency_params`)."""
    return fit_efficiency_params(df, hw, params, starts, lenient)[0]


def fit_efficiency_params(df: pd.DataFrame, hw: HardwareProfile, params: Sequence[str] | None = None,
                          starts: int = 1, lenient: Sequence[str] = ()) -> tuple[HardwareProfile, list[str]]:
    """(profile, fitted params): `params` fitted to the rows' time_ms (defaults: all the rows determine).

    Refuses (SpecsimError) parameters the rows' ops cannot determine, or whose effect on every row
    stays under MIN_EFFECT across their range; those in `lenient` are instead left at the base
    profile's value. `starts` > 1 adds fits from spread starting points and keeps the best (the loss
    surface has shallow valleys among the tile-model parameters).
    """
    ops = set(df["op"]) & set(DETERMINES)
    determinable = {p for op in ops for p in DETERMINES[op]}
    if params is None:  # the defaults: those the rows cannot determine are left alone, not refused
        params = default_params(df)
        lenient = [*lenient, *params]
    params = list(params)
    unknown = [p for p in params if p not in BOUNDS]
    if unknown:
        raise SpecsimError(f"unknown efficiency parameter(s) {', '.join(unknown)} (known: {', '.join(BOUNDS)})")
    wrong_op = [p for p in params if p not in determinable]
    if wrong_op:
        raise SpecsimError(f"the measurements cannot determine {', '.join(wrong_op)} "
                           f"(their ops: {', '.join(sorted(ops)) or 'none'})")
    if not params:
        raise SpecsimError("nothing to fit: no gemm, attention or memcpy rows")
    sub = df[df["op"].isin(list(ops))].reset_index(drop=True)
    rows = RowSet(sub)
    y = sub["time_ms"].to_numpy(dtype=float)
    usable = np.isfinite(rows.predict_ms(hw))
    if not usable.any():
        raise SpecsimError("no row can be predicted: gemm rows need tokens, d_in, d_out; attention rows "
                           "batch, context_len, q_per_seq, n_heads, n_kv_heads, head_dim; memcpy rows bytes")
    flat = undetermined(rows, hw, params)
    params = [p for p in params if not (p in flat and p in lenient)]
    flat = {p: e for p, e in flat.items() if p not in lenient}
    if not params:
        raise SpecsimError("the measurements cannot determine any efficiency parameter")
    if flat:
        detail = ", ".join(f"{p} (moves predictions by at most {100 * e:.2g}%)" for p, e in flat.items())
        raise SpecsimError(f"the measurements cannot determine {detail}; leave it out of --params")
    w = row_weights(sub) * usable
    lo = np.array([BOUNDS[p][0] for p in params])
    hi = np.array([BOUNDS[p][1] for p in params])
    x0 = np.clip(np.array([getattr(hw.efficiency, p) for p in params], dtype=float), lo + 1e-9, hi - 1e-9)
    space = _FitSpace(lo, hi)

    def residual(u: np.ndarray) -> np.ndarray:
        trial = hw.with_efficiency(**dict(zip(params, space.to_x(u), strict=True)))
        r = (rows.predict_ms(trial) / y - 1.0) * w
        return np.nan_to_num(r, nan=0.0)

    candidates = [space.to_u(x0)]
    rng = np.random.default_rng(0)
    for _ in range(max(0, starts - 1)):
        candidates.append(space.u_lo + (space.u_hi - space.u_lo) * rng.uniform(0.15, 0.85, size=len(params)))
    best = None
    for start in candidates:
        fit = least_squares(residual, np.clip(start, space.u_lo + 1e-9, space.u_hi - 1e-9),
                            bounds=(space.u_lo, space.u_hi), loss="soft_l1", f_scale=F_SCALE, x_scale="jac")
        if best is None or fit.cost < best.cost:
            best = fit
    assert best is not None
    # restarted from its own optimum (a fresh trust region) while that still lowers the cost: the first
    # run can stop on ftol in a shallow valley of the tile model
    for _ in range(POLISH_RESTARTS):
        again = least_squares(residual, best.x, bounds=(space.u_lo, space.u_hi), loss="soft_l1", f_scale=F_SCALE,
                              x_scale="jac")
        if again.cost >= best.cost * (1 - 1e-4):
            break
        best = again
    best_x = space.to_x(best.x)
    fitted = hw.with_efficiency(**dict(zip(params, (float(v) for v in best_x), strict=True)))
    # A parameter whose neighbourhood of the optimum moves no prediction was not determined by the
    # fit (the start value was already on a flat): report it as such and keep the base value.
    base = rows.predict_ms(fitted)
    kept = []
    for p, v in zip(params, best_x, strict=True):
        lo_p, hi_p = BOUNDS[p]
        steps = [float(np.clip(v * f, lo_p, hi_p)) for f in (0.8, 1.25)]
        # fitted onto a bound (e.g. no per-expert cost at 0): scaling barely moves it, so also step 5% of
        # the range inwards, else a parameter the rows pin to its bound would be reverted to the base value
        at_bound = 1e-6 * (hi_p - lo_p)
        if v - lo_p <= at_bound:
            steps.append(float(min(v + 0.05 * (hi_p - lo_p), hi_p)))
        elif hi_p - v <= at_bound:
            steps.append(float(max(v - 0.05 * (hi_p - lo_p), lo_p)))
        trial = [rows.predict_ms(fitted.with_efficiency(**{p: s})) for s in steps]
        effect = max(float(np.nanmax(np.abs(t / base - 1.0))) for t in trial)
        if effect >= MIN_EFFECT / 10:
            kept.append(p)
    fitted = fitted.with_efficiency(**{p: getattr(hw.efficiency, p) for p in params if p not in kept})
    return fitted, kept


def fitted_values(hw: HardwareProfile) -> dict[str, float]:
    return {k: v for k, v in dataclasses.asdict(hw.efficiency).items() if k in BOUNDS}


# --------------------------------------------------------------------------------------------------
# All-reduce (per world size)


def allreduce_impl(df: pd.DataFrame) -> pd.Series:
    """Each all-reduce row's implementation (the `impl` column; eager nccl where absent)."""
    if "impl" not in df.columns:
        return pd.Series("nccl", index=df.index)
    return df["impl"].fillna("").astype(str).str.strip().replace({"": "nccl", "nan": "nccl"})


def fit_allreduce(df: pd.DataFrame, hw: HardwareProfile) -> HardwareProfile:
    """Profile whose interconnect holds (latency, busbw, sharpness) fitted per implementation and
    world size in the rows (eager nccl -> allreduce_by_world_size; nccl_graph, custom ->
    allreduce_by_implementation; custom_eager rows are not an implementation a caller picks: skipped).

    Each world size needs messages on both sides of its latency/bandwidth knee: if the transfer term
    never reaches the latency (or vice versa) the bandwidth (latency) cannot be determined and the
    fit is refused.
    """
    from specsim.cost.hardware import ALLREDUCE_IMPLEMENTATIONS

    ar = df[(df["op"] == "allreduce") & df["bytes"].notna() & df["world_size"].notna() & (df["world_size"] > 1)]
    ar = ar[allreduce_impl(ar).isin(ALLREDUCE_IMPLEMENTATIONS).to_numpy()]
    if ar.empty:
        raise SpecsimError("nothing to fit for all-reduce: no allreduce rows with bytes and world_size > 1 "
                           f"(implementations: {', '.join(ALLREDUCE_IMPLEMENTATIONS)})")
    tables = {"nccl": dict(hw.interconnect.allreduce_by_world_size),
              **{k: dict(v) for k, v in hw.interconnect.allreduce_by_implementation.items()}}
    for (impl, n), g in ar.groupby([allreduce_impl(ar), "world_size"]):
        size = int(cast(float, n))
        b = g["bytes"].to_numpy(float)
        y = g["time_ms"].to_numpy(float) * 1e-3
        what = f"all-reduce ({impl}) over {size} GPUs"
        if len(np.unique(b)) < 4:
            raise SpecsimError(f"{what}: {len(np.unique(b))} message size(s); need >= 4 to "
                               "fit latency, bus bandwidth and sharpness")
        f = 2.0 * (size - 1) / size
        lo = np.array([ALLREDUCE_BOUNDS[p][0] for p in ALLREDUCE_PARAMS])
        hi = np.array([ALLREDUCE_BOUNDS[p][1] for p in ALLREDUCE_PARAMS])
        small, large = np.quantile(y, 0.05), np.quantile(y, 0.95)
        x0 = np.clip(np.array([small * 1e6, f * b.max() / max(large - small, 1e-9) / 1e9, 1.0]), lo + 1e-6, hi - 1e-6)

        def model(x: np.ndarray, b: np.ndarray = b, f: float = f) -> np.ndarray:
            return rl._join(np.full_like(b, x[0] * 1e-6), f * b / (x[1] * 1e9), x[2])

        transfer_share = f * b / (x0[1] * 1e9) / y
        if transfer_share.max() < 0.2:
            raise SpecsimError(f"{what}: messages too small to determine bus bandwidth "
                               f"(transfer is at most {100 * transfer_share.max():.0f}% of the time)")
        if transfer_share.min() > 0.8:
            raise SpecsimError(f"{what}: messages too large to determine latency "
                               f"(latency is at most {100 * (1 - transfer_share.min()):.0f}% of the time)")
        fit = least_squares(lambda x, y=y, model=model: model(x) / y - 1.0, x0, bounds=(lo, hi),
                            loss="soft_l1", f_scale=F_SCALE, x_scale="jac")
        tables.setdefault(str(impl), {})[size] = (float(fit.x[0]) * 1e-6, float(fit.x[1]) * 1e9, float(fit.x[2]))
    ic = dataclasses.replace(
        hw.interconnect, allreduce_by_world_size=dict(sorted(tables.pop("nccl").items())),
        allreduce_by_implementation={k: dict(sorted(v.items())) for k, v in tables.items() if v})
    return dataclasses.replace(hw, interconnect=ic)


# --------------------------------------------------------------------------------------------------
# Selection, holdout and error reports


def parse_holdout(spec: str, df: pd.DataFrame) -> np.ndarray:
    """'COLUMN=V1,V2' holds out rows whose COLUMN is one of the values; 'COLUMN!=V' all other rows."""
    neg = "!=" in spec
    if "=" not in spec:
        raise SpecsimError(f"--holdout: expected COLUMN=VALUE or COLUMN!=VALUE, got {spec!r}")
    col, _, value = spec.partition("!=" if neg else "=")
    col = col.strip()
    if col not in df.columns:
        raise SpecsimError(f"--holdout: no column {col!r} in the measurements (columns: {', '.join(df.columns)})")
    values = {v.strip() for v in value.split(",")}
    cells = df[col].astype(str).str.strip()
    numeric = pd.to_numeric(df[col], errors="coerce")
    hit = cells.isin(values)
    for v in values:
        with contextlib.suppress(ValueError):
            hit |= numeric == float(v)
    if not hit.any():
        raise SpecsimError(f"--holdout: no row has {col} = {value!r}")
    return (~hit if neg else hit).to_numpy()


def errors_pct(df: pd.DataFrame, pred_ms: np.ndarray) -> np.ndarray:
    """Absolute percentage error of each row's prediction."""
    return np.abs(pred_ms / df["time_ms"].to_numpy(float) - 1.0) * 100.0


def error_report(df: pd.DataFrame, pred_ms: np.ndarray, held: np.ndarray, by: str | None = None) -> pd.DataFrame:
    """Mean absolute percentage error overall, per op, per token band (GEMM/attention) and per
    world size (all-reduce), on the fitted and the held-out rows; optionally per `by` column."""
    e = errors_pct(df, pred_ms)
    tokens = df["tokens"].fillna(df["batch"] * df["q_per_seq"])
    band = token_band(tokens).astype(str)
    out = []
    for subset, mask in (("fitted", ~held), ("held-out", held)):
        ok = mask & np.isfinite(e)
        if not ok.any():
            continue

        def add(group: str, sel: np.ndarray, subset: str = subset, ok: np.ndarray = ok) -> None:
            s = sel & ok
            if s.any():
                out.append({"rows": subset, "group": group, "n": int(s.sum()), "mape_pct": float(e[s].mean()),
                            "p90_pct": float(np.percentile(e[s], 90)), "max_pct": float(e[s].max())})

        add("all", np.ones(len(df), bool))
        for op in sorted(df.loc[ok, "op"].unique()):
            is_op = (df["op"] == op).to_numpy()
            add(f"op={op}", is_op)
            if op in ("gemm", "attention"):
                for label in BAND_LABELS:
                    add(f"op={op} tokens={label}", is_op & (band == label).to_numpy())
            if op == "moe":
                for label in BAND_LABELS:
                    add(f"op=moe tokens={label}", is_op & (band == label).to_numpy())
            if op == "allreduce":
                impls = allreduce_impl(df)
                for impl in sorted(impls[ok & is_op].unique()):
                    tag = "" if impl == "nccl" else f" impl={impl}"
                    for n in sorted(df.loc[ok & is_op & (impls == impl).to_numpy(), "world_size"].dropna().unique()):
                        add(f"op=allreduce{tag} world_size={int(n)}",
                            is_op & (impls == impl).to_numpy() & (df["world_size"] == n).to_numpy())
        if by is not None:
            if by not in df.columns:
                raise SpecsimError(f"--by: no column {by!r} in the measurements")
            for v in sorted(df.loc[ok, by].dropna().astype(str).unique()):
                add(f"{by}={v}", (df[by].astype(str) == v).to_numpy())
                if by != "op":
                    for label in BAND_LABELS:
                        add(f"{by}={v} tokens={label}", (df[by].astype(str) == v).to_numpy()
                            & (band == label).to_numpy() & df["op"].isin(["gemm", "attention"]).to_numpy())
    return pd.DataFrame(out)


# --------------------------------------------------------------------------------------------------
# The whole calibration, and writing the profile


@dataclass
class Calibration:
    base: HardwareProfile
    fitted: HardwareProfile
    rows: pd.DataFrame  # the rows used (fitted and held out), with predicted_ms_base / predicted_ms
    held: np.ndarray
    params: list[str]
    allreduce: bool
    report: pd.DataFrame
    dropped_noisy: int
    skipped: dict[str, int]


def kernel_groups(df: pd.DataFrame) -> dict[str, list[str]]:
    """For each (op, dtype[, impl]) of the single-kernel ops, the distinct 'framework/kernel' pairs
    its rows were timed with (blank framework and kernel count as one unnamed kernel)."""
    out: dict[str, list[str]] = {}
    if df.empty:
        return out
    fw = df["framework"].fillna("").astype(str) if "framework" in df else pd.Series("", index=df.index)
    kern = df["kernel"].fillna("").astype(str) if "kernel" in df else pd.Series("", index=df.index)
    label = (fw + "/" + kern).str.strip("/")
    impl = allreduce_impl(df).where(df["op"] == "allreduce", "")
    key = df["op"].astype(str) + " " + df["dtype"].fillna("").astype(str) + impl.map(lambda x: f" {x}" if x else "")
    for k, g in label.groupby(key):
        op = k.split(" ")[0]
        if op in SINGLE_KERNEL_OPS:
            out[k] = sorted(set(g))
    return out


def select_rows(df: pd.DataFrame, framework: str | None = None, kernel: str | None = None) -> pd.DataFrame:
    """Rows of one framework (column `framework`) and/or kernels whose name contains `kernel`."""
    d = df
    for col, value in (("framework", framework), ("kernel", kernel)):
        if not value:
            continue
        if col not in d.columns:
            raise SpecsimError(f"--{col}: the measurements have no '{col}' column")
        cells = d[col].fillna("").astype(str)
        hit = cells.str.lower() == value.lower() if col == "framework" else cells.str.contains(value, regex=False)
        if not hit.any():
            known = ", ".join(sorted(set(cells))[:12])
            raise SpecsimError(f"--{col}: no row has {col} {value!r} (present: {known})")
        d = d[hit.to_numpy()]
    return d


def calibrate(df: pd.DataFrame, hw: HardwareProfile, params: str | None = None, holdout: str | None = None,
              max_rel_std: float = 1.0, ops: Sequence[str] | None = None, all_devices: bool = False,
              by: str | None = None, starts: int = 1, framework: str | None = None, kernel: str | None = None,
              mix_kernels: bool = False) -> Calibration:
    """Select rows, hold some out, fit, and report errors (see the `calibrate` command).

    Rows of one (op, dtype[, all-reduce implementation]) timed with more than one framework/kernel
    are refused (fits never silently mix kernels) unless `mix_kernels`; `framework` / `kernel`
    select rows first."""
    skipped: dict[str, int] = {}
    d = select_rows(df, framework, kernel).copy()
    if not all_devices:
        other = (d["device"] != "") & (d["device"] != hw.name)
        if other.any():
            skipped["other devices"] = int(other.sum())
        d = d[~other]
    if ops:
        bad = [o for o in ops if o not in NEEDS]
        if bad:
            raise SpecsimError(f"--ops: unknown op(s) {', '.join(bad)} (known: {', '.join(NEEDS)})")
        keep = d["op"].isin(list(ops))
        if (~keep).any():
            skipped["other ops"] = int((~keep).sum())
        d = d[keep]
    unknown_op = ~d["op"].isin(list(NEEDS))
    if unknown_op.any():
        skipped["unknown op"] = int(unknown_op.sum())
        d = d[~unknown_op]
    if d.empty:
        raise SpecsimError(f"no rows to calibrate {hw.name} on (rows of other devices or ops: "
                           f"{', '.join(f'{k}: {v}' for k, v in skipped.items()) or 'none'}; try --all-devices)")
    mixed = {k: v for k, v in kernel_groups(d).items() if len(v) > 1}
    if mixed and not mix_kernels:
        detail = "; ".join(f"{k}: {', '.join(v)}" for k, v in mixed.items())
        raise SpecsimError(f"the rows mix kernels ({detail}); choose one with --framework / --kernel, or pass "
                           "--mix-kernels to fit them together")
    dropped = 0
    if "std_ms" in d.columns and max_rel_std > 0:
        noisy = (pd.to_numeric(d["std_ms"], errors="coerce") / d["time_ms"] > max_rel_std).to_numpy()
        dropped = int(noisy.sum())
        d = d[~noisy]
    d = d.reset_index(drop=True)
    held = parse_holdout(holdout, d) if holdout else np.zeros(len(d), bool)
    train = d[~held]
    if train.empty:
        raise SpecsimError(f"--holdout {holdout!r} holds out every row: nothing left to fit")
    eff_params, named, fit_ar = parse_params(params, train)
    fitted = hw
    if eff_params:
        fitted, eff_params = fit_efficiency_params(train, fitted, eff_params, starts=starts,
                                                   lenient=[p for p in eff_params if p not in named])
    if fit_ar:
        fitted = fit_allreduce(train, fitted)
    if not eff_params and not fit_ar:
        raise SpecsimError("nothing to fit: no gemm, attention, memcpy or allreduce rows")
    rows = RowSet(d)
    out = d.copy()
    out["predicted_ms_base"] = rows.predict_ms(hw)
    out["predicted_ms"] = rows.predict_ms(fitted)
    out["held_out"] = held
    rep = error_report(out, out["predicted_ms"].to_numpy(), held, by)
    return Calibration(hw, fitted, out, held, eff_params, fit_ar, rep, dropped, skipped)


def file_sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def provenance(cal: Calibration, measurements: str | Path, holdout: str | None, when: dt.datetime | None = None,
               ) -> dict[str, Any]:
    """What the profile was fitted on, when, with which parameters, and how well it fits."""
    when = when or dt.datetime.now(dt.UTC)
    rep = cal.report.set_index(["rows", "group"])["mape_pct"]
    by_group = cast("Iterable[tuple[tuple[str, str], float]]", rep.items())  # ((rows, group), MAPE)

    def mape(subset: str, group: str = "all") -> float | None:
        return round(float(rep[(subset, group)]), 2) if (subset, group) in rep.index else None

    return {
        "fitted_by": "specsim calibrate",
        "date": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "base_profile": cal.base.name,
        "measurements": str(measurements),
        "measurements_sha256": file_sha256(measurements) if Path(measurements).is_file() else None,
        "rows_fitted": int((~cal.held).sum()),
        "rows_held_out": int(cal.held.sum()),
        "holdout": holdout,
        "rows_dropped_noisy": cal.dropped_noisy,
        "params": [*cal.params, *(["allreduce (per world size)"] if cal.allreduce else [])],
        "mape_pct_fitted": mape("fitted"),
        "mape_pct_held_out": mape("held-out"),
        "mape_pct_by_group": {f"{r}: {g}": round(float(v), 2) for (r, g), v in by_group
                              if g.startswith("op=") or g == "all" or " tokens=" not in g},
    }


def fitted_profile(cal: Calibration, measurements: str | Path, holdout: str | None, name: str | None = None,
                   when: dt.datetime | None = None) -> HardwareProfile:
    """The fitted profile with its provenance and an efficiency `source` line saying how it was made."""
    prov = provenance(cal, measurements, holdout, when)
    held = f", {prov['mape_pct_held_out']}% on {prov['rows_held_out']} held-out rows" if prov["rows_held_out"] else ""
    source = (f"fitted by `specsim calibrate` on {prov['date'][:10]} to {prov['rows_fitted']} rows of "
              f"{Path(str(measurements)).name} (params: {', '.join(prov['params'])}); mean absolute error "
              f"{prov['mape_pct_fitted']}% on the fitted rows{held}")
    eff = dataclasses.replace(cal.fitted.efficiency, source=source)
    return dataclasses.replace(cal.fitted, name=name or f"{cal.base.name}-fitted", efficiency=eff,
                               provenance=prov, source_path="")


def profile_yaml(hw: HardwareProfile) -> str:
    data = hw.to_yaml_dict()
    data["efficiency"] = {k: (round(v, 6) if isinstance(v, float) else v) for k, v in data["efficiency"].items()}
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


def write_atomic(path: str | Path, text: str | bytes) -> None:
    """Write to a temporary file beside `path`, then rename: nothing is ever half-written."""
    path = Path(path)
    if path.parent and not path.parent.exists():
        raise SpecsimError(f"{path}: folder {path.parent} does not exist")
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode() if isinstance(text, str) else text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # an ordinary file's mode, not mkstemp's private 0600
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_profile(hw: HardwareProfile, path: str | Path) -> None:
    """Write the profile YAML atomically, after checking that it loads back as a valid profile."""
    text = profile_yaml(hw)
    parse_hardware(yaml.safe_load(text), str(path))  # what every command will accept
    write_atomic(path, text)


__all__ = ["BOUNDS", "DETERMINES", "Calibration", "RowSet", "calibrate", "error_report", "fit_allreduce",
           "fit_efficiency", "fitted_profile", "row_weights", "undetermined", "write_profile"]
