"""Commands about serving engines: `specsim engines list|show`."""

from __future__ import annotations

import typer

from specsim.cli._format import emit_mapping, emit_records
from specsim.cli._options import Fmt
from specsim.cli.main import app
from specsim.engines.profile import available, load_engine
from specsim.records import to_record

engines_app = typer.Typer(help="Serving engines as specsim prices them: list and show.", no_args_is_help=True)
app.add_typer(engines_app, name="engines")


@engines_app.command("list")
def engines_list(fmt: Fmt = "table") -> None:
    """The bundled engine profiles (and version variants)."""
    rows = []
    for name in available():
        e = load_engine(name)
        rows.append({"name": name, "graphs": e.cuda_graphs, "async": e.async_scheduling,
                     "spec overlapped": e.async_scheduling and not e.spec_sync, "drafting": e.draft_loop,
                     "all-reduce": e.allreduce, **({"version": e.version} if fmt != "table" else {})})
    emit_records(rows, fmt, "engine profiles (specsim engines show NAME for figures and sources)")


@engines_app.command("show")
def engines_show(name: str, fmt: Fmt = "table") -> None:
    """One engine profile (a bundled name or a YAML path): every figure and its source."""
    e = load_engine(name)
    data = to_record(e)
    data.pop("source_path")
    sources = data.pop("sources")
    flat: dict[str, object] = {}
    for key, value in data.items():
        flat[key] = value
        if key in sources:
            flat[f"  source of {key}"] = sources[key]
    flat["kernels"] = (f"{e.framework}'s where a GPU's profile holds them (its frameworks.{e.framework} block)"
                       if e.framework else "the GPU profile's own")
    flat["profile file"] = e.source_path
    emit_mapping(flat, fmt, f"engine: {e.name}")
