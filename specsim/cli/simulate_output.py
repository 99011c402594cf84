"""What `specsim simulate` prints and writes: the comparison's JSON record, its tables at 80 columns, the time
series CSV, and a sweep's tables."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from specsim.cli._format import (
    console,
    emit,
    markdown_table,
    plain,
    print_json,
    print_rows_table,
)

if TYPE_CHECKING:
    from specsim.advise.benchmark import Frontier
    from specsim.advise.simulation import Outcome, Setup

# --- output --------------------------------------------------------------------------------------------
# Tables are laid out to fit an 80-column terminal as they are: the runs are columns named "off" and "on"
# (the policy, whatever its length, is named on a line of its own above the table), names are short with
# their units, and a sweep prints one table per draft and policy with two-line headers.

def _ms(x: float) -> float:
    return x * 1e3


ROWS: tuple[tuple[str, str, Any], ...] = (
    ("TTFT p50 (ms)", "ttft_s.p50", _ms), ("TTFT p90 (ms)", "ttft_s.p90", _ms), ("TTFT p99 (ms)", "ttft_s.p99", _ms),
    ("TPOT p50 (ms)", "tpot_s.p50", _ms), ("TPOT p90 (ms)", "tpot_s.p90", _ms), ("TPOT p99 (ms)", "tpot_s.p99", _ms),
    ("ITL per token p50 (ms)", "itl_token_s.p50", _ms), ("ITL per token p99 (ms)", "itl_token_s.p99", _ms),
    ("ITL per step p99 (ms)", "itl_step_s.p99", _ms),
    ("e2e p50 (s)", "e2e_s.p50", None), ("e2e p99 (s)", "e2e_s.p99", None),
    ("queueing p99 (ms)", "queue_s.p99", _ms),
    ("output tokens/s", "output_tok_s", None), ("requests/s", "requests_per_s", None),
    ("goodput (req/s in SLO)", "goodput_rps", None), ("SLO attainment", "slo_attainment", None),
    ("mean decode batch", "mean_decode_batch", None), ("mean waiting", "mean_waiting", None),
    ("peak KV (tokens)", "peak_kv_tokens", None), ("tokens per decode step", "tokens_per_decode_step", None),
    ("preemptions", "preemptions", None), ("rejected", "rejected", None),
    ("$ per M output tokens", "cost_per_mtok_usd", None),
)


def _get(m: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        m = getattr(m, part)
    return m


def _value(m: Any, dotted: str, scale: Any) -> float | None:
    v = _get(m, dotted)
    if v is None:
        return None
    v = float(v)
    if not math.isfinite(v):
        return None
    return scale(v) if scale is not None else v


def _curve_start_rps(a: Any) -> float:
    """A rate curve's rate (requests/s) at the hour its run starts (the simulation's t = 0)."""
    return float(a.rate_at(np.asarray([a.start_hour], dtype=np.float64))[0])


def _describe_arrivals(setup: Setup) -> str:
    from specsim.scenario.traffic import Saturated

    a = setup.traffic.arrivals
    clients = setup.traffic.concurrency
    if isinstance(a, Saturated):
        return f"{clients} closed-loop clients (--max-concurrency {clients} --request-rate inf)"
    return _open_arrivals(a) + (f", at most {clients} in flight (--max-concurrency {clients})" if clients else "")


def _open_arrivals(a: Any) -> str:
    from specsim.scenario.traffic import Constant, Gamma, Poisson, RateCurve, TraceArrivals

    if isinstance(a, Constant):
        return f"evenly spaced at {a.rate_rps:g} requests/s"
    if isinstance(a, Poisson):
        return f"Poisson at {a.rate_rps:g} requests/s"
    if isinstance(a, Gamma):
        return f"gamma gaps (CV {a.cv:g}) at {a.rate_rps:g} requests/s"
    if isinstance(a, RateCurve):
        return (f"rate curve over the day (daily mean {a.mean_rate_rps:.3g} requests/s, gap CV {a.cv:g}) from hour "
                f"{a.start_hour:g}, where it is {_curve_start_rps(a):.3g} requests/s")
    if isinstance(a, TraceArrivals):
        return f"trace {Path(a.trace.source).name} x{a.speedup:g}"
    return type(a).__name__


def outcome_dict(o: Outcome) -> dict[str, Any]:
    """The JSON record of `specsim simulate --format json`."""
    from specsim.acceptance.chain import expected_tokens_positional
    from specsim.advise.traffic import mean_lengths
    from specsim.records import to_record
    from specsim.simulate.capacity import Comparison

    st = o.setup
    s = st.scenario
    prompt, output = mean_lengths(st.traffic)
    kmax = max(1, st.policy.max_k)
    runs = {("on" if r.policy.enabled else "off"): {"policy": r.policy.label,
                                                    "kv_capacity_tokens": r.kv_capacity_tokens,
                                                    **to_record(r.metrics)} for r in o.runs}
    comparison = None
    if o.off is not None and o.on is not None:
        comparison = to_record(Comparison(o.off.metrics, o.on.metrics).ratios)
    acceptance = [{"workload": c.name, "share": float(sh), "alphas": [float(a) for a in c.conditional(kmax)],
                   "tokens_per_step": float(expected_tokens_positional(c.conditional(kmax), kmax)),
                   "source": src}
                  for c, sh, src in zip(o.acceptance.classes, o.acceptance.shares, o.acceptance_sources, strict=True)]
    slo = st.slo
    replicas = None
    if o.replicas:
        replicas = {"target_rate_rps": o.target_rate_rps,
                    **{("on" if lab != "off" else "off"): to_record(rp) for lab, rp in o.replicas.items()}}
    return plain({
        "scenario": s.name, "hardware": s.hardware.name, "model": s.model.name, "tp": s.tp,
        "engine": s.engine.name, "draft": st.draft.label if st.policy.enabled else "none",
        "method": st.draft.method if st.policy.enabled else "none", "policy": st.policy.label,
        "policy_source": st.policy_source,
        "traffic": {"arrivals": _describe_arrivals(st), "requests": o.requests.n, "seed": st.seed,
                    "simulated_rate_rps": o.requests.mean_rate_rps if o.requests.n > 1 else None,
                    "mean_prompt_tokens": prompt, "mean_output_tokens": output},
        "acceptance": acceptance,
        "serving": {"max_num_seqs": st.limits.max_num_seqs,
                    "max_num_batched_tokens": st.limits.max_num_batched_tokens,
                    "kv_capacity_tokens": {r.policy.label: r.kv_capacity_tokens for r in o.runs},
                    "kv_source": "scenario" if st.limits.kv_capacity_tokens is not None else "memory model",
                    "slo": None if slo is None else {"ttft_ms": slo.ttft_s * 1e3, "tpot_ms": slo.tpot_s * 1e3,
                                                     "percentile": slo.percentile},
                    "gpus_per_replica": st.gpus_per_replica, "gpu_hour_usd": s.gpu_hour_usd},
        "runs": runs, "comparison": comparison, "replicas": replicas, "notes": list(st.notes),
    })


def _run_name(r: Any) -> str:
    """A run's column: "off" or "on" (the policy itself is named above the table)."""
    return "on" if r.policy.enabled else "off"


