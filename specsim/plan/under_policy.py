"""A plan's figures under a policy decided elsewhere (the SLO search by simulation, advise/slo.py): each load
bucket at the configuration the policy runs at its batch, an arrival rate at the k the policy runs at the
concurrency that k produces, so that the table, the headline, the policy and the engine configs name one
configuration per batch."""

from __future__ import annotations

import dataclasses

import numpy as np

from specsim.drafts.build import make_draft
from specsim.drafts.draft import Draft
from specsim.plan.arrival import arrival_under_policy
from specsim.plan.candidates import evaluate_draft
from specsim.plan.decide import bucket_points, objective_total, rows_at, target_of
from specsim.plan.result import BucketPlan, Plan
from specsim.step.policy import Config, Policy


def config_at(policy: Policy, batch: int) -> Config:
    """The configuration `policy` runs at `batch`: its band's (a band where nothing fits: none), else the k
    outside its bands (`Policy.k_for_batch`)."""
    for seg in policy.schedule:
        if seg.batch_from <= batch <= seg.batch_to:
            return seg.config if seg.config is not None and seg.config.k > 0 else Config(0)
    return Config(max(policy.k_for_batch(batch), 0))


def under_policy(p: Plan, d: Draft, policy: Policy) -> Plan:
    """Plan p with its buckets, gain and arrival figures those of draft d running `policy` (module docstring);
    the acceptance band is kept only where every bucket runs the configuration it was weighed for."""
    s = p.scenario
    t = target_of(s)
    if s.arrival is not None:
        bp, arrival = arrival_under_policy(s, t, d, policy)
        same = bp.k == p.buckets[0].k and bp.draft == p.buckets[0].draft
        return dataclasses.replace(p, buckets=(bp,), arrival=arrival, gain=arrival.gain_same_rate,
                                   band=p.band if same else None)
    batch, ctx, share, owner = bucket_points(s.buckets)
    cfgs = [config_at(policy, b.batch) for b in s.buckets]
    configs = list(dict.fromkeys([Config(0), *cfgs]))
    ev = evaluate_draft(t, d, max(c.k for c in configs), batch, ctx, configs)
    base = evaluate_draft(t, make_draft("none", s.model), 0, batch, ctx)
    choice = [configs.index(c) for c in cfgs]
    buckets = []
    for i, (b, c) in enumerate(zip(s.buckets, cfgs, strict=True)):
        idx = np.flatnonzero(owner == i)
        on = c.k > 0
        nodes = int(c.nodes) if c.is_tree and c.nodes is not None else None
        buckets.append(BucketPlan(b, d.label if on else "none", d.method if on else "none", c.k,
                                  rows_at(ev, choice[i], idx, batch, ctx, share),
                                  rows_at(base, 0, idx, batch, ctx, share), bool(base.feasible[0, idx].all()),
                                  c.topk if c.is_tree else 1, nodes))
    total = objective_total(s, ev, choice, owner, share)
    base_total = objective_total(s, base, [0] * len(s.buckets), owner, share)
    gain = total / base_total if s.objective != "latency" else base_total / total
    same = all((bp.k, bp.topk, bp.draft) == (old.k, old.topk, old.draft)
               for bp, old in zip(buckets, p.buckets, strict=True))
    return dataclasses.replace(p, buckets=tuple(buckets), gain=float(gain), band=p.band if same else None)
