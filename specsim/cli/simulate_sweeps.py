"""What `specsim simulate` prints and writes for a load sweep: a sweep's tables (one per draft and policy), and a
sweep read as the throughput-interactivity frontier (advise/benchmark.py). Both speak the clients' vocabulary
(`simulate.client.LABELS`: ms, "median"), the same names as one comparison's table (simulate_output.py); a CSV or
JSON carries the clients' columns first and the simulator's raw ones (seconds) after them."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from specsim.cli._format import console, emit, markdown_table, plain, print_json, print_rows_table
from specsim.cli.simulate_output import curve_start_rps, sig
from specsim.simulate.client import LABELS

if TYPE_CHECKING:
    from specsim.advise.benchmark import Frontier
    from specsim.advise.simulation import Setup

#: A sweep's table columns after its load point ("arrived_rps" is not a row column: the mean arrival rate of the
#: requests each rate simulated, `_arrived`).
SWEEP_COLUMNS = ("arrived_rps", "ttft_p99_ms", "tpot_median_ms", "tpot_p99_ms", "output_tok_s", "goodput_rps",
                 "cost_per_mtok_usd")
#: The frontier's table columns after its load point.
FRONTIER_COLUMNS = ("output_tok_s_per_gpu", "per_user_tok_s", "tpot_mean_ms", "tpot_p99_ms", "ttft_mean_ms",
                    "acceptance_length", "throughput_ratio")


def requests_line(rows: pd.DataFrame, load: str) -> str:
    """What every load point simulated: the requests each sent, and which completed fewer (requests longer than
    the KV cache are rejected)."""
    sent = rows["requests"].astype(int)
    size = f"{sent.iloc[0]:,}" if sent.nunique() == 1 else f"{sent.min():,}-{sent.max():,}"
    short = rows[rows["completed"] < rows["requests"]]
    done = "all completed" if short.empty else f"{len(short)} of {len(rows)} rows completed fewer"
    line = f"requests simulated per load point: {size}; {done}"
    if "prefix_hit_share" in rows and rows["prefix_hit_share"].notna().any():
        hit = rows["prefix_hit_share"].astype(float)
        share = f"{hit.min():.0%}" if hit.max() - hit.min() < 0.005 else f"{hit.min():.0%}-{hit.max():.0%}"
        line += f"; prompt tokens served from the prefix cache: {share}"
    return line


def _arrived(setup: Setup, rates: list[float] | None) -> dict[float, float | None]:
    """The mean arrival rate of the requests each swept rate simulated (the same seeded requests the sweep
    generated, `simulation._load_points`), by the rate its rows carry."""
    from specsim.advise.traffic import stationary
    from specsim.scenario.traffic import generate_requests

    out: dict[float, float | None] = {}
    for rate in list(rates) if rates else [None]:
        traffic = setup.traffic if rate is None else stationary(setup.traffic, rate)
        label = float(traffic.mean_rate_rps if rate is None else rate)
        req = generate_requests(traffic, setup.seed)
        out[label] = req.mean_rate_rps if req.n > 1 else None
    return out


def _rate_notes(setup: Setup, rates: list[float] | None) -> list[str]:
    """What the rate column means for this traffic, and what 'arrived' is: a swept rate runs steady
    (`stationary`: a rate curve becomes gamma gaps of its CV at that mean rate, not the day's curve from its
    start hour)."""
    from specsim.scenario.traffic import Gamma, Poisson, RateCurve, TraceArrivals

    a = setup.traffic.arrivals
    arrived = "arrived: the mean arrival rate of the requests simulated at that rate"
    if isinstance(a, RateCurve) and rates:
        return [f"rate: each rate runs steady, with the gaps of the scenario's rate curve (gamma, CV {a.cv:g}) at "
                f"that mean rate; the curve over the day (from hour {a.start_hour:g}, where it is "
                f"{curve_start_rps(a):.3g} requests/s) is what a run without --sweep-rates replays.", arrived]
    if isinstance(a, RateCurve):
        return [f"rate: the daily mean of the scenario's rate curve; the run starts at hour {a.start_hour:g}, "
                f"where it is {curve_start_rps(a):.3g} requests/s, and follows the curve from there.", arrived]
    if isinstance(a, Poisson):
        what = "the mean arrival rate (Poisson arrivals)"
    elif isinstance(a, Gamma):
        what = f"the mean arrival rate (gamma gaps, CV {a.cv:g})"
    elif isinstance(a, TraceArrivals):
        what = (f"the trace {Path(a.trace.source).name} sped up to this mean rate over the whole trace "
                f"(its own: {a.trace.mean_rate_rps:.3g} requests/s)")
    else:
        what = "the mean arrival rate"
    return [f"rate: {what}", arrived]


def _groups(rows: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The rows by configuration, in the order they first appear: (title, rows)."""
    out = []
    for name in dict.fromkeys(rows["configuration"]):
        part = rows[rows["configuration"] == name]
        draft, pol = part["draft"].iloc[0], part["policy"].iloc[0]
        out.append(("off (no speculation)" if pol == "off" else f"{draft}, policy {pol}", part))
    return out


