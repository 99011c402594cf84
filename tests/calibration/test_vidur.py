from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from specsim.calibration.vidur import import_vidur
from specsim.cost.measurements import read_measurements
from specsim.errors import SpecsimError
from tests._cli import run

LINEAR = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")


def _fake_vidur(root: Path) -> Path:
    """A two-row vidur-shaped tree: one model's compute file and one dgx + one pairwise network file."""
    model = root / "compute" / "h100" / "meta-llama" / "Tiny-1b"
    model.mkdir(parents=True)
    rows = []
    for tokens, tp in ((1, 1), (64, 2)):
        r = {"n_head": 32, "n_kv_head": 8, "n_embd": 4096, "n_expanded_embd": 14336, "vocab_size": 128256,
             "use_gated_mlp": True, "num_tokens": tokens, "num_tensor_parallel_workers": tp}
        for i, op in enumerate(LINEAR):
            r[f"time_stats.{op}.median"] = 0.01 * (i + 1) * tokens
            r[f"time_stats.{op}.std"] = 0.0001
        rows.append(r)
    pd.DataFrame(rows).to_csv(model / "mlp.csv", index=False)
    for topo in ("dgx", "pairwise_nvlink"):
        net = root / "network" / f"h100_{topo}"
        net.mkdir(parents=True)
        pd.DataFrame({
            "time_stats.all_reduce.median": [0.02, 0.05, 0.3, 0.4],
            "time_stats.all_reduce.std": [0.001, 0.001, 0.002, 0.002],
            "num_workers": [2, 2, 8, 8], "devices_per_node": [2, 2, 8, 4],
            "size": [2048, 1 << 20, 64 << 20, 64 << 20],
        }).to_csv(net / "all_reduce.csv")
    return root


def test_fake_tree_shapes_bytes_and_topology(tmp_path: Path) -> None:
    df = import_vidur(_fake_vidur(tmp_path))
    gemm = df[df["op"] == "gemm"].set_index(["layer_op", "tp"])
    hd = 4096 / 32
    # Megatron split: qkv N = (heads + 2 kv) * head_dim / tp; o K = heads * head_dim / tp; up fused gate+up
    assert gemm.loc[("qkv", 2), "d_out"] == pytest.approx((32 + 16) * hd / 2)
    assert gemm.loc[("o", 2), "d_in"] == pytest.approx(32 * hd / 2) and gemm.loc[("o", 2), "d_out"] == 4096
    assert gemm.loc[("up", 1), "d_out"] == pytest.approx(2 * 14336)
    assert gemm.loc[("down", 2), "d_in"] == pytest.approx(14336 / 2)
    assert gemm["std_ms"].notna().all() and set(gemm["model"]) == {"Tiny-1b"}
    assert set(gemm["source"]) == {"vidur compute/h100/meta-llama/Tiny-1b/mlp.csv"}
    ar = df[df["op"] == "allreduce"]
    # dgx only (pairwise boxes are another machine), one node only (dpn 4 of 8 workers = 2 nodes dropped)
    assert set(ar["source"]) == {"vidur network/h100_dgx/all_reduce.csv"} and len(ar) == 3
    # `size` is bytes as written by Vidur's profiler: no factor of two
    assert sorted(ar["bytes"]) == [2048, 1 << 20, 64 << 20]


def test_missing_columns_and_empty_tree(tmp_path: Path) -> None:
    with pytest.raises(SpecsimError, match="no such directory"):
        import_vidur(tmp_path / "nope")
    with pytest.raises(SpecsimError, match="no vidur"):
        import_vidur(tmp_path)
    bad = tmp_path / "compute" / "h100" / "org" / "m"
    bad.mkdir(parents=True)
    pd.DataFrame({"n_head": [1]}).to_csv(bad / "mlp.csv", index=False)
    with pytest.raises(SpecsimError, match="missing column"):
        import_vidur(tmp_path)


def test_cli_import_writes_readable_measurements(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "m.csv"
    code, stdout, _ = run(capsys, "import", "vidur", str(_fake_vidur(tmp_path / "v")), "-o", str(out))
    assert code == 0 and "h100-sxm gemm: 8" in stdout
    df = read_measurements(out)
    assert len(df) == 11 and set(df["op"]) == {"gemm", "allreduce"}
    code, _, err = run(capsys, "import", "vidur", str(tmp_path / "missing"), "-o", str(tmp_path / "x.csv"))
    assert code == 2 and "no such directory" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x.csv").exists()


def test_real_network_files_read_as_bytes(vidur_table: pd.DataFrame) -> None:
    """The bytes reading is the physical one: 8xH100 at 64 MiB stays under NVLink4's 450 GB/s per
    direction (elements would give ~730), and the latency plateau sits at tens of microseconds."""
    ar = vidur_table[(vidur_table["op"] == "allreduce") & (vidur_table["device"] == "h100-sxm")]
    assert set(ar["world_size"]) == {2, 4, 8} and (ar["bytes"] <= 64 * 2**20).all()
    big = ar[(ar["world_size"] == 8) & (ar["bytes"] == ar["bytes"].max())].iloc[0]
    busbw = 2 * 7 / 8 * big["bytes"] / (big["time_ms"] * 1e-3)
    assert 300e9 < busbw < 450e9
    small = ar[ar["bytes"] < 256 * 2**10]
    assert 5 < float(np.median(small["time_ms"])) * 1e3 < 60


def test_elementwise_ops_become_rows(tmp_path: Path) -> None:
    root = _fake_vidur(tmp_path)
    path = root / "compute" / "h100" / "meta-llama" / "Tiny-1b" / "mlp.csv"
    d = pd.read_csv(path)
    for op in ("input_layernorm", "post_attention_layernorm", "attn_rope", "mlp_act", "add"):
        d[f"time_stats.{op}.median"] = 0.005
    d.to_csv(path, index=False)
    df = import_vidur(root)
    e = df[df["op"] == "elementwise"].set_index(["layer_op", "tp"])
    assert set(e["kernel"]) == {"rmsnorm", "rotary_embedding", "silu_and_mul", "residual_add"}
    # bytes read + written, 16-bit: norm 2 x T x h, rope 2 x T x (q + k heads / tp) x hd, SiLU-and-mul 3 x T x
    # inter / tp, residual add 3 x T x h
    assert e.loc[("input_layernorm", 1), "bytes"] == 2 * 1 * 4096 * 2
    assert e.loc[("attn_rope", 2), "bytes"] == 2 * 64 * (32 + 8) / 2 * 128 * 2
    assert e.loc[("mlp_act", 2), "bytes"] == 64 * 14336 / 2 * 3 * 2
    assert e.loc[("add", 1), "bytes"] == 3 * 4096 * 2
    assert set(df.loc[df["op"] == "gemm", "framework"]) == {"vidur"}
    assert set(df.loc[df["op"] == "allreduce", "impl"]) == {"nccl"}
