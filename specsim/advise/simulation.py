"""A scenario's serving simulation: the scenario's traffic and engine limits, the planner's step costs and
memory (advise/planner.py), the draft and speculation policy chosen, and the questions `specsim simulate`
answers: speculation on against off on identical traffic, replicas for a target rate, sweeps.

Where each input comes from (first that applies):
- traffic: the scenario's `traffic:` (with --rate / --requests / --duration / --seed applied); else, for a
  scenario whose load is an arrival rate, Poisson arrivals at that rate with its fixed prompt and output
  lengths (DERIVED_REQUESTS requests); a load given as buckets has no traffic to simulate (an error).
- limits: `serving:` (max_num_seqs 256, max_num_batched_tokens 8192 unless said); KV capacity from the
  file, else from the memory model for the draft and k run (`planner.kv_capacity_tokens`): speculation's
  draft weights and KV leave fewer tokens than plain decoding has.
- draft: the one named (--draft, `serving.draft`); else, when the policy follows the plan, the analytic plan's
  choice; else the scenario's first draft.
- policy: --policy, else `serving.speculation`, else the analytic plan's chain policy for that draft (its
  own analytic schedule, `planner.analytic_schedule`, when the plan chose another draft).
- acceptance: per request from the workload mix (`planner.acceptance_mix`); a draft tree the scenario fixed
  (topk, num_draft_tokens) is simulated as that tree: its accepted depth per class (`AcceptanceMix.as_tree`),
  1 + its nodes verified per sequence (budget, KV and the step's price, `PlannerCost` of the tree). A tree's
  shape is fixed when the engine starts, so its policy runs one depth (off above a batch allowed); a policy
  that changes depth with batch is refused, and the analytic plan's such policy runs at its deepest.
- SLO: `serving.slo`; price: the scenario's `gpu_hour_usd` x `serving.gpus_per_replica` (default tp).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from specsim.advise.planner import (
    MAX_DEPTH,
    PlannerCost,
    acceptance_mix,
    analytic_schedule,
    chain,
    kv_capacity_tokens,
    with_depth,
)
from specsim.advise.traffic import (
    closed_loop,
    length_bound,
    mean_context,
    mean_lengths,
    requests_at,
    scenario_traffic,
    stationary,
    with_size,
)
from specsim.drafts.draft import Draft
from specsim.errors import SpecsimError
from specsim.plan.decide import target_of
from specsim.plan.result import Plan
from specsim.records import Json
from specsim.scenario.kv_cache import drops_block
from specsim.scenario.scenario import Scenario
from specsim.scenario.sections import ServingSpec, parse_serving
from specsim.scenario.serving import SLO, EngineConfig, Pricing
from specsim.scenario.traffic import Requests, Traffic, generate_requests
from specsim.scenario.where import Where
from specsim.scenario.workload import AcceptanceMix, Workload
from specsim.simulate.capacity import ReplicaPlan, replicas_needed
from specsim.simulate.cost import StepTable, cached_table, rows_of
from specsim.simulate.engine import SimResult, simulate
from specsim.simulate.metrics import ServingMetrics, summarize
from specsim.simulate.sweep import SweepCase, sweep
from specsim.simulate.trees import tree_depth, tree_policy, tree_verify_tokens
from specsim.step.evaluate import Target
from specsim.step.policy import Policy

MAX_K = MAX_DEPTH  # the deepest draft a policy may use (acceptance positions carried)
Progress = Callable[[str], None]


def _quiet(_step: str) -> None:
    return None


@dataclass(frozen=True, eq=False)
class Setup:
    """Everything one scenario's simulation needs, resolved (module docstring)."""

    scenario: Scenario
    target: Target
    traffic: Traffic
    seed: int
    workloads: tuple[Workload, ...]
    limits: ServingSpec
    draft: Draft  # a chain; method "none" when the scenario's policy never speculates
    policy: Policy
    policy_source: str
    slo: SLO | None
    pricing: Pricing | None
    notes: tuple[str, ...] = ()
    _kv: dict[tuple[str, bool, int], int] = field(default_factory=dict, repr=False)

    @property
    def context_hint(self) -> float:
        """A representative KV length: mean prompt + half the mean output."""
        prompt, output = mean_lengths(self.traffic)
        return prompt + output / 2.0

    def cost(self, draft: Draft | None = None) -> PlannerCost:
        """The planner's step costs for a draft: its chain, or the tree it fixes."""
        d = draft or self.draft
        return PlannerCost(self.target, d if d.is_tree else chain(d))

    def depth(self, policies: Sequence[Policy] = ()) -> int:
        return max(1, self.scenario.max_k, self.policy.max_k, *(p.max_k for p in policies))

    def mix(self, draft: Draft | None = None, depth: int | None = None, policy: Policy | None = None
            ) -> tuple[AcceptanceMix, tuple[str, ...]]:
        """The workload mix as acceptance for a draft: per-position chain rates, or a tree's accepted depth at the
        depth `policy` runs it (default: this setup's policy)."""
        d = draft or self.draft
        temperature = self.scenario.raw.get("temperature")
        mix, sources = acceptance_mix(d, self.target, self.workloads, depth or self.depth(),
                                      temperature if isinstance(temperature, int | float) else None)
        p = self.policy if policy is None else policy
        if d.is_tree and p.enabled:
            k = tree_depth(d, p, self.limits.max_num_seqs)
            mix = mix.as_tree(d.topk, k, d.nodes(k))
        return mix, sources

    def kv_tokens(self, policy: Policy, draft: Draft | None = None) -> int:
        """KV capacity in tokens for this policy and draft (the file's, else the memory model's)."""
        if self.limits.kv_capacity_tokens is not None:
            return self.limits.kv_capacity_tokens
        d = draft or self.draft
        k = policy.max_k if policy.enabled else 0
        key = (d.label if k else "none", d.is_tree, k)
        if key not in self._kv:
            self._kv[key] = kv_capacity_tokens(self.target, d if k else None, k, self.context_hint,
                                               self.limits.max_num_seqs)
        return self._kv[key]

    def engine(self, policy: Policy | None = None, draft: Draft | None = None) -> EngineConfig:
        """The scheduler's limits for a policy: the scenario's, with the engine's own cap on running requests under
        speculation where the scenario sets no max_num_seqs (SGLang: 48, `EngineProfile.spec_max_running`)."""
        p = self.policy if policy is None else policy
        seqs = self.limits.max_num_seqs
        cap = self.scenario.engine.spec_max_running
        if p.enabled and cap and not self.limits.seqs_given:
            seqs = min(seqs, cap)
        d = draft or self.draft
        verify = tree_verify_tokens(d, p.max_k) if d.is_tree and p.enabled else None
        sc, cache = self.scenario, self.limits.kv_cache
        kv_bytes = sc.model.kv_bytes_per_token(sc.kv_dtype)
        return EngineConfig(seqs, self.limits.max_num_batched_tokens, self.kv_tokens(p, draft), p, verify,
                            cache.block_for(sc.engine.name, sc.model.is_mla),
                            drops_block(sc.engine.name, d.method if p.enabled else None), cache.host_tokens(kv_bytes),
                            cache.reload_s_per_token(sc.hardware.name, self.gpus_per_replica, kv_bytes))

    @property
    def gpus_per_replica(self) -> int:
        return self.limits.gpus_per_replica or self.scenario.gpus

    def table(self, policies: Sequence[Policy], requests: Sequence[Requests], draft: Draft | None = None
              ) -> StepTable:
        """The planner's step costs for a draft tabulated once (`StepTable`), holding the (k, batch) rows these
        policies run and these requests' contexts (or the traffic's longest possible, when bounded); shared
        with every other setup of the same target and draft in this process (`cost.cached_table`: a report's
        SLO search and its serving section tabulate once), extended when a later call needs more."""
        d = draft or self.draft
        engines = [self.engine(p, d) for p in policies]
        tables = [e.k_by_batch() for e in engines]
        longest = max([float(np.max(r.prompt_tokens + r.output_tokens)) for r in requests if r.n] or [1.0])
        bound = length_bound(self.traffic)
        need = max(longest, bound or 0.0) + max(int(np.max(e.verify_by_batch())) for e in engines)  # + k + 1
        return cached_table(self.cost(d), self.limits.max_num_seqs, self.limits.max_num_batched_tokens,
                            rows_of(tables), need)


