"""One placement of a fleet search priced analytically: a GPU type and layout (`Placement`), plain decoding and
every draft at every k, each sized for the traffic's arrival rate under the per-token latency SLO.

A replica's capacity is the planner's own Little's-law model (plan/arrival.py, the model `specsim plan` solves an
arrival rate with): at N requests in flight a request sees the decode step's time per token stretched by the
prompts' share of the GPU (`decode_tpot_s`) and the replica takes `rate_at_concurrency(N)` requests/s; the capacity
is that rate at the largest N whose latency meets the SLO and whose KV fits in memory (`step.evaluate.fits`). It is
found on a geometric grid of N (one `step_arrays` call over every k at once), then on a fine grid inside the
bracket, and interpolated to the SLO: what `plan.capacity.solver_max_rate` finds by bisection, within 0.1%.

The traffic mix's acceptance is its classes' tokens per step weighted by their shares (`FleetQuestion.tps`,
made once by fleet_search.py), at the prior's central value and its 80% band's ends; a band end's capacity gives
the band of GPUs and of the speedup (capacity over plain decoding's on the same GPUs).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from specsim.cost.hardware import load_hardware
from specsim.cost.layout import Layout
from specsim.drafts.build import make_draft
from specsim.drafts.draft import Draft
from specsim.plan.arrival import decode_tpot_s, prefill_time_s, rate_at_concurrency
from specsim.scenario.scenario import Scenario
from specsim.scenario.serving import cost_per_mtok_usd
from specsim.step.evaluate import Target, fits, step_arrays

#: the acceptance cases each configuration is priced at: the prior's central value and its 80% band's ends
CASES = ("central", "low", "high")
AGGREGATED = "aggregated"  # the layout of replicas that prefill and decode
MAX_BATCH = 4096.0  # the largest concurrency a replica is solved to (as plan/arrival.py's solver)
_COARSE, _FINE = 128, 9


@dataclass(frozen=True)
class Placement:
    """Where a replica runs: a GPU type and its layout, and how the replicas serve: aggregated (pd None, each
    replica prefills and decodes) or in prefill and decode pools of x:y replicas (pd (x, y), plan/fleet_pools.py).
    `fleet_search.AXES` lists the axes; this is where they reach the target."""

    hardware: str
    tp: int
    ep: int = 1
    pd: tuple[int, int] | None = None

    @property
    def layout(self) -> str:
        return AGGREGATED if self.pd is None else f"{self.pd[0]}P{self.pd[1]}D"

    @property
    def label(self) -> str:
        return (f"{self.hardware} tp {self.tp}" + (f" ep {self.ep}" if self.ep > 1 else "")
                + ("" if self.pd is None else f" {self.layout}"))


@dataclass(frozen=True)
class FleetQuestion:
    """What every configuration is sized for (picklable: it travels to the workers with each task)."""

    scenario: Scenario  # model, dtypes, engine, memory use: the target every placement runs
    rate_rps: float  # the fleet's arrival rate
    prompt_tokens: int
    output_tokens: int
    slo_ms: float  # per-token latency bound (mean, prefill's share of the GPU included)
    drafts: tuple[Draft, ...]  # chains, acceptance continued to the deepest k searched
    ks: tuple[int, ...]  # draft lengths searched (>= 1; plain decoding is always priced)
    #: per draft label, per case (CASES), the mix's tokens per step at each of ks
    tps: Mapping[str, Mapping[str, tuple[float, ...]]]
    prices: Mapping[str, float] | None = None  # $ per GPU-hour by hardware name (None: rank by GPUs)
    cost_model: str | None = None  # --cost-model, applied to every GPU type
    kv_link_gb_s: float = 43.5  # prefill -> decode KV bandwidth per prefill GPU (advise.pools' default)


@dataclass(frozen=True)
class FleetRow:
    """One configuration's answer. capacity_rps is one replica's requests/s within the SLO (0: none served);
    gpus the fleet's GPUs for the rate; *_low / *_high at the acceptance band's low and high ends."""

    hardware: str
    tp: int
    ep: int
    draft: str  # 'none': plain decoding
    k: int
    gpus_per_replica: int
    capacity_rps: float
    capacity_low_rps: float
    capacity_high_rps: float
    concurrency: float  # requests in flight on a replica at its capacity
    replicas: float  # inf: the configuration serves nothing within the SLO
    gpus: float
    gpus_low: float  # the band's fewest (high acceptance) and most (low acceptance) GPUs
    gpus_high: float
    speedup: float | None  # capacity over plain decoding's on the same GPUs (None where plain serves nothing)
    speedup_low: float | None
    speedup_high: float | None
    usd_per_mtok: float | None
    status: str  # ok | no fit (memory) | misses SLO
    #: aggregated, or xPyD: prefill and decode pools (plan/fleet_pools.py); there capacity_rps is an x:y group's
    #: requests/s over its x + y replicas, replicas the pools' total, concurrency per decode replica
    layout: str = AGGREGATED
    prefill_replicas: float | None = None  # the pools' (None: aggregated)
    decode_replicas: float | None = None
    ttft_ms: float | None = None  # unqueued: the prompt's prefill pass, plus the KV transfer between pools

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def target_for(q: FleetQuestion, p: Placement) -> Target:
    """The scenario's target on placement p (SpecsimError where the layout cannot split the model)."""
    s = q.scenario
    hw = load_hardware(p.hardware)
    if q.cost_model is not None:
        hw = hw.with_cost_model(q.cost_model)
    s.model.check_tp(p.tp, "--tp")
    layout = Layout(p.tp, ep=p.ep) if p.ep > 1 else None
    return Target(hw, s.model, p.tp, s.weight_dtype, s.kv_dtype, s.memory_utilization, engine=s.engine,
                  layout=layout)


