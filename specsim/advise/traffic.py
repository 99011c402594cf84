"""A scenario's traffic as the simulator runs it: the traffic section (or one derived from an arrival rate),
resized to a rate, a request count or a duration; made stationary at a rate; the requests at a target rate that
replica planning thins; the lengths and context that size the step table."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from specsim.errors import SpecsimError
from specsim.scenario.scenario import Scenario
from specsim.scenario.traffic import (
    Empirical,
    Fixed,
    Gamma,
    Lognormal,
    Poisson,
    RateCurve,
    Requests,
    Saturated,
    TraceArrivals,
    Traffic,
    generate_requests,
)
from specsim.scenario.workload import Workload

DERIVED_REQUESTS = 2000  # requests simulated for a scenario whose traffic is derived from arrival_rate_rps
#: Requests generated at a target rate for replica planning (`requests_at`; the SLO optimiser uses the same,
#: so `specsim simulate --target-rate` and `specsim plan` agree): n replicas each simulate about 1/n of them.
REPLICA_REQUESTS = 12_000
MAX_REQUESTS = 10_000_000


def scenario_traffic(s: Scenario) -> tuple[Traffic, int, tuple[Workload, ...]]:
    """(traffic, seed, workloads) of a scenario (module docstring)."""
    if s.traffic is not None:
        return s.traffic.traffic, s.traffic.seed, s.traffic.workloads
    if s.arrival is not None:
        a = s.arrival
        return (Traffic(Poisson(a.rate_rps), Fixed(a.prompt_tokens), Fixed(a.output_tokens), DERIVED_REQUESTS),
                0, ())
    raise SpecsimError(f"{s.path}: no 'traffic:' section to simulate (and the load is buckets of batch sizes, not an "
                       "arrival rate); add a traffic section: arrivals, num_requests, prompt, output")


SESSION_SAMPLE = 64  # sessions drawn to average a session traffic's lengths over


def mean_lengths(traffic: Traffic) -> tuple[float, float]:
    """Mean prompt and output tokens (a replayed trace's own where the traffic gives none; over every turn of a
    sample of sessions where the traffic has sessions)."""
    if traffic.sessions is not None and not isinstance(traffic.arrivals, TraceArrivals):
        sample = generate_requests(dataclasses.replace(traffic, arrivals=Poisson(1.0), num_requests=SESSION_SAMPLE,
                                                       duration_s=None, concurrency=None), 0)
        return float(sample.prompt_tokens.mean()), float(sample.output_tokens.mean())
    arr = traffic.arrivals
    trace = arr.trace if isinstance(arr, TraceArrivals) else None
    prompt = traffic.prompt.mean_tokens if traffic.prompt is not None else (
        float(trace.prompt_tokens.mean()) if trace is not None else 1.0)
    output = traffic.output.mean_tokens if traffic.output is not None else (
        float(trace.output_tokens.mean()) if trace is not None else 1.0)
    return prompt, output


def with_size(traffic: Traffic, rate: float | None = None, requests: int | None = None,
              duration_s: float | None = None) -> Traffic:
    """The traffic at another mean rate and/or another size (num_requests or duration_s)."""
    if requests is not None and duration_s is not None:
        raise SpecsimError("give --requests or --duration, not both")
    if requests is not None:
        if not 1 <= requests <= MAX_REQUESTS:
            raise SpecsimError(f"--requests must be in [1, {MAX_REQUESTS:,}], got {requests:,}")
        traffic = dataclasses.replace(traffic, num_requests=int(requests), duration_s=None)
    if duration_s is not None:
        if not (duration_s > 0 and math.isfinite(duration_s)):
            raise SpecsimError(f"--duration must be a number of seconds > 0, got {duration_s:g}")
        traffic = dataclasses.replace(traffic, duration_s=float(duration_s), num_requests=None)
    if rate is not None:
        if not (rate > 0 and math.isfinite(rate)):
            raise SpecsimError(f"--rate must be a number of requests/s > 0, got {rate:g}")
        traffic = traffic.with_rate(float(rate))
    if traffic.duration_s is not None and not isinstance(traffic.arrivals, TraceArrivals):
        expected = traffic.mean_rate_rps * traffic.duration_s
        if expected > MAX_REQUESTS:
            raise SpecsimError(f"{traffic.duration_s:g} s at {traffic.mean_rate_rps:g} requests/s is about "
                               f"{expected:,.0f} requests; at most {MAX_REQUESTS:,} per run")
    return traffic


#: Requests per client a closed-loop load point sends unless told (`--num-prompts`): ATOM's benchmark workflow and
#: InferenceMAX send 10 x concurrency (shared/validation/SERVING.md: `--num-prompts 10*conc`), at least MIN_PROMPTS.
PROMPTS_PER_CLIENT = 10
MIN_PROMPTS = 20
#: Requests an open-loop load point sends unless told, without a scenario to say: `vllm bench serve --num-prompts`
#: and `sglang.bench_serving --num-prompts` default to 1,000 (vllm/benchmarks/serve.py, python/sglang/bench_serving.py).
RATE_PROMPTS = 1000


def closed_loop(traffic: Traffic, clients: int, num_prompts: int | None = None) -> Traffic:
    """The traffic's lengths sent by `clients` closed-loop clients as fast as they allow (`--max-concurrency N
    --request-rate inf`), `num_prompts` requests (default PROMPTS_PER_CLIENT per client, at least MIN_PROMPTS)."""
    if isinstance(clients, bool) or not isinstance(clients, int) or not 1 <= clients <= 100_000:
        raise SpecsimError(f"concurrency must be an integer in [1, 100000], got {clients!r}")
    n = num_prompts if num_prompts is not None else max(PROMPTS_PER_CLIENT * clients, MIN_PROMPTS)
    if not 1 <= n <= MAX_REQUESTS:
        raise SpecsimError(f"--num-prompts must be in [1, {MAX_REQUESTS:,}], got {n:,}")
    if isinstance(traffic.arrivals, TraceArrivals) and (traffic.prompt is None or traffic.output is None):
        raise SpecsimError("a closed loop sends the traffic's lengths; a replayed trace's lengths need "
                           "prompt: {dist: trace} and output: {dist: trace}")
    return dataclasses.replace(traffic, arrivals=Saturated(), concurrency=clients, num_requests=n, duration_s=None)


def stationary(traffic: Traffic, rate: float) -> Traffic:
    """The traffic at a steady mean rate: a rate curve becomes gamma gaps of its CV at that rate (the same
    lengths and size); other arrivals are scaled to it (`Traffic.with_rate`)."""
    arr = traffic.arrivals
    if isinstance(arr, RateCurve):
        return dataclasses.replace(traffic, arrivals=Gamma(float(rate), arr.cv))
    if isinstance(arr, Saturated):  # closed-loop clients at a rate: open loop at that rate
        return dataclasses.replace(traffic, arrivals=Poisson(float(rate)), concurrency=None)
    return traffic.with_rate(rate)


def length_bound(traffic: Traffic) -> float | None:
    """The longest prompt + output the traffic can draw (None: unbounded, e.g. a lognormal without max)."""
    def top(dist: Any, trace_values: Any) -> float | None:
        if dist is None:
            return None if trace_values is None else float(trace_values.max())
        if isinstance(dist, Fixed):
            return float(dist.tokens)
        if isinstance(dist, Lognormal):
            return None if dist.max_tokens is None else float(dist.max_tokens)
        if isinstance(dist, Empirical):
            return float(np.max(dist.values))
        return None

    arr = traffic.arrivals
    trace = arr.trace if isinstance(arr, TraceArrivals) else None
    p = top(traffic.prompt, None if trace is None else trace.prompt_tokens)
    o = top(traffic.output, None if trace is None else trace.output_tokens)
    return None if p is None or o is None else p + o


def mean_context(traffic: Traffic) -> float:
    prompt, output = mean_lengths(traffic)
    return prompt + output / 2.0


def requests_at(traffic: Traffic, rate: float, seed: int, cap: int | None = None) -> Requests:
    """Requests arriving at a steady `rate` (`stationary`: a rate curve's burstiness at that rate; a trace sped
    up), as many more as the rate is higher than the traffic's (a num_requests traffic; at most `cap`): each of
    n replicas then sees about as many requests as the scenario's run has."""
    base = traffic.mean_rate_rps
    t = stationary(traffic, rate)
    top = REPLICA_REQUESTS if cap is None else cap
    if t.num_requests is not None and not isinstance(t.arrivals, TraceArrivals) and rate > base:
        t = dataclasses.replace(t, num_requests=int(min(top, max(t.num_requests, round(t.num_requests * rate / base)))))
    return generate_requests(t, seed)
