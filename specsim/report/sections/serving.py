"""Serving simulation: the scenario's traffic run request by request (specsim simulate) with speculation off
and on: latency percentiles against the arrival rate, and the batch over the day (one short stationary run
per hour of a rate curve: its rate and burstiness at that hour; the simulated window's own batch over time
for other arrivals). None for a scenario without a `traffic:` section."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from specsim.advise.simulation import Setup, make_setup, run_scenario, sweep_cases
from specsim.advise.traffic import mean_lengths, stationary
from specsim.errors import SpecsimError
from specsim.report.context import Ctx, Section, md_table
from specsim.report.figures import drawing as fg
from specsim.scenario.traffic import Gamma, RateCurve, TraceArrivals, Traffic, generate_requests
from specsim.simulate.cost import StepTable
from specsim.simulate.sweep import SweepBatch, SweepCase, sweep_many
from specsim.step.policy import Policy

#: Requests per simulation of the report's rate sweep (the scenario's count when smaller; fewer for long outputs,
#: at most REPORT_TOKENS output tokens, at least 100): a curve's points to a few percent, in seconds. The scenario's
#: own window runs its own count, as `specsim simulate` does.
REPORT_REQUESTS = 1000
REPORT_TOKENS = 400_000
#: Requests per hour of the day (a stationary run at that hour's rate).
HOUR_REQUESTS = 200
#: Rates of the latency curve, as multiples of the scenario's simulated rate.
RATE_MULTIPLES = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5)
#: Closed-loop concurrencies of the throughput-interactivity frontier (at most the engine's max_num_seqs).
FRONTIER_CONCURRENCY = (1, 4, 16, 64, 256)


def _setup(c: Ctx) -> Setup | None:
    """The scenario's simulation as it states it (its request count, as `specsim simulate` runs it); None without a
    `traffic:` section."""
    if c.s.traffic is None:
        return None
    return make_setup(c.s, analytic=lambda: c.plan)


def _sweep_setup(c: Ctx, setup: Setup) -> Setup:
    """The rate sweep's simulations: the scenario's, capped at REPORT_REQUESTS requests (REPORT_TOKENS output
    tokens)."""
    cap = max(100, min(REPORT_REQUESTS, round(REPORT_TOKENS / max(mean_lengths(setup.traffic)[1], 1.0))))
    n = setup.traffic.num_requests
    if setup.traffic.duration_s is not None and not isinstance(setup.traffic.arrivals, TraceArrivals):
        n = round(setup.traffic.mean_rate_rps * setup.traffic.duration_s)
    return make_setup(c.s, requests=cap, analytic=lambda: c.plan) if n is not None and n > cap else setup


def _hour_cases(setup: Setup) -> tuple[np.ndarray, list[SweepCase], StepTable] | None:
    """Per hour of a rate curve: a stationary gamma run at the hour's rate, off and on (None: no curve): the
    rates by hour and the cases, one per distinct rate and policy (hours at the same rate share one run: the
    same traffic and seed, the same simulation)."""
    arr = setup.traffic.arrivals
    if not isinstance(arr, RateCurve):
        return None
    rates = arr.rate_at(np.arange(24.0) + 0.5)
    policies = _policies(setup)
    mix, _ = setup.mix()
    cases = []
    for r in dict.fromkeys(float(x) for x in rates if x > 0):
        traffic = Traffic(Gamma(r, arr.cv), setup.traffic.prompt, setup.traffic.output, HOUR_REQUESTS)
        for p in policies:
            cases.append(SweepCase(traffic, setup.engine(p), mix, setup.seed, (("rate_rps", r), ("policy", p.label))))
    reqs = [generate_requests(c.traffic, c.seed) for c in cases[::len(policies)]]
    return rates, cases, setup.table(policies, reqs)


def _policies(setup: Setup) -> list[Policy]:
    return [Policy.off(), setup.policy] if setup.policy.enabled else [Policy.off()]


def _hour_rows(setup: Setup, rates: np.ndarray, frame: pd.DataFrame) -> tuple[np.ndarray, pd.DataFrame]:
    """The hour cases' rows by hour of the day (hours at one rate repeat its rows)."""
    hours = pd.DataFrame([{"hour": float(h), "rate_rps": float(r), "policy": p.label}
                          for h, r in enumerate(rates.tolist()) if r > 0 for p in _policies(setup)])
    return rates, hours.merge(frame, on=["rate_rps", "policy"], how="left").drop(columns="rate_rps")