def _is_count(v: Any) -> bool:
    return isinstance(v, int | np.integer) and not isinstance(v, bool)


def _metric_rows(o: Outcome) -> tuple[list[str], list[list[Any]]]:
    cols = ["quantity", *(_run_name(r) for r in o.runs)]
    if o.off is not None and o.on is not None:
        cols.append("on / off")
    rows = []
    for name, dotted, scale in ROWS:
        vals = [_value(r.metrics, dotted, scale) for r in o.runs]
        if all(v is None for v in vals):
            continue
        if dotted == "slo_attainment":
            vals = [None if v is None else round(100 * v, 2) for v in vals]
            name = "SLO attainment (%)"
        ratio = None
        if len(cols) > len(o.runs) + 1:
            a, b = vals
            ratio = None if a is None or b is None or a == 0 else b / a
        shown: list[Any] = list(vals)
        if scale is None and all(_is_count(_get(r.metrics, dotted)) for r in o.runs):  # counts: 131,281, not .0
            shown = [None if v is None else f"{round(v):,}" for v in vals]
        row: list[Any] = [name, *shown]
        if len(cols) > len(o.runs) + 1:
            row.append(ratio)
        rows.append(row)
    return cols, rows


def _replica_rows(o: Outcome) -> tuple[list[str], list[list[Any]]]:
    """Replicas for the target rate, one column per run (off, on), one row per quantity."""
    runs = [r for r in o.runs if r.policy.label in o.replicas]
    plans = [o.replicas[r.policy.label] for r in runs]
    cols = ["quantity", *(_run_name(r) for r in runs)]
    rows: list[list[Any]] = [
        ["replicas", *(rp.replicas for rp in plans)],
        ["GPUs", *(rp.gpus for rp in plans)],
        ["meets the SLO", *(rp.meets_slo for rp in plans)],
        ["TTFT p99 per replica (ms)", *(rp.per_replica.ttft_s.p99 * 1e3 for rp in plans)],
        ["TPOT p99 per replica (ms)", *(rp.per_replica.tpot_s.p99 * 1e3 for rp in plans)],
        ["$ per M output tokens", *(rp.cost_per_mtok_usd for rp in plans)],
    ]
    return cols, rows


