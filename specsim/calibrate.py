"""Fitting a profile's efficiency and overhead parameters to measured kernel timings.

Robust least squares (scipy.optimize.least_squares, soft-L1 loss) on relative error, with rows
weighted so that each token band counts alike (a sweep has many more large-M rows than decode
rows, but decode rows decide speculation).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from specsim.errors import SpecsimError
from specsim.hardware import HardwareProfile
from specsim.measurements import predict_rows, token_band

# Bounds of each fittable parameter (physical ranges).
BOUNDS = {
    "gemm_compute": (0.2, 1.0),
    "memory": (0.3, 1.0),
    "kernel_overhead_us": (0.0, 50.0),
    "ridge_sharpness": (1.0, 20.0),
    "cta_k_overhead": (0.0, 4096.0),
    "attention_compute": (0.05, 1.0),
}
# Which parameters each op's rows can determine.
DETERMINES = {
    "gemm": ("gemm_compute", "memory", "kernel_overhead_us", "ridge_sharpness", "cta_k_overhead"),
    "attention": ("attention_compute", "memory", "kernel_overhead_us", "ridge_sharpness"),
    "memcpy": ("memory", "kernel_overhead_us"),
}


def row_weights(df: pd.DataFrame) -> np.ndarray:
    """1/sqrt(rows in the same (op, token band)): bands count alike without drowning in noise."""
    band = token_band(df["tokens"].fillna(df["batch"].fillna(1) * df["q_per_seq"].fillna(1)))
    key = df["op"].astype(str) + ":" + band.astype(str)
    return 1.0 / np.sqrt(key.map(key.value_counts()).to_numpy(dtype=float))


def fit_efficiency(df: pd.DataFrame, hw: HardwareProfile, params: Sequence[str] | None = None) -> HardwareProfile:
    """Profile with `params` fitted to the rows' time_ms (all that the rows determine if None)."""
    ops = set(df["op"]) & set(DETERMINES)
    determinable = {p for op in ops for p in DETERMINES[op]}
    if params is None:
        params = [p for p in BOUNDS if p in determinable]
    undetermined = [p for p in params if p not in determinable]
    if undetermined:
        raise SpecsimError(f"the measurements cannot determine {', '.join(undetermined)} "
                           f"(their ops: {', '.join(sorted(ops)) or 'none'})")
    if not params:
        raise SpecsimError("nothing to fit: no gemm, attention or memcpy rows")
    rows = df[df["op"].isin(list(ops))]
    y = rows["time_ms"].to_numpy(dtype=float)
    w = row_weights(rows)
    x0 = np.array([getattr(hw.efficiency, p) for p in params], dtype=float)
    lo = np.array([BOUNDS[p][0] for p in params])
    hi = np.array([BOUNDS[p][1] for p in params])
    x0 = np.clip(x0, lo + 1e-6, hi - 1e-6)

    def residual(x: np.ndarray) -> np.ndarray:
        trial = hw.with_efficiency(**dict(zip(params, x, strict=True)))
        return (predict_rows(rows, trial) / y - 1.0) * w

    fit = least_squares(residual, x0, bounds=(lo, hi), loss="soft_l1", f_scale=0.05, x_scale="jac")
    return hw.with_efficiency(**dict(zip(params, (float(v) for v in fit.x), strict=True)))


def fitted_values(hw: HardwareProfile) -> dict[str, float]:
    return {k: v for k, v in dataclasses.asdict(hw.efficiency).items() if k in BOUNDS}