def _hours(setup: Setup) -> tuple[np.ndarray, pd.DataFrame] | None:
    """Per hour of a rate curve: a stationary gamma run at the hour's rate, off and on (None: no curve)."""
    got = _hour_cases(setup)
    if got is None:
        return None
    rates, cases, table = got
    return _hour_rows(setup, rates, sweep_many([(cases, table)], setup.slo, setup.pricing, workers=1)[0])


def _figure(setup: Setup, by_rate: pd.DataFrame, hours: tuple[np.ndarray, pd.DataFrame] | None,
            window: dict[str, Any], title: str) -> Figure:
    fig = Figure(figsize=(13.0, 5.0), layout="constrained")
    FigureCanvasAgg(fig)
    ax1, ax2 = fig.subplots(1, 2)
    for i, lab in enumerate(dict.fromkeys(by_rate["policy"])):
        rows = by_rate[by_rate["policy"] == lab].sort_values("rate_rps", kind="stable")
        x = rows["rate_rps"].to_numpy()
        colour = "black" if lab == "off" else fg.SERIES[i % len(fg.SERIES)]
        name = "no speculation" if lab == "off" else f"{setup.draft.label} {lab}"
        ax1.plot(x, rows["tpot_p99_s"].to_numpy() * 1e3, color=colour, lw=2, marker="o", label=f"{name}: TPOT p99")
        ax1.plot(x, rows["tpot_p50_s"].to_numpy() * 1e3, color=colour, lw=1, ls="--", label=f"{name}: TPOT p50")
        ax1.plot(x, rows["ttft_p99_s"].to_numpy() * 1e3 / 10, color=colour, lw=1, ls=":",
                 label=f"{name}: TTFT p99 / 10")
    if setup.slo is not None:
        ax1.axhline(setup.slo.tpot_s * 1e3, color="red", lw=1, ls="-.",
                    label=f"TPOT bound {setup.slo.tpot_s * 1e3:g} ms (p{setup.slo.percentile:g})")
    ax1.set_yscale("log")
    ax1.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax1.yaxis.set_minor_formatter(FuncFormatter(lambda v, _pos: f"{v:g}" if str(f"{v:g}")[0] in "25" else ""))
    ax1.set_xlabel("arrival rate per replica (requests/s)")
    ax1.set_ylabel("latency (ms)")
    ax1.set_title("latency percentiles against the arrival rate", fontsize=11)
    ax1.legend(fontsize=7, loc="upper left")
    if hours is not None:
        rates, rows = hours
        ax2b = ax2.twinx()
        ax2b.bar(np.arange(24) + 0.5, rates, width=0.9, color="#dddddd", label="arrival rate (requests/s)")
        ax2b.set_ylabel("arrival rate (requests/s)")
        ax2.set_zorder(ax2b.get_zorder() + 1)
        ax2.patch.set_visible(False)
        for i, lab in enumerate(dict.fromkeys(rows["policy"])):
            mine = rows[rows["policy"] == lab].sort_values("hour", kind="stable")
            colour = "black" if lab == "off" else fg.SERIES[i % len(fg.SERIES)]
            ax2.plot(mine["hour"].to_numpy() + 0.5, mine["mean_decode_batch"].to_numpy(), color=colour, lw=2,
                     marker="o", ms=3, label="no speculation" if lab == "off" else f"{setup.draft.label} {lab}")
        ax2.set_xlim(0, 24)
        ax2.set_xticks(range(0, 25, 3))
        ax2.set_xlabel("hour of the day")
        ax2.set_title("mean decode batch over the day (a stationary run per hour)", fontsize=11)
    else:
        for i, (lab, ts) in enumerate(window.items()):
            colour = "black" if lab == "off" else fg.SERIES[i % len(fg.SERIES)]
            ax2.plot(ts.time_s - ts.time_s[0], ts.decode_batch, color=colour, lw=1.2,
                     label="no speculation" if lab == "off" else f"{setup.draft.label} {lab}")
        ax2.set_xlabel("time (s)")
        ax2.set_title("decode batch over the simulated window", fontsize=11)
    ax2.set_ylabel("mean decode batch (sequences)")
    ax2.legend(fontsize=8, loc="upper left")
    fig.suptitle(fg.wrap_title(f"{title}: serving simulation, speculation off and on", 13.0, 12), fontsize=12)
    return fig


def _fmt(x: float | None, scale: float = 1.0, digits: int = 1) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x * scale:,.{digits}f}"


