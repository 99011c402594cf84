"""The report command: a capacity-planning report (HTML, Markdown, figures, plan.json) for a scenario."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from specsim.cli.main import app


@app.command()
def report(
    scenario: Path,
    output: Annotated[Path, typer.Option("--output", "-o", help="folder for report.html, report.md, "
                                                                "figures/ and plan.json")] = Path("report"),
    reference: Annotated[Path | None, typer.Option(help="Vidur reference timings, to check the hardware "
                                                        "profile's fit (default: ../shared/reference/vidur)")] = None,
) -> None:
    """A capacity-planning report: the recommendation, verification cost, speedup by draft and k, the
    optimal k over batch and acceptance, the policy over the load, sensitivity, memory, capacity and
    cost, and the hardware profile's provenance."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from specsim.plan.scenario import load_scenario
    from specsim.report.build import STEPS, write_report  # matplotlib loads only for this command

    t0 = time.perf_counter()
    s = load_scenario(scenario)  # bad input fails here, before any progress bar or file
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
    print(result["recommendation"])
    print(f"wrote {output}/report.html, report.md, plan.json and {len(result['figures'])} figures in "
          f"{output}/figures/ ({time.perf_counter() - t0:.1f} s)")