def _head_lines(o: Outcome, data: dict[str, Any]) -> tuple[str, list[str]]:
    """The title and what each column ran: "off" and "on" (draft, policy and where the policy came from),
    then the traffic."""
    st = o.setup
    s = st.scenario
    head = f"{s.name}: {s.model.name} on {s.where} ({s.engine.name})"
    lines = []
    if o.off is not None:
        lines.append("off: no speculation" + (f" (policy from {st.policy_source})" if o.on is None else ""))
    if o.on is not None:
        lines.append(f"on: {data['draft']}, policy {o.on.policy.label} (from {st.policy_source})")
    rate = data["traffic"]["simulated_rate_rps"]
    lines.append(f"traffic: {o.requests.n:,} requests, {data['traffic']['arrivals']}"
                 + (f"; {rate:.3g} requests/s simulated" if rate else "") + f"; seed {st.seed}")
    return head, lines


def emit_outcome(o: Outcome, fmt: str, timeseries: Path | None) -> None:
    data = outcome_dict(o)
    if fmt == "json":
        print_json(data)
        return
    if fmt == "csv":
        from specsim.simulate.sweep import metrics_row

        records: list[dict[str, Any]] = []
        for r in o.runs:
            row = {"policy": r.policy.label, "draft": data["draft"] if r.policy.enabled else "none",
                   "requests": o.requests.n, "seed": o.setup.seed, "kv_capacity_tokens": r.kv_capacity_tokens,
                   **metrics_row(r.metrics)}
            rp = o.replicas.get(r.policy.label)
            if rp is not None:
                row.update({"target_rate_rps": rp.target_rate_rps, "replicas": rp.replicas,
                            "replicas_meet_slo": rp.meets_slo, "replicas_gpus": rp.gpus,
                            "replicas_cost_per_mtok_usd": rp.cost_per_mtok_usd})
            records.append(row)
        emit(pd.DataFrame(records), "csv")
        return
    st = o.setup
    head, top = _head_lines(o, data)
    cols, rows = _metric_rows(o)
    title = "speculation off and on" if len(o.runs) > 1 else "simulation"
    rep_title = f"replicas for {o.target_rate_rps or 0:g} requests/s"  # narrower than its table: not wrapped
    lines: list[str] = []
    acc = ", ".join(f"{c['workload']} {c['share']:.0%}: {c['tokens_per_step']:.2f} tokens/step at k = "
                    f"{max(1, st.policy.max_k)}" for c in data["acceptance"]) if st.policy.enabled else ""
    kv = ", ".join(f"{_run_name(r)} {r.kv_capacity_tokens:,}" for r in o.runs)
    lines.append(f"KV capacity (tokens, {data['serving']['kv_source']}): {kv}")
    if acc:
        lines.append(f"acceptance per request: {acc}")
    if timeseries is not None:
        lines.append(f"wrote {timeseries}: batch, running, waiting and KV tokens over time per policy")
    if fmt == "markdown":
        out = [f"**{head}**", "", *(line + "  " for line in top), "", markdown_table(cols, rows)]
        if o.replicas:
            out += [f"{rep_title[0].upper()}{rep_title[1:]}:", "", markdown_table(*_replica_rows(o))]
        out += [line + "  " for line in lines] + [f"> {n}" for n in st.notes]
        sys.stdout.write("\n".join(out) + "\n")
        return
    con = console()
    con.print(head, style="bold", markup=False)
    for line in top:
        con.print(line, markup=False)
    print_rows_table(title, cols, rows)
    if o.replicas:
        print_rows_table(rep_title, *_replica_rows(o))
    for line in lines:
        con.print(line, markup=False)
    for note in st.notes:
        con.print(f"note: {note}", style="yellow", markup=False)


def timeseries_frame(o: Outcome) -> pd.DataFrame:
    parts = []
    for r in o.runs:
        ts = r.metrics.timeseries
        if ts is None:
            continue
        parts.append(pd.DataFrame({"policy": r.policy.label, "time_s": ts.time_s, "bin_s": ts.bin_s,
                                   "decode_batch": ts.decode_batch, "running": ts.running, "waiting": ts.waiting,
                                   "kv_tokens": ts.kv_tokens}))
    return pd.concat(parts, ignore_index=True)