def _cell(v: Any) -> str | None:
    return sig(v) if v is not None and not (isinstance(v, float) and math.isnan(v)) else None


def emit_sweep(setup: Setup, frame: pd.DataFrame, fmt: str, rates: list[float] | None, client: str) -> None:
    """A sweep's rows in the clients' vocabulary (`advise.benchmark.client_frame`): every column in a CSV or JSON,
    a table per draft and policy at the terminal or in Markdown."""
    from specsim.advise.benchmark import client_frame
    from specsim.simulate.frontier import load_column

    rows = client_frame(frame, setup.gpus_per_replica, client)
    if fmt in ("csv", "json"):
        emit(rows, fmt)
        return
    load = load_column(rows)
    view = rows.copy()
    if load == "rate_rps":
        arrived = _arrived(setup, rates)
        view["arrived_rps"] = [arrived.get(float(r)) for r in view["rate_rps"]]
    shown = [load, *(c for c in SWEEP_COLUMNS if c in view.columns and view[c].notna().any())]
    s = setup.scenario
    title = f"{s.name}: {len(rows)} simulations, seed {setup.seed}, measured as the {client} client does"
    notes = [requests_line(rows, load), *(_rate_notes(setup, rates) if load == "rate_rps" else [])]
    if fmt == "markdown":
        cols = [LABELS[load][1], "draft", "policy", *(LABELS[c][1] for c in shown[1:])]
        table = [[f"{float(r[load]):g}", r["draft"], r["policy"], *(_cell(r[c]) for c in shown[1:])]
                 for _, r in view.iterrows()]
        sys.stdout.write(f"**{title}**\n\n" + markdown_table(cols, table, text_columns=3) + "\n"
                         + "".join(f"{line}  \n" for line in notes))
        return
    con = console()
    con.print(title, style="bold", markup=False)
    for name, part in _groups(view):
        table = [[f"{float(r[load]):g}", *(_cell(r[c]) for c in shown[1:])] for _, r in part.iterrows()]
        print_rows_table(name, [LABELS[c][0] for c in shown], table, text_columns=0)
    for line in notes:
        con.print(line, markup=False)


# --- a load sweep read as the frontier (specsim/advise/benchmark.py) ------------------------------------------


def _frontier_title(setup: Setup, f: Frontier) -> str:
    s = setup.scenario
    prompt, output = (setup.traffic.prompt, setup.traffic.output)
    lengths = f"{_length_text(prompt)} in / {_length_text(output)} out" if prompt is not None else ""
    lengths = ", ".join(x for x in (lengths, setup.traffic.reuse_text()) if x)
    return (f"{s.model.name} on {setup.gpus_per_replica}x {s.hardware.name} ({s.engine.name}), weights "
            f"{s.model.precision_label(s.weight_dtype)}, {lengths}, "
            f"{'closed-loop clients' if f.load == 'concurrency' else 'open loop'}, measured as the {f.client} "
            f"client does")


def _length_text(dist: Any) -> str:
    from specsim.scenario.traffic import Fixed, Uniform

    if isinstance(dist, Fixed):
        return f"{dist.tokens:,}"
    if isinstance(dist, Uniform):
        return f"{dist.low:,}-{dist.high:,}"
    return f"mean {dist.mean_tokens:,.0f}" if dist is not None else "trace"


def _band_words(band: tuple[float | None, float | None]) -> str:
    """' (80% band: 16 to past the largest)': where it may stop paying at the band's ends."""
    def at(x: float | None) -> str:
        return "past the largest" if x is None else f"{x:g}"

    lo, hi = band
    return "" if lo == hi else f" (80% band: {at(lo)} to {at(hi)})"


