"""The fleet a report sizes: one capacity and one cost per million output tokens for each configuration (plain
decoding, and the plan's speculation), computed once here and read by every section that quotes them.

Which model sizes it, by what the scenario asks:
- `objective: slo` decided by simulation (`Plan.serving`): the fewest replicas whose simulated requests meet the
  SLO's percentiles at the target rate (advise/slo.py), and that fleet's dollars per million output tokens;
- an arrival rate: the rate one replica serves within the per-token SLO by the planner's Little's-law model, a
  request's prefill included (plan/arrival.py, plan/capacity.py), priced at that rate;
- load buckets: GPU-equivalents at plain decoding's token rate, priced over the day.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specsim.drafts.build import make_draft
from specsim.drafts.draft import Draft
from specsim.plan.capacity import RateCurve, max_rate_rps, replicas_needed, solver_max_rate
from specsim.plan.summary import config_text
from specsim.report.context import Ctx
from specsim.scenario.serving import cost_per_mtok_usd
from specsim.step.policy import Config

#: bases of a fleet's sizing, as the report names them
SIMULATED = "simulation"
LITTLE = "Little's law"
BUCKETS = "buckets"


@dataclass(frozen=True)
class Sized:
    """One configuration's capacity and cost: `rate_rps`, the requests/s one replica serves within the SLO (None
    for load buckets), `gpus`, the GPUs for the load sized (the target rate; for buckets the day's mean
    GPU-equivalents), and the dollars per million output tokens (None without a price)."""

    label: str
    k: int  # the configuration's k (the chosen policy's largest for a simulated choice; 0: plain decoding)
    rate_rps: float | None
    gpus: float
    cost_per_mtok_usd: float | None
    draft: Draft | None = None  # the draft in the configuration run (an arrival rate's chain or tree; None: plain)


@dataclass(frozen=True)
class Fleet:
    """The sizing every section quotes (module docstring): plain decoding's and speculation's."""

    basis: str
    load: str  # the load sized, as the report names it
    without: Sized
    with_: Sized
    ceiling: tuple[float, float] | None = None  # a simulated fleet's analytic ceiling per replica (without, with)



def fleet(c: Ctx, slo_ms: float | None, curves: Sequence[RateCurve] | None) -> Fleet:
    """The report's fleet (module docstring); for an arrival rate `curves` and `slo_ms` are the policy section's
    Little's-law curves and latency bound (`RateModel`)."""
    if c.plan.serving is not None:
        return _simulated(c, slo_ms, curves)
    if c.s.arrival is not None:
        assert slo_ms is not None and curves is not None
        return _little(c, slo_ms, curves)
    return _buckets(c)


def _price(c: Ctx, gpus: float, tok_s: float) -> float | None:
    usd = c.s.gpu_hour_usd
    return None if usd is None or not tok_s > 0 else cost_per_mtok_usd(gpus, usd, tok_s)


def analytic_capacity(c: Ctx, slo_ms: float, curves: Sequence[RateCurve], deployed: bool = False
                      ) -> tuple[float, float, int]:
    """(plain decoding's, speculation's requests/s one replica serves within slo_ms, speculation's k) by the
    planner's Little's-law solver (prefill included), refined from the curves' estimates: `deployed`, of the
    configuration the plan runs (its arrival row's chain or tree); else the better of the two most promising chain
    lengths (a ceiling)."""
    a = c.s.arrival
    assert a is not None
    d = c.draft or c.s.drafts[0]
    est = [max_rate_rps(cv, slo_ms) for cv in curves]
    base = solver_max_rate(c.t, make_draft("none", c.s.model), 0, a, slo_ms, est[0])
    if deployed:
        bp = c.plan.buckets[0]
        tries = [(Config(bp.k, bp.topk, bp.num_draft_tokens).draft(d), bp.k)] if bp.k > 0 else []
    else:
        tries = [(d, kk) for kk in sorted(range(1, len(est)), key=lambda kk: -est[kk])[:2]]
    spec, k = max(((solver_max_rate(c.t, dd, kk, a, slo_ms, est[min(kk, len(est) - 1)]), kk) for dd, kk in tries),
                  key=lambda x: (x[0], -x[1]), default=(0.0, 0))
    return (base, spec, k) if spec > base else (base, base, 0)


def _little(c: Ctx, slo_ms: float, curves: Sequence[RateCurve]) -> Fleet:
    """An arrival rate: per-replica capacity within the SLO of plain decoding and of the configuration the plan
    deploys; the replicas the scenario's rate needs; the price of a token at that capacity (each replica run at its
    SLO-bound rate)."""
    a = c.s.arrival
    assert a is not None
    base, spec, k = analytic_capacity(c, slo_ms, curves, deployed=True)
    bp = c.plan.buckets[0]
    mine = Config(bp.k, bp.topk, bp.num_draft_tokens).draft(c.draft or c.s.drafts[0])
    none = make_draft("none", c.s.model)
    gpus = c.s.gpus

    def sized(cap: float, d: Draft, kk: int) -> Sized:
        n = replicas_needed(c.t, d, kk, a, slo_ms, a.rate_rps, cap)
        label = f"{d.label}, {config_text(kk, bp.topk, bp.num_draft_tokens)}" if kk else "without speculation"
        return Sized(label, kk, cap, n * gpus, _price(c, gpus, cap * a.output_tokens), d if kk else None)

    return Fleet(LITTLE, f"{a.rate_rps:g} requests/s", sized(base, none, 0), sized(spec, mine, k) if k else
                 sized(base, none, 0))


def _simulated(c: Ctx, slo_ms: float | None, curves: Sequence[RateCurve] | None) -> Fleet:
    """`objective: slo` by simulation: the replicas the SLO search found, their rate and price; the analytic
    ceiling beside it, where there is an arrival rate to compute it for."""
    sv = c.plan.serving
    assert sv is not None
    per = sv.gpus_per_replica
    base = Sized("without speculation", 0, sv.target_rate_rps / sv.baseline.replicas, sv.baseline.replicas * per,
                 sv.baseline.cost_per_mtok_usd)
    mine = Sized(f"{sv.draft} {sv.policy}" if sv.speculates else "without speculation", c.plan.policy.max_k,
                 sv.target_rate_rps / sv.replicas, sv.replicas * per, sv.cost_per_mtok_usd)
    ceiling = None
    if c.s.arrival is not None and slo_ms is not None and curves is not None:
        b, s_, _ = analytic_capacity(c, slo_ms, curves)
        ceiling = (b, s_)
    return Fleet(SIMULATED, f"{sv.target_rate_rps:g} requests/s", base, mine, ceiling)


def _buckets(c: Ctx) -> Fleet:
    """Load buckets: GPU-equivalents at plain decoding's token rate over the day, and the price of a token."""
    rows = c.data["buckets"]
    w = np.array([r["weight"] for r in rows])
    thr = float((w * [r["throughput_tok_s"] for r in rows]).sum() / w.sum())
    base = float((w * [r["baseline_throughput_tok_s"] for r in rows]).sum() / w.sum())
    gpus = float(c.s.gpus)
    spec_gpus = gpus * base / thr if thr > 0 else math.inf
    label = f"{c.plan.draft_label} {c.plan.policy.label}" if c.plan.speculates else "without speculation"
    return Fleet(BUCKETS, "the day's load", Sized("without speculation", 0, None, gpus, _price(c, gpus, base)),
                 Sized(label, c.plan.policy.max_k, None, spec_gpus, _price(c, gpus, thr)))
