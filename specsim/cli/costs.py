"""Commands about the cost model: hardware, models, ops, forward, predict."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import numpy as np
import pandas as pd
import typer

from specsim.cli._format import check_format, emit, emit_summary, parse_int_list
from specsim.cli._options import (
    Batch,
    Context,
    CostModel,
    DtypeAlias,
    Engine,
    Fmt,
    Hardware,
    KvDtype,
    Model,
    Tokens,
    Tp,
    WeightDtype,
    batch_context,
    weight_dtype,
)
from specsim.cli.main import app
from specsim.cost import hardware as hwmod
from specsim.cost import model as modelmod
from specsim.cost.costmodel import describe
from specsim.cost.dtypes import KV_BYTES, canonical
from specsim.cost.forward import breakdown
from specsim.cost.measurements import predict_table, read_measurements, resolver
from specsim.cost.ops import head_ops, layer_ops
from specsim.engines.pass_parts import PARTS, EngineShape, engine_ops, engine_pass, engine_shape
from specsim.engines.profile import ALLREDUCE_KINDS, EngineProfile, load_engine
from specsim.engines.profile import available as available_engines
from specsim.errors import SpecsimError
from specsim.files import Outputs

DEFAULT_TOKENS = "1,2,4,8,16,32,64,128,256,512"


AllreduceOpt = Annotated[str | None, typer.Option(
    "--allreduce", help="all-reduce inside the engine's CUDA graphs: custom | nccl_graph | nccl (default: the "
                        "engine's; a pass outside a graph runs eager NCCL)")]


def _dtype(value: str, option: str, known: Iterable[str]) -> str:
    """`value` itself, or SpecsimError naming `option` and the accepted values (an empty value included)."""
    names = list(known)
    if not str(value).strip() or canonical(value) not in names:
        raise SpecsimError(f"{option} must be one of {' | '.join(names)}, got {value!r}")
    return value


@dataclass(frozen=True)
class _Pass:
    """What `ops` and `forward` resolved from their options: the profiles and where each point runs."""

    hw: hwmod.HardwareProfile
    model: modelmod.ModelSpec
    engine: EngineProfile
    where: EngineShape


def _resolve(hardware: str, model: str, tp: int, weight_dtype_: str | None, dtype_alias: str | None, kv_dtype: str,
             tokens: str, batch: str, context: str, cost_model: str | None, engine: str | None,
             allreduce: str | None) -> _Pass:
    from specsim.step.evaluate import DEFAULT_ENGINE  # the engine evaluate and plan price with by default

    q = np.array(parse_int_list(tokens, "--tokens"), dtype=float)
    if np.any(q < 1):
        raise SpecsimError("--tokens must be >= 1")
    b, L = batch_context(batch, context)
    dtype = weight_dtype(weight_dtype_, dtype_alias)
    _dtype(kv_dtype, "--kv-dtype", KV_BYTES)
    if allreduce is not None and allreduce not in ALLREDUCE_KINDS:
        raise SpecsimError(f"--allreduce must be one of {' | '.join(ALLREDUCE_KINDS)}, got {allreduce!r}")
    name = DEFAULT_ENGINE if engine is None else engine
    if not name.strip():
        raise SpecsimError(f"--engine must be one of {' | '.join(available_engines())} or a profile YAML, got ''")
    e = load_engine(name)
    if allreduce is not None:
        e = dataclasses.replace(e, allreduce=allreduce)
    hw = hwmod.load_hardware(hardware)
    m = modelmod.load_model(model)
    m.check_tp(tp, "--tp")
    if cost_model is not None:
        hw = hw.with_cost_model(cost_model)
    m.check_context(L, "--context")
    return _Pass(hw, m, e, engine_shape(e, b, q, L, tp, m.resolve_precision(dtype), kv_dtype))


def _at(tokens: np.ndarray, mask: np.ndarray) -> str:
    """The rows where `mask` holds, named by their tokens; a run of three rows or more as "first to last"."""
    out: list[str] = []
    i = 0
    while i < mask.size:
        if not mask[i]:
            i += 1
            continue
        j = i
        while j + 1 < mask.size and mask[j + 1]:
            j += 1
        run = [int(x) for x in tokens[i:j + 1]]
        out.append(f"{run[0]} to {run[-1]}" if len(run) > 2 else ", ".join(map(str, run)))
        i = j + 1
    return "tokens " + ", ".join(out)


def _engine_note(p: _Pass) -> str:
    """How the engine runs the pass, for a title: in a CUDA graph or eagerly, which all-reduce, padding."""
    es = p.where
    graphed = es.graphed.ravel()
    tokens = es.shape.tokens.ravel()
    tp1 = es.shape.tp == 1

    def kind(allreduce: str) -> str:
        return "no all-reduce (tp 1)" if tp1 else f"{allreduce} all-reduce"

    graph = f"CUDA graph, {kind(es.graph_allreduce)}"
    eager = f"eager (no CUDA graph), {kind('nccl')}"
    if graphed.all():
        how = graph
    elif not graphed.any():
        how = eager
    else:
        how = f"{graph}; {eager} at {_at(tokens, ~graphed)}"
    padded = (es.run_batch != es.shape.batch).ravel()
    if padded.any():
        how += f"; batch padded to the graph's at {_at(tokens, padded)}"
    return f"engine {p.engine.name}: {how}"


@app.command()
def ops(hardware: Hardware, model: Model, tokens: Tokens = DEFAULT_TOKENS, batch: Batch = "1",
        context: Context = "1024", tp: Tp = 1, weight_dtype_: WeightDtype = None, kv_dtype: KvDtype = "bf16",
        fmt: Fmt = "table", dtype_alias: DtypeAlias = None, cost_model: CostModel = None, engine: Engine = None,
        allreduce: AllreduceOpt = None) -> None:
    """Per-op FLOPs, bytes and time of one layer, plus the pass's embedding, LM head and sampling, as the
    engine runs the pass (its CUDA graph's batch padding and all-reduce; eager NCCL outside a graph).

    `tokens` in the output is the total new tokens in the pass (batch x tokens per sequence).
    """
    check_format(fmt)
    p = _resolve(hardware, model, tp, weight_dtype_, dtype_alias, kv_dtype, tokens, batch, context, cost_model,
                 engine, allreduce)
    shape = p.where.shape
    rows = []
    for op in engine_ops(p.where, lambda s: layer_ops(p.model, p.hw, s) + head_ops(p.model, p.hw, s)):
        for i, t in enumerate(shape.tokens):
            rows.append({"op": op.name, "tokens": int(t), "flops": float(op.flops[i]), "bytes": float(op.bytes_[i]),
                         "time_ms": float(op.time_s[i]) * 1e3, "bound": str(op.bound[i]),
                         "kernels": float(np.broadcast_to(op.kernels, op.time_s.shape)[i])})
    emit(pd.DataFrame(rows), fmt, f"one layer of {p.model.name} on {p.hw.name} (tp {tp}, batch "
         f"{shape.batch.flat[0]:g}, context {shape.context_len.flat[0]:g}); {_engine_note(p)}")


@app.command()
def forward(hardware: Hardware, model: Model, tokens: Tokens = DEFAULT_TOKENS, batch: Batch = "1",
            context: Context = "1024", tp: Tp = 1, weight_dtype_: WeightDtype = None, kv_dtype: KvDtype = "bf16",
            fmt: Fmt = "table", dtype_alias: DtypeAlias = None, cost_model: CostModel = None, engine: Engine = None,
            allreduce: AllreduceOpt = None) -> None:
    """Time of one engine step running the whole forward pass, split into the kernels' op families, the
    engine's launch of the pass (overhead: a CUDA-graph replay, or an eager pass's dispatch) and its host
    work per step (host) — at --tokens 1 the plain-decoding step `evaluate` and `plan` price."""
    check_format(fmt)
    p = _resolve(hardware, model, tp, weight_dtype_, dtype_alias, kv_dtype, tokens, batch, context, cost_model,
                 engine, allreduce)
    es = p.where
    run = engine_pass(p.engine, p.hw, p.model, es, engine_ops(es, lambda s: breakdown(p.model, p.hw, s).ops))
    parts = run.by_part()
    total = run.step_s
    df = pd.DataFrame({"tokens": es.shape.tokens.astype(int), "q_per_seq": es.shape.q_per_seq.astype(int),
                       "time_ms": total * 1e3})
    for f in PARTS:
        df[f"{f}_ms"] = parts[f] * 1e3
    df["time_per_token_ms"] = df["time_ms"] / df["tokens"]
    df["vs_first"] = df["time_ms"] / df["time_ms"].iloc[0]
    df["tflops"] = run.flops() / total / 1e12
    df["allreduce"] = es.allreduce
    emit(df, fmt, f"forward pass of {p.model.name} on {p.hw.name} (tp {tp}, batch {es.shape.batch.flat[0]:g}, "
         f"context {es.shape.context_len.flat[0]:g}; "
         f"{describe(p.hw)} cost model); {_engine_note(p)}")


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
