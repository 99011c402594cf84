"""Capacity under a latency SLO for arrival-rate loads, and the price of a million tokens.

Built on the planner's own Little's-law solver (plan.arrival.solve_concurrency, a request's prefill included),
so the capacity a report quotes is the load at which the plan's latency crosses the SLO.
"""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np

from specsim.drafts.draft import Draft
from specsim.plan.arrival import solve_concurrency
from specsim.scenario.scenario import ArrivalLoad
from specsim.step.evaluate import Target, fits


class RateCurve(Protocol):
    """Per-token latency against arrival rate for one configuration (figures.RateCurve)."""

    rate_rps: np.ndarray
    ms_per_token: np.ndarray


def max_rate_rps(curve: RateCurve, slo_ms: float) -> float:
    """The highest arrival rate one replica serves at <= slo_ms per token on a Little's-law curve (0 if it never
    does): linear interpolation between the curve's points around the crossing (the solver refines it,
    `solver_max_rate`)."""
    ok = curve.ms_per_token <= slo_ms
    if not ok.any():
        return 0.0
    i = int(np.flatnonzero(ok)[-1])
    if i == len(ok) - 1:
        return float(curve.rate_rps[i])  # limited by memory or saturation, not by the SLO
    f = (slo_ms - curve.ms_per_token[i]) / (curve.ms_per_token[i + 1] - curve.ms_per_token[i])
    return float(curve.rate_rps[i] + f * (curve.rate_rps[i + 1] - curve.rate_rps[i]))


def latency_at_rate_ms(t: Target, d: Draft, k: int, a: ArrivalLoad, rate_rps: float) -> float:
    """Per-token latency at a rate by the planner's own Little's-law solver (inf: unservable or no fit)."""
    sol = solve_concurrency(t, d, k, rate_rps, a.prompt_tokens, a.output_tokens)
    if sol is None or not bool(fits(t, d, k, max(sol[0], 1.0), a.prompt_tokens + a.output_tokens / 2)):
        return math.inf
    return sol[1]


def solver_max_rate(t: Target, d: Draft, k: int, a: ArrivalLoad, slo_ms: float, estimate_rps: float) -> float:
    """The highest rate one replica serves within slo_ms by `latency_at_rate_ms`, refined by bisection from
    the Little's-law curve's estimate (0 if even a trickle misses the SLO)."""
    if estimate_rps <= 0:
        return 0.0
    lo, hi = estimate_rps * 0.95, estimate_rps * 1.05
    for _ in range(8):
        if latency_at_rate_ms(t, d, k, a, lo) <= slo_ms:
            break
        lo, hi = lo * 0.8, lo
    else:
        return 0.0
    for _ in range(6):
        if latency_at_rate_ms(t, d, k, a, hi) > slo_ms:
            break
        lo, hi = hi, hi * 1.25
    for _ in range(9):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if latency_at_rate_ms(t, d, k, a, mid) <= slo_ms else (lo, mid)
    return lo


def replicas_needed(t: Target, d: Draft, k: int, a: ArrivalLoad, slo_ms: float, rate_rps: float,
                    cap_rps: float) -> float:
    """Fewest replicas whose even share of rate_rps meets slo_ms (checked with the solver)."""
    if cap_rps <= 0:
        return math.inf
    n = max(1, math.floor(rate_rps / cap_rps))
    for _ in range(4):
        if latency_at_rate_ms(t, d, k, a, rate_rps / n) <= slo_ms * (1 + 1e-9):
            return n
        n += 1
    return max(n, math.ceil(rate_rps / cap_rps))
