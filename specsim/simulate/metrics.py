"""Serving metrics from a simulation: latency percentiles, throughput, goodput, time series and price.

Definitions (as vLLM's benchmarks/benchmark_serving.py reports them, percentiles by linear interpolation):
- TTFT = first token - arrival; e2e = finish - arrival; queueing delay = first scheduled - arrival.
- TPOT per request = (e2e - TTFT) / (output tokens - 1), requests with more than one output token.
- ITL per emitted token: a step that hands a request e tokens after a gap g gives e tokens of
  latency g / e each (speculation delivers several tokens at once); the per-step gap g is also reported
  (one sample per request and step, plus gaps across a preemption). Both percentiles weight samples
  (inverted CDF).
- Goodput: completed requests per second meeting both the TTFT and the TPOT bound (DistServe, Zhong et
  al. 2024); requests with one output token need only meet TTFT.
- The window is first arrival to last finish; time averages (batch, queue, in system, KV) are exact
  integrals over it, so mean in system = arrival rate x mean time in system (Little's law).
- Cost per million output tokens (scenario/serving.py) at the simulated load (idle capacity is paid for).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from specsim.scenario.serving import SLO, Pricing, cost_per_mtok_usd
from specsim.simulate.engine import SimResult

FloatArray = npt.NDArray[np.float64]


def weighted_percentile(values: np.ndarray, q: float, weights: np.ndarray) -> float:
    """The smallest value v with (total weight of values <= v) >= q% of all weight (inverted CDF)."""
    return weighted_percentiles(values, (q,), weights)[0]


def weighted_percentiles(values: np.ndarray, qs: tuple[float, ...], weights: np.ndarray) -> list[float]:
    """`weighted_percentile` at each of qs, sorting once."""
    w = np.asarray(weights, dtype=np.float64)
    keep = w > 0
    v = np.asarray(values, dtype=np.float64)[keep]
    w = w[keep]
    if v.size == 0:
        return [math.nan] * len(qs)
    order = np.argsort(v, kind="stable")
    cw = np.cumsum(w[order])
    i = np.searchsorted(cw, np.asarray(qs, dtype=np.float64) / 100.0 * cw[-1], side="left")
    return [float(x) for x in v[order][np.minimum(i, len(v) - 1)]]


@dataclass(frozen=True)
class Percentiles:
    """p50 / p90 / p99 and mean, in seconds (NaN when there are no samples)."""

    p50: float
    p90: float
    p99: float
    mean: float

    @classmethod
    def of(cls, values: np.ndarray, weights: np.ndarray | None = None) -> Percentiles:
        v = np.asarray(values, dtype=np.float64)
        if weights is None:
            v = v[np.isfinite(v)]
            if v.size == 0:
                return cls(math.nan, math.nan, math.nan, math.nan)
            p50, p90, p99 = np.percentile(v, [50, 90, 99])
            return cls(float(p50), float(p90), float(p99), float(v.mean()))
        w = np.asarray(weights, dtype=np.float64)
        if w.sum() <= 0:
            return cls(math.nan, math.nan, math.nan, math.nan)
        p50, p90, p99 = weighted_percentiles(v, (50, 90, 99), w)
        return cls(p50, p90, p99, float(np.average(v, weights=w)))


@dataclass(frozen=True, eq=False)
class TimeSeries:
    """Time-weighted means per bin (bin start times in time_s, width bin_s)."""

    bin_s: float
    time_s: FloatArray
    decode_batch: FloatArray
    running: FloatArray
    waiting: FloatArray
    kv_tokens: FloatArray


def _cumulative(start: FloatArray, end: FloatArray, increments: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Piecewise-linear cumulative integral: points (start_i, A_{i-1}), (end_i, A_i); flat across idle gaps."""
    a = np.cumsum(increments)
    x = np.column_stack([start, end]).ravel()
    y = np.column_stack([np.concatenate([[0.0], a[:-1]]), a]).ravel()
    return x, y


def time_series(result: SimResult, bins: int = 200, window: tuple[float, float] | None = None) -> TimeSeries:
    """Downsample the step log to `bins` bins of time-weighted means (exact integrals at step ends)."""
    st = result.steps
    t0, t1 = window if window is not None else _window(result)
    edges = np.linspace(t0, t1, bins + 1)
    width = (t1 - t0) / bins if t1 > t0 else 1.0
    start, end, dt = st.start_s, st.start_s + st.duration_s, st.duration_s
    out = []
    for inc in (st.decode_batch * dt, st.running * dt, st.waiting * dt + st.arrival_area_s, st.kv_tokens * dt):
        if st.n == 0:
            out.append(np.zeros(bins))
            continue
        x, y = _cumulative(start, end, np.asarray(inc, dtype=np.float64))
        out.append(np.diff(np.interp(edges, x, y)) / width)
    return TimeSeries(float(width), edges[:-1], *out)


def _window(result: SimResult) -> tuple[float, float]:
    done = result.completed
    if not done.any():
        return 0.0, 0.0
    return float(np.min(result.requests.arrival_s[done])), float(np.nanmax(result.finish_s))


def request_latencies(result: SimResult) -> dict[str, FloatArray]:
    """Per completed request: ttft_s, e2e_s, queue_s and tpot_s (NaN for one-token outputs)."""
    done = result.completed
    arr = result.requests.arrival_s[done]
    out_tok = result.requests.output_tokens[done]
    ttft = result.first_token_s[done] - arr
    e2e = result.finish_s[done] - arr
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(out_tok > 1, (e2e - ttft) / (out_tok - 1), np.nan)
    return {"ttft_s": ttft, "e2e_s": e2e, "queue_s": result.scheduled_s[done] - arr, "tpot_s": tpot}


