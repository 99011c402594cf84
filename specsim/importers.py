"""Importers from public profiling data into the measurement schema (measurements.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from specsim.errors import SpecsimError
from specsim.measurements import check_measurements

# Vidur's GPU folder names -> specsim profile names (its A100 rows come from 80 GB SXM parts).
VIDUR_DEVICES = {"h100": "h100-sxm", "a100": "a100-sxm-80gb"}
# Vidur column -> (our op name, K, N) of one layer's linear ops, per its README.
_VIDUR_LINEAR = {
    "attn_pre_proj": "qkv",
    "attn_post_proj": "o",
    "mlp_up_proj": "up",
    "mlp_down_proj": "down",
}


def _vidur_compute(path: Path, device: str) -> pd.DataFrame:
    d = pd.read_csv(path)
    need = {"n_head", "n_kv_head", "n_embd", "n_expanded_embd", "use_gated_mlp", "num_tokens",
            "num_tensor_parallel_workers"}
    if missing := need - set(d.columns):
        raise SpecsimError(f"{path}: missing column(s) {', '.join(sorted(missing))}")
    tp = d["num_tensor_parallel_workers"].astype(float)
    hd = d["n_embd"] / d["n_head"]
    gated = np.where(d["use_gated_mlp"].astype(str).str.lower() == "true", 2, 1)
    shapes = {
        "qkv": (d["n_embd"], (d["n_head"] + 2 * d["n_kv_head"]) * hd / tp),
        "o": (d["n_head"] * hd / tp, d["n_embd"]),
        "up": (d["n_embd"], gated * d["n_expanded_embd"] / tp),
        "down": (d["n_expanded_embd"] / tp, d["n_embd"]),
    }
    frames = []
    for col, name in _VIDUR_LINEAR.items():
        k, n = shapes[name]
        frames.append(pd.DataFrame({
            "op": "gemm", "device": device, "dtype": "fp16", "tokens": d["num_tokens"],
            "d_in": k, "d_out": n, "world_size": 1, "time_ms": d[f"time_stats.{col}.median"],
            "std_ms": d[f"time_stats.{col}.std"], "layer_op": name, "model": path.parent.name,
            "tp": d["num_tensor_parallel_workers"], "source": "vidur",
        }))
    return pd.concat(frames, ignore_index=True)


def _vidur_network(path: Path, device: str) -> pd.DataFrame:
    d = pd.read_csv(path)
    return pd.DataFrame({
        "op": "allreduce", "device": device, "dtype": "fp16", "bytes": 2.0 * d["size"],
        "world_size": d["num_workers"], "time_ms": d["time_stats.all_reduce.median"],
        "std_ms": d["time_stats.all_reduce.std"], "topology": path.parent.name, "source": "vidur",
    })


def import_vidur(root: str | Path) -> pd.DataFrame:
    """All compute/<gpu>/<org>/<model>/mlp.csv and network/<gpu>_<topo>/all_reduce.csv under root."""
    root = Path(root)
    if not root.is_dir():
        raise SpecsimError(f"{root}: no such directory")
    frames = []
    for path in sorted(root.glob("compute/*/*/*/mlp.csv")):
        gpu = path.parts[-4]
        if gpu in VIDUR_DEVICES:
            frames.append(_vidur_compute(path, VIDUR_DEVICES[gpu]))
    for path in sorted(root.glob("network/*/all_reduce.csv")):
        gpu = path.parent.name.split("_")[0]
        if gpu in VIDUR_DEVICES:
            frames.append(_vidur_network(path, VIDUR_DEVICES[gpu]))
    if not frames:
        raise SpecsimError(f"{root}: no vidur compute/*/*/*/mlp.csv or network/*/all_reduce.csv files")
    df = pd.concat(frames, ignore_index=True)
    df = df[df["time_ms"] > 0].reset_index(drop=True)
    return check_measurements(df, str(root))