@dataclasses.dataclass(frozen=True, eq=False)
class ServingRuns:
    """The serving section's simulations, started (`start_serving`) before they are needed."""

    setup: Setup | None = None
    error: str = ""
    outcome: Any = None  # run_scenario's outcome (the window, off and on)
    rate: float = math.nan
    hours: tuple[np.ndarray, list[SweepCase], StepTable] | None = None
    batch: SweepBatch | None = None
    frontier_at: int = -1  # the index of the concurrency sweep's frame in the batch (-1: none)
    collected: list[pd.DataFrame] = dataclasses.field(default_factory=list)  # the batch's frames, once collected
    sweep_requests: int | None = None  # requests per point of the rate sweep (None: the scenario's duration)


def start_serving(c: Ctx) -> ServingRuns:
    """The scenario's window run here, then the rate sweep and the hourly runs started in forked workers (they
    run while the caller builds other sections); `serving_section(c, runs)` collects them."""
    try:
        setup = _setup(c)
    except SpecsimError as exc:
        return ServingRuns(error=str(exc))
    if setup is None:
        return ServingRuns()
    outcome = run_scenario(setup, compare=True, bins=200)
    rate = float(outcome.requests.mean_rate_rps) if outcome.requests.n > 1 else setup.traffic.mean_rate_rps
    if not math.isfinite(rate) and outcome.runs:  # closed-loop clients send as fast as they finish: their pace
        rate = float(outcome.runs[0].metrics.requests_per_s)
    sweep = _sweep_setup(c, setup)
    base = stationary(sweep.traffic, rate) if math.isfinite(rate) and rate > 0 else sweep.traffic
    by_rate_setup = dataclasses.replace(sweep, traffic=base)
    rates = [rate * m for m in RATE_MULTIPLES]
    batches: list[tuple[list[SweepCase], StepTable | dict[str, StepTable]]] = [sweep_cases(by_rate_setup, rates)]
    hour_cases = _hour_cases(setup)
    if hour_cases is not None:
        batches.append((hour_cases[1], hour_cases[2]))
    frontier_at = -1
    if setup.policy.enabled:  # the frontier: closed-loop clients at each concurrency, off and on
        clients = [x for x in FRONTIER_CONCURRENCY if x <= setup.limits.max_num_seqs]
        batches.append(sweep_cases(setup, concurrencies=clients))
        frontier_at = len(batches) - 1
    batch = SweepBatch(batches, setup.slo, setup.pricing)  # the report's simulations, over the CPUs
    return ServingRuns(setup, "", outcome, rate, hour_cases, batch, frontier_at,
                       sweep_requests=by_rate_setup.traffic.num_requests)