# A sweep's table columns: (frame column, scale, header at the terminal (two lines), header in Markdown).
# "arrived" is not a frame column: the mean arrival rate of the requests each rate simulated (`_arrived`).
SWEEP_COLUMNS: tuple[tuple[str, float, str, str], ...] = (
    ("rate_rps", 1.0, "rate\nreq/s", "rate (req/s)"),
    ("arrived", 1.0, "arrived\nreq/s", "arrived (req/s)"),
    ("ttft_p99_s", 1e3, "TTFT\np99 ms", "TTFT p99 (ms)"),
    ("tpot_p50_s", 1e3, "TPOT\np50 ms", "TPOT p50 (ms)"),
    ("tpot_p99_s", 1e3, "TPOT\np99 ms", "TPOT p99 (ms)"),
    ("output_tok_s", 1.0, "output\ntok/s", "output (tokens/s)"),
    ("goodput_rps", 1.0, "goodput\nreq/s", "goodput (req/s in SLO)"),
    ("cost_per_mtok_usd", 1.0, "$ per M\ntokens", "$ per M output tokens"),
)


def _sig(v: Any, digits: int = 4) -> str | None:
    """A number to `digits` significant figures (at least its integer part, thousands separated); None for a
    missing one."""
    if v is None:
        return None
    x = float(v)
    if not math.isfinite(x):
        return None
    if x == 0:
        return "0"
    decimals = min(8, max(0, digits - 1 - math.floor(math.log10(abs(x)))))
    return f"{x:,.{decimals}f}"


def _rate_axis(rates: list[float] | None) -> list[float | None]:
    """The swept rates, or [None]: the traffic's own (as `run.sweep_cases`)."""
    return list(rates) if rates else [None]


def _rate_of(setup: Setup, rate: float | None) -> tuple[float, Any]:
    """(the rate a sweep's row is labelled with, the traffic it simulated): as `simulation.sweep_cases` builds
    them (a swept rate runs steady: `advise.traffic.stationary`)."""
    from specsim.advise.traffic import stationary

    traffic = setup.traffic if rate is None else stationary(setup.traffic, rate)
    return float(traffic.mean_rate_rps if rate is None else rate), traffic


def _arrived(setup: Setup, rates: list[float] | None) -> dict[float, float | None]:
    """The mean arrival rate of the requests each swept rate simulated (the same seeded requests the sweep
    generated), by the rate its rows carry."""
    from specsim.scenario.traffic import generate_requests

    out: dict[float, float | None] = {}
    for rate in _rate_axis(rates):
        label, traffic = _rate_of(setup, rate)
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
                f"{_curve_start_rps(a):.3g} requests/s) is what a run without --sweep-rates replays.", arrived]
    if isinstance(a, RateCurve):
        return [f"rate: the daily mean of the scenario's rate curve; the run starts at hour {a.start_hour:g}, "
                f"where it is {_curve_start_rps(a):.3g} requests/s, and follows the curve from there.", arrived]
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


