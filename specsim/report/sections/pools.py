"""Prefill and decode pools (a scenario's serving.pools): each xPyD layout asked beside one aggregated pool of the
same GPUs, simulated on the scenario's open-loop traffic (advise/pools.py, simulate/disagg.py), and the fewest GPUs
that meet the scenario's SLO (its TTFT and TPOT bounds, held at the 99th percentile)."""

from __future__ import annotations

import math

from specsim.report.context import Ctx, Section, md_table

REPORT_REQUESTS = 400  # requests each layout serves (the scenario's own where fewer)


def pools_section(c: Ctx) -> Section | None:
    """None unless the scenario asks for pools (serving.pools) over open-loop traffic."""
    serving = c.s.serving
    if serving is None or serving.pools is None or c.s.traffic is None:
        return None
    from specsim.advise.pools import compare_pools, fewest_within
    from specsim.advise.simulation import make_setup

    spec = serving.pools
    n = c.s.traffic.traffic.num_requests
    setup = make_setup(c.s, requests=min(n, REPORT_REQUESTS) if n else REPORT_REQUESTS, analytic=lambda: c.plan)
    if setup.traffic.concurrency is not None or setup.traffic.sessions is not None or not math.isfinite(
            setup.traffic.mean_rate_rps):
        return Section("Prefill and decode pools", "Not simulated: pools are compared on open-loop traffic (an "
                       "arrival rate), and this scenario's traffic is closed-loop clients or sessions.")
    rows = compare_pools(setup, spec.pd, spec.kv_link_gb_per_s, spec.kv_latency_ms)
    slo = setup.slo
    answer = fewest_within(rows, slo.ttft_s * 1e3 if slo else None, slo.tpot_s * 1e3 if slo else None)
    table = md_table(["layout", "GPUs", "TTFT p50 ms", "TTFT p99 ms", "TPOT p50 ms", "TPOT p99 ms", "tok/s per GPU",
                      "KV transfer ms"],
                     [[r.layout, r.gpus, f"{r.ttft_p50_ms:,.0f}", f"{r.ttft_p99_ms:,.0f}", f"{r.tpot_p50_ms:.2f}",
                       f"{r.tpot_p99_ms:.2f}", f"{r.tok_s_per_gpu:,.0f}",
                       "-" if r.transfer_ms is None else f"{r.transfer_ms:.1f}"] for r in rows])
    body = (f"{answer}.\n\nThe scenario's traffic at {setup.traffic.mean_rate_rps:g} requests/s "
            f"({setup.traffic.num_requests:,} requests) through x prefill and y decode replicas (xPyD: the first "
            f"token on the prefill pool, the KV over a {spec.kv_link_gb_per_s:g} GB/s-per-GPU link, the rest "
            f"decoded with {setup.policy.label} on the decode pool), beside one pool of the same GPUs running both "
            "(`specsim pools`):\n\n" + table)
    return Section("Prefill and decode pools", body)