def slo_percentiles(result: SimResult, percentile: float) -> tuple[float, float]:
    """(TTFT, TPOT) at the given percentile over completed requests (NaN if none)."""
    lat = request_latencies(result)
    ttft, tpot = lat["ttft_s"], lat["tpot_s"][np.isfinite(lat["tpot_s"])]
    return (float(np.percentile(ttft, percentile)) if ttft.size else math.nan,
            float(np.percentile(tpot, percentile)) if tpot.size else 0.0)


def meets_slo(result: SimResult, slo: SLO) -> bool:
    """Every request admitted and TTFT and TPOT at slo.percentile within the bounds."""
    if result.rejected.any():
        return False
    ttft, tpot = slo_percentiles(result, slo.percentile)
    return bool((ttft <= slo.ttft_s or math.isnan(ttft)) and tpot <= slo.tpot_s)


@dataclass(frozen=True, eq=False)
class ServingMetrics:
    """What one simulation says about serving: latencies (s), rates, time averages, price."""

    requests: int
    completed: int
    rejected: int
    window_s: float
    ttft_s: Percentiles
    tpot_s: Percentiles
    itl_token_s: Percentiles
    itl_step_s: Percentiles
    e2e_s: Percentiles
    queue_s: Percentiles
    output_tok_s: float
    requests_per_s: float
    goodput_rps: float | None
    slo_attainment: float | None
    mean_decode_batch: float
    mean_running: float
    mean_waiting: float
    mean_in_system: float
    peak_kv_tokens: int
    mean_kv_tokens: float
    tokens_per_decode_step: float  # mean tokens a decoding request receives per step (1 + accepted)
    preemptions: int
    policy: str
    cost_per_mtok_usd: float | None
    timeseries: TimeSeries | None
    #: share of the completed requests' prompt tokens served from the prefix cache (None: not modelled)
    prefix_hit_share: float | None = None


def summarize(result: SimResult, slo: SLO | None = None, pricing: Pricing | None = None,
              bins: int | None = 200) -> ServingMetrics:
    """ServingMetrics of a simulation (time series with `bins` bins; None: no time series)."""
    st = result.steps
    lat = request_latencies(result)
    done = result.completed
    t0, t1 = _window(result)
    span = t1 - t0
    out_tokens = int(result.requests.output_tokens[done].sum())
    dt = st.duration_s
    # Per-step gaps: each decoding request waited the whole step; plus gaps across preemptions.
    gaps = np.concatenate([dt, result.resume_gaps_s])
    gap_w = np.concatenate([st.decode_batch.astype(np.float64), np.ones(len(result.resume_gaps_s))])
    # Per-token ITL: e tokens at gap/e each, weight e x (requests that got e tokens).
    e = np.arange(st.emitted.shape[1], dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        tok_v = np.concatenate([(dt[:, None] / np.maximum(e, 1.0)[None, :]).ravel(), result.resume_gaps_s])
    tok_w = np.concatenate([(st.emitted * e[None, :]).ravel().astype(np.float64), np.ones(len(result.resume_gaps_s))])
    goodput = attain = None
    if slo is not None:
        ok = (lat["ttft_s"] <= slo.ttft_s) & ~(lat["tpot_s"] > slo.tpot_s)
        goodput = float(ok.sum() / span) if span > 0 else math.nan
        attain = float(ok.mean()) if ok.size else math.nan
    tok_s = out_tokens / span if span > 0 else math.nan
    decode_slots = float(st.decode_batch.sum())
    price = None
    if pricing is not None:
        price = cost_per_mtok_usd(pricing.gpus_per_replica, pricing.gpu_hour_usd, tok_s)

    def avg(values: np.ndarray, extra: np.ndarray | float = 0.0) -> float:
        return float(((values * dt).sum() + np.sum(extra)) / span) if span > 0 else math.nan

    return ServingMetrics(
        requests=int(result.requests.n), completed=int(done.sum()), rejected=int(result.rejected.sum()),
        window_s=float(span),
        ttft_s=Percentiles.of(lat["ttft_s"]), tpot_s=Percentiles.of(lat["tpot_s"]),
        itl_token_s=Percentiles.of(tok_v, tok_w), itl_step_s=Percentiles.of(gaps, gap_w),
        e2e_s=Percentiles.of(lat["e2e_s"]), queue_s=Percentiles.of(lat["queue_s"]),
        output_tok_s=float(tok_s), requests_per_s=float(done.sum() / span) if span > 0 else math.nan,
        goodput_rps=goodput, slo_attainment=attain,
        mean_decode_batch=avg(st.decode_batch), mean_running=avg(st.running),
        mean_waiting=avg(st.waiting, st.arrival_area_s),
        mean_in_system=avg(st.running + st.waiting, st.arrival_area_s),
        peak_kv_tokens=int(np.max(st.kv_tokens)) if st.n else 0, mean_kv_tokens=avg(st.kv_tokens),
        tokens_per_decode_step=float((st.emitted * e[None, :]).sum() / decode_slots) if decode_slots else math.nan,
        preemptions=int(result.preemptions.sum()), policy=result.engine.policy.label,
        cost_per_mtok_usd=price, timeseries=time_series(result, bins) if bins else None,
        prefix_hit_share=(int(result.hit_tokens[done].sum()) / max(1, int(result.requests.prompt_tokens[done].sum()))
                          if result.hit_tokens is not None else None))
