"""Prefill and decode in separate pools (NVIDIA Dynamo, llm-d, SGLang and vLLM P/D disaggregation): x prefill
replicas and y decode replicas, the KV moved between them over the fabric, speculation on the decode pool.

A request is routed round-robin to a prefill replica, which prefills it and samples its first token (the event loop
with one output token, speculation off: serving-2026.md section 5.3, AIConfigurator projects MTP onto decode
workers only). Its KV then crosses the fabric: latency + prompt tokens x KV bytes per token / the link's bandwidth
(serving-2026.md section 5.2, "derived": t_KV = ISL x bytes per token / link bandwidth); vLLM and TensorRT-LLM
wait for the whole transfer before decoding [DYN-DIS]. The first token reaches the client when the KV has landed
(TTFT = queueing + prefill + transfer). The request then joins a decode replica (round-robin in landing order)
holding its whole prompt's KV: the decode pool runs the first token's forward as a one-token prefill (the landed
KV is the cache, at token granularity: nothing recomputed) and decodes the rest with the pool's speculation.

Each pool is the same event loop as an aggregated replica (engine.py), so Little's law holds per pool as it does
for one replica.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from specsim.errors import SpecsimError
from specsim.scenario.serving import EngineConfig
from specsim.scenario.traffic import Requests
from specsim.scenario.workload import AcceptanceMix
from specsim.simulate.cost import StepCost
from specsim.simulate.engine import SimResult, simulate
from specsim.step.policy import Policy

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Pools:
    """x prefill and y decode replicas, each pool's engine, and the KV transfer between them."""

    prefill_replicas: int
    decode_replicas: int
    prefill: EngineConfig
    decode: EngineConfig
    transfer_s_per_token: float  # KV bytes per token / link bytes per second
    transfer_latency_s: float = 0.0

    def __post_init__(self) -> None:
        if self.prefill_replicas < 1 or self.decode_replicas < 1:
            raise SpecsimError(f"pools: need at least one prefill and one decode replica, got "
                               f"{self.prefill_replicas}P{self.decode_replicas}D")
        if self.transfer_s_per_token < 0 or self.transfer_latency_s < 0:
            raise SpecsimError("pools: the KV transfer's time must be >= 0")


@dataclass(frozen=True, eq=False)
class DisaggResult:
    """Per request: arrival, first token at the client (KV landed), finish; each pool's replicas' runs."""

    requests: Requests
    prefill_done_s: FloatArray
    ttft_s: FloatArray
    finish_s: FloatArray
    transfer_s: FloatArray
    prefill_runs: tuple[SimResult, ...]
    decode_runs: tuple[SimResult, ...]

    @property
    def tpot_s(self) -> FloatArray:
        """(finish - first token) / (output - 1); NaN for one-token outputs."""
        out = self.requests.output_tokens.astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(out > 1, (self.finish_s - self.ttft_s - self.requests.arrival_s) / (out - 1), np.nan)

    @property
    def output_tok_s(self) -> float:
        span = float(np.nanmax(self.finish_s) - self.requests.arrival_s[0])
        return float(self.requests.output_tokens.sum() / span) if span > 0 else float("nan")


def _split(requests: Requests, replicas: int, order: npt.NDArray[np.int64]) -> list[npt.NDArray[np.int64]]:
    """Round-robin over `replicas` in the given order: each replica's request indices."""
    return [order[r::replicas] for r in range(replicas)]


def simulate_pools(requests: Requests, pools: Pools, prefill_cost: StepCost, decode_cost: StepCost,
                   acceptance: AcceptanceMix | None, seed: int = 0) -> DisaggResult:
    """Simulate the prefill pool, the transfers, then the decode pool (module docstring). Open loop only: a closed
    loop's clients would couple the pools through their finishes."""
    if requests.concurrency is not None or requests.session is not None:
        raise SpecsimError("pools: disaggregated serving is simulated for open-loop traffic (a rate), not "
                           "closed-loop clients or sessions")
    n = requests.n
    done = np.full(n, np.nan)
    p_runs = []
    prefill_engine = replace(pools.prefill, policy=Policy.off(), verify_tokens=None)
    for idx in _split(requests, pools.prefill_replicas, np.arange(n, dtype=np.int64)):
        sub = Requests(requests.arrival_s[idx], requests.prompt_tokens[idx], np.ones(len(idx), dtype=np.int64),
                       None, None if requests.cached_tokens is None else requests.cached_tokens[idx])
        res = simulate(sub, prefill_engine, prefill_cost, None, seed)
        done[idx] = res.first_token_s
        p_runs.append(res)
    transfer = np.asarray(pools.transfer_latency_s + requests.prompt_tokens * pools.transfer_s_per_token,
                          dtype=np.float64)
    landed = done + transfer
    finish = landed.copy()
    d_runs = []
    decoding = np.flatnonzero((requests.output_tokens > 1) & np.isfinite(landed))
    order = decoding[np.argsort(landed[decoding], kind="stable")]
    decode_engine = replace(pools.decode, kv_block_tokens=1, cache_drop_blocks=0)
    for idx in _split(requests, pools.decode_replicas, order):
        if not len(idx):
            continue
        idx = idx[np.argsort(landed[idx], kind="stable")]
        prompt = requests.prompt_tokens[idx] + 1  # the first token's forward runs on the decode pool
        sub = Requests(landed[idx], prompt, requests.output_tokens[idx] - 1, None, prompt - 1)
        res = simulate(sub, decode_engine, decode_cost, acceptance, seed)
        finish[idx] = res.finish_s
        d_runs.append(res)
    return DisaggResult(requests, done, landed - requests.arrival_s, finish, transfer, tuple(p_runs), tuple(d_runs))
