"""What `specsim simulate` prints and writes for one comparison: its JSON record, its tables at 80 columns, the
time series CSV. Its figures are named as the benchmark clients name them (`simulate.client.LABELS`: ms, "median"),
the same names as a sweep's and a frontier's (simulate_sweeps.py); a CSV or JSON carries the simulator's raw
figures (seconds) too."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from specsim.cli._format import console, emit, markdown_table, plain, print_json, print_rows_table

if TYPE_CHECKING:
    from specsim.advise.simulation import Outcome, Setup

# --- output --------------------------------------------------------------------------------------------
# Tables are laid out to fit an 80-column terminal as they are: the runs are columns named "off" and "on"
# (the policy, whatever its length, is named on a line of its own above the table), names are short with
# their units, and a sweep prints one table per draft and policy with two-line headers.

#: The comparison's rows: figures in the clients' vocabulary (`LABELS`), then the simulation's own.
ROWS: tuple[str, ...] = (
    "requests", "completed", "ttft_mean_ms", "ttft_median_ms", "ttft_p90_ms", "ttft_p99_ms", "tpot_mean_ms",
    "tpot_median_ms", "tpot_p90_ms", "tpot_p99_ms", "itl_median_ms", "itl_p99_ms", "e2e_mean_ms", "e2e_median_ms",
    "e2e_p99_ms", "queue_p99_ms", "output_tok_s", "request_per_s", "per_user_tok_s", "acceptance_length",
    "goodput_rps", "slo_attainment_pct", "mean_decode_batch", "mean_waiting", "peak_kv_tokens", "preemptions",
    "rejected", "prefix_hit_pct", "cost_per_mtok_usd")
#: names of the rows that are not the clients' figures
OWN_LABELS = {"slo_attainment_pct": "SLO attainment (%)", "mean_decode_batch": "mean decode batch",
              "mean_waiting": "mean waiting", "peak_kv_tokens": "peak KV (tokens)", "preemptions": "preemptions",
              "rejected": "rejected", "prefix_hit_pct": "prompt from cache (%)"}
COUNTS = ("requests", "completed", "peak_kv_tokens", "preemptions", "rejected")


def run_values(r: Any, gpus: int, client: str) -> dict[str, Any]:
    """One run's figures by ROWS' names: the client's (`run_figures`), then the simulation's own."""
    from specsim.simulate.client import run_figures

    m = r.metrics
    out: dict[str, Any] = {"requests": m.requests, "completed": m.completed, **run_figures(m, gpus, client)}
    out["slo_attainment_pct"] = None if m.slo_attainment is None else 100.0 * m.slo_attainment
    out["prefix_hit_pct"] = None if m.prefix_hit_share is None else 100.0 * m.prefix_hit_share
    for name in ("goodput_rps", "mean_decode_batch", "mean_waiting", "peak_kv_tokens", "preemptions", "rejected",
                 "cost_per_mtok_usd"):
        out[name] = getattr(m, name)
    return out


def _number(v: Any) -> float | None:
    if v is None or isinstance(v, str):
        return None
    x = float(v)
    return x if math.isfinite(x) else None


def curve_start_rps(a: Any) -> float:
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
                f"{a.start_hour:g}, where it is {curve_start_rps(a):.3g} requests/s")
    if isinstance(a, TraceArrivals):
        return f"trace {Path(a.trace.source).name} x{a.speedup:g}"
    return type(a).__name__


def outcome_dict(o: Outcome, client: str = "vllm") -> dict[str, Any]:
    """The JSON record of `specsim simulate --format json`: each run's figures in the clients' vocabulary, then
    its raw metrics (seconds, as `ServingMetrics` holds them)."""
    from specsim.acceptance.chain import expected_tokens_positional
    from specsim.advise.traffic import mean_lengths
    from specsim.records import to_record
    from specsim.simulate.capacity import Comparison
    from specsim.simulate.client import itl_definition

    st = o.setup
    s = st.scenario
    prompt, output = mean_lengths(st.traffic)
    kmax = max(1, st.policy.max_k)
    runs = {_run_name(r): {"policy": r.policy.label, "kv_capacity_tokens": r.kv_capacity_tokens,
                           **run_values(r, st.gpus_per_replica, client), **to_record(r.metrics)} for r in o.runs}
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
    d = st.draft
    return plain({
        "scenario": s.name, "hardware": s.hardware.name, "model": s.model.name, "tp": s.tp,
        "priced_weights": s.model.precision_label(s.weight_dtype), "priced_layout": str(s.layout or f"tp {s.tp}"),
        "engine": s.engine.name, "draft": d.label if st.policy.enabled else "none",
        "method": d.method if st.policy.enabled else "none", "policy": st.policy.label,
        "tree": {"topk": d.topk, "num_draft_tokens": d.num_draft_tokens} if d.is_tree and st.policy.enabled else None,
        "policy_source": st.policy_source, "client": client, "itl_definition": itl_definition(client),
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
        "runs": runs, "comparison": comparison, "replicas": replicas, "bands": run_bands(o, client),
        "notes": [*st.notes, *_rejected_notes(o)],
    })


#: the simulated figures given a band: how each moves with acceptance (at the simulated load the step barely
#: does: throughput as tokens per step, time per token as its inverse) and the cost spread it carries
_BANDED = {"output_tok_s": (1, "step"), "tpot_mean_ms": (-1, "step"), "itl_median_ms": (-1, "step")}


def run_bands(o: Outcome, client: str) -> dict[str, Any]:
    """Each run's 80% band of output tok/s, mean TPOT and median ITL ([low, high]; step/bands.py), and of the
    on / off throughput ratio: the acceptance's band (the draft's prior; none when given) and the engine's
    measured cost spread."""
    from specsim.scenario.traffic import Saturated
    from specsim.step.bands import load_spread, step_bands

    st = o.setup
    cal = st.target.calibration
    spread = load_spread().fitted(st.target.engine.name, cal.sigma_log if cal else None)
    out: dict[str, Any] = {}
    # open-loop arrivals set the throughput (below saturation): only the times per token move
    banded = _BANDED if isinstance(st.traffic.arrivals, Saturated) else {
        k: v for k, v in _BANDED.items() if k != "output_tok_s"}
    for r in o.runs:
        v = run_values(r, st.gpus_per_replica, client)
        tau = float(v.get("acceptance_length") or 1.0) if r.policy.enabled else 1.0
        low, high = st.draft.tau_band(max(1, r.policy.max_k), tau, exact=False) if r.policy.enabled else (tau, tau)
        central = {"tokens_per_step": np.array([tau]), **{k: np.array([_number(v[k]) or np.nan]) for k in banded}}
        b = step_bands(central, np.array([low]), np.array([high]), st.target.engine.name, spread, banded=banded)
        out[_run_name(r)] = {k: [float(b.low[k][0]), float(b.high[k][0])] for k in banded}
        if r.policy.enabled and o.off is not None and "output_tok_s" in banded:
            ratio = (_number(v["output_tok_s"]) or np.nan) / (_number(run_values(o.off, st.gpus_per_replica, client)[
                "output_tok_s"]) or np.nan)
            rb = step_bands({"tokens_per_step": np.array([tau]), "ratio": np.array([ratio])}, np.array([low]),
                            np.array([high]), st.target.engine.name, spread, banded={"ratio": (1, "speedup")})
            out["on_off_output_tok_s"] = [float(rb.low["ratio"][0]), float(rb.high["ratio"][0])]
    return out


def _rejected_notes(o: Outcome) -> list[str]:
    """A line per run that rejected requests (longer than its KV cache with one step's tokens)."""
    return [f"{_run_name(r)}: {r.metrics.rejected:,} of {r.metrics.requests:,} requests rejected (prompt + output + "
            f"one step's tokens exceed the KV cache of {r.kv_capacity_tokens:,} tokens)"
            + ("; nothing completed, so no latency or throughput" if r.metrics.completed == 0 else "")
            for r in o.runs if r.metrics.rejected]


def _run_name(r: Any) -> str:
    """A run's column: "off" or "on" (the policy itself is named above the table)."""
    return "on" if r.policy.enabled else "off"


def _metric_rows(o: Outcome, client: str) -> tuple[list[str], list[list[Any]]]:
    """The comparison's table: one row per figure (ROWS, named by LABELS), one column per run, and on / off."""
    from specsim.simulate.client import LABELS

    both = o.off is not None and o.on is not None
    cols = ["quantity", *(_run_name(r) for r in o.runs), *(["on / off"] if both else [])]
    values = [run_values(r, o.setup.gpus_per_replica, client) for r in o.runs]
    rows = []
    for name in ROWS:
        vals = [_number(v[name]) for v in values]
        if all(v is None for v in vals):
            continue
        shown: list[Any] = [None if v is None else f"{round(v):,}" for v in vals] if name in COUNTS else list(vals)
        row: list[Any] = [OWN_LABELS.get(name) or LABELS[name][1], *shown]
        if both:
            a, b = vals
            row.append(None if a is None or b is None or a == 0 or name in ("requests", "completed") else b / a)
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
    head = f"{s.name}: {s.model.name} on {s.where} ({s.engine.name}), weights {s.model.precision_label(s.weight_dtype)}"
    lines = []
    if o.off is not None:
        lines.append("off: no speculation" + (f" (policy from {st.policy_source})" if o.on is None else ""))
    if o.on is not None:
        tree = data["tree"]
        shape = f" (a tree: top-{tree['topk']}, {tree['num_draft_tokens']} nodes)" if tree else ""
        lines.append(f"on: {data['draft']}{shape}, policy {o.on.policy.label} (from {st.policy_source})")
    rate = data["traffic"]["simulated_rate_rps"]
    reuse = st.traffic.reuse_text()
    lines.append(f"traffic: {o.requests.n:,} requests, {data['traffic']['arrivals']}"
                 + (f"; {reuse}" if reuse else "") + (f"; {rate:.3g} requests/s simulated" if rate else "")
                 + f"; seed {st.seed}")
    return head, lines


def _csv(o: Outcome, data: dict[str, Any], client: str) -> None:
    """One row per run: what ran, its figures in the clients' vocabulary, its raw metrics, its replicas."""
    from specsim.simulate.sweep import metrics_row

    records: list[dict[str, Any]] = []
    for r in o.runs:
        row = {"policy": r.policy.label, "draft": data["draft"] if r.policy.enabled else "none",
               "requests": o.requests.n, "completed": r.metrics.completed, "seed": o.setup.seed,
               "kv_capacity_tokens": r.kv_capacity_tokens, "client": client,
               **run_values(r, o.setup.gpus_per_replica, client), **metrics_row(r.metrics)}
        rp = o.replicas.get(r.policy.label)
        if rp is not None:
            row.update({"target_rate_rps": rp.target_rate_rps, "replicas": rp.replicas,
                        "replicas_meet_slo": rp.meets_slo, "replicas_gpus": rp.gpus,
                        "replicas_cost_per_mtok_usd": rp.cost_per_mtok_usd})
        records.append(row)
    emit(pd.DataFrame(records), "csv")


def emit_outcome(o: Outcome, fmt: str, timeseries: Path | None, client: str = "vllm") -> None:
    data = outcome_dict(o, client)
    if fmt == "json":
        print_json(data)
        return
    if fmt == "csv":
        _csv(o, data, client)
        return
    head, top = _head_lines(o, data)
    cols, rows = _metric_rows(o, client)
    title = "speculation off and on" if len(o.runs) > 1 else "simulation"
    rep_title = f"replicas for {o.target_rate_rps or 0:g} requests/s"  # narrower than its table: not wrapped
    lines = _tail_lines(o, data, timeseries)
    notes = data["notes"]
    if fmt == "markdown":
        out = [f"**{head}**", "", *(line + "  " for line in top), "", markdown_table(cols, rows)]
        if o.replicas:
            out += [f"{rep_title[0].upper()}{rep_title[1:]}:", "", markdown_table(*_replica_rows(o))]
        out += [line + "  " for line in lines] + [f"> {n}" for n in notes]
        sys.stdout.write("\n".join(out) + "\n")
        return
    con = console()
    con.print(head, style="bold", markup=False)
    for line in top:
        con.print(line, markup=False)
    print_rows_table(title, cols, rows)
    if o.replicas:
        print_rows_table(rep_title, *_replica_rows(o))
    band = _band_line(data["bands"])
    for line in ([band] if band else []) + lines:
        con.print(line, markup=False)
    for note in notes:
        con.print(f"note: {note}", style="yellow", markup=False)


def _band_line(bands: dict[str, Any]) -> str:
    """'80% bands of output tok/s: on 1,800-2,600; off 1,000-1,300; on / off 1.41x-2.20x' (closed-loop clients)
    or of mean TPOT (open-loop arrivals, whose rate sets the throughput); nothing when empty."""
    figure = "output_tok_s" if "output_tok_s" in bands.get("off", bands.get("on", {})) else "tpot_mean_ms"
    parts = [f"{name} {lo:,.1f}-{hi:,.1f}" if figure == "tpot_mean_ms" else f"{name} {lo:,.0f}-{hi:,.0f}"
             for name, (lo, hi) in ((name, bands[name][figure]) for name in ("on", "off") if name in bands)
             if math.isfinite(lo) and math.isfinite(hi)]
    ratio = bands.get("on_off_output_tok_s")
    if ratio and all(math.isfinite(x) for x in ratio):
        parts.append(f"on / off {ratio[0]:.2f}x-{ratio[1]:.2f}x")
    what = "output tok/s" if figure == "output_tok_s" else "mean TPOT (ms)"
    return (f"80% bands of {what}: " + "; ".join(parts) + " (-f json: each run's)") if parts else ""


def _tail_lines(o: Outcome, data: dict[str, Any], timeseries: Path | None) -> list[str]:
    """The lines under the table: KV capacity, acceptance per request, what ITL is, the file written."""
    st = o.setup
    depth = "depth" if st.draft.is_tree else "k"
    acc = ", ".join(f"{c['workload']} {c['share']:.0%}: {c['tokens_per_step']:.2f} tokens/step at {depth} = "
                    f"{max(1, st.policy.max_k)}" for c in data["acceptance"]) if st.policy.enabled else ""
    kv = ", ".join(f"{_run_name(r)} {r.kv_capacity_tokens:,}" for r in o.runs)
    itl = "per streamed chunk" if data["itl_definition"] == "chunk" else "per token (a chunk's gap / its tokens)"
    lines = [f"KV capacity (tokens, {data['serving']['kv_source']}): {kv}"]
    if acc:
        lines.append(f"acceptance per request: {acc}")
    lines.append(f"measured as the {data['client']} client does: ITL {itl}; TPOT excludes the first token")
    if timeseries is not None:
        lines.append(f"wrote {timeseries}: batch, running, waiting and KV tokens over time per policy")
    return lines


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




def sig(v: Any, digits: int = 4) -> str | None:
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