def _frontier_lines(f: Frontier) -> list[str]:
    unit = "concurrency" if f.load == "concurrency" else "rate"
    lines = [requests_line(f.rows, f.load)]
    for name, at in f.crossovers.items():
        band = f.crossover_bands.get(name)
        lines.append(f"{name}: " + ("still pays at the largest " + unit if at is None else
                                    f"stops paying at {unit} {at:g}") + (_band_words(band) if band else ""))
    parts = []
    for c in f.choices:
        span = f"{c.load_from:g}" if c.load_from == c.load_to else f"{c.load_from:g}-{c.load_to:g}"
        parts.append(f"{span}: {c.configuration}" + (f" ({c.gain:.2f}x)" if c.configuration != "off" else ""))
    lines.append(f"recommended by {unit}: " + "; ".join(parts))
    if f.configs:
        lines.append("engine configuration for it: -f json (engine_configs)" if "vllm" in f.configs else
                     f"engine configuration: {f.configs.get('note')}")
    itl = f.rows["itl_definition"].iloc[0] if len(f.rows) else "chunk"
    lines.append(f"ITL per {'streamed chunk' if itl == 'chunk' else 'token (chunk gap / its tokens)'}, as the "
                 f"{f.client} client reports it; TPOT excludes the first token; tok/s per user = 1000 / median TPOT")
    lines += [f"acceptance: {src}" for src in f.acceptance_sources]
    return lines


def emit_frontier(setup: Setup, f: Frontier, fmt: str, plot: Path | None, notes: list[str] | None = None) -> None:
    """A load sweep as benchmarks report it: one row per (configuration, load point), the crossovers, the
    recommendation; --plot draws the frontier."""
    rows = f.rows
    if plot is not None:
        from specsim.files import Outputs
        from specsim.report.figures.frontier import frontier as draw
        from specsim.report.figures.saving import save_png

        with Outputs() as outs:
            save_png(draw(f.rows, f.load, f.crossovers, setup.scenario.model.name), str(outs.path(plot, "--plot")))
    title = _frontier_title(setup, f)
    if fmt == "csv":
        emit(rows, "csv")
        return
    lines = _frontier_lines(f)
    if plot is not None:
        lines.append(f"wrote {plot}: output tokens/s per GPU against tokens/s per user, one curve per configuration")
    all_notes = [*setup.notes, *f.notes, *(notes or [])]
    if fmt == "json":
        s = setup.scenario
        print_json({"title": title, "load": f.load, "client": f.client, "gpus_per_replica": f.gpus,
                    "priced_hardware": s.hardware.name, "priced_model": s.model.name,
                    "priced_weights": s.model.precision_label(s.weight_dtype),
                    "priced_layout": str(s.layout or f"tp {s.tp}"),
                    "rows": plain(rows.to_dict(orient="records")), "crossovers": f.crossovers,
                    "crossover_bands": {k: list(v) for k, v in f.crossover_bands.items()},
                    "recommendation": [{"from": c.load_from, "to": c.load_to, "configuration": c.configuration,
                                        "gain": c.gain} for c in f.choices],
                    "engine_configs": f.configs, "acceptance_sources": list(f.acceptance_sources),
                    "notes": all_notes})
        return
    groups = [(name, rows[rows["configuration"] == name]) for name in dict.fromkeys(rows["configuration"])]
    if fmt == "markdown":
        out = [f"**{title}**", ""]
        for name, part in groups:
            table = [[f"{float(r[f.load]):g}", *(_cell(r[c]) for c in FRONTIER_COLUMNS)] for _, r in part.iterrows()]
            out += [f"*{name}*", "", markdown_table([LABELS[c][1] for c in (f.load, *FRONTIER_COLUMNS)], table,
                                                    text_columns=1)]
        sys.stdout.write("\n".join(out) + "\n" + "".join(f"{line}  \n" for line in [*lines, *all_notes]))
        return
    con = console()
    con.print(title, style="bold", markup=False)
    for name, part in groups:
        table = [[f"{float(r[f.load]):g}", *(_cell(r[c]) for c in FRONTIER_COLUMNS)] for _, r in part.iterrows()]
        print_rows_table("speculation off" if name == "off" else name,
                         [LABELS[c][0] for c in (f.load, *FRONTIER_COLUMNS)], table, text_columns=0)
    for line in lines:
        con.print(line, markup=False)
    for note in all_notes:
        con.print(f"note: {note}", style="yellow", markup=False)
