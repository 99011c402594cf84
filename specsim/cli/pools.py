"""`specsim pools`: prefill and decode in separate pools (xPyD) against one aggregated pool of the same GPUs, for
open-loop traffic at a rate (advise/pools.py, simulate/disagg.py)."""

from __future__ import annotations

import json
import math
import sys
from typing import Annotated

import typer

from specsim.cli._format import check_format, console, plain, print_rows_table
from specsim.cli._options import fields_command
from specsim.cli.main import app
from specsim.errors import SpecsimError
from specsim.fields import Given

#: simulate's fields the comparison takes (the traffic at a rate; the pools run the scenario's engine limits)
TAKES = ("hardware", "model", "weight_dtype", "kv_dtype", "tp", "dp", "ep", "engine", "draft", "k", "policy",
         "acceptance_length", "task", "input_len", "output_len", "range_ratio", "client", "prompts", "arrivals", "cv",
         "rate", "requests", "seed", "max_num_seqs", "cached_fraction")
COLUMNS = ("layout", "GPUs", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "tok/s/GPU", "KV ms")


@app.command("pools")
@fields_command("simulate", TAKES)
def pools(
    given: Given,
    pd: Annotated[str, typer.Option("--pd", help="prefill:decode replicas to compare, e.g. 1:1,1:2,2:1 (or 1P2D)")
                  ] = "1:1,1:2,2:1",
    kv_link: Annotated[float, typer.Option("--kv-link", help=(
        "KV transfer bandwidth per GPU between the pools, GB/s (default: one 400 Gb/s NIC per GPU at Mooncake's "
        "measured 87% of line rate)"))] = 43.5,
    kv_latency: Annotated[float, typer.Option("--kv-latency", help="per-transfer latency, ms")] = 0.0,
    ttft_ms: Annotated[float | None, typer.Option("--ttft-ms", help="p99 TTFT the layouts must meet, ms")] = None,
    tpot_ms: Annotated[float | None, typer.Option("--tpot-ms", help="p99 TPOT the layouts must meet, ms")] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="table | json")] = "table",
) -> None:
    """Prefill and decode pools (xPyD: NVIDIA Dynamo, llm-d, SGLang / vLLM disaggregation) against one aggregated
    pool of the same GPUs: TTFT (queueing + prefill + KV transfer) and TPOT percentiles, output tokens/s per GPU.
    Speculation runs on the decode pool. Open-loop traffic: give --rate."""
    from specsim.advise.benchmark import benchmark_data
    from specsim.advise.pools import compare_pools, fewest_within, parse_ratios
    from specsim.advise.simulation import make_setup
    from specsim.scenario.scenario import parse_scenario

    check_format(fmt, ("table", "json"))
    ratios = parse_ratios(pd)
    if not given.given("rate"):
        raise SpecsimError("pools compares open-loop traffic: give --rate (requests/s)")
    if not (math.isfinite(kv_link) and kv_link > 0) or not (math.isfinite(kv_latency) and kv_latency >= 0):
        raise SpecsimError("--kv-link must be > 0 GB/s and --kv-latency >= 0 ms")
    data = benchmark_data(given)
    data["traffic"]["arrivals"] = {"process": str(given["arrivals"]), "rate_rps": float(given["rate"]),
                                   **({"cv": float(given["cv"])} if given.given("cv") else {})}
    n = int(given["requests"]) if given.given("requests") else 400
    setup = make_setup(parse_scenario(data, "command line"), rate=float(given["rate"]), requests=n,
                       seed=int(given["seed"]) if given.given("seed") else None)
    rows = compare_pools(setup, ratios, kv_link, kv_latency)
    s = setup.scenario
    title = (f"{s.model.name} on {setup.gpus_per_replica}x {s.hardware.name} per replica ({s.engine.name}), "
             f"{given['input_len']:,} in / {given['output_len']:,} out at {float(given['rate']):g} req/s, decode "
             f"pool {setup.policy.label} ({setup.draft.label}); KV link {kv_link:g} GB/s per GPU")
    for limit in (ttft_ms, tpot_ms):
        if limit is not None and not (math.isfinite(limit) and limit > 0):
            raise SpecsimError(f"--ttft-ms and --tpot-ms must be > 0 ms, got {limit:g}")
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
