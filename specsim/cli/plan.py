"""Commands that plan: plan, sweep."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import numpy as np
import pandas as pd
import typer
from rich.markup import escape

from specsim.cli._format import check_format, console, emit, emit_summary, parse_float_list, parse_int_list
from specsim.cli._options import CostModel, Engine, Fmt, overridden
from specsim.cli.main import app
from specsim.errors import SpecsimError
from specsim.files import Outputs
from specsim.plan.optimize import plan as make_plan
from specsim.plan.scenario import load_scenario
from specsim.plan.summary import plan_dict, plan_markdown


@app.command()
def plan(scenario: Path, engine: Engine = None, cost_model: CostModel = None, fmt: Fmt = "table") -> None:
    """Best draft and k per load bucket, the policy over batch size, and engine configuration."""
    check_format(fmt)
    p = make_plan(overridden(load_scenario(scenario), cost_model, engine))
    data = plan_dict(p)
    if fmt == "json":
        print(json.dumps(data, indent=2, default=float))
        return
    if fmt == "markdown":
        print(plan_markdown(p), end="")
        return
    rows = pd.DataFrame(data["buckets"])
    if fmt == "csv":
        emit(rows, "csv")
        return
    con = console()
    con.print(f"[bold]{escape(data['recommendation'])}[/bold]")
    cols = ["bucket", "weight", "batch", "context", "draft", "k", "tokens_per_step", "step_ms", "baseline_step_ms",
            "speedup", "throughput_tok_s", "ms_per_token"]
    emit(rows[cols], "table", f"{data['scenario']}: {data['model']} on {data['tp']}x {data['hardware']} "
         f"({data['engine']}), objective {data['objective']}")
    if data["policy"]:
        pol = ", ".join(f"batch {s['batch_from']}-{s['batch_to']}: "
                        + ("does not fit" if s["k"] < 0 else f"k={s['k']}" if s["k"] else "off")
                        for s in data["policy"])
        con.print(f"policy for {data['draft']}: {pol}", markup=False)
    if data["crossover_batch"]:
        con.print("crossover batch (stops paying): " + ", ".join(
            f"{k} {v if v is not None else '> grid'}" for k, v in data["crossover_batch"].items()), markup=False)
    for engine, cfg in data["engine_configs"].items():
        if cfg is not None and engine != "note":
            con.print(f"[dim]{escape(engine)}:[/dim] {escape(json.dumps(cfg))}", soft_wrap=True)
    for note in data["notes"]:
        con.print(f"[yellow]note:[/yellow] {escape(note)}")


@app.command()
def sweep(
    scenario: Annotated[Path, typer.Argument(help="scenario YAML")],
    output: Annotated[Path, typer.Option("--output", "-o", help="CSV or .parquet (needs pyarrow)")] = Path("sweep.csv"),
    batch: Annotated[str | None, typer.Option("--batch", "-b", help="batch sizes (a list; default 1:1024:x2)")
                     ] = None,
    context: Annotated[str | None, typer.Option("--context", "-L", help="context lengths (a list; "
                                                "default 1024,4096,16384)")] = None,
    alpha_grid: Annotated[str, typer.Option("--alpha-grid", help="i.i.d. acceptance rates to sweep, e.g. "
                                            "0.5,0.7,0.9 (default: each draft's own profile)")] = "",
    max_k: Annotated[int | None, typer.Option("--max-k", help="largest k (default: the scenario's)")] = None,
    engine: Engine = None,
    cost_model: CostModel = None,
    fmt: Fmt = "table",
    batches: Annotated[str | None, typer.Option("--batches", hidden=True)] = None,
    contexts: Annotated[str | None, typer.Option("--contexts", hidden=True)] = None,
    alphas: Annotated[str | None, typer.Option("--alphas", hidden=True)] = None,
) -> None:
    """A tidy table of every (draft, k, batch, context[, alpha]) for notebooks."""
    from specsim.plan.sweep import sweep_frame

    check_format(fmt)
    if alphas is not None:
        raise SpecsimError("sweep: the acceptance axis is --alpha-grid (--alphas means per-position rates, as in "
                           "evaluate)")
    b_text = _one_of(batch, batches, "--batch", "1:1024:x2")
    c_text = _one_of(context, contexts, "--context", "1024,4096,16384")
    b = np.array(parse_int_list(b_text, "--batch"), float)
    c = np.array(parse_int_list(c_text, "--context"), float)
    if b.min() < 1 or b.max() > 1_000_000:
        raise SpecsimError("--batch: batch sizes must be in [1, 1000000]")
    if c.max() > 1_000_000_000:
        raise SpecsimError("--context: context lengths must be at most 1000000000")
    a = None
    if alpha_grid.strip():
        a = np.array(parse_float_list(alpha_grid, "--alpha-grid"))
        if np.any((a < 0) | (a > 1)):
            raise SpecsimError(f"--alpha-grid: rates must lie in [0, 1], got {alpha_grid!r}")
    points = len(b) * len(c) * (len(a) if a is not None else 1)
    if points > 200_000:
        raise SpecsimError(f"--batch x --context x --alpha-grid is {points:,} points; at most 200,000 per sweep")
    if max_k is not None and not 0 <= max_k <= 32:
        raise SpecsimError(f"--max-k must be in [0, 32], got {max_k}")
    if output.suffix not in (".csv", ".parquet"):
        raise SpecsimError(f"--output {output}: give a .csv or .parquet name")
    with Outputs() as outs:
        staged = outs.path(output)
        s = overridden(load_scenario(scenario), cost_model, engine)
        df = sweep_frame(s, b, c, a, s.max_k if max_k is None else max_k)
        if output.suffix == ".parquet":
            try:
                df.to_parquet(staged, index=False)
            except ImportError:
                raise SpecsimError("writing Parquet needs pyarrow (pip install pyarrow); or use a .csv name") from None
        else:
            df.to_csv(staged, index=False)
    emit_summary(fmt, f"wrote {output}: {len(df):,} rows ({', '.join(df.columns)})",
                 {"output": str(output), "rows": len(df), "columns": list(df.columns)})


def _one_of(value: str | None, old: str | None, option: str, default: str) -> str:
    """An option or its hidden old (plural) name, not both; the default when neither is given."""
    if value is not None and old is not None:
        raise SpecsimError(f"give {option} only ({option}s is its old name)")
    return value if value is not None else old if old is not None else default