def _sweep_groups(frame: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The sweep's rows by draft and policy, in the order they first appear: (title, rows)."""
    keys = list(dict.fromkeys(zip(frame["draft"], frame["policy"], strict=True)))
    out = []
    for draft, pol in keys:
        part = frame[(frame["draft"] == draft) & (frame["policy"] == pol)]
        out.append(("off (no speculation)" if pol == "off" else f"{draft}, policy {pol}", part))
    return out


def emit_sweep(setup: Setup, frame: pd.DataFrame, fmt: str, rates: list[float] | None) -> None:
    if fmt in ("csv", "json"):
        emit(frame, fmt)
        return
    view = frame.copy()
    arrived = _arrived(setup, rates)
    view["arrived"] = [arrived.get(float(r)) for r in view["rate_rps"]]
    shown = [c for c in SWEEP_COLUMNS if c[0] in view.columns and view[c[0]].notna().any()]
    s = setup.scenario
    n = setup.traffic.num_requests
    title = (f"{s.name}: {len(frame)} simulations, {f'{n:,}' if n else 'all'} requests each, seed "
             f"{setup.seed}")
    notes = _rate_notes(setup, rates)
    if fmt == "markdown":
        cols = [shown[0][3], "draft", "policy", *(c[3] for c in shown[1:])]
        rows = [[r[shown[0][0]], r["draft"], r["policy"], *(_scaled(r[c[0]], c[1]) for c in shown[1:])]
                for _, r in view.iterrows()]
        sys.stdout.write(f"**{title}**\n\n" + markdown_table(cols, rows, text_columns=3) + "\n"
                         + "".join(f"{line}  \n" for line in notes))
        return
    con = console()
    con.print(title, style="bold", markup=False)
    for name, part in _sweep_groups(view):
        rows = [[_sig(_scaled(r[c[0]], c[1])) if c[0] != "rate_rps" else f"{float(r[c[0]]):g}" for c in shown]
                for _, r in part.iterrows()]
        print_rows_table(name, [c[2] for c in shown], rows, text_columns=0)
    for line in notes:
        con.print(line, markup=False)


def _scaled(v: Any, scale: float) -> float | None:
    if v is None:
        return None
    x = float(v)
    return x * scale if math.isfinite(x) else None


# --- a load sweep read as the frontier (specsim/advise/benchmark.py) ------------------------------------------

FRONTIER_COLUMNS: tuple[tuple[str, str], ...] = (
    ("output_tok_s_per_gpu", "tok/s per GPU"), ("per_user_tok_s", "tok/s per user"),
    ("tpot_mean_ms", "TPOT mean (ms)"), ("tpot_p99_ms", "TPOT p99 (ms)"), ("ttft_mean_ms", "TTFT mean (ms)"),
    ("acceptance_length", "accept length"), ("throughput_ratio", "x off"))


def _frontier_title(setup: Setup, f: Frontier) -> str:
    s = setup.scenario
    prompt, output = (setup.traffic.prompt, setup.traffic.output)
    lengths = f"{_length_text(prompt)} in / {_length_text(output)} out"
    return (f"{s.model.name} on {setup.gpus_per_replica}x {s.hardware.name} ({s.engine.name}), {lengths}, "
            f"{'closed-loop clients' if f.load == 'concurrency' else 'open loop'}, measured as the {f.client} "
            f"client does")


def _length_text(dist: Any) -> str:
    from specsim.scenario.traffic import Fixed, Uniform

    if isinstance(dist, Fixed):
        return f"{dist.tokens:,}"
    if isinstance(dist, Uniform):
        return f"{dist.low:,}-{dist.high:,}"
    return f"mean {dist.mean_tokens:,.0f}" if dist is not None else "trace"


def _frontier_lines(f: Frontier) -> list[str]:
    unit = f.load
    lines = []
    for name, at in f.crossovers.items():
        lines.append(f"{name}: " + ("still pays at the largest " + unit if at is None else
                                    f"stops paying at {unit} {at:g}"))
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
                 f"{f.client} client reports it; TPOT excludes the first token; interactivity = 1000 / median TPOT")
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
    if fmt == "json":
        print_json({"title": title, "load": f.load, "client": f.client, "gpus_per_replica": f.gpus,
                    "rows": plain(rows.to_dict(orient="records")),
                    "crossovers": f.crossovers,
                    "recommendation": [{"from": c.load_from, "to": c.load_to, "configuration": c.configuration,
                                        "gain": c.gain} for c in f.choices],
                    "engine_configs": f.configs, "acceptance_sources": list(f.acceptance_sources),
                    "notes": [*setup.notes, *(notes or [])]})
        return
    groups = [(name, rows[rows["configuration"] == name]) for name in dict.fromkeys(rows["configuration"])]
    heads = [f.load if f.load == "concurrency" else "rate (req/s)", *(c[1] for c in FRONTIER_COLUMNS)]
    if fmt == "markdown":
        out = [f"**{title}**", ""]
        for name, part in groups:
            table = [[f"{float(r[f.load]):g}", *(_sig(r[c]) for c, _ in FRONTIER_COLUMNS)] for _, r in part.iterrows()]
            out += [f"*{name}*", "", markdown_table(heads, table, text_columns=1)]
        sys.stdout.write("\n".join(out) + "\n" + "".join(f"{line}  \n" for line in lines))
        return
    con = console()
    con.print(title, style="bold", markup=False)
    for name, part in groups:
        table = [[f"{float(r[f.load]):g}", *(_sig(r[c]) for c, _ in FRONTIER_COLUMNS)] for _, r in part.iterrows()]
        print_rows_table("speculation off" if name == "off" else name, heads, table, text_columns=0)
    for line in lines:
        con.print(line, markup=False)
    for note in [*setup.notes, *(notes or [])]:
        con.print(f"note: {note}", style="yellow", markup=False)
