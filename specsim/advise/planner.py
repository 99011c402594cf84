"""The planner's costs, memory and acceptance, as the serving simulation needs them.

- `PlannerCost(target, draft)`: a `StepCost` whose decode step is exactly the planner's step time
  (`plan.evaluate.step_arrays`: draft passes + verification pass + rejection sampler + the engine's host
  work, as `specsim evaluate` and `specsim plan` price it; k = 0 is plain decoding) and whose prefill is
  one forward pass over the chunk as the engine runs it (`plan.arrival.prefill_pass_s`, batch 1, q = the
  chunk's tokens, over the mean context those tokens attend to: the same pass the planner's own
  Little's-law solver prices a request's prefill by, `plan.arrival.solve_concurrency`). Only the step
  *time* comes from the planner: how many tokens a step emits comes from the simulation's per-request
  acceptance draws (the workload mix), never from the planner's mean tokens per step.
- `kv_capacity_tokens`: the KV cache the memory model leaves (`plan.memory.Memory.kv_capacity`) divided
  by the KV bytes one token costs the target plus the draft, per GPU.
- `acceptance_mix`: the workload mix as per-position rates for one draft: a workload's own `alphas`, the
  sourced prior for its `task` (`acceptance.priors.lookup` through `drafts.priors.prior_match`), or else
  the draft's own acceptance (measured, or its prior).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specsim.acceptance.chain import AcceptanceProfile
from specsim.acceptance.priors import extend_profile, task_of_dataset
from specsim.drafts.build import make_draft
from specsim.drafts.draft import Draft
from specsim.drafts.priors import prior_match
from specsim.errors import SpecsimError
from specsim.plan.arrival import prefill_pass_s
from specsim.plan.candidates import evaluate_draft
from specsim.plan.schedule import merge_runs, monotone_schedule
from specsim.scenario.workload import AcceptanceMix, Workload, WorkloadClass
from specsim.step.evaluate import Target, memory_per_gpu, step_arrays
from specsim.step.policy import Config, Policy, Segment

#: Positions of acceptance a simulation carries per workload class (the deepest k the planner searches).
MAX_DEPTH = 32


def chain(d: Draft) -> Draft:
    """The draft as the simulation runs it: a chain (engines change only a chain's length with batch; a
    tree the scenario fixed is simulated as the chain of the same depth, keeping the scenario's label)."""
    if not d.is_tree:
        return d.with_tree(1, None)
    return dataclasses.replace(d.with_tree(1, None), name=d.name or d.label)


@dataclass(frozen=True)
class PlannerCost:
    """A `StepCost` from the planner (module docstring); vectorised over numpy arrays (broadcasting)."""

    target: Target
    draft: Draft

    def decode_s(self, batch: np.ndarray, mean_context: np.ndarray, k: np.ndarray) -> np.ndarray:
        """`step_arrays(...).step_time_s`: draft + verify + engine overheads at draft length k (0: plain)."""
        m = step_arrays(self.target, self.draft, np.asarray(k, dtype=np.float64), np.asarray(batch, dtype=np.float64),
                        np.asarray(mean_context, dtype=np.float64), 1.0)
        return np.asarray(m.step_time_s, dtype=np.float64)

    def prefill_s(self, tokens: np.ndarray, mean_context: np.ndarray) -> np.ndarray:
        """One pass of `tokens` prompt tokens over `mean_context` in the target's layout; 0 for no tokens: the
        planner's own prefill (`plan.arrival.prefill_pass_s`, which its Little's-law solver prices requests by)."""
        return prefill_pass_s(self.target, tokens, mean_context)


def kv_capacity_tokens(t: Target, d: Draft | None, k: int, context: float, max_num_seqs: int | None = None) -> int:
    """KV-cache tokens one replica holds: (capacity - weights - activations - reserves - draft weights) /
    KV bytes per token (target + draft), per GPU, from `plan.memory` at a representative context (sliding-
    window models cache less per token at long contexts), times the DP-attention groups (each caches its own
    sequences); `max_num_seqs` the engine's limit (step.memory.PROFILE_SEQS). SpecsimError when nothing is left
    for the KV."""
    plain = d is None or k <= 0 or not d.speculates
    dd = make_draft("none", t.model) if plain or d is None else d
    kk = 0 if plain else int(k)
    ctx = max(float(context), 1.0)
    mem = memory_per_gpu(t, dd, kk, 1.0, ctx, max_num_seqs)
    q = float(dd.verify_tokens_per_seq(kk)) if kk else 1.0
    per_token = (float(mem.kv_cache) + float(mem.draft_kv)) / (ctx + q)
    free = float(mem.kv_capacity)
    if free <= 0 or per_token <= 0:
        what = "" if plain else f" with {dd.label} at k = {kk}"
        raise SpecsimError(f"{t.model.name} on {t.where}{what} leaves no memory for the KV cache "
                           f"({free / 2**30:.1f} GiB): raise tp, use fp8 weights or lower memory use")
    return int(free // per_token) * (1 if t.layout is None else t.layout.dp)


def draft_profile(d: Draft, depth: int = MAX_DEPTH) -> AcceptanceProfile:
    """The draft's own acceptance, continued past a measured depth by the method's decay model."""
    acc = d.acceptance
    if acc.max_k is not None and acc.max_k < depth:
        acc = extend_profile(acc, d.method, depth)
    return acc


def _rates(profile: AcceptanceProfile, depth: int) -> tuple[float, ...]:
    return tuple(float(x) for x in np.clip(profile.rates_for(depth), 0.0, 1.0))


def acceptance_mix(d: Draft, t: Target, workloads: Sequence[Workload] = (), depth: int = MAX_DEPTH,
                   temperature: float | None = None) -> tuple[AcceptanceMix, tuple[str, ...]]:
    """The workload mix as per-position rates for draft d, and where each class's rates come from."""
    depth = max(1, min(int(depth), MAX_DEPTH))
    if not d.speculates:
        return AcceptanceMix.constant(0.0), ("no speculation",)
    own = draft_profile(d, depth)
    items = list(workloads) or [Workload("all", 1.0)]
    classes, sources = [], []
    for w in items:
        if w.alphas is not None:
            rates, src = w.alphas, "given alphas"
        elif w.task is not None:
            task = task_of_dataset(w.task)
            match = prior_match(d.method, t.model, d.model, task, temperature)
            rates, src = _rates(match.profile("central"), depth), f"prior {match.entry_id} (task {task})"
        else:
            rates, src = _rates(own, depth), f"the draft's acceptance ({own.source})"
        classes.append(WorkloadClass(w.name, w.share, tuple(rates)))
        sources.append(src)
    return AcceptanceMix(tuple(classes)), tuple(sources)


def with_depth(d: Draft, depth: int) -> Draft:
    """The draft whose acceptance reaches `depth` positions (a measured profile continued by its model)."""
    acc = draft_profile(d, depth)
    return d if acc is d.acceptance else dataclasses.replace(d, acceptance=acc)


def analytic_schedule(t: Target, d: Draft, max_k: int, max_batch: int, context: float) -> Policy:
    """The planner's chain schedule for draft d: at each batch of a geometric grid over 1..max_batch (one
    context) the k with the most throughput (tokens per step over the step time, memory checked), made non-
    increasing in batch and merged into few bands (`plan.optimize.monotone_schedule`, `merge_runs`)."""
    grid = np.unique(np.round(np.geomspace(1, max(max_batch, 1), 40))).astype(int)
    configs = [Config(k) for k in range(max(max_k, 0) + 1)]
    ev = evaluate_draft(t, chain(d), max(max_k, 0), grid.astype(float), np.full(len(grid), float(context)), configs)
    score = np.where(ev.feasible, ev.values["throughput_tok_s"], -np.inf)
    pick = merge_runs(score, monotone_schedule(score, np.ones(len(grid))))
    ks = [configs[int(c)].k if c >= 0 else 0 for c in pick]
    ends = [*(int(g) - 1 for g in grid[1:]), int(max_batch)]
    segs: list[list[int]] = []
    for g, end, k in zip(grid.tolist(), ends, ks, strict=True):
        if segs and segs[-1][2] == k:
            segs[-1][1] = end
        else:
            segs.append([int(g), end, k])
    return Policy(0, tuple(Segment.chain(*band) for band in segs if band[2] > 0))
