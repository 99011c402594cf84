"""Fitting all-reduce timings per implementation and world size.

Each (implementation, world size) gets its own (latency, bus bandwidth, sharpness of the p-norm
joining them) triple (roofline.allreduce_time_s), fitted by robust least squares on relative error.
"""

from __future__ import annotations

import dataclasses
from typing import cast

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from specsim.calibration.params import ALLREDUCE_BOUNDS, ALLREDUCE_PARAMS, F_SCALE
from specsim.cost import roofline as rl
from specsim.cost.hardware_profile import ALLREDUCE_IMPLEMENTATIONS, HardwareProfile
from specsim.errors import SpecsimError


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
    ar = df[(df["op"] == "allreduce") & df["bytes"].notna() & df["world_size"].notna() & (df["world_size"] > 1)]
    ar = ar[allreduce_impl(ar).isin(ALLREDUCE_IMPLEMENTATIONS).to_numpy()]
    if ar.empty:
        raise SpecsimError("nothing to fit for all-reduce: no allreduce rows with bytes and world_size > 1 "
                           f"(implementations: {', '.join(ALLREDUCE_IMPLEMENTATIONS)})")
    tables = {"nccl": dict(hw.interconnect.allreduce_by_world_size),
              **{k: dict(v) for k, v in hw.interconnect.allreduce_by_implementation.items()}}
    for (impl, n), g in ar.groupby([allreduce_impl(ar), "world_size"]):
        size = int(cast(float, n))
        tables.setdefault(str(impl), {})[size] = _fit_one(g, size, f"all-reduce ({impl}) over {size} GPUs")
    ic = dataclasses.replace(
        hw.interconnect, allreduce_by_world_size=dict(sorted(tables.pop("nccl").items())),
        allreduce_by_implementation={k: dict(sorted(v.items())) for k, v in tables.items() if v})
    return dataclasses.replace(hw, interconnect=ic)


def _fit_one(g: pd.DataFrame, size: int, what: str) -> tuple[float, float, float]:
    """(latency s, bus bandwidth B/s, sharpness) of one implementation over `size` GPUs."""
    b = g["bytes"].to_numpy(float)
    y = g["time_ms"].to_numpy(float) * 1e-3
    if len(np.unique(b)) < 4:
        raise SpecsimError(f"{what}: {len(np.unique(b))} message size(s); need >= 4 to "
                           "fit latency, bus bandwidth and sharpness")
    f = 2.0 * (size - 1) / size
    lo = np.array([ALLREDUCE_BOUNDS[p][0] for p in ALLREDUCE_PARAMS])
    hi = np.array([ALLREDUCE_BOUNDS[p][1] for p in ALLREDUCE_PARAMS])
    small, large = np.quantile(y, 0.05), np.quantile(y, 0.95)
    x0 = np.clip(np.array([small * 1e6, f * b.max() / max(large - small, 1e-9) / 1e9, 1.0]), lo + 1e-6, hi - 1e-6)

    def model(x: np.ndarray) -> np.ndarray:
        return rl._join(np.full_like(b, x[0] * 1e-6), f * b / (x[1] * 1e9), x[2])

    transfer_share = f * b / (x0[1] * 1e9) / y
    if transfer_share.max() < 0.2:
        raise SpecsimError(f"{what}: messages too small to determine bus bandwidth "
                           f"(transfer is at most {100 * transfer_share.max():.0f}% of the time)")
    if transfer_share.min() > 0.8:
        raise SpecsimError(f"{what}: messages too large to determine latency "
                           f"(latency is at most {100 * (1 - transfer_share.min()):.0f}% of the time)")
    fit = least_squares(lambda x: model(x) / y - 1.0, x0, bounds=(lo, hi), loss="soft_l1", f_scale=F_SCALE,
                        x_scale="jac")
    return (float(fit.x[0]) * 1e-6, float(fit.x[1]) * 1e9, float(fit.x[2]))
