"""A fleet search: every GPU type x layout x draft x k for a scenario's traffic mix, each configuration sized for
the arrival rate under the per-token latency SLO (plan/fleet_price.py), ranked by dollars per million output
tokens (or by GPUs, without prices); the cheapest first.

The search space is a product of axes (`AXES`, spelt as their flags): the placement axes (GPU type, layout and
how the replicas serve, `fleet_price.Placement`), then the draft, then k. How they serve (`pd`): aggregated, or in
prefill and decode pools of x:y replicas rate-matched analytically (plan/fleet_pools.py), the fewest replicas in
that ratio. A new axis is a field of `Placement` and an entry of `PLACEMENT_AXES`; nothing else changes.
Layouts the model cannot take (tp not dividing its heads, ep on a dense model) are left out before the search and
counted; plain decoding is priced once per placement (k = 0 belongs to no draft).

Where it runs: local processes by default (joblib's loky), or a cluster through joblib's Dask or Ray backend
(`specsim.simulate.sweep.parallel_backend`, the one implementation: a Dask scheduler's address or a local
cluster; neither is a dependency). The placements are cut into tasks of about `TASK_CONFIGS` configurations
(10,000 configurations are 20 tasks, not 10,000), a placement never split, so each configuration is priced by the
same numpy calls wherever it runs: the cluster's answer is the local one, bit for bit.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from specsim.acceptance.chain import AcceptanceProfile
from specsim.acceptance.priors.names import task_of_dataset
from specsim.advise.planner import chain, with_depth
from specsim.cost.layout import Layout, check_layout
from specsim.drafts.draft import Draft
from specsim.drafts.priors import prior_match
from specsim.errors import SpecsimError
from specsim.names import unknown
from specsim.plan.fleet_price import AGGREGATED, CASES, FleetQuestion, FleetRow, Placement, price_chunk
from specsim.scenario.workload import Workload

#: the axes of the search, outermost first (fields of specsim.fields); the placement's, then the draft's
PLACEMENT_AXES = ("hardware", "tp", "ep", "pd")
AXES = (*PLACEMENT_AXES, "draft", "k")
#: where the search runs: local processes (joblib's loky), a Dask cluster, a Ray cluster
BACKENDS = ("local", "dask", "ray")
AUTO_PD = "1:1,1:2,1:3,2:1,2:3,3:2"  # the prefill:decode ratios `--pd auto` searches
TASK_CONFIGS = 500  # configurations per task, about (a placement is never split)


@dataclass(frozen=True)
class Space:
    """The placements searched: the product of the placement axes (name -> values, in PLACEMENT_AXES' order);
    on each, plain decoding and every draft of the question at every k (`per_placement`)."""

    axes: tuple[tuple[str, tuple[Any, ...]], ...]

    def placements(self) -> list[Placement]:
        names = [name for name, _ in self.axes]
        return [Placement(**dict(zip(names, combo, strict=True)))
                for combo in itertools.product(*(values for _, values in self.axes))]


def per_placement(q: FleetQuestion) -> int:
    """Configurations of one placement: plain decoding and every draft at every k."""
    return 1 + len(q.drafts) * len(q.ks)


@dataclass(frozen=True)
class FleetAnswer:
    """The search's answer: every configuration, cheapest first (`rank_key`), and how the search ran."""

    rows: tuple[FleetRow, ...]
    configurations: int
    skipped: tuple[str, ...]  # placements left out before the search, with why
    seconds: float
    backend: str
    tasks: int
    objective: str  # usd | gpus

    @property
    def best(self) -> FleetRow | None:
        return self.rows[0] if self.rows and self.rows[0].ok else None

    @property
    def per_second(self) -> float:
        return self.configurations / self.seconds if self.seconds > 0 else math.inf


def valid_placements(q: FleetQuestion, space: Space) -> tuple[list[Placement], list[str]]:
    """The space's placements the model can take, and a line for each it cannot (SpecsimError where none can:
    the first reason)."""
    ok, skipped = [], []
    model = q.scenario.model
    for p in space.placements():
        try:
            model.check_tp(p.tp, "--tp")
            check_layout(Layout(p.tp, ep=p.ep), model.n_experts)
        except SpecsimError as exc:
            skipped.append(f"{p.label}: {exc}")
            continue
        ok.append(p)
    if not ok:
        raise SpecsimError(f"fleet: no layout searched fits {model.name}: {skipped[0]}")
    return ok, skipped


def mix_tokens(d: Draft, q_model: Any, workloads: Sequence[Workload], ks: Sequence[int],
               temperature: float | None) -> dict[str, tuple[float, ...]]:
    """Tokens per step of chain draft d at each k over the traffic mix, per acceptance case (CASES): the classes'
    tokens per step weighted by their shares. A class's acceptance is its own `alphas`, the sourced prior for its
    `task`, or else the draft's own (as advise.planner.acceptance_mix reads a mix); only a prior has a band."""
    depth = max(ks, default=1)
    items = list(workloads) or [Workload("all", 1.0)]
    total = sum(w.share for w in items)
    out = {c: [0.0] * len(ks) for c in CASES}
    for w in items:
        for case in CASES:
            if w.alphas is not None:
                dc = dataclasses.replace(d, acceptance=AcceptanceProfile.from_alphas(w.alphas))
            elif w.task is not None:
                match = prior_match(d.method, q_model, d.model, task_of_dataset(w.task), temperature)
                dc = dataclasses.replace(d, acceptance=match.profile(case))
            else:
                dc = d.band(case)
            dc = with_depth(dc, depth)
            for i, k in enumerate(ks):
                out[case][i] += w.share / total * dc.tokens_per_step(k)
    return {c: tuple(v) for c, v in out.items()}


def chains(drafts: Sequence[Draft], ks: Sequence[int]) -> tuple[Draft, ...]:
    """The drafts as the search runs them: chains (a scenario's fixed tree searched as the chain of each k),
    acceptance continued to the deepest k."""
    return tuple(with_depth(chain(d), max(ks, default=1)) for d in drafts if d.speculates)


def tasks_of(placements: Sequence[Placement], per_placement: int, task_configs: int = TASK_CONFIGS
             ) -> list[list[Placement]]:
    """The placements cut into tasks of about task_configs configurations (at least one placement each)."""
    size = max(1, task_configs // max(per_placement, 1))
    return [list(placements[i:i + size]) for i in range(0, len(placements), size)]


def rank_key(objective: str) -> Any:
    """Cheapest first: served configurations before the rest, then dollars (or GPUs), GPUs, the most capacity
    per replica, and the configuration's own names (a total order: every run ranks alike)."""
    def key(r: FleetRow) -> tuple[Any, ...]:
        cost = r.usd_per_mtok if objective == "usd" and r.usd_per_mtok is not None else r.gpus
        return (not r.ok, cost, r.gpus, -r.capacity_rps, r.hardware, r.tp, r.ep, r.layout != AGGREGATED, r.layout,
                r.draft != "none", r.draft, r.k)

    return key


def check_backend(name: str, scheduler: str | None) -> str:
    """The backend's name (BACKENDS; joblib's `loky` taken for local); SpecsimError naming the nearest one."""
    backend = "local" if name == "loky" else name
    if backend not in BACKENDS:
        raise unknown("backend", name, BACKENDS, where="--backend")
    if scheduler is not None and backend != "dask":
        raise SpecsimError(f"--scheduler is a Dask scheduler's address: give it with --backend dask, not {name}")
    if scheduler is not None and "://" not in scheduler:
        raise SpecsimError(f"--scheduler: give the scheduler's address as tcp://HOST:PORT, got {scheduler!r}")
    return backend


@contextlib.contextmanager
def cluster(backend: str, scheduler: str | None = None) -> Iterator[None]:
    """joblib's backend for the search: local processes, or Dask (the scheduler at `scheduler`, else at
    DASK_SCHEDULER_ADDRESS, else a local cluster) or Ray, through simulate.sweep's `parallel_backend` (its one
    wording when they are missing)."""
    if backend == "local":
        yield
        return
    from specsim.simulate.sweep import parallel_backend

    was = os.environ.get("DASK_SCHEDULER_ADDRESS")
    if scheduler is not None:
        os.environ["DASK_SCHEDULER_ADDRESS"] = scheduler
    try:
        with parallel_backend(backend):
            yield
    finally:
        os.environ.pop("DASK_SCHEDULER_ADDRESS", None)
        if was is not None:
            os.environ["DASK_SCHEDULER_ADDRESS"] = was


def search(q: FleetQuestion, space: Space, backend: str = "local", scheduler: str | None = None,
           n_jobs: int | None = -1, task_configs: int = TASK_CONFIGS) -> FleetAnswer:
    """Price every configuration of `space` for `q` on `backend` (module docstring) and rank them."""
    import joblib

    backend = check_backend(backend, scheduler)
    placements, skipped = valid_placements(q, space)
    tasks = tasks_of(placements, per_placement(q), task_configs)
    start = time.perf_counter()
    if backend == "local" and (n_jobs == 1 or len(tasks) == 1):
        parts = [price_chunk(q, task) for task in tasks]
    else:
        with cluster(backend, scheduler):
            parts = joblib.Parallel(n_jobs=n_jobs)(joblib.delayed(price_chunk)(q, task) for task in tasks)
    rows = [r for part in parts for r in part]
    seconds = time.perf_counter() - start
    objective = "usd" if q.prices is not None else "gpus"
    return FleetAnswer(tuple(sorted(rows, key=rank_key(objective))), len(rows), tuple(skipped), seconds, backend,
                       len(tasks), objective)


def question(s: Any, drafts: Sequence[Draft], ks: Sequence[int], rate_rps: float | None = None,
             prices: Mapping[str, float] | None = None, cost_model: str | None = None,
             kv_link_gb_s: float | None = None) -> FleetQuestion:
    """The question for scenario s: its arrival load (the rate `rate_rps`, else the serving section's target
    rate, else the load's), its per-token SLO and workload mix, the drafts as chains and their mix's tokens; the
    KV link between prefill and decode pools, GB/s per prefill GPU (default: advise.pools')."""
    from specsim.scenario.kv_cache import DEFAULT_KV_LINK_GB_PER_S

    link = DEFAULT_KV_LINK_GB_PER_S if kv_link_gb_s is None else float(kv_link_gb_s)
    if not (math.isfinite(link) and link > 0):
        raise SpecsimError(f"--kv-link must be > 0 GB/s, got {link:g}")
    a = s.arrival
    if a is None:
        raise SpecsimError(f"{s.path or s.name}: fleet sizes a fleet for an arrival rate: give the scenario "
                           "load.arrival_rate_rps (with prompt_tokens, output_tokens) or a traffic section")
    if s.slo_ms_per_token is None:
        raise SpecsimError(f"{s.path or s.name}: fleet needs a per-token latency SLO: give the scenario "
                           "slo_ms_per_token (or serving.slo.tpot_ms)")
    if s.calibration is not None:
        raise SpecsimError("fleet prices other GPUs and layouts: a fitted deployment's calibration holds only for "
                           "its own (drop --deployment)")
    target = s.serving.target_rate_rps if s.serving is not None else None
    rate = rate_rps if rate_rps is not None else target if target is not None else a.rate_rps
    runs = chains(drafts, ks)
    workloads = s.traffic.workloads if s.traffic is not None else ()
    temperature = s.raw.get("temperature")
    tps = {d.label: mix_tokens(d, s.model, workloads, ks, temperature) for d in runs}
    return FleetQuestion(s, float(rate), a.prompt_tokens, a.output_tokens, float(s.slo_ms_per_token), runs,
                         tuple(ks), tps, dict(prices) if prices is not None else None, cost_model, link)