def serving_section(c: Ctx, runs: ServingRuns | None = None) -> Section | None:
    """The serving simulation's section (module docstring); None when the scenario has no `traffic:`."""
    runs = runs if runs is not None else start_serving(c)
    if runs.error:
        return Section("Serving simulation", f"The serving simulation could not run: {runs.error}.")
    if runs.setup is None or runs.batch is None:
        return None
    setup, outcome, rate, hour_cases = runs.setup, runs.outcome, runs.rate, runs.hours
    frames = runs.batch.frames()
    runs.collected[:] = frames  # the frontier section reads its frame from the same batch
    by_rate = frames[0]
    hours = None if hour_cases is None else _hour_rows(setup, hour_cases[0], frames[1])
    window = {r.policy.label: r.metrics.timeseries for r in outcome.runs if r.metrics.timeseries is not None}
    fig = _figure(setup, by_rate, hours, window, c.title)
    header = ["", *(("no speculation" if not r.policy.enabled else f"{setup.draft.label} {r.policy.label}")
                    for r in outcome.runs)]
    rows = []
    for name, get, scale, digits in (
            ("TTFT p50 / p99 (ms)", lambda m: (m.ttft_s.p50, m.ttft_s.p99), 1e3, 0),
            ("TPOT p50 / p99 (ms)", lambda m: (m.tpot_s.p50, m.tpot_s.p99), 1e3, 1),
            ("ITL per token p50 / p99 (ms)", lambda m: (m.itl_token_s.p50, m.itl_token_s.p99), 1e3, 1),
            ("e2e p50 / p99 (s)", lambda m: (m.e2e_s.p50, m.e2e_s.p99), 1.0, 2)):
        rows.append([name, *(" / ".join(_fmt(v, scale, digits) for v in get(r.metrics)) for r in outcome.runs)])
    rows.append(["output tokens/s", *(_fmt(r.metrics.output_tok_s, 1, 0) for r in outcome.runs)])
    if setup.slo is not None:
        rows.append(["goodput (requests/s within the SLO)", *(_fmt(r.metrics.goodput_rps, 1, 2)
                                                               for r in outcome.runs)])
    rows.append(["mean decode batch", *(_fmt(r.metrics.mean_decode_batch, 1, 1) for r in outcome.runs)])
    rows.append(["KV capacity (tokens)", *(f"{r.kv_capacity_tokens:,}" for r in outcome.runs)])
    slo = setup.slo
    text = [f"The scenario's traffic ({outcome.requests.n:,} requests at {rate:.3g} requests/s, seed {setup.seed}) "
            "run through an iteration-level model of the engine (continuous batching, chunked prefill, KV cache "
            "and preemption), each step priced by the planner's own step arithmetic and each request's accepted "
            f"tokens drawn from its workload's acceptance; policy {setup.policy.label} ({setup.policy_source}).",
            "", md_table(header, rows), ""]
    sv = c.plan.serving
    if sv is not None:
        text += [f"Replicas by simulation (objective slo) at {sv.target_rate_rps:g} requests/s: "
                 f"**{sv.replicas} with {sv.draft} {sv.policy}**, {sv.baseline.replicas} without "
                 f"speculation ({len(sv.trials)} simulations over "
                 f"{len({(t.draft, t.policy) for t in sv.trials})} candidates); what that fleet costs is in "
                 "Capacity and cost.", ""]
    elif setup.pricing is not None:
        text += ["This window is one replica at the scenario's own rate; the cost of a token is quoted once, in "
                 "Capacity and cost.", ""]
    if slo is not None:
        text += [f"SLO: {slo.percentile:g}th-percentile TTFT <= {slo.ttft_s * 1e3:g} ms and TPOT <= "
                 f"{slo.tpot_s * 1e3:g} ms."]
    per_point = f"{runs.sweep_requests:,} requests a point, " if runs.sweep_requests else ""
    right = ("the mean decode batch in each hour of the day, from a stationary run at that hour's rate (the bars)."
             if hours is not None else "the decode batch over the simulated window.")
    after = ("Left: latency percentiles as the same traffic arrives faster or slower (" + per_point + "TTFT scaled by "
             "1/10 to share the axis). Right: " + right)
    return Section("Serving simulation", "\n".join(text), fig, "serving",
                   "Latency percentiles against the arrival rate, and the batch over the day", after)


def frontier_section(c: Ctx, runs: ServingRuns | None) -> Section | None:
    """Throughput per GPU against interactivity, closed-loop clients at each concurrency with speculation off and
    on (the simulate command's frontier, on the scenario's lengths, draft and policy); None without one."""
    from specsim.advise.benchmark import client_frame
    from specsim.report.figures.frontier import frontier
    from specsim.simulate.frontier import crossovers, recommend

    if runs is None or runs.setup is None or runs.frontier_at < 0 or not runs.collected:
        return None
    frames = runs.collected
    setup = runs.setup
    rows = client_frame(frames[runs.frontier_at], setup.gpus_per_replica, "vllm")
    cross = crossovers(rows)
    fig = frontier(rows, "concurrency", cross, c.title)
    picks = recommend(rows)
    table = [[f"{p.load_from:g}" if p.load_from == p.load_to else f"{p.load_from:g}-{p.load_to:g}",
              p.configuration, "-" if p.configuration == "off" else f"{p.gain:.2f}x"] for p in picks]
    stops = "; ".join(f"{name}: " + ("still pays at concurrency " + f"{max(rows['concurrency']):g}" if at is None
                                     else f"stops paying at concurrency {at:g}") for name, at in cross.items())
    body = ("Closed-loop clients, as serving benchmarks run them (`--max-concurrency N --request-rate inf`, the "
            "scenario's prompt and output lengths, 10 requests per client): output tokens/s per GPU against "
            "tokens/s per user, one curve per configuration (`specsim simulate SCENARIO --concurrency "
            f"{','.join(str(int(x)) for x in sorted(rows['concurrency'].unique()))} --plot frontier.png`). {stops}."
            "\n\n" + md_table(["concurrency", "run", "output tok/s vs off"], table))
    return Section("Throughput against interactivity", body, fig, "frontier",
                   "Output tokens/s per GPU against tokens/s per user, speculation off and on",
                   "Each point is one concurrency; where the speculating curve falls below plain decoding's at the "
                   "same concurrency, speculation has stopped paying.")
