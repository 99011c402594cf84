"""The README's Speed section, from the benchmark scripts' own JSON (benchmarks/*.py --json), recorded in
benchmarks/results.json by tools/readme_figures.py."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tools.readme_common import Figures, SourceError, count, span, word
from tools.readme_slow import bench_json


def refresh_speed() -> dict[str, Any]:
    """Every benchmark the Speed table quotes, each as its script runs it (minutes)."""
    return {
        "cli": bench_json("bench_cli.py"),
        "cli_cold": bench_json("bench_cli.py", "--cold", "--only", "plan,validate"),
        "plan": bench_json("bench_plan.py", "--only", "sweep"),
        "grid": bench_json("bench_grid.py"),
        "simulate": bench_json("bench_simulate.py", "--only", "closed,planner"),
        "costmodel": bench_json("bench_costmodel.py"),
    }


def _best(cli: Mapping[str, Any], kind: str) -> dict[str, float]:
    out = {c["label"]: c["best_s"] for c in cli["cases"] if c["kind"] == kind}
    if not out:
        raise SourceError(f"benchmarks/results.json: bench_cli.py timed no {kind!r} case")
    return out


def _traffic(reports: Mapping[str, float]) -> tuple[str, float]:
    hits = [(label, t) for label, t in reports.items() if "traffic" in label]
    if len(hits) != 1:
        raise SourceError("bench_cli.py: not one traffic scenario among the reports")
    return hits[0]


def _rows(data: Mapping[str, Any], serving_s: float | None, serving_rows: str) -> list[tuple[str, str, str]]:
    cli, cold = data["cli"], data["cli_cold"]
    lists = {**_best(cli, "version"), **_best(cli, "list")}
    plans, cold_plans = _best(cli, "plan"), _best(cold, "plan")
    reports = _best(cli, "report")
    traffic, traffic_s = _traffic(reports)
    analytic = [t for label, t in reports.items() if label != traffic]
    floor = max(c["floor_s"] for c in cli["cases"] if c["label"] == traffic)
    over = f"; over the {floor:g} s floor" if traffic_s > floor else ""
    validate = _best(cli, "validate")["validate --published"]
    sweep, grid, sim, cm = data["plan"]["sweep"], data["grid"], data["simulate"], data["costmodel"]
    planner, closed = sim["planner"], sim["closed"]
    spec = next(k for k in planner if k not in ("requests", "model", "hardware", "draft", "off"))
    moe = [cm["roofline"][m]["passes_per_s"] / 1e6 for m in cm["roofline"] if m != "llama-3.1-70b"]
    table = cm.get("table")
    fits = {c["label"]: c["best_s"] for c in cli["cases"] if c["kind"] == "fit"}  # recorded since issue 32
    fit_row = [("`fit-runs` of the bundled real runs", "`python benchmarks/bench_cli.py --only fit`",
                ", ".join(f"{t:.1f} s" for t in fits.values()) + " (four runs, each fitting round simulating them)")
               ] if fits else []
    return [
        ("start-up, listings", "`python benchmarks/bench_cli.py --only version,list`",
         ", ".join(f"`{label}` {t:.2f} s" for label, t in lists.items())
         + f" (a fresh interpreter, best of {cli['repeats']})"),
        (f"a plan (the {word(len(plans))} analytic scenarios)", "`python benchmarks/bench_cli.py --only plan`",
         f"{span(plans.values(), 2)} s per CLI call, interpreter start included; {span(cold_plans.values(), 2)} s "
         "on a machine's very first run (`--cold`: the priors catalogue fitted once, then cached in "
         "`~/.cache/specsim`)"),
        ("`validate --published`", "`python benchmarks/bench_cli.py --only validate`",
         f"{validate:.1f} s ({_best(cold, 'validate')['validate --published']:.1f} s `--cold`)"),
        (f"a sweep of {sweep['configurations'] / 1e6:.1f} M configurations", "`python benchmarks/bench_plan.py`",
         f"{sweep['best_s']:.2f} s (one vectorised call)"),
        (f"{count(grid['mixed']['rows'])} rows of `evaluate --grid`", "`python benchmarks/bench_grid.py`",
         f"{grid['mixed']['best_s']:.2f} s ({grid['layouts']['best_s']:.2f} s for {count(grid['layouts']['rows'])} "
         "DeepSeek-V3 MTP rows over four layouts)"),
        ("a report", "`python benchmarks/bench_cli.py --only report`",
         f"{span(analytic, 1)} s for the {word(len(analytic))} analytic scenarios; {traffic_s:.1f} s for the traffic "
         f"scenario (the SLO plan's serial simulations and the serving section's{over})"),
        (f"{count(planner['requests'])} simulated requests", "`python benchmarks/bench_simulate.py`",
         f"{planner[spec]:.1f} s ({planner['model']} on {planner['hardware']}, {planner['draft']} at {spec}, the "
         f"step table's build included; {planner['off']:.1f} s without speculation)"),
        ("a closed-loop frontier: 64 concurrencies x 2 configurations x 1,000 requests",
         "`python benchmarks/bench_simulate.py` (`closed_loop_speed`)",
         f"{closed['jobs_2']['wall_s']:.1f} s on 2 processes, {closed['jobs_1']['wall_s']:.1f} s on one "
         "(Llama-3.1-8B, H100, EAGLE-3 k = 3, 1024 / 1024 tokens at range ratio 0.8)"),
        (f"`validate --serving` ({serving_rows} rows, both modes)", "`time specsim validate --serving`",
         "—" if serving_s is None else f"{serving_s:.0f} s"),
        ("forward passes (the cost model)", "`python benchmarks/bench_costmodel.py`",
         f"{cm['roofline']['llama-3.1-70b']['passes_per_s'] / 1e6:.2f} M passes/s (Llama-70B), {span(moe, 2)} M/s "
         "(Mixtral, DeepSeek-V3)" + ("" if table is None else f"; table backend {table['passes_per_s'] / 1e6:.2f} "
                                     f"M/s after {table['build_s']:.1f} s to build its grids")),
        *fit_row,
    ]


def machine_phrase(rec: Mapping[str, Any]) -> str:
    return f"a {rec['cores']}-core machine ({rec['cpu']}, Python {rec['python']}, {rec['date']})"


def speed_figures(rec: Mapping[str, Any], serving: Mapping[str, Any] | None, f: Figures) -> None:
    """The Speed table (its serving row from the serving record) and the intro's "in about a second"."""
    serving_s = None if serving is None else float(serving["data"]["seconds"])
    rows = serving and sum(g["rows"] for g in serving["data"]["groups"]
                           if g["group"] == "OVERALL" and g["mode"] == "priors")
    lines = ["Measured by the scripts in `benchmarks/` (not part of the test run) on",
             f"{machine_phrase(rec)}; `python tools/readme_figures.py`",
             "records them in `benchmarks/results.json` and writes this table from there:",
             "", "| what | command | time |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in _rows(rec["data"], serving_s, count(rows or 0))]
    f["speed.table"] = "\n".join(lines)
    slowest = max(_best(rec["data"]["cli"], "plan").values())
    f["speed.plan_phrase"] = "about a second" if slowest < 1.5 else f"about {round(slowest)} seconds"
