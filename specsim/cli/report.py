"""The report command: a capacity-planning report (HTML, Markdown, figures, plan.json) for a scenario."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from specsim.cli._format import check_format, emit_summary
from specsim.cli._options import CostModel, DeploymentFile, Engine, Fmt, scenario_of
from specsim.cli.main import app


@app.command()
def report(
    scenario: Annotated[Path | None, typer.Argument(help="scenario YAML (or none, with --deployment: the "
                                                        "question its runs asked)")] = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="folder for report.html, report.md, "
                                                                "figures/ and plan.json")] = Path("report"),
    reference: Annotated[Path | None, typer.Option(help="Vidur reference timings, to check the hardware "
                                                        "profile's fit (default: ../shared/reference/vidur)")] = None,
    engine: Engine = None,
    cost_model: CostModel = None,
    deployment: DeploymentFile = None,
    fmt: Fmt = "table",
) -> None:
    """A capacity-planning report: the recommendation, verification cost, speedup by draft and k, the
    optimal k over batch and acceptance, the policy over the load, sensitivity, memory, capacity and
    cost, and the hardware profile's provenance."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from specsim.files import check_folder_target
    from specsim.plan.text import wrap
    from specsim.report.assemble import STEPS  # matplotlib loads only for this command
    from specsim.report.write import OUTPUTS, write_report
    check_format(fmt)
    t0 = time.perf_counter()
    check_folder_target(output, OUTPUTS)
    # bad input fails here, before any progress bar or file
    s = scenario_of(scenario, cost_model, engine, deployment)
    console = Console(file=sys.stderr)
    with Progress(TextColumn("[bold]report[/bold] {task.description:<26}"), BarColumn(), TimeElapsedColumn(),
                  console=console, transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task("loading", total=len(STEPS))
        seen: list[str] = []

        def tick(step: str) -> None:
            if seen:
                bar.advance(task)
            seen.append(step)
            bar.update(task, description=step)

        result = write_report(s, output, reference, tick)
        bar.advance(task)
    seconds = time.perf_counter() - t0
    configs = [f for f in result.files if f.startswith("engine-configs/")]
    wrote = (f"wrote {output}/report.html, report.md, plan.json, {len(result.figures)} figures in {output}/figures/"
             + (f" and {len(configs)} engine configs in {output}/engine-configs/" if configs else "")
             + f" ({seconds:.1f} s)")
    width = Console(file=sys.stdout).width  # the answer wrapped at spaces for the terminal (a path stands alone)
    line = "\n".join([*wrap(result.recommendation, width), *wrap(wrote, width)])
    emit_summary(fmt, line, {"recommendation": result.recommendation, "output": str(output),
                             "files": ["report.html", "report.md", "plan.json",
                                       *(f"figures/{f}" for f in result.figures), *result.files],
                             "seconds": round(seconds, 2)})
