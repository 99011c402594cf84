"""Synthetic measurement rows made by the cost model itself (shared by the calibration tests)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from specsim.cost import roofline as rl
from specsim.cost.measurements import check_measurements

SHAPES = [(4096, 4096), (12288, 4096), (4096, 11008), (28672, 8192), (1280, 8192), (8192, 8192), (4096, 512),
          (8192, 1024)]
TOKENS = [1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192]


def gemm_rows(hw, noise: float, seed: int = 0) -> pd.DataFrame:
    """Measurements made by the cost model itself on `hw`, with relative Gaussian noise."""
    rows = [{"op": "gemm", "device": hw.name, "dtype": "bf16", "tokens": m, "d_in": k, "d_out": n, "time_ms": 1.0}
            for n, k in SHAPES for m in TOKENS]
    df = check_measurements(pd.DataFrame(rows), "synthetic")
    true_ms = rl.gemm_time_s(df["tokens"], df["d_out"], df["d_in"], hw)[0] * 1e3
    df["time_ms"] = true_ms * (1 + np.random.default_rng(seed).normal(0, noise, len(df)))
    df["true_ms"] = true_ms
    return df


def allreduce_rows(hw, noise: float) -> pd.DataFrame:
    sizes = np.unique(np.geomspace(2048, 64 * 2**20, 60).astype(int))
    rows = [{"op": "allreduce", "device": hw.name, "bytes": float(s), "world_size": n, "time_ms": 1.0}
            for n in (2, 4, 8) for s in sizes]
    df = check_measurements(pd.DataFrame(rows), "synthetic")
    t = rl.allreduce_time_s(df["bytes"], df["world_size"], hw) * 1e3
    df["time_ms"] = t * (1 + np.random.default_rng(5).normal(0, noise, len(df)))
    return df
