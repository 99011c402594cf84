from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests._cli import run

FORMATS = "bf16 | fp16 | fp8 | fp8_block | int8 | int4 | w4a8 | nvfp4 | mxfp4 |" \
    " native, or a format per part (fp8,experts=nvfp4)"


def test_hardware_and_models_commands(capsys) -> None:
    code, out, _ = run(capsys, "hardware", "list", "--format", "csv")
    assert code == 0 and "h100-sxm" in out and "mi300x" in out
    code, out, _ = run(capsys, "hardware", "show", "h200", "--format", "json")
    shown = json.loads(out)
    assert code == 0 and shown["mem_bw_tb_per_s"] == pytest.approx(4.8)
    # each engine's own kernels, one row per parameter, as the profile holds them
    from specsim.cost.hardware import load_hardware

    own = load_hardware("h200").for_framework("trtllm").efficiency
    assert shown["frameworks.trtllm.fp8_compute"] == pytest.approx(own.fp8_compute)
    code, out, _ = run(capsys, "engines", "show", "sglang-0.4", "--format", "json")
    assert code == 0 and "frameworks.sglang" in json.loads(out)["kernels"]
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
    # an empty or unknown dtype names its option and the accepted values (an empty one used to mean bf16)
    (("ops", "-H", "h100-sxm", "-m", "llama-2-7b", "--dtype", ""),
     f"--dtype must be one of {FORMATS}, got ''"),
    (("forward", "-H", "h100-sxm", "-m", "llama-2-7b", "--weight-dtype", ""),
     f"--weight-dtype must be one of {FORMATS}, got ''"),
    (("ops", "-H", "h100-sxm", "-m", "llama-2-7b", "--weight-dtype", "fp4"),
     f"--weight-dtype must be one of {FORMATS}, got 'fp4'"),
    (("ops", "-H", "h100-sxm", "-m", "llama-2-7b", "--kv-dtype", ""), "--kv-dtype must be one of bf16 | fp16 | fp8"),
    (("forward", "-H", "h100-sxm", "-m", "llama-2-7b", "--kv-dtype", "int4"),
     "--kv-dtype must be one of bf16 | fp16 | fp8, got 'int4'"),
    (("forward", "-H", "h100-sxm", "-m", "llama-2-7b", "--engine", ""), "--engine must be one of"),
    (("ops", "-H", "h100-sxm", "-m", "llama-2-7b", "--engine", "warp"), "unknown engine 'warp'"),
    (("forward", "-H", "h100-sxm", "-m", "llama-2-7b", "--allreduce", "mpi"),
     "--allreduce must be one of custom | nccl_graph | nccl, got 'mpi'"),
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


def _json(capsys, *args: str) -> Any:
    """`specsim ARGS --format json`, read."""
    code, out, err = run(capsys, *args, "--format", "json")
    assert code == 0, err
    return json.loads(out)


# (engine, hardware, model, tp, batch, context): TP 8 under a custom all-reduce; a batch vLLM pads to a captured
# token count (3 -> 4) and one SGLang pads to a captured request count (9 -> 10); a batch TensorRT-LLM has no graph
# for (33: eager NCCL); an eager research loop; a fitted older engine at TP 4; an MoE model
SAME_PASS = [
    ("vllm", "h100-sxm", "llama-3.1-70b", 8, 1, 4096),
    ("sglang", "h100-sxm", "llama-3.1-70b", 8, 1, 4096),
    ("vllm", "h100-sxm", "llama-3.1-70b", 8, 3, 2048),
    ("sglang", "h100-sxm", "llama-3.1-70b", 8, 9, 1024),
    ("trtllm", "h100-sxm", "llama-3.1-70b", 8, 33, 1024),
    ("hf", "h100-sxm", "llama-3.1-8b", 1, 2, 512),
    ("vllm-0.10", "h200", "llama-3.1-70b", 4, 3, 4096),
    ("sglang", "h200", "qwen3-30b-a3b", 2, 16, 2048),
]


