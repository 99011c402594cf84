"""Commands that plan: plan, sweep."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import numpy as np
import pandas as pd
import typer

from specsim.cli._format import check_format, emit, parse_int_list
from specsim.cli.main import app
from specsim.errors import SpecsimError
from specsim.plan.optimize import plan as make_plan
from specsim.plan.scenario import load_scenario
from specsim.plan.summary import plan_dict, plan_markdown

Fmt = Annotated[str, typer.Option("--format", "-f", help="table | json | csv | markdown")]


@app.command()
def plan(scenario: Path, fmt: Fmt = "table") -> None:
    """Best draft and k per load bucket, the policy over batch size, and engine configuration."""
    check_format(fmt, ("table", "json", "csv", "markdown"))
    p = make_plan(load_scenario(scenario))
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
    from rich.console import Console

    console = Console(width=max(120, Console().width))
    console.print(f"[bold]{data['recommendation']}[/bold]")
    cols = ["bucket", "weight", "batch", "context", "draft", "k", "tokens_per_step", "step_ms", "baseline_step_ms",
            "speedup", "throughput_tok_s", "ms_per_token"]
    emit(rows[cols], "table", f"{data['scenario']}: {data['model']} on {data['tp']}x {data['hardware']}, "
         f"objective {data['objective']}")
    if data["policy"]:
        pol = ", ".join(f"batch {s['batch_from']}-{s['batch_to']}: "
                        + ("does not fit" if s["k"] < 0 else f"k={s['k']}" if s["k"] else "off")
                        for s in data["policy"])
        console.print(f"policy for {data['draft']}: {pol}")
    if data["crossover_batch"]:
        console.print("crossover batch (stops paying): " + ", ".join(
            f"{k} {v if v is not None else '> grid'}" for k, v in data["crossover_batch"].items()))
    for engine, cfg in data["engine_configs"].items():
        if cfg is not None and engine != "note":
            console.print(f"[dim]{engine}:[/dim] {json.dumps(cfg)}", soft_wrap=True)
    for note in data["notes"]:
        console.print(f"[yellow]note:[/yellow] {note}")


@app.command()
def sweep(
    scenario: Path,
    output: Annotated[Path, typer.Option("--output", "-o", help="CSV or .parquet (needs pyarrow)")] = Path("sweep.csv"),
    batches: Annotated[str, typer.Option(help="batch sizes")] = "1:1024:x2",
    contexts: Annotated[str, typer.Option(help="context lengths")] = "1024,4096,16384",
    alphas: Annotated[str, typer.Option(help="i.i.d. acceptance rates (empty: each draft's own profile)")] = "",
    max_k: Annotated[int | None, typer.Option(help="largest k (default: the scenario's)")] = None,
) -> None:
    """A tidy table of every (draft, k, batch, context[, alpha]) for notebooks."""
    from specsim.plan.sweep import sweep_frame

    s = load_scenario(scenario)
    b = np.array(parse_int_list(batches, "--batches"), float)
    c = np.array(parse_int_list(contexts, "--contexts"), float)
    a = None
    if alphas.strip():
        try:
            a = np.array([float(x) for x in alphas.split(",")])
        except ValueError:
            raise SpecsimError(f"--alphas: expected numbers like 0.6,0.7,0.8, got '{alphas}'") from None
    df = sweep_frame(s, b, c, a, s.max_k if max_k is None else max_k)
    tmp = output.with_name(output.name + ".tmp")
    if output.suffix == ".parquet":
        try:
            df.to_parquet(tmp, index=False)
        except ImportError:
            raise SpecsimError("writing Parquet needs pyarrow (pip install pyarrow); or use a .csv name") from None
    else:
        df.to_csv(tmp, index=False)
    tmp.replace(output)
    print(f"wrote {output}: {len(df):,} rows ({', '.join(df.columns)})")
