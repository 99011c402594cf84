"""The simulate command: a scenario's traffic through an iteration-level continuous-batching engine, with
speculation off and on side by side (latency percentiles, throughput, goodput, batch / queue / KV over time,
price), replicas for a target rate, and sweeps over rates x policies x drafts (joblib)."""

from __future__ import annotations

import contextlib
import math
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
import pandas as pd
import typer

from specsim.cli._format import (
    check_format,
    console,
    emit,
    markdown_table,
    parse_float_list,
    plain,
    print_json,
    print_rows_table,
)
from specsim.cli._options import CostModel, Engine, Fmt, overridden
from specsim.cli.main import app
from specsim.errors import SpecsimError

if TYPE_CHECKING:
    from specsim.simulate.policy import SpecPolicy
    from specsim.simulate.run import Outcome, Setup

BACKENDS = ("loky", "dask", "ray")


@app.command()
def simulate(
    scenario: Annotated[Path, typer.Argument(help="scenario YAML (its traffic: and serving: sections)")],
    rate: Annotated[float | None, typer.Option("--rate", help="mean arrival rate, requests/s (a rate curve: its "
                                                              "daily mean; a trace: sped up to it)")] = None,
    requests: Annotated[int | None, typer.Option("--requests", help="requests to simulate (instead of the "
                                                                    "scenario's)")] = None,
    duration: Annotated[float | None, typer.Option("--duration", help="or every arrival within this many "
                                                                      "seconds")] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="random seed (default: the scenario's traffic.seed)")
                    ] = None,
    policy: Annotated[str | None, typer.Option("--policy", help="speculation: off | k=4 | 1-16:4,17-64:2 | "
                                                                "k=4,off>64 (default: serving.speculation, else "
                                                                "the analytic plan's)")] = None,
    draft: Annotated[str | None, typer.Option("--draft", help="which of the scenario's drafts (its label; "
                                                              "default: serving.draft, else the plan's)")] = None,
    compare: Annotated[bool, typer.Option("--compare/--no-compare", help="speculation off and on side by side "
                                                                         "(default), or the policy alone")] = True,
    target_rate: Annotated[float | None, typer.Option("--target-rate", help="replicas needed for this many "
                                                                            "requests/s under serving.slo "
                                                                            "(default: serving.target_rate_rps)")
                           ] = None,
    max_replicas: Annotated[int, typer.Option("--max-replicas", help="largest replica count tried")] = 256,
    sweep_rates: Annotated[str | None, typer.Option("--sweep-rates", help="sweep these rates, e.g. 2,4,8,16")
                           ] = None,
    sweep_policies: Annotated[list[str] | None, typer.Option("--sweep-policies", help="sweep these policies, "
                                                             "separated by ';' (or the option repeated), e.g. "
                                                             "'off;k=2;k=4;1-16:4,17-256:2'")] = None,
    sweep_drafts: Annotated[str | None, typer.Option("--sweep-drafts", help="sweep these drafts (labels, "
                                                                            "comma-separated, or 'all')")] = None,
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="parallel simulations in a sweep (-1: every core)")] = -1,
    backend: Annotated[str, typer.Option("--backend", help="joblib backend of a sweep: loky (local processes) | "
                                                           "dask | ray (installed separately)")] = "loky",
    timeseries: Annotated[Path | None, typer.Option("--timeseries", help="write batch, queue and KV over time "
                                                                         "to this CSV")] = None,
    engine: Engine = None,
    cost_model: CostModel = None,
    fmt: Fmt = "table",
) -> None:
    """Simulate serving the scenario's traffic request by request, with speculation off and on side by side."""
    from specsim.files import check_target
    from specsim.plan.scenario import load_scenario
    from specsim.simulate.policy import SpecPolicy
    from specsim.simulate.run import make_setup, run_scenario, sweep_scenario

    check_format(fmt)
    if backend not in BACKENDS:
        raise SpecsimError(f"--backend must be one of {' | '.join(BACKENDS)}, got {backend!r}")
    if jobs == 0 or jobs < -1 or jobs > 1024:
        raise SpecsimError(f"--jobs must be -1 (every core) or 1-1024, got {jobs}")
    sweeping = bool(sweep_rates or sweep_policies or sweep_drafts)
    if timeseries is not None:
        if sweeping:
            raise SpecsimError("--timeseries writes one comparison's time series; it does not apply to a sweep")
        check_target(timeseries, "--timeseries")
    rates = parse_float_list(sweep_rates, "--sweep-rates") if sweep_rates else None
    pols = _policies(sweep_policies) if sweep_policies else None
    chosen = SpecPolicy.parse(policy) if policy is not None else None
    s = overridden(load_scenario(scenario), cost_model, engine)  # bad input fails here, before any progress bar or file
    drafts = None
    if sweep_drafts:
        drafts = ([d.label for d in s.drafts if d.method != "none"] if sweep_drafts.strip() == "all"
                  else [x.strip() for x in sweep_drafts.split(",") if x.strip()])
        if not drafts:
            raise SpecsimError("--sweep-drafts: no draft named")
    with _progress() as tick:
        tick("resolving the draft and policy")
        if sweeping:  # the sweep's own axes, when given, stand in for the draft and policy (no plan to run)
            chosen = chosen or (pols[0] if pols else None)
            draft = draft or (drafts[0] if drafts else None)
        setup = make_setup(s, rate=rate, requests=requests, duration_s=duration, seed=seed, policy=chosen,
                           draft=draft)
        frame = outcome = None
        if sweeping:
            with _backend(backend):
                frame = sweep_scenario(setup, rates, pols, drafts, jobs,
                                       progress=lambda done, total: tick("sweep", done, total))
        else:
            goal = target_rate if target_rate is not None else setup.limits.target_rate_rps
            outcome = run_scenario(setup, compare, goal, max_replicas, progress=tick)
    if frame is not None:  # printed once the progress bar is gone
        _emit_sweep(setup, frame, fmt)
        return
    assert outcome is not None
    if timeseries is not None:
        from specsim.files import Outputs

        with Outputs() as outs:
            _timeseries_frame(outcome).to_csv(outs.path(timeseries, "--timeseries"), index=False)
    _emit_outcome(outcome, fmt, timeseries)