@pytest.mark.parametrize(("engine", "hw", "model", "tp", "batch", "context"), SAME_PASS)
def test_forward_total_is_evaluates_plain_step(capsys, engine, hw, model, tp, batch, context) -> None:
    """One tool, one answer: `forward --engine X --tokens 1` is the plain-decoding step `evaluate` prices for X."""
    setup = ("-H", hw, "-m", model, "--tp", str(tp), "--batch", str(batch), "--context", str(context),
             "--engine", engine)
    [row] = _json(capsys, "forward", *setup, "--tokens", "1")
    ev = _json(capsys, "evaluate", *setup, "--draft", "none", "--k", "0")
    assert ev["engine"] == engine
    assert row["time_ms"] == pytest.approx(ev["step_ms"], rel=1e-12)
    assert row["time_ms"] == pytest.approx(ev["baseline_step_ms"], rel=1e-12)
    # the parts add up to it: the pass (evaluate's verify_ms) and the engine's host work per step
    parts = sum(row[f"{p}_ms"] for p in ("linear", "attention", "elementwise", "communication", "head", "overhead",
                                         "host"))
    assert parts == pytest.approx(row["time_ms"], rel=1e-12)
    assert row["time_ms"] - row["host_ms"] == pytest.approx(ev["verify_ms"], rel=1e-12)
    assert row["host_ms"] == pytest.approx(ev["overhead_ms"], rel=1e-9, abs=1e-12)


def test_forward_prices_the_engines_allreduce_and_says_so(capsys) -> None:
    """The 70B TP 8 example of the report: the engines' custom all-reduce in a CUDA graph, not eager NCCL."""
    setup = ("forward", "-H", "h100-sxm", "-m", "llama-3.1-70b", "--tp", "8", "--batch", "1", "--context", "4096",
             "--tokens", "1")
    default, vllm, sglang, hf = (_json(capsys, *setup, *e)[0] for e in ((), ("-e", "vllm"), ("-e", "sglang"),
                                                                        ("-e", "hf")))
    assert default == vllm  # the default engine is evaluate's
    assert vllm["allreduce"] == sglang["allreduce"] == "custom" and hf["allreduce"] == "nccl"
    # custom all-reduce is several times cheaper than eager NCCL at one token; the kernels are the same
    assert vllm["communication_ms"] == sglang["communication_ms"] < hf["communication_ms"] / 3
    assert vllm["linear_ms"] == hf["linear_ms"]
    # the engines differ in their exposed host work per step, vLLM 200 us and SGLang 100 us
    assert vllm["host_ms"] == pytest.approx(0.2) and sglang["host_ms"] == pytest.approx(0.1)
    assert vllm["overhead_ms"] == pytest.approx(0.015)  # one CUDA-graph replay
    # --allreduce replaces the engine's kind inside the graph: NCCL captured in the graph costs more than custom
    nccl = _json(capsys, *setup, "-e", "vllm", "--allreduce", "nccl_graph")[0]
    assert nccl["allreduce"] == "nccl_graph" and nccl["communication_ms"] > vllm["communication_ms"]
    # the table's title names the engine and the all-reduce it is priced for
    code, out, _ = run(capsys, *setup, "-e", "sglang")
    assert code == 0 and "engine sglang: CUDA graph, custom all-reduce" in " ".join(out.split())
    code, out, _ = run(capsys, *setup, "-e", "hf")
    assert code == 0 and "engine hf: eager (no CUDA graph), nccl all-reduce" in " ".join(out.split())


def test_forward_title_names_eager_and_padded_rows(capsys) -> None:
    """vLLM captures passes up to 512 tokens: batch 3 pads to 4 tokens, 3 x 200 runs eager with NCCL."""
    args = ("forward", "-H", "h100-sxm", "-m", "llama-3.1-70b", "--tp", "8", "--batch", "3", "--tokens", "1,2,200")
    rows = _json(capsys, *args)
    assert [r["allreduce"] for r in rows] == ["custom", "custom", "nccl"]
    # a padded graph's kernels are the pass less one graph replay (15 us): its GEMMs run at the padded batch,
    # its attention reads the real sequences only, as evaluate prices it
    assert [r["overhead_ms"] for r in rows[:2]] == pytest.approx([0.015, 0.015], abs=1e-12)
    code, out, _ = run(capsys, *args)
    title = " ".join(out.split())
    assert code == 0 and "CUDA graph, custom all-reduce; eager (no CUDA graph), nccl all-reduce at tokens 600" in title
    assert "batch padded to the graph's at tokens 3, 6" in title


@pytest.mark.parametrize(("engine", "batch", "tokens"), [("vllm", 1, "1,512"), ("sglang", 9, "1,4"),
                                                         ("vllm", 3, "1,200"), ("hf", 1, "1")])
