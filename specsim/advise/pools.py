"""Prefill and decode pools against one aggregated pool on the same GPUs (simulate/disagg.py): for each xPyD asked,
the traffic through x prefill and y decode replicas with the KV moved over the fabric and speculation on the decode
pool, beside (x + y) aggregated replicas serving the same requests (round-robin), speculation on.

The fabric's default: one 400 Gb/s NIC per GPU (ConnectX-7 in DGX H100 / B200 systems) at the 87% of line rate
Mooncake's transfer engine measured (87 GB/s on 4 x 200 Gb/s RoCE; research/serving-2026.md section 5.2,
[MOONCAKE]): 43.5 GB/s per GPU; the transfer spreads over the prefill replica's GPUs. Per-transfer latency: not
found (NIXL publishes none), 0 unless given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specsim.advise.simulation import Setup
from specsim.errors import SpecsimError
from specsim.scenario.kv_cache import DEFAULT_KV_LINK_GB_PER_S
from specsim.scenario.traffic import Requests, generate_requests
from specsim.simulate.disagg import Pools, simulate_pools
from specsim.simulate.engine import simulate
from specsim.step.policy import Policy


@dataclass(frozen=True)
class PoolRow:
    """One layout's answer: GPUs, latency percentiles (ms) and output tokens/s per GPU."""

    layout: str
    gpus: int
    ttft_p50_ms: float
    ttft_p99_ms: float
    tpot_p50_ms: float
    tpot_p99_ms: float
    tok_s_per_gpu: float
    transfer_ms: float | None  # mean KV transfer (disaggregated only)


def _pct(values: np.ndarray, q: float) -> float:
    v = values[np.isfinite(values)]
    return float(np.percentile(v, q) * 1e3) if v.size else float("nan")


def compare_pools(setup: Setup, ratios: Sequence[tuple[int, int]], link_gb_per_s: float = DEFAULT_KV_LINK_GB_PER_S,
                  latency_ms: float = 0.0) -> list[PoolRow]:
    """Each xPyD's disaggregated run, then the aggregated pool of the same GPUs (module docstring)."""
    if not link_gb_per_s > 0:
        raise SpecsimError(f"--kv-link must be > 0 GB/s, got {link_gb_per_s:g}")
    req = generate_requests(setup.traffic, setup.seed)
    if req.concurrency is not None or req.session is not None:
        raise SpecsimError("pools compares open-loop traffic: give --rate (not --concurrency or --turns)")
    policy = setup.policy
    mix, _ = setup.mix()
    table = setup.table([Policy.off(), policy], [req])
    gpus = setup.gpus_per_replica
    kv_bytes = setup.scenario.model.kv_bytes_per_token(setup.scenario.kv_dtype)
    per_token = kv_bytes / (link_gb_per_s * 1e9 * gpus)
    rows = []
    for x, y in ratios:
        pools = Pools(x, y, setup.engine(Policy.off()), setup.engine(policy), per_token, latency_ms / 1e3)
        res = simulate_pools(req, pools, table, table, mix if policy.enabled else None, setup.seed)
        rows.append(PoolRow(f"{x}P{y}D", (x + y) * gpus, _pct(res.ttft_s, 50), _pct(res.ttft_s, 99),
                            _pct(res.tpot_s, 50), _pct(res.tpot_s, 99), res.output_tok_s / ((x + y) * gpus),
                            float(np.mean(res.transfer_s) * 1e3)))
    for n in sorted({x + y for x, y in ratios}):
        rows.append(_aggregated(setup, req, n, table, mix))
    return rows


def _aggregated(setup: Setup, req: Requests, replicas: int, table: object, mix: object) -> PoolRow:
    """`replicas` aggregated replicas, requests round-robin, speculation as the decode pool runs it."""
    policy = setup.policy
    ttft, tpot, finish = [], [], []
    for r in range(replicas):
        idx = np.arange(r, req.n, replicas)
        sub = Requests(req.arrival_s[idx], req.prompt_tokens[idx], req.output_tokens[idx], None,
                       None if req.cached_tokens is None else req.cached_tokens[idx])
        res = simulate(sub, setup.engine(policy), table, mix if policy.enabled else None, setup.seed)  # type: ignore[arg-type]
        first = res.first_token_s - sub.arrival_s
        out = sub.output_tokens.astype(float)
        ttft.append(first)
        with np.errstate(invalid="ignore", divide="ignore"):
            tpot.append(np.where(out > 1, (res.finish_s - res.first_token_s) / (out - 1), np.nan))
        finish.append(res.finish_s)
    t, p, f = np.concatenate(ttft), np.concatenate(tpot), np.concatenate(finish)
    gpus = replicas * setup.gpus_per_replica
    span = float(np.nanmax(f) - req.arrival_s[0])
    return PoolRow(f"{replicas} replicas", gpus, _pct(t, 50), _pct(t, 99), _pct(p, 50), _pct(p, 99),
                   float(req.output_tokens.sum() / span / gpus) if span > 0 else float("nan"), None)


def fewest_within(rows: Sequence[PoolRow], ttft_ms: float | None, tpot_ms: float | None) -> str:
    """The answer: the fewest GPUs whose p99 TTFT and TPOT meet the limits given (ties: the lower TPOT), a pool
    layout's beside the aggregated pool's; without limits, the lowest p99 TPOT per GPU count."""
    def ok(r: PoolRow) -> bool:
        return ((ttft_ms is None or r.ttft_p99_ms <= ttft_ms) and (tpot_ms is None or r.tpot_p99_ms <= tpot_ms))

    def best(part: list[PoolRow]) -> PoolRow | None:
        good = [r for r in part if ok(r)]
        return min(good, key=lambda r: (r.gpus, r.tpot_p99_ms)) if good else None

    split = best([r for r in rows if r.transfer_ms is not None])
    agg = best([r for r in rows if r.transfer_ms is None])
    limits = " and ".join(x for x in (f"TTFT p99 <= {ttft_ms:g} ms" if ttft_ms else "",
                                      f"TPOT p99 <= {tpot_ms:g} ms" if tpot_ms else "") if x) or "no limit given"

    def words(r: PoolRow | None) -> str:
        return "none of those asked" if r is None else f"{r.layout} on {r.gpus} GPUs (TPOT p99 {r.tpot_p99_ms:.2f} ms)"

    return f"Fewest GPUs within {limits}: split pools {words(split)}; one pool {words(agg)}"
