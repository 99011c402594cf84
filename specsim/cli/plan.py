"""Commands that plan: plan, sweep."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from specsim.advise.plan import plan_scenario as make_plan
from specsim.cli._format import (
    check_format,
    console,
    emit_records,
    emit_summary,
    parse_float_list,
    parse_int_list,
    working,
)
from specsim.cli._options import CostModel, DeploymentFile, Engine, Fmt, scenario_of
from specsim.cli.main import app
from specsim.errors import SpecsimError
from specsim.files import Outputs
from specsim.plan.summary import plan_dict, plan_markdown
from specsim.plan.text import answer_lines, detail_lines, wrap


@app.command()
def plan(
    scenario: Annotated[Path | None, typer.Argument(help="scenario YAML (or none, with --deployment: the "
                                                        "question its runs asked)")] = None,
    engine: Engine = None,
    cost_model: CostModel = None,
    deployment: DeploymentFile = None,
    fmt: Fmt = "table",
    engine_configs: Annotated[Path | None, typer.Option(
        "--engine-configs", help="also write each engine's configuration as DIR/<engine>.json")] = None,
    details: Annotated[bool, typer.Option(
        "--details", help="after the answer, every step figure, the acceptance band, the simulations, each "
        "engine's configuration and the sources behind the answer (table format)")] = False,
) -> None:
    """The decision for a scenario: the draft and k (or tree) per load, the policy over batch size and what to
    run in each engine; --details for everything behind it."""
    check_format(fmt)
    if details and fmt != "table":
        raise SpecsimError(f"--details is for the table format: --format {fmt} already holds every detail")
    s = scenario_of(scenario, cost_model, engine, deployment)  # bad input fails here, before the spinner
    with working(f"planning {s.name}..."):
        p = make_plan(s)
        data = plan_dict(p)
    if engine_configs is not None:
        _write_engine_configs(engine_configs, data["engine_configs"])
    if fmt == "json":
        print(json.dumps(data, indent=2, default=float))
        return
    if fmt == "markdown":
        print(plan_markdown(p), end="")
        return
    if fmt == "csv":
        emit_records(data["buckets"], "csv")
        return
    con = console()
    lines = answer_lines(p, data, con.width)
    lines += detail_lines(p, data, con.width) if details else [
        "", *wrap("--details: every step figure, the acceptance band, the engine configs and the sources", con.width)]
    head = len(wrap(data["recommendation"], con.width))
    for i, line in enumerate(lines):  # wrapped here at spaces: rich neither wraps nor cuts them
        con.print(line, markup=False, highlight=False, soft_wrap=True, style="bold" if i < head else None)


def _write_engine_configs(folder: Path, configs: dict[str, Any]) -> None:
    """DIR/<engine>.json for each engine that runs the plan (all or nothing; DIR made if absent)."""
    if folder.exists() and not folder.is_dir():
        raise SpecsimError(f"--engine-configs {folder}: not a folder")
    if not folder.parent.is_dir():
        raise SpecsimError(f"--engine-configs {folder}: folder {folder.parent} does not exist")
    if not folder.exists():
        folder.mkdir()
    from specsim.engines.configs.layout import engine_config_files

    with Outputs() as outs:  # the same files, laid out the same way, as a report's engine-configs/
        for rel, text in engine_config_files(configs).items():
            outs.path(folder / Path(rel).name, "--engine-configs").write_text(text)


@app.command()
def sweep(
    scenario: Annotated[Path | None, typer.Argument(help="scenario YAML (or none, with --deployment)")] = None,
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
    deployment: DeploymentFile = None,
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
        s = scenario_of(scenario, cost_model, engine, deployment)
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