def test_ops_are_forwards_kernels(capsys, engine, batch, tokens) -> None:
    """`ops` lists the kernels of the pass `forward` prices: one layer x layers + the head = forward less the
    engine's launch and host work; its all-reduce row is forward's communication per layer."""
    setup = ("-H", "h100-sxm", "-m", "llama-3.1-70b", "--tp", "8", "--batch", str(batch), "--context", "2048",
             "--tokens", tokens, "--engine", engine)
    rows = _json(capsys, "ops", *setup)
    fwd = _json(capsys, "forward", *setup)
    layers = 80
    for f in fwd:
        mine = [r for r in rows if r["tokens"] == f["tokens"]]
        head = sum(r["time_ms"] for r in mine if r["op"] in ("embedding", "lm_head", "sampling"))
        layer = sum(r["time_ms"] for r in mine if r["op"] not in ("embedding", "lm_head", "sampling"))
        kernels = f["time_ms"] - f["overhead_ms"] - f["host_ms"]
        assert layer * layers + head == pytest.approx(kernels, rel=1e-9)
        [ar] = [r["time_ms"] for r in mine if r["op"] == "allreduce"]
        assert ar * layers == pytest.approx(f["communication_ms"], rel=1e-9)


def test_ops_allreduce_row_follows_the_engine(capsys) -> None:
    setup = ("ops", "-H", "h100-sxm", "-m", "llama-3.1-70b", "--tp", "8", "--context", "4096", "--tokens", "1")

    def allreduce_ms(*extra: str) -> float:
        [ms] = [r["time_ms"] for r in _json(capsys, *setup, *extra) if r["op"] == "allreduce"]
        return ms

    custom, eager = allreduce_ms("-e", "sglang"), allreduce_ms("-e", "hf")
    assert allreduce_ms() == allreduce_ms("-e", "vllm") == custom  # default: vLLM, custom all-reduce
    assert custom < eager / 3
    assert allreduce_ms("-e", "vllm", "--allreduce", "nccl") == pytest.approx(eager)
    code, out, _ = run(capsys, *setup, "-e", "sglang")
    assert code == 0 and "engine sglang: CUDA graph, custom all-reduce" in " ".join(out.split())


def test_empty_dtype_is_refused_not_bf16(capsys) -> None:
    """`--dtype ''` used to price bf16 weights and exit 0."""
    code, out, err = run(capsys, "ops", "-H", "h100-sxm", "-m", "llama-3.1-8b", "--dtype", "")
    assert code == 2 and out == "" and err.startswith("error: --dtype must be one of") and err.count("\n") == 1
    # aliases of a dtype still read
    a = _json(capsys, "forward", "-H", "h100-sxm", "-m", "llama-3.1-8b", "--tokens", "1", "--weight-dtype", "FP8")
    b = _json(capsys, "forward", "-H", "h100-sxm", "-m", "llama-3.1-8b", "--tokens", "1", "--weight-dtype", "fp8")
    assert a == b


@pytest.mark.parametrize("args", [
    ("forward", "-H", "h100-sxm", "-m", "llama-3.1-70b", "--tp", "8", "--batch", "3", "--context", "4096",
     "--tokens", "1,2,200"),
    ("forward", "-H", "h100-sxm", "-m", "llama-3.1-70b", "--tp", "8", "-e", "sglang"),
    ("ops", "-H", "h100-sxm", "-m", "llama-3.1-70b", "--tp", "8", "--tokens", "1,512", "-e", "trtllm"),
])
def test_tables_fit_80_columns_uncut(capsys, monkeypatch, args) -> None:
    """At 80 columns nothing is ellipsized or cut: every line fits, every name and number reads whole."""
    monkeypatch.setenv("COLUMNS", "80")
    from specsim.cli._format import fmt_value

    code, out, _ = run(capsys, *args)
    assert code == 0 and "\u2026" not in out
    assert max(len(line) for line in out.splitlines()) <= 80
    words = set(out.split())
    assert {"llama-3.1-70b", "h100-sxm"} <= words | {w.rstrip(";,)") for w in words}
    rows = _json(capsys, *args)
    for row in rows:
        for key, value in row.items():
            assert key in words
            assert fmt_value(value) in words, (key, value)
