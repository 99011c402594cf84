"""The optimiser: for each load bucket the draft configuration (chain k, or a tree of topk, depth and
verified nodes) that serves the scenario's objective best, with plain decoding always a candidate
and memory always checked; the policy over batch size; each draft's crossover batch; the
load-weighted gain; the same decisions under the acceptance band's low and high cases; Little's-law
loads solved as a fixed point (plan/arrival.py).

Its parts, one job each: candidates (configurations and their figures), decide (per bucket), schedule
(the policy over load), bands (the acceptance band), arrival (rates), dynamic_k (vLLM's profile),
result (the typed answer).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from specsim.drafts.build import make_draft
from specsim.drafts.draft import Draft
from specsim.plan.arrival import plan_arrival
from specsim.plan.bands import band_decision
from specsim.plan.candidates import Evaluated, evaluate_draft, with_depth
from specsim.plan.decide import bucket_points, decide, objective_total, prior_notes, require_fit, rows_at, target_of
from specsim.plan.deploy import deployable, tree_bands_note
from specsim.plan.dynamic_k import vllm_dynamic_profile
from specsim.plan.result import BucketPlan, Plan
from specsim.plan.schedule import (
    bands_of,
    batch_grid,
    grid_scores,
    merge_runs,
    monotone_schedule,
    pays_and_crossover,
    pooled_contexts,
)
from specsim.scenario.scenario import Bucket, Scenario
from specsim.step.evaluate import Target
from specsim.step.policy import Config, Policy


def plan(s: Scenario, detail: bool = True) -> Plan:
    """The analytic plan: the draft, k or tree and the policy over load that the objective prefers, among the
    configurations the scenario's engine deploys (plan/deploy.py). `detail=False` skips what only the full record
    shows (crossovers, the acceptance band, vLLM's dynamic profile): the report's sensitivity re-plans.
    (`objective: slo` with serving traffic is then decided by simulation: specsim.advise.plan.)"""
    s, searched = deployable(s)
    t = target_of(s)
    if s.arrival is not None:
        p = plan_arrival(s, t, detail)
        return dataclasses.replace(p, details=(*searched, *p.details))
    batch, ctx, share, owner = bucket_points(s.buckets)
    require_fit(s, t, batch, ctx, [f"bucket {s.buckets[int(o)].name} (batch {int(b)}, context {int(c)})"
                                   for b, c, o in zip(batch, ctx, owner, strict=True)])
    base = evaluate_draft(t, make_draft("none", s.model), 0, batch, ctx)
    drafts = [with_depth(d, s.max_k) for d in s.drafts]  # measured profiles continued by a stated model
    dec = decide(s, t, drafts, batch, ctx, share, owner)
    base_total = objective_total(s, base, [0] * len(s.buckets), owner, share)

    def gain(total: float) -> float:
        return total / base_total if s.objective != "latency" else base_total / total

    best, ev = drafts[dec.best], dec.evs[dec.best]
    sched = _schedules(s, t, best)
    choice = [ev.index(sched.configs[c]) if c >= 0 else 0 for c in sched.at_buckets(s)]
    total = objective_total(s, ev, choice, owner, share)
    buckets = tuple(_bucket_plan(b, best, ev, base, choice[i], np.flatnonzero(owner == i), batch, ctx, share)
                    for i, b in enumerate(s.buckets))
    detail = detail and s.max_k > 0  # speculation off by the scenario's own setting: nothing to weigh
    pays_cross = {d.label: pays_and_crossover(t, d, s) for d in drafts} if detail else {}
    speculating = any(bp.k for bp in buckets)
    band = (band_decision(s, t, drafts, best, choice, batch, ctx, share, owner, base_total, gain(total), speculating)
            if detail else None)
    notes, details = _notes(s, buckets, drafts, best)
    return Plan(s, best.method if speculating else "none", best.label, buckets, sched.policy,
                {label: pc[1] for label, pc in pays_cross.items()}, float(gain(total)),
                {d.label: float(gain(tot)) for d, tot in zip(drafts, dec.totals, strict=True)},
                None, notes, band,
                vllm_dynamic_profile(t, ev.draft, s, sched.grid, sched.chain_policy) if detail else None,
                sched.chain_policy, pays={label: pc[0] for label, pc in pays_cross.items()},
                crossover_band={label: pc[2] for label, pc in pays_cross.items()},
                details=(*searched, *tree_bands_note(sched.policy), *details))


@dataclass(frozen=True)
class _Schedules:
    grid: np.ndarray  # batch sizes, ascending
    schedule: np.ndarray  # the configuration index per grid batch (-1: nothing fits)
    configs: list[Config]
    policy: Policy
    chain_policy: Policy

    def at_buckets(self, s: Scenario) -> list[int]:
        """The schedule's configuration index at each bucket's batch."""
        return [int(self.schedule[int(np.flatnonzero(self.grid == b.batch)[0])]) for b in s.buckets]


def _schedules(s: Scenario, t: Target, best: Draft) -> _Schedules:
    """The deployed policy: one non-increasing schedule over batch for the chosen method. Grid points at a
    bucket's batch use that bucket's contexts and weigh by its share of the day. Engines that schedule only
    a chain length per batch (vLLM's per-batch k and its dynamic profile, TensorRT-LLM's draft_len_schedule)
    get the best chain schedule beside the tree policy."""
    grid = batch_grid(s)
    at = {b.batch: i for i, b in enumerate(s.buckets)}
    ctxs = [s.buckets[at[int(g)]].contexts if int(g) in at else pooled_contexts(s) for g in grid]
    score, gev, _ = grid_scores(t, best, s, grid, ctxs)
    weight = np.array([1.0 + 100.0 * sum(b.weight for b in s.buckets if b.batch == g) for g in grid])
    schedule = merge_runs(score, monotone_schedule(score, weight))
    chains = np.array([not c.is_tree for c in gev.configs])
    chain_idx = np.flatnonzero(chains)
    chain_sched = merge_runs(score[chains], monotone_schedule(score[chains], weight))
    chain_policy = bands_of(grid, np.where(chain_sched >= 0, chain_idx[np.maximum(chain_sched, 0)], -1),
                            gev.configs, best)
    return _Schedules(grid, schedule, gev.configs, bands_of(grid, schedule, gev.configs, best), chain_policy)


def _bucket_plan(b: Bucket, best: Draft, ev: Evaluated, base: Evaluated, c: int, idx: np.ndarray, batch: np.ndarray,
                 ctx: np.ndarray, share: np.ndarray) -> BucketPlan:
    cfg = ev.configs[c]
    on = cfg.k > 0
    return BucketPlan(b, best.label if on else "none", best.method if on else "none", cfg.k,
                      rows_at(ev, c, idx, batch, ctx, share), rows_at(base, 0, idx, batch, ctx, share),
                      bool(base.feasible[0, idx].all()), cfg.topk if cfg.is_tree else 1,
                      int(cfg.nodes) if cfg.is_tree and cfg.nodes is not None else None)


def _notes(s: Scenario, buckets: tuple[BucketPlan, ...], drafts: list[Draft], best: Draft
           ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(notes, details): what a person must know under the answer, and what stands behind it in full."""
    notes = []
    if s.objective == "slo":
        assert s.slo_ms_per_token is not None
        for bp in buckets:
            worst = max(r.ms_per_token for r in bp.rows)
            if worst > s.slo_ms_per_token:
                notes.append(f"bucket {bp.bucket.name} misses the SLO ({worst:.1f} > {s.slo_ms_per_token:g} ms/token) "
                             "even with its best configuration: lower its batch (more replicas)")
    if not all(bp.fits for bp in buckets):
        notes.append("some buckets do not fit in memory even without speculation: add GPUs or shorten contexts")
    prior, details = prior_notes(drafts, best) if s.max_k > 0 else ([], [])
    return (*notes, *prior), tuple(details)