def _draft_by_label(s: Scenario, label: str, option: str) -> Draft:
    d = next((d for d in s.drafts if d.label == label), None)
    if d is None:
        known = ", ".join(x.label for x in s.drafts)
        raise SpecsimError(f"{option}: {label!r} is not one of the scenario's drafts ({known})")
    return d


def make_setup(s: Scenario, *, rate: float | None = None, requests: int | None = None,
               duration_s: float | None = None, seed: int | None = None, policy: Policy | None = None,
               draft: str | None = None, analytic: Callable[[], Plan] | None = None,
               policy_from: str = "--policy") -> Setup:
    """Resolve a scenario's simulation (module docstring). `analytic()` gives the analytic plan, asked for only
    when the draft or the policy follows it (default: `plan.optimize.plan`); `policy_from` names where `policy`
    was given (in its errors and as its source)."""
    traffic, file_seed, workloads = scenario_traffic(s)
    traffic = with_size(traffic, rate, requests, duration_s)
    if traffic.sessions is not None and s.model.max_context_tokens:  # sessions end at the model's window
        traffic = replace(traffic, sessions=replace(
            traffic.sessions, max_context_tokens=s.model.max_context_tokens))
    if seed is not None and not 0 <= seed < 2**63:
        raise SpecsimError(f"--seed must be in [0, 2^63), got {seed}")
    limits = s.serving if s.serving is not None else parse_serving(None, Where(s.path, "serving"))
    t = target_of(s)
    d, policy, source, notes = _choose(s, t, limits, traffic, draft, policy, _PlanOnce(s, analytic), policy_from)
    if policy.max_k > MAX_K:
        raise SpecsimError(f"--policy: k = {policy.max_k} is beyond the {MAX_K} positions acceptance is known for")
    if d.is_tree and policy.enabled:
        policy, note = tree_policy(d, policy, source, limits.max_num_seqs)
        notes += [note] if note else []
    d = with_depth(d if d.is_tree else chain(d), max(1, s.max_k, policy.max_k))
    if not d.speculates and policy.enabled:
        raise SpecsimError(f"policy {policy.label} needs a draft: the scenario's draft is 'none'")
    if s.serving is not None and s.serving.kv_capacity_tokens is None:
        notes.append("KV capacity from the memory model (step/memory.py) for the draft and k simulated")
    if t.calibration is not None:
        notes.append(f"step calibrated to a fitted deployment's runs: {t.calibration.label}")
    pricing = (Pricing(float(s.gpu_hour_usd), limits.gpus_per_replica or s.gpus)
               if s.gpu_hour_usd is not None else None)
    return Setup(s, t, traffic, file_seed if seed is None else int(seed), workloads, limits, d, policy, source,
                 limits.slo, pricing, tuple(notes))


