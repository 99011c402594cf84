from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from tests._cli import run


def test_hardware_and_models_commands(capsys) -> None:
    code, out, _ = run(capsys, "hardware", "list", "--format", "csv")
    assert code == 0 and "h100-sxm" in out and "mi300x" in out
    code, out, _ = run(capsys, "hardware", "show", "h200", "--format", "json")
    assert code == 0 and json.loads(out)["mem_bw_tb_per_s"] == pytest.approx(4.8)
    code, out, _ = run(capsys, "models", "show", "llama-3.1-70b", "--format", "json")
    assert code == 0 and json.loads(out)["kv_bytes_per_token.bf16"] == 327_680


def test_ops_rows_and_columns(capsys) -> None:
    code, out, _ = run(capsys, "ops", "--hardware", "h100-sxm", "--model", "llama-3.1-70b", "--tp", "8",
                       "--tokens", "1,2,4,512", "--format", "json")
    rows = json.loads(out)
    assert code == 0
    assert {"qkv", "o", "up", "down", "attention", "lm_head", "allreduce"} <= {r["op"] for r in rows}
    assert {"op", "tokens", "flops", "bytes", "time_ms", "bound"} <= set(rows[0])
    up = {r["tokens"]: r for r in rows if r["op"] == "up"}
    assert up[1]["bound"] == "memory" and up[512]["bound"] == "compute"


def test_forward_has_family_split(capsys) -> None:
    code, out, _ = run(capsys, "forward", "-H", "h100-sxm", "-m", "llama-3.1-8b", "--tokens", "1,4",
                       "--batch", "4", "--format", "csv")
    from io import StringIO

    df = pd.read_csv(StringIO(out))
    assert code == 0 and list(df["tokens"]) == [4, 16]
    fam = df[[c for c in df.columns if c.endswith("_ms") and c not in ("time_ms", "time_per_token_ms")]]
    assert (fam.sum(axis=1) - df["time_ms"]).abs().max() < 1e-9


def test_predict_writes_column(capsys, tmp_path: Path) -> None:
    src = tmp_path / "m.csv"
    src.write_text("op,device,tokens,d_in,d_out,time_ms\ngemm,a100-sxm-80gb,16,4096,4096,0.03\nfoo,,,,,1\n")
    out = tmp_path / "p.csv"
    code, _stdout, err = run(capsys, "predict", str(src), "-o", str(out))
    assert code == 0 and "1 row(s) could not be predicted" in err
    df = pd.read_csv(out)
    assert df["predicted_ms"].iloc[0] > 0 and pd.isna(df["predicted_ms"].iloc[1])


@pytest.mark.parametrize(("args", "message"), [
    (("hardware", "show", "h300"), "unknown hardware 'h300'"),
    (("ops", "-H", "h100-sxm", "-m", "gpt-9"), "unknown model 'gpt-9'"),
    (("ops", "-H", "h100-sxm", "-m", "llama-2-7b", "--tokens", "a,b"), "--tokens"),
    (("forward", "-H", "h100-sxm", "-m", "llama-2-7b", "--batch", "0"), "--batch"),
    (("ops", "-H", "a100-sxm-80gb", "-m", "llama-2-7b", "--dtype", "fp4"), "fp4"),  # --dtype: old --weight-dtype
    (("ops", "-H", "h100-sxm", "-m", "llama-3.1-70b", "--tp", "3"), "--tp: tp 3 does not divide"),
])
def test_bad_input_one_line_exit_2(capsys, args, message) -> None:
    code, _out, err = run(capsys, *args)
    assert code == 2
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_predict_bad_file_writes_nothing(capsys, tmp_path: Path) -> None:
    src = tmp_path / "m.csv"
    src.write_text("device,tokens\nx,1\n")
    out = tmp_path / "p.csv"
    code, _, err = run(capsys, "predict", str(src), "-o", str(out))
    assert code == 2 and "missing column" in err and not out.exists()
