"""Commands about the cost model: hardware, models, ops, forward, predict."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import numpy as np
import pandas as pd
import typer

from specsim.calibration.measurements import predict_table, read_measurements, resolver
from specsim.cli._format import check_format, emit, emit_mapping, emit_summary, parse_int_list
from specsim.cli._options import (
    Batch,
    Context,
    CostModel,
    DtypeAlias,
    Fmt,
    Hardware,
    KvDtype,
    Model,
    Tokens,
    Tp,
    WeightDtype,
    check_batch_context,
    weight_dtype,
)
from specsim.cli.main import app
from specsim.cost import hardware as hwmod
from specsim.cost import model as modelmod
from specsim.cost.dtypes import weight_bytes
from specsim.cost.forward import FAMILIES, breakdown
from specsim.cost.ops import PassShape, head_ops, layer_ops, make_shape
from specsim.errors import SpecsimError
from specsim.files import Outputs

hardware_app = typer.Typer(help="Hardware profiles: list and show.", no_args_is_help=True)
models_app = typer.Typer(help="Model catalogue: list and show.", no_args_is_help=True)
app.add_typer(hardware_app, name="hardware")
app.add_typer(models_app, name="models")

DEFAULT_TOKENS = "1,2,4,8,16,32,64,128,256,512"


@hardware_app.command("list")
def hardware_list(fmt: Fmt = "table") -> None:
    """The bundled hardware profiles."""
    rows = []
    for name in hwmod.available():
        hw = hwmod.load_hardware(name)
        rows.append({"name": name, "description": hw.description, "bf16_tflops": hw.peak("bf16") / 1e12,
                     "fp8_tflops": (hw.peak_flops_per_s["fp8"] or np.nan) / 1e12,
                     "mem_bw_tb_s": hw.mem_bw_bytes_per_s / 1e12, "memory_gb": hw.memory_bytes / 1e9,
                     "sms": hw.sm_count})
    emit(pd.DataFrame(rows), fmt, "hardware profiles (dense peaks)")


@hardware_app.command("show")
def hardware_show(name: str, fmt: Fmt = "table") -> None:
    """One profile (a bundled name or a YAML path), with derived ridge points."""
    hw = hwmod.load_hardware(name)
    data = hw.to_yaml_dict()
    flat: dict[str, object] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            flat.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            flat[key] = value
    eff = hw.efficiency
    flat["ridge_flops_per_byte.bf16"] = hw.peak("bf16") * eff.gemm_compute / (hw.mem_bw_bytes_per_s * eff.memory)
    flat["source_path"] = hw.source_path
    emit_mapping(flat, fmt, f"hardware: {hw.name}")


@models_app.command("list")
def models_list(fmt: Fmt = "table") -> None:
    """The bundled model catalogue."""
    rows = []
    for name in modelmod.available():
        m = modelmod.load_model(name)
        rows.append({"name": name, "family": m.family, "params_b": m.n_params() / 1e9,
                     "active_params_b": m.n_active_params() / 1e9, "layers": m.n_layers, "hidden": m.hidden,
                     "heads": m.n_heads, "kv_heads": m.n_kv_heads, "experts": m.n_experts,
                     "kv_kib_per_token": m.kv_bytes_per_token() / 1024})
    emit(pd.DataFrame(rows), fmt, "model catalogue")


@models_app.command("show")
def models_show(name: str, fmt: Fmt = "table") -> None:
    """One model: architecture, parameters, bytes per dtype, KV bytes per token."""
    from dataclasses import asdict

    m = modelmod.load_model(name)

    data: dict[str, object] = asdict(m)
    data["params"] = m.n_params()
    data["active_params"] = m.n_active_params()
    for part, n in m.param_counts().items():
        data[f"params.{part}"] = n
    for dtype in ("bf16", "fp8", "int4"):
        data[f"weight_gb.{dtype}"] = m.n_params() * weight_bytes(dtype) / 1e9
    for dtype in ("bf16", "fp8"):
        data[f"kv_bytes_per_token.{dtype}"] = m.kv_bytes_per_token(dtype)
    emit_mapping(data, fmt, f"model: {m.name}")


AllreduceOpt = Annotated[str, typer.Option(
    "--allreduce", help="all-reduce implementation: nccl (eager) | nccl_graph | custom (under CUDA graphs)")]


def _ops_rows(hardware: str, model: str, tp: int, dtype: str, kv_dtype: str, tokens: str, batch: int,
              context: int, cost_model: str | None = None, allreduce: str = "nccl",
              ) -> tuple[PassShape, tuple[hwmod.HardwareProfile, modelmod.ModelSpec]]:
    q = np.array(parse_int_list(tokens, "--tokens"), dtype=float)
    if np.any(q < 1):
        raise SpecsimError("--tokens must be >= 1")
    check_batch_context(batch, context)
    hw = hwmod.load_hardware(hardware)
    m = modelmod.load_model(model)
    m.check_tp(tp, "--tp")
    if cost_model is not None:
        hw = hw.with_cost_model(cost_model)
    shape = make_shape(batch, q, context, tp, dtype, kv_dtype, allreduce)
    return shape, (hw, m)


@app.command()
def ops(hardware: Hardware, model: Model, tokens: Tokens = DEFAULT_TOKENS, batch: Batch = 1, context: Context = 1024,
        tp: Tp = 1, weight_dtype_: WeightDtype = None, kv_dtype: KvDtype = "bf16", fmt: Fmt = "table",
        dtype_alias: DtypeAlias = None, cost_model: CostModel = None, allreduce: AllreduceOpt = "nccl") -> None:
    """Per-op FLOPs, bytes and time of one layer, plus the pass's embedding, LM head and sampling.

    `tokens` in the output is the total new tokens in the pass (batch x tokens per sequence).
    """
    check_format(fmt)
    dtype = weight_dtype(weight_dtype_, dtype_alias)
    shape, (hw, m) = _ops_rows(hardware, model, tp, dtype, kv_dtype, tokens, batch, context, cost_model, allreduce)
    rows = []
    for op in layer_ops(m, hw, shape) + head_ops(m, hw, shape):
        for i, t in enumerate(shape.tokens):
            rows.append({"op": op.name, "tokens": int(t), "flops": float(op.flops[i]), "bytes": float(op.bytes_[i]),
                         "time_ms": float(op.time_s[i]) * 1e3, "bound": str(op.bound[i]),
                         "kernels": float(np.broadcast_to(op.kernels, op.time_s.shape)[i])})
    emit(pd.DataFrame(rows), fmt, f"one layer of {m.name} on {hw.name} (tp {tp}, batch {batch}, context {context})")


@app.command()
def forward(hardware: Hardware, model: Model, tokens: Tokens = DEFAULT_TOKENS, batch: Batch = 1,
            context: Context = 1024, tp: Tp = 1, weight_dtype_: WeightDtype = None, kv_dtype: KvDtype = "bf16",
            fmt: Fmt = "table", dtype_alias: DtypeAlias = None, cost_model: CostModel = None,
            allreduce: AllreduceOpt = "nccl") -> None:
    """Time of the whole forward pass, all layers, head and overheads, split by op family."""
    check_format(fmt)
    dtype = weight_dtype(weight_dtype_, dtype_alias)
    shape, (hw, m) = _ops_rows(hardware, model, tp, dtype, kv_dtype, tokens, batch, context, cost_model, allreduce)
    br = breakdown(m, hw, shape)
    fam = br.by_family()
    total = br.time_s
    df = pd.DataFrame({"tokens": shape.tokens.astype(int), "q_per_seq": shape.q_per_seq.astype(int),
                       "time_ms": total * 1e3})
    for f in FAMILIES:
        df[f"{f}_ms"] = fam[f] * 1e3
    df["time_per_token_ms"] = df["time_ms"] / df["tokens"]
    df["vs_first"] = df["time_ms"] / df["time_ms"].iloc[0]
    df["tflops"] = br.flops() / total / 1e12
    emit(df, fmt, f"forward pass of {m.name} on {hw.name} (tp {tp}, batch {batch}, context {context}; "
         f"{br.cost_model} cost model)")


@app.command()
def predict(measurements: Annotated[Path, typer.Argument(help="measurement CSV (README: measurement tables)")],
            hardware: Annotated[str | None, typer.Option(
                "--hardware", "-H", help="profile for every row (default: each row's device)")] = None,
            output: Annotated[Path, typer.Option("--output", "-o", help="CSV to write")] = Path("predicted.csv"),
            fmt: Fmt = "table") -> None:
    """Copy a measurement table and add `predicted_ms` (README: measurement tables)."""
    check_format(fmt)
    with Outputs() as outs:
        staged = outs.path(output)  # checked before any work
        df = read_measurements(measurements, need_time=False)
        out = predict_table(df, resolver(hardware))
        out.to_csv(staged, index=False)
    missing = int(out["predicted_ms"].isna().sum())
    if missing:
        print(f"{missing} row(s) could not be predicted (unknown op or missing columns)", file=sys.stderr)
    have = out["time_ms"].notna() & out["predicted_ms"].notna()
    err = (float(((out.loc[have, "predicted_ms"] / out.loc[have, "time_ms"]) - 1).abs().mean() * 100)
           if have.any() else None)
    line = f"wrote {output}: {len(out)} rows" + (f", mean absolute error {err:.1f}% on {int(have.sum())} timed rows"
                                                 if err is not None else "")
    emit_summary(fmt, line, {"output": str(output), "rows": len(out), "predicted_rows": len(out) - missing,
                             "timed_rows": int(have.sum()), "mean_abs_error_pct": err})