def capacity(t: Target, d: Draft, ks: np.ndarray, tps: np.ndarray, prompt: int, output: int, slo_ms: float,
             prefill_s: float | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row (k, tokens per step): (requests/s one replica serves within slo_ms, the concurrency there, whether
    anything fits in memory at all) by the Little's-law model (module docstring); prefill_s 0: a decode pool's
    replica, the prompts prefilled elsewhere (None: the prompt's own prefill, `prefill_time_s`)."""
    prefill_s = prefill_time_s(t, prompt) if prefill_s is None else prefill_s
    ctx = prompt + output / 2
    coarse = np.broadcast_to(np.geomspace(1.0, MAX_BATCH, _COARSE), (len(ks), _COARSE))
    _, lat, fit = _curve(t, d, ks, tps, coarse, ctx, prefill_s, output)
    ok = fit & (lat <= slo_ms)
    rows = np.arange(len(ks))
    i = np.where(ok.any(1), _COARSE - 1 - np.argmax(ok[:, ::-1], axis=1), -1)
    last = np.maximum(i, 0)
    nxt = np.minimum(last + 1, _COARSE - 1)
    fine = coarse[rows, last][:, None] + (coarse[rows, nxt] - coarse[rows, last])[:, None] * np.linspace(0, 1, _FINE)
    frate, flat, ffit = _curve(t, d, ks, tps, fine, ctx, prefill_s, output)
    fok = ffit & (flat <= slo_ms)
    j = _FINE - 1 - np.argmax(fok[:, ::-1], axis=1)
    jn = np.minimum(j + 1, _FINE - 1)
    cap = frate[rows, j]
    slo_bound = (j < _FINE - 1) & ffit[rows, jn] & (flat[rows, jn] > slo_ms)
    w = np.where(slo_bound, (slo_ms - flat[rows, j]) / np.where(slo_bound, flat[rows, jn] - flat[rows, j], 1.0), 0.0)
    cap = cap + np.clip(w, 0.0, 1.0) * (frate[rows, jn] - cap)
    conc = fine[rows, j] + np.clip(w, 0.0, 1.0) * (fine[rows, jn] - fine[rows, j])
    served = (i >= 0) & fok.any(1)
    return np.where(served, cap, 0.0), np.where(served, conc, 0.0), np.asarray(fit.any(1), dtype=bool)


def _curve(t: Target, d: Draft, ks: np.ndarray, tps: np.ndarray, n: np.ndarray, ctx: float, prefill_s: float,
           output: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(arrival rate, per-token latency in ms, fits in memory) at concurrencies n[row, :] for each row's k."""
    tpot = _step_s(t, d, ks, tps, n, ctx) / tps[:, None]
    rate = rate_at_concurrency(n, prefill_s, output, tpot)
    lat = decode_tpot_s(tpot, rate, prefill_s) * 1e3
    fit = np.zeros(n.shape, dtype=bool)
    for k in np.unique(ks):
        rows = ks == k
        fit[rows] = np.asarray(fits(t, d, int(k), n[rows], ctx), dtype=bool)
    return rate, np.where(np.isfinite(lat), lat, np.inf), fit


def _step_s(t: Target, d: Draft, ks: np.ndarray, tps: np.ndarray, n: np.ndarray, ctx: float) -> np.ndarray:
    """The step's time (s) at concurrencies n[row, :] for each row's k and tokens per step: rows on one grid priced
    once per k, unless the draft's verification depends on its acceptance (an n-gram draft on vLLM V1)."""
    if len(ks) > 1 and bool((n == n[:1]).all()) and not d.verifies_drafted_only(t.engine):
        uk, inv = np.unique(ks, return_inverse=True)
        m = step_arrays(t, d, uk[:, None].astype(float), n[:1], ctx, np.ones((len(uk), 1)))
        return np.broadcast_to(m.step_time_s, (len(uk), n.shape[1]))[inv]
    m = step_arrays(t, d, ks[:, None].astype(float), n, ctx, tps[:, None])
    return np.broadcast_to(m.step_time_s, n.shape)


def price_placement(q: FleetQuestion, p: Placement) -> list[FleetRow]:
    """Plain decoding, then every draft at every k (in q.drafts' and q.ks' order), on placement p."""
    t = target_for(q, p)
    prompt, output = q.prompt_tokens, q.output_tokens
    none = make_draft("none", q.scenario.model)
    base, base_n, base_fit = capacity(t, none, np.array([0]), np.array([1.0]), prompt, output, q.slo_ms)
    plain = float(base[0])
    ttft = prefill_time_s(t, prompt) * 1e3
    rows = [fleet_row(q, p, t, ("none", 0), (plain, plain, plain), float(base_n[0]), bool(base_fit[0]), plain, ttft)]
    ks = np.array(q.ks * len(CASES))
    for d in q.drafts:
        tps = np.concatenate([np.asarray(q.tps[d.label][c], dtype=np.float64) for c in CASES])
        cap, n, fit = capacity(t, d, ks, tps, prompt, output, q.slo_ms)
        m = len(q.ks)
        for i, k in enumerate(q.ks):
            caps = (float(cap[i]), float(cap[m + i]), float(cap[2 * m + i]))
            rows.append(fleet_row(q, p, t, (d.label, k), caps, float(n[i]), bool(fit[i]), plain, ttft))
    return rows


def replicas_for(rate: float, cap: float) -> float:
    """The fewest replicas (or groups) of capacity cap that serve rate; inf where cap serves nothing."""
    return math.inf if not cap > 0 else float(max(1, math.ceil(rate / cap * (1 - 1e-12))))


def fleet_row(q: FleetQuestion, p: Placement, t: Target, config: tuple[str, int], caps: tuple[float, float, float],
              concurrency: float, fit: bool, plain: float, ttft_ms: float) -> FleetRow:
    """One configuration's row. `caps` and `plain` are one unit's requests/s (central, and at the acceptance band's
    ends; plain decoding's): a replica, or an x:y group of prefill and decode replicas (p.pd); the fleet is the
    fewest units that serve the rate; `fit`: the configuration fits in memory (then a zero capacity misses the
    SLO)."""
    x, y = p.pd if p.pd is not None else (1, 0)
    per = x + y  # replicas in a unit
    unit_gpus = per * t.gpus
    cap, lo, hi = caps
    n = replicas_for(q.rate_rps, cap)
    usd = None
    if q.prices is not None and math.isfinite(n):
        usd = cost_per_mtok_usd(n * unit_gpus, q.prices[p.hardware], q.rate_rps * q.output_tokens)

    def ratio(v: float) -> float | None:
        return v / plain if plain > 0 else None

    status = "ok" if cap > 0 else "misses SLO" if fit else "no fit"
    pools = p.pd is not None
    return FleetRow(p.hardware, p.tp, p.ep, config[0], config[1], t.gpus, cap / per, lo / per, hi / per, concurrency,
                    n * per, n * unit_gpus, replicas_for(q.rate_rps, hi) * unit_gpus,
                    replicas_for(q.rate_rps, lo) * unit_gpus, ratio(cap), ratio(lo), ratio(hi), usd, status,
                    p.layout, n * x if pools else None, n * y if pools else None, ttft_ms)


def price_chunk(q: FleetQuestion, placements: Sequence[Placement]) -> list[FleetRow]:
    """A task of the search: its placements' rows, in order (a layout the model cannot take is refused before
    the search: fleet_search.placements). Pool layouts are priced by plan/fleet_pools.py, a decode pool's
    capacities once per GPU type and layout of the task (they do not depend on the ratio)."""
    from specsim.plan.fleet_pools import DecodeCaps, price_pools

    decode: dict[Placement, DecodeCaps] = {}
    return [row for p in placements
            for row in (price_placement(q, p) if p.pd is None else price_pools(q, p, decode))]