class _PlanOnce:
    """The analytic plan, made when first asked for (`analytic()`, else `plan_scenario`)."""

    def __init__(self, s: Scenario, analytic: Callable[[], Plan] | None) -> None:
        self.s, self.analytic = s, analytic
        self.plan: Plan | None = None

    def __call__(self) -> Plan:
        if self.plan is None:
            if self.analytic is not None:
                self.plan = self.analytic()
            else:
                from specsim.advise.plan import plan_scenario as make_plan

                self.plan = make_plan(self.s)
        return self.plan


def _choose(s: Scenario, t: Target, limits: ServingSpec, traffic: Traffic, draft: str | None,
            policy: Policy | None, get_plan: Callable[[], Plan], policy_from: str = "--policy"
            ) -> tuple[Draft, Policy, str, list[str]]:
    """The draft and the policy simulated, where the policy came from and notes (module docstring)."""
    notes: list[str] = []
    label = draft or limits.draft
    if policy is not None:
        source = policy_from
    elif not limits.plan_policy:
        policy, source = limits.policy, "serving.speculation"
    else:
        policy, source = None, "the analytic plan"
    if label is not None:
        d = _draft_by_label(s, label, "--draft" if draft else "serving.draft")
    elif policy is not None:
        d = next((x for x in s.drafts if x.speculates), s.drafts[0])
    else:
        p = get_plan()
        d = _draft_by_label(s, p.draft_label, "plan") if p.speculates else s.drafts[0]
    if policy is None:
        p = get_plan()
        if not p.speculates:
            policy = Policy.off()
            notes.append("the analytic plan speculates at no load, so the simulated policy is off; pass --policy "
                         "(e.g. k=3) to simulate speculation")
        elif p.serving is not None and p.serving.draft == d.label:
            policy, source = Policy.parse(p.serving.policy), "the plan's SLO optimisation (simulated)"
        elif p.draft_label == d.label:
            policy = (p.chain_policy or p.policy).as_run()
        else:
            policy = analytic_schedule(t, d, s.max_k, limits.max_num_seqs, mean_context(traffic))
            source = f"the analytic schedule of {d.label} (the plan chose {p.draft_label})"
    return d, policy, source, notes


