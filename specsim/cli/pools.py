"""`specsim pools`: prefill and decode in separate pools (xPyD) against one aggregated pool of the same GPUs, for
open-loop traffic at a rate (advise/pools.py, simulate/disagg.py)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from specsim.cli._format import check_format, console, plain, print_rows_table
from specsim.cli._options import fields_command
from specsim.cli.main import app
from specsim.errors import SpecsimError
from specsim.fields import Given

if TYPE_CHECKING:
    from specsim.advise.simulation import Setup
    from specsim.scenario.kv_cache import PoolsSpec

#: simulate's fields the comparison takes (the traffic at a rate; the pools run the scenario's engine limits)
TAKES = ("hardware", "model", "weight_dtype", "kv_dtype", "tp", "dp", "ep", "engine", "draft", "k", "policy",
         "acceptance_length", "task", "input_len", "output_len", "range_ratio", "client", "prompts", "arrivals", "cv",
         "rate", "requests", "seed", "max_num_seqs", "cached_fraction")
COLUMNS = ("layout", "GPUs", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "tok/s/GPU", "KV ms")


@app.command("pools")
@fields_command("simulate", TAKES)
def pools(
    given: Given,
    scenario: Annotated[Path | None, typer.Argument(help="a scenario with open-loop traffic (its serving.pools: pd, "
                                                        "kv_link_gb_per_s, kv_latency_ms); or the flags alone")] = None,
    pd: Annotated[str | None, typer.Option("--pd", help=(
        "prefill:decode replicas to compare, e.g. 1:1,1:2,2:1 or 1P2D (serving.pools.pd; default 1:1,1:2,2:1)"))
    ] = None,
    kv_link: Annotated[float | None, typer.Option("--kv-link", help=(
        "KV transfer bandwidth per GPU between the pools, GB/s (serving.pools.kv_link_gb_per_s; default: one 400 "
        "Gb/s NIC per GPU at Mooncake's measured 87% of line rate, 43.5)"))] = None,
    kv_latency: Annotated[float | None, typer.Option("--kv-latency", help=(
        "per-transfer latency, ms (serving.pools.kv_latency_ms; default 0: not found published)"))] = None,
    ttft_ms: Annotated[float | None, typer.Option("--ttft-ms", help="p99 TTFT the layouts must meet, ms")] = None,
    tpot_ms: Annotated[float | None, typer.Option("--tpot-ms", help="p99 TPOT the layouts must meet, ms")] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="table | json")] = "table",
) -> None:
    """Prefill and decode pools (xPyD: NVIDIA Dynamo, llm-d, SGLang / vLLM disaggregation) against one aggregated
    pool of the same GPUs: TTFT (queueing + prefill + KV transfer) and TPOT percentiles, output tokens/s per GPU.
    Speculation runs on the decode pool. Open-loop traffic: give --rate."""
    from specsim.advise.pools import compare_pools, fewest_within

    check_format(fmt, ("table", "json"))
    setup, spec = _question(given, scenario, pd, kv_link, kv_latency)
    n = int(setup.traffic.num_requests or 0)
    rows = compare_pools(setup, spec.pd, spec.kv_link_gb_per_s, spec.kv_latency_ms)
    kv_link = spec.kv_link_gb_per_s
    s = setup.scenario
    from specsim.advise.traffic import mean_lengths

    inp, out = mean_lengths(setup.traffic)
    title = (f"{s.model.name} on {setup.gpus_per_replica}x {s.hardware.name} per replica ({s.engine.name}), "
             f"{inp:,.0f} in / {out:,.0f} out at {setup.traffic.mean_rate_rps:g} req/s, decode pool "
             f"{setup.policy.label} ({setup.draft.label}); KV link {kv_link:g} GB/s per GPU")
    for limit in (ttft_ms, tpot_ms):
        if limit is not None and not (math.isfinite(limit) and limit > 0):
            raise SpecsimError(f"--ttft-ms and --tpot-ms must be > 0 ms, got {limit:g}")
    if setup.slo is not None:  # the scenario's SLO unless the flags say otherwise
        ttft_ms = ttft_ms if ttft_ms is not None else setup.slo.ttft_s * 1e3
        tpot_ms = tpot_ms if tpot_ms is not None else setup.slo.tpot_s * 1e3
    verdict = fewest_within(rows, ttft_ms, tpot_ms)
    if fmt == "json":
        sys.stdout.write(json.dumps(plain({"title": title, "requests": n, "ttft_p99_ms_slo": ttft_ms,
                                           "tpot_p99_ms_slo": tpot_ms, "answer": verdict,
                                           "rows": [r.__dict__ for r in rows]}), indent=2) + "\n")
        return
    con = console()
    con.print(verdict, markup=False)
    con.print(title, markup=False)
    cells = [[r.layout, r.gpus, f"{r.ttft_p50_ms:,.0f}", f"{r.ttft_p99_ms:,.0f}", f"{r.tpot_p50_ms:.2f}",
              f"{r.tpot_p99_ms:.2f}", f"{r.tok_s_per_gpu:,.0f}", "-" if r.transfer_ms is None else
              f"{r.transfer_ms:.1f}"] for r in rows]
    print_rows_table(f"{n} requests, ms", COLUMNS, cells)
    con.print("TTFT of a pool layout = queueing + prefill + the KV's transfer; an aggregated replica runs both",
              markup=False)


def _question(given: Given, scenario: Path | None, pd: str | None, kv_link: float | None,
              kv_latency: float | None) -> tuple[Setup, PoolsSpec]:
    """The setup (the scenario's, or the flags' benchmark at --rate) and the pools compared (the scenario's
    serving.pools, each flag given replacing its key)."""
    import dataclasses

    from specsim.advise.benchmark import benchmark_data
    from specsim.advise.simulation import make_setup
    from specsim.scenario.kv_cache import PoolsSpec, parse_pd
    from specsim.scenario.overrides import override
    from specsim.scenario.scenario import load_scenario, parse_scenario

    rate = float(given["rate"]) if given.given("rate") else None
    n = int(given["requests"]) if given.given("requests") else None
    seed = int(given["seed"]) if given.given("seed") else None
    if scenario is None:
        if rate is None:
            raise SpecsimError("pools compares open-loop traffic: give --rate (requests/s), or a scenario")
        data = benchmark_data(given)
        data["traffic"]["arrivals"] = {"process": str(given["arrivals"]), "rate_rps": rate,
                                       **({"cv": float(given["cv"])} if given.given("cv") else {})}
        s = parse_scenario(data, "command line")
        n = n or 400
    else:
        s = load_scenario(scenario)
        if any(given.given(name) for name in given.typed):
            s = parse_scenario(override(dict(s.raw), given, "vllm"), str(scenario))
    setup = make_setup(s, rate=rate, requests=n, seed=seed)
    spec = (s.serving.pools if s.serving is not None else None) or PoolsSpec()
    for value, check in ((kv_link, lambda v: math.isfinite(v) and v > 0), (kv_latency,
                                                                           lambda v: math.isfinite(v) and v >= 0)):
        if value is not None and not check(value):
            raise SpecsimError("--kv-link must be > 0 GB/s and --kv-latency >= 0 ms")
    return setup, dataclasses.replace(
        spec, pd=parse_pd(pd) if pd is not None else spec.pd,
        kv_link_gb_per_s=kv_link if kv_link is not None else spec.kv_link_gb_per_s,
        kv_latency_ms=kv_latency if kv_latency is not None else spec.kv_latency_ms)
