"""Importers from public profiling data into the measurement schema (measurements.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from specsim.cost.measurements import check_measurements
from specsim.errors import SpecsimError

# Vidur's GPU folder names -> specsim profile names (its A100 rows come from 80 GB SXM parts).
VIDUR_DEVICES = {"h100": "h100-sxm", "a100": "a100-sxm-80gb"}
# Vidur column -> our name for one layer's linear ops, per its README.
_VIDUR_LINEAR = {
    "attn_pre_proj": "qkv",
    "attn_post_proj": "o",
    "mlp_up_proj": "up",
    "mlp_down_proj": "down",
}
# Network topologies that match a profile's scale-up fabric: `dgx` = 8 GPUs on NVSwitch. The
# `pairwise_nvlink` boxes (GPUs bridged in pairs, the rest over PCIe) are a different machine.
VIDUR_TOPOLOGIES = ("dgx",)


def _read(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise SpecsimError(f"{path}: not a readable CSV ({str(exc).splitlines()[0]})") from None


def _need(d: pd.DataFrame, cols: set[str], path: Path) -> None:
    if missing := cols - set(d.columns):
        raise SpecsimError(f"{path}: missing column(s) {', '.join(sorted(missing))}")


# Vidur's element-wise ops (its mlp.csv, one median per op): name -> our kernel name. The bytes each
# moves (read + written, 16-bit activations) are computed from the layer's shape in `_vidur_elementwise`.
_VIDUR_ELEMENTWISE = {
    "input_layernorm": "rmsnorm",
    "post_attention_layernorm": "rmsnorm",
    "attn_rope": "rotary_embedding",
    "mlp_act": "silu_and_mul",
    "add": "residual_add",
}


def _vidur_elementwise(d: pd.DataFrame, path: Path, device: str) -> pd.DataFrame:
    """Element-wise rows: RMSNorm reads and writes T x h; rotary reads and writes the q and k heads of
    one GPU; the gated activation reads 2 x inter/tp and writes inter/tp per token (one branch
    ungated: read 1, write 1); the residual add reads two T x h and writes one."""
    tp = d["num_tensor_parallel_workers"].astype(float)
    t, h = d["num_tokens"].astype(float), d["n_embd"].astype(float)
    hd = h / d["n_head"]
    gated = d["use_gated_mlp"].astype(str).str.lower() == "true"
    inter = d["n_expanded_embd"] / tp
    moved = {
        "input_layernorm": 2 * t * h, "post_attention_layernorm": 2 * t * h,
        "attn_rope": 2 * t * (d["n_head"] + d["n_kv_head"]) / tp * hd,
        "mlp_act": t * inter * np.where(gated, 3, 2), "add": 3 * t * h,
    }
    frames = []
    for col, kernel in _VIDUR_ELEMENTWISE.items():
        if f"time_stats.{col}.median" not in d.columns:
            continue
        frames.append(pd.DataFrame({
            "op": "elementwise", "device": device, "dtype": "fp16", "tokens": t, "d_in": h,
            "bytes": moved[col] * 2.0, "time_ms": d[f"time_stats.{col}.median"],
            "std_ms": d.get(f"time_stats.{col}.std", np.nan), "layer_op": col, "model": path.parent.name,
            "tp": d["num_tensor_parallel_workers"], "framework": "vidur", "kernel": kernel,
            "source": f"vidur {'/'.join(path.parts[-5:])}",
        }))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _vidur_compute(path: Path, device: str) -> pd.DataFrame:
    d = _read(path)
    _need(d, {"n_head", "n_kv_head", "n_embd", "n_expanded_embd", "use_gated_mlp", "num_tokens",
              "num_tensor_parallel_workers", *(f"time_stats.{c}.median" for c in _VIDUR_LINEAR)}, path)
    tp = d["num_tensor_parallel_workers"].astype(float)
    hd = d["n_embd"] / d["n_head"]
    gated = np.where(d["use_gated_mlp"].astype(str).str.lower() == "true", 2, 1)
    # Weight shapes on one GPU (Megatron column/row split), per the Vidur README's table.
    shapes = {
        "qkv": (d["n_embd"], (d["n_head"] + 2 * d["n_kv_head"]) * hd / tp),
        "o": (d["n_head"] * hd / tp, d["n_embd"]),
        "up": (d["n_embd"], gated * d["n_expanded_embd"] / tp),
        "down": (d["n_expanded_embd"] / tp, d["n_embd"]),
    }
    frames = []
    for col, name in _VIDUR_LINEAR.items():
        k, n = shapes[name]
        std = d.get(f"time_stats.{col}.std", np.nan)
        frames.append(pd.DataFrame({
            "op": "gemm", "device": device, "dtype": "fp16", "tokens": d["num_tokens"],
            "d_in": k, "d_out": n, "world_size": 1, "time_ms": d[f"time_stats.{col}.median"],
            "std_ms": std, "layer_op": name, "model": path.parent.name,
            "tp": d["num_tensor_parallel_workers"], "framework": "vidur", "kernel": "torch.nn.functional.linear",
            "source": f"vidur {'/'.join(path.parts[-5:])}",
        }))
    frames.append(_vidur_elementwise(d, path, device))
    return pd.concat(frames, ignore_index=True)


def _vidur_network(path: Path, device: str) -> pd.DataFrame:
    d = _read(path)
    _need(d, {"size", "num_workers", "time_stats.all_reduce.median"}, path)
    # `size` is BYTES, not fp16 elements (whatever the README beside the data says): Vidur's profiler
    # writes `"size": self._size * 2,  # bytes` for a float16 buffer of self._size elements
    # (microsoft/vidur vidur/profiling/collectives/collectives_wrapper.py), its largest size
    # 67,108,864 is its default max_collective_size 4096*8192 elements * 2 bytes, and the data agree:
    # read as bytes, 8xH100 at 64 MiB reaches a bus bandwidth of 365 GB/s (NCCL-1455 ring: 365-370),
    # A100 pairs 195 GB/s (under NVLink3's 300 per direction); read as elements they would be 730 and
    # 391 GB/s, beyond what the links carry.
    per_node = d["devices_per_node"] if "devices_per_node" in d else d["num_workers"]
    out = pd.DataFrame({
        "op": "allreduce", "device": device, "dtype": "fp16", "bytes": d["size"].astype(float),
        "world_size": d["num_workers"], "time_ms": d["time_stats.all_reduce.median"],
        "std_ms": d.get("time_stats.all_reduce.std", np.nan), "nodes": d["num_workers"] / per_node,
        "framework": "vidur", "kernel": "torch.distributed.all_reduce", "impl": "nccl",
        "source": f"vidur {'/'.join(path.parts[-3:])}",
    })
    # One node only: a profile's interconnect is its scale-up fabric (NVLink/NVSwitch), not the network.
    return out[out["nodes"] == 1].reset_index(drop=True)


def import_vidur(root: str | Path) -> pd.DataFrame:
    """compute/<gpu>/<org>/<model>/mlp.csv (linear layers -> gemm rows; RMSNorm, rotary, activation
    and residual add -> elementwise rows) and network/<gpu>_dgx/all_reduce.csv (single-node eager
    NCCL all-reduce -> allreduce rows, impl nccl) under root."""
    root = Path(root)
    if not root.is_dir():
        raise SpecsimError(f"{root}: no such directory (Vidur's measured profiles are the data/profiling folder "
                           "of a microsoft/vidur clone: give that folder)")
    frames = []
    for path in sorted(root.glob("compute/*/*/*/mlp.csv")):
        gpu = path.parts[-4]
        if gpu in VIDUR_DEVICES:
            frames.append(_vidur_compute(path, VIDUR_DEVICES[gpu]))
    for path in sorted(root.glob("network/*/all_reduce.csv")):
        gpu, _, topology = path.parent.name.partition("_")
        if gpu in VIDUR_DEVICES and topology in VIDUR_TOPOLOGIES:
            frames.append(_vidur_network(path, VIDUR_DEVICES[gpu]))
    if not frames:
        raise SpecsimError(f"{root}: no vidur compute/*/*/*/mlp.csv or network/*_dgx/all_reduce.csv files")
    df = pd.concat(frames, ignore_index=True)
    df = df[df["time_ms"] > 0].reset_index(drop=True)
    return check_measurements(df, str(root))