# --- runs ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Run:
    """One simulation and its summary."""

    policy: Policy
    result: SimResult
    metrics: ServingMetrics
    kv_capacity_tokens: int


@dataclass(frozen=True, eq=False)
class Outcome:
    """What `specsim simulate` reports: the runs (off first when compared), replicas, the acceptance used."""

    setup: Setup
    requests: Requests
    runs: tuple[Run, ...]
    acceptance: AcceptanceMix
    acceptance_sources: tuple[str, ...]
    replicas: dict[str, ReplicaPlan] = field(default_factory=dict)
    target_rate_rps: float | None = None

    @property
    def off(self) -> Run | None:
        return next((r for r in self.runs if not r.policy.enabled), None)

    @property
    def on(self) -> Run | None:
        return next((r for r in self.runs if r.policy.enabled), None)


def run_scenario(setup: Setup, compare: bool = True, target_rate: float | None = None, max_replicas: int = 256,
                 bins: int | None = 200, progress: Progress = _quiet) -> Outcome:
    """Speculation off and on (or the policy alone), and replicas for a target rate when asked."""
    policies = [Policy.off(), setup.policy] if compare and setup.policy.enabled else [setup.policy]
    progress("generating requests")
    req = generate_requests(setup.traffic, setup.seed)
    if req.n == 0:
        raise SpecsimError("the traffic generated no requests (a duration shorter than the first arrival)")
    target_req = None
    if target_rate is not None:
        if setup.slo is None:
            raise SpecsimError("--target-rate needs an SLO to size replicas for: add serving.slo {ttft_ms, tpot_ms, "
                               "percentile} to the scenario")
        if not (target_rate > 0 and math.isfinite(target_rate)):
            raise SpecsimError(f"--target-rate must be > 0 requests/s, got {target_rate:g}")
        if not 1 <= max_replicas <= 100_000:
            raise SpecsimError(f"--max-replicas must be in [1, 100000], got {max_replicas}")
        target_req = requests_at(setup.traffic, target_rate, setup.seed)
    mix, sources = setup.mix()
    engines = [setup.engine(p) for p in policies]
    progress("tabulating step costs")
    table = setup.table(policies, [req] + ([target_req] if target_req is not None else []))
    runs = []
    for p, eng in zip(policies, engines, strict=True):
        progress(f"simulating {p.label}")
        res = simulate(req, eng, table, mix, setup.seed)
        runs.append(Run(p, res, summarize(res, setup.slo, setup.pricing, bins), eng.kv_capacity_tokens))
    replicas: dict[str, ReplicaPlan] = {}
    if target_req is not None:
        assert setup.slo is not None
        for p, eng in zip(policies, engines, strict=True):
            progress(f"replicas, {p.label}")
            replicas[p.label] = replicas_needed(target_req, eng, table, setup.slo, mix, setup.seed, setup.pricing,
                                                max_replicas)
    return Outcome(setup, req, tuple(runs), mix, sources, replicas, target_rate)


# --- sweeps --------------------------------------------------------------------------------------------


def sweep_scenario(setup: Setup, rates: Sequence[float] | None = None, policies: Sequence[Policy] | None = None,
                   drafts: Sequence[str] | None = None, n_jobs: int = 1,
                   progress: Callable[[int, int], None] | None = None,
                   concurrencies: Sequence[int] | None = None, num_prompts: int | None = None,
                   compare: bool = True) -> pd.DataFrame:
    """Simulations over load points (rates, or closed-loop concurrencies) x drafts x policies (joblib, in
    parallel), one row each; every case runs the same seeded requests for its load point, with the KV capacity
    of its own draft and k."""
    unique, costs = sweep_cases(setup, rates, policies, drafts, concurrencies, num_prompts, compare)
    total = len(unique)
    frame = sweep(unique, costs, setup.slo, setup.pricing, n_jobs=n_jobs,
                  progress=None if progress is None else (lambda done: progress(done, total)))
    return frame