def _policies(values: list[str]) -> list[SpecPolicy]:
    from specsim.simulate.policy import SpecPolicy

    items = [x.strip() for v in values for x in v.split(";") if x.strip()]
    if not items:
        raise SpecsimError("--sweep-policies: no policy given")
    return [SpecPolicy.parse(x, "--sweep-policies") for x in items]


@contextlib.contextmanager
def _progress() -> Iterator[Any]:
    """A transient progress bar on stderr (only at a terminal): tick(description[, done, total]); without a
    total the bar pulses (one long simulation), with one it fills (a sweep's simulations)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    err = Console(file=sys.stderr)
    with Progress(TextColumn("[bold]simulate[/bold] {task.description:<34}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, transient=True, disable=not err.is_terminal) as bar:
        task = bar.add_task("loading", total=None)

        def tick(step: str, done: int | None = None, total: int | None = None) -> None:
            bar.update(task, description=step, completed=done or 0, total=total)

        yield tick


@contextlib.contextmanager
def _backend(name: str) -> Iterator[None]:
    """joblib's backend for a sweep: loky (local processes); dask (a distributed.Client: the scheduler in
    DASK_SCHEDULER_ADDRESS, else a local cluster); ray (ray.util.joblib). Dask and Ray are not dependencies."""
    import joblib

    if name == "loky":
        yield
        return
    if name == "dask":
        try:
            from distributed import Client
        except ImportError:
            raise SpecsimError("--backend dask needs Dask's distributed scheduler: pip install 'dask[distributed]'"
                               ) from None
        address = os.environ.get("DASK_SCHEDULER_ADDRESS")
        with Client(address) if address else Client(processes=True) as _client, \
                joblib.parallel_config(backend="dask"):
            yield
        return
    try:
        from ray.util.joblib import register_ray
    except ImportError:
        raise SpecsimError("--backend ray needs Ray: pip install 'ray[default]'") from None
    register_ray()
    with joblib.parallel_config(backend="ray"):
        yield


# --- output --------------------------------------------------------------------------------------------

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
    ("goodput (requests/s within SLO)", "goodput_rps", None), ("SLO attainment", "slo_attainment", None),
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


def _describe_arrivals(setup: Setup) -> str:
    from specsim.simulate.traffic import Gamma, Poisson, RateCurve, TraceArrivals

    a = setup.traffic.arrivals
    if isinstance(a, Poisson):
        return f"Poisson at {a.rate_rps:g} requests/s"
    if isinstance(a, Gamma):
        return f"gamma gaps (CV {a.cv:g}) at {a.rate_rps:g} requests/s"
    if isinstance(a, RateCurve):
        return (f"rate curve over the day (daily mean {a.mean_rate_rps:.3g} requests/s, gap CV {a.cv:g}) from hour "
                f"{a.start_hour:g}")
    if isinstance(a, TraceArrivals):
        return f"trace {Path(a.trace.source).name} x{a.speedup:g}"
    return type(a).__name__


def outcome_dict(o: Outcome) -> dict[str, Any]:
    """The JSON record of `specsim simulate --format json`."""
    from specsim.simulate.capacity import Comparison
    from specsim.simulate.run import mean_lengths

    st = o.setup
    s = st.scenario
    prompt, output = mean_lengths(st.traffic)
    kmax = max(1, st.policy.max_k)
    runs = {("on" if r.policy.enabled else "off"): {"policy": r.policy.label,
                                                    "kv_capacity_tokens": r.kv_capacity_tokens,
                                                    **r.metrics.to_dict()} for r in o.runs}
    comparison = None
    if o.off is not None and o.on is not None:
        comparison = {k: v for k, v in Comparison(o.off.metrics, o.on.metrics).to_dict().items()
                      if k not in ("off", "on")}
    acceptance = [{"workload": c.name, "share": float(sh), "alphas": [float(a) for a in c.conditional(kmax)],
                   "tokens_per_step": float(1 + np.cumprod(c.conditional(kmax)).sum()),
                   "source": src}
                  for c, sh, src in zip(o.acceptance.classes, o.acceptance.shares, o.acceptance_sources, strict=True)]
    slo = st.slo
    replicas = None
    if o.replicas:
        replicas = {"target_rate_rps": o.target_rate_rps,
                    **{("on" if lab != "off" else "off"): rp.to_dict() for lab, rp in o.replicas.items()}}
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


def _metric_rows(o: Outcome) -> tuple[list[str], list[list[Any]]]:
    cols = ["quantity", *(r.policy.label for r in o.runs)]
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
        row: list[Any] = [name, *vals]
        if len(cols) > len(o.runs) + 1:
            a, b = vals
            row.append(None if a is None or b is None or a == 0 else b / a)
        rows.append(row)
    return cols, rows


def _emit_outcome(o: Outcome, fmt: str, timeseries: Path | None) -> None:
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
    s = st.scenario
    head = (f"{s.name}: {s.model.name} on {s.tp}x {s.hardware.name} ({s.engine.name}); "
            f"{data['draft']} {st.policy.label} ({st.policy_source})"
            + (" against no speculation" if o.off is not None and o.on is not None else ""))
    rate = data["traffic"]["simulated_rate_rps"]
    sub = (f"{o.requests.n:,} requests, {data['traffic']['arrivals']}"
           + (f", {rate:.3g} requests/s simulated" if rate else "") + f", seed {st.seed}")
    cols, rows = _metric_rows(o)
    lines: list[str] = []
    if o.replicas:
        rep_cols = ["policy", "replicas", "GPUs", "meets SLO", "TTFT p99 (ms)", "TPOT p99 (ms)", "$ per M tokens"]
        rep_rows = [[lab, rp.replicas, rp.gpus, rp.meets_slo, rp.per_replica.ttft_s.p99 * 1e3,
                     rp.per_replica.tpot_s.p99 * 1e3, rp.cost_per_mtok_usd] for lab, rp in o.replicas.items()]
    acc = ", ".join(f"{c['workload']} {c['share']:.0%}: {c['tokens_per_step']:.2f} tokens/step at k = "
                    f"{max(1, st.policy.max_k)}" for c in data["acceptance"]) if st.policy.enabled else ""
    kv = ", ".join(f"{k}: {v:,}" for k, v in data["serving"]["kv_capacity_tokens"].items())
    lines.append(f"KV capacity (tokens, {data['serving']['kv_source']}): {kv}")
    if acc:
        lines.append(f"acceptance per request: {acc}")
    if timeseries is not None:
        lines.append(f"wrote {timeseries}: batch, running, waiting and KV tokens over time per policy")
    if fmt == "markdown":
        out = [f"**{head}**", "", sub, "", markdown_table(cols, rows)]
        if o.replicas:
            out += [f"Replicas for {o.target_rate_rps:g} requests/s:", "", markdown_table(rep_cols, rep_rows)]
        out += [line + "  " for line in lines] + [f"> {n}" for n in st.notes]
        sys.stdout.write("\n".join(out) + "\n")
        return
    con = console()
    con.print(head, style="bold", markup=False)
    con.print(sub, markup=False)
    print_rows_table("speculation off and on" if len(o.runs) > 1 else "simulation", cols, rows)
    if o.replicas:
        print_rows_table(f"replicas for {o.target_rate_rps:g} requests/s within the SLO", rep_cols, rep_rows)
    for line in lines:
        con.print(line, markup=False)
    for note in st.notes:
        con.print(f"note: {note}", style="yellow", markup=False)


def _timeseries_frame(o: Outcome) -> pd.DataFrame:
    parts = []
    for r in o.runs:
        ts = r.metrics.timeseries
        if ts is None:
            continue
        parts.append(pd.DataFrame({"policy": r.policy.label, "time_s": ts.time_s, "bin_s": ts.bin_s,
                                   "decode_batch": ts.decode_batch, "running": ts.running, "waiting": ts.waiting,
                                   "kv_tokens": ts.kv_tokens}))
    return pd.concat(parts, ignore_index=True)


SWEEP_COLUMNS = ("rate_rps", "draft", "policy", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "output_tok_s",
                 "goodput_rps", "cost_per_mtok_usd")


def _emit_sweep(setup: Setup, frame: pd.DataFrame, fmt: str) -> None:
    if fmt in ("csv", "json"):
        emit(frame, fmt)
        return
    cols = [c for c in SWEEP_COLUMNS if c in frame.columns and frame[c].notna().any()]
    view = frame[cols].copy()
    for c in cols:
        if c.endswith("_s") and c.startswith(("ttft", "tpot")):
            view[c] = view[c] * 1e3
    view.columns = [c[:-2] + "_ms" if c.endswith("_s") and c.startswith(("ttft", "tpot")) else c for c in cols]
    s = setup.scenario
    emit(view, fmt, f"{s.name}: {len(frame)} simulations, {setup.traffic.num_requests or 'all'} requests each, "
                    f"seed {setup.seed}")


__all__ = ["outcome_dict", "simulate"]