def _load_points(setup: Setup, rates: Sequence[float] | None, concurrencies: Sequence[int] | None,
                 num_prompts: int | None) -> list[tuple[tuple[str, Json], Traffic]]:
    """(label, traffic) per load point: a rate runs the traffic made steady at it (`stationary`: a rate curve's
    burstiness at that mean, not the curve from its start hour), `num_prompts` requests when given (else the
    traffic's own size); a concurrency runs closed-loop clients; neither: the scenario's own traffic (a closed
    loop's own concurrency)."""
    if rates and concurrencies:
        raise SpecsimError("sweep rates or concurrencies, not both")
    for r in rates or ():
        if not (r > 0 and math.isfinite(r)):
            raise SpecsimError(f"--sweep-rates: rates must be > 0 requests/s, got {r:g}")
    if rates:
        return [(("rate_rps", float(r)), with_size(stationary(setup.traffic, float(r)), requests=num_prompts))
                for r in rates]
    if concurrencies:
        return [(("concurrency", int(c)), closed_loop(setup.traffic, int(c), num_prompts)) for c in concurrencies]
    t = setup.traffic
    return [(("concurrency", int(t.concurrency)) if t.concurrency is not None
             else ("rate_rps", float(t.mean_rate_rps)), t)]


def sweep_cases(setup: Setup, rates: Sequence[float] | None = None, policies: Sequence[Policy] | None = None,
                drafts: Sequence[str] | None = None, concurrencies: Sequence[int] | None = None,
                num_prompts: int | None = None, compare: bool = True
                ) -> tuple[list[SweepCase], dict[str, StepTable]]:
    """`sweep_scenario`'s cases (plain decoding once per load point) and their step tables, by draft label. Without
    `policies` the axis is plain decoding and the setup's policy (the policy alone without `compare`); a draft
    tree's acceptance is its accepted depth under each policy (`Setup.mix`)."""
    s = setup.scenario
    points = _load_points(setup, rates, concurrencies, num_prompts)
    policy_axis = list(policies) if policies else ([Policy.off(), setup.policy] if setup.policy.enabled and compare
                                                    else [setup.policy])
    if any(p.max_k > MAX_K for p in policy_axis):
        raise SpecsimError(f"--sweep-policies: k beyond {MAX_K}, the positions acceptance is known for")
    chosen = [_draft_by_label(s, x, "--sweep-drafts") for x in drafts] if drafts else [setup.draft]
    depth = setup.depth(policy_axis)
    draft_axis = [with_depth(d if d.is_tree else chain(d), depth) for d in chosen]
    if len(points) * len(policy_axis) * len(draft_axis) > 10_000:
        raise SpecsimError("sweep: more than 10,000 simulations; narrow the axes")
    mixes = {}  # a tree's acceptance is its accepted depth, which depends on the depth the policy runs
    for d, p in ((d, p) for d in draft_axis for p in policy_axis if d.is_tree and p.enabled):
        tree_depth(d, p, setup.limits.max_num_seqs, "--sweep-policies" if policies else "--policy")
        mixes[(d.label, p.label)] = setup.mix(d, depth, p)[0]
    cases: list[SweepCase] = []
    for load, traffic in points:
        for d in draft_axis:
            mix, _ = setup.mix(d, depth, Policy.off())  # a chain's rates (a tree's per policy: `mixes`)
            for p in policy_axis:
                eng = setup.engine(p, d)
                labels = (load, ("draft", d.label if p.enabled else "none"),
                          ("policy", p.label), ("kv_capacity_tokens", eng.kv_capacity_tokens), ("seed", setup.seed))
                cases.append(SweepCase(traffic, eng, mixes.get((d.label, p.label), mix), setup.seed, labels,
                                       d.label))
    # plain decoding is the same simulation whatever the draft: run it once per load point
    seen: set[tuple[Any, ...]] = set()
    unique = []
    for c in cases:
        key = (c.labels[0], c.engine.policy.label, c.engine.kv_capacity_tokens,
               c.cost if c.engine.policy.enabled else "")
        if key not in seen:
            seen.add(key)
            unique.append(c)
    made = {(c.traffic, c.seed) for c in unique}
    reqs = [generate_requests(t, sd) for t, sd in made]
    costs = {d.label: setup.table(policy_axis, reqs, d) for d in draft_axis}
    return unique, costs
