"""The optimiser: for each load bucket the draft configuration (chain k, or a tree of topk, depth and
verified nodes) that serves the scenario's objective best, with plain decoding always a candidate
and memory always checked; the policy over batch size; each draft's crossover batch; the
load-weighted gain; the same decisions under the acceptance band's low and high cases; Little's-law
loads solved as a fixed point.

Trees are chosen, not assumed: for EAGLE-2/3 and Medusa style drafts every depth is tried as a chain
and as dynamic trees of several (topk, nodes); a tree verifies nodes + 1 tokens per sequence (the
verification cost grows with it, through `plan.evaluate.step_arrays`) and each draft pass expands
topk tokens, so big trees win at low load and small trees or chains at high load. The tree's
acceptance comes from the draft's per-depth rates through the sibling hazard model
(`acceptance.trees.sibling_probs_hazard`), never from a tree factor on a tree-measured mean.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from specsim.acceptance.priors import extend_profile
from specsim.cost.forward import forward_time_s
from specsim.drafts.build import make_draft
from specsim.drafts.draft import Draft, max_tree_nodes
from specsim.errors import SpecsimError
from specsim.scenario.scenario import Bucket, Scenario
from specsim.step.economics import step_metrics
from specsim.step.evaluate import Target, config_metrics, fits, memory_per_gpu, step_arrays

FIELDS = ("tokens_per_step", "step_ms", "draft_ms", "verify_ms", "baseline_step_ms", "speedup", "throughput_tok_s",
          "ms_per_token")
#: Tree shapes searched for tree-capable drafts: candidates per level (SGLang's usual
#: --speculative-eagle-topk values) and verified nodes as multiples of the depth, at most 63 (Medusa's
#: and EAGLE-2's largest published trees verify 60-64 tokens).
TREE_TOPK = (2, 4, 8)
TREE_NODE_FACTORS = (1.5, 2.0, 4.0, 8.0)
MAX_TREE_NODES = 63


def target_of(s: Scenario) -> Target:
    engine = getattr(s, "engine", None)
    extra = {"engine": engine} if engine is not None else {}
    return Target(s.hardware, s.model, s.tp, s.weight_dtype, s.kv_dtype, s.memory_utilization, **extra)


# ---------------------------------------------------------------------------------------------
# configurations
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    """One speculative configuration of a draft: k draft passes (chain length or tree depth), and for
    a tree the candidates expanded per level and the draft nodes verified (root excluded)."""

    k: int
    topk: int = 1
    nodes: int | None = None

    @property
    def is_tree(self) -> bool:
        return self.topk > 1 and self.nodes is not None and self.nodes > self.k

    @property
    def verify_tokens(self) -> int:
        """Tokens per sequence in the verification pass (drafts + the root token)."""
        return 1 + (int(self.nodes or 0) if self.is_tree else self.k)

    def draft(self, d: Draft) -> Draft:
        """The draft drafting this configuration."""
        return d.with_tree(self.topk, self.nodes) if self.is_tree else d.with_tree(1, None)

    def as_dict(self) -> dict[str, Any]:
        return {"k": self.k, "topk": self.topk if self.is_tree else 1,
                "num_draft_tokens": int(self.nodes or 0) if self.is_tree else None, "verify_tokens": self.verify_tokens}


def candidate_configs(d: Draft, max_k: int) -> list[Config]:
    """Plain decoding, every chain length up to max_k and, for tree-capable drafts, the tree shapes of
    TREE_TOPK x TREE_NODE_FACTORS; a draft whose scenario fixed its tree keeps that tree. Ordered by
    verification tokens (then depth): the order in which a schedule may only shrink with load."""
    if d.method == "none":
        return [Config(0)]
    out = {Config(0)}
    for k in range(1, max_k + 1):
        if d.is_tree:  # the scenario fixed topk and the node budget
            out.add(Config(k, d.topk, d.nodes(k)) if d.nodes(k) > k else Config(k))
            continue
        out.add(Config(k))
        if d.can_tree and k >= 2:
            for topk in TREE_TOPK:
                for f in TREE_NODE_FACTORS:
                    n = math.ceil(f * k)
                    if k < n <= min(max_tree_nodes(topk, k), MAX_TREE_NODES):
                        out.add(Config(k, topk, n))
    return sorted(out, key=lambda c: (c.verify_tokens, c.k, c.topk))


# ---------------------------------------------------------------------------------------------
# evaluation
# ---------------------------------------------------------------------------------------------


@dataclass
class Evaluated:
    """Metrics of one draft over its configurations at a set of (batch, context) points: [config, point]."""

    draft: Draft
    configs: list[Config]
    values: dict[str, np.ndarray]
    feasible: np.ndarray

    def at(self, c: int, i: int) -> dict[str, float]:
        return {f: float(self.values[f][c, i]) for f in FIELDS}

    def index(self, config: Config) -> int:
        return self.configs.index(config)


def _with_depth(d: Draft, max_k: int) -> Draft:
    """A measured profile shorter than max_k is continued by the method's stated decay model (with a
    note), never by a flat rate; priors already carry 32 positions."""
    if d.method == "none" or d.acceptance.max_k is None or d.acceptance.max_k >= max_k:
        return d
    return dataclasses.replace(d, acceptance=extend_profile(d.acceptance, d.method, max(max_k, 8)))


def evaluate_draft(t: Target, d: Draft, max_k: int, batch: np.ndarray, context: np.ndarray,
                   configs: list[Config] | None = None) -> Evaluated:
    """Every configuration of d at the points (batch[i], context[i]), through `plan.evaluate.step_arrays`
    (one call per draft-pass width: a tree's verification tokens vary along the config axis)."""
    d = _with_depth(d, max_k)
    cfgs = configs if configs is not None else candidate_configs(d, max_k)
    n, p = len(cfgs), batch.size
    values = {f: np.empty((n, p)) for f in FIELDS}
    feasible = np.zeros((n, p), dtype=bool)
    groups: dict[int, list[int]] = {}
    for i, c in enumerate(cfgs):
        groups.setdefault(c.topk if c.is_tree else 1, []).append(i)
    for width, idx in groups.items():
        sub = [cfgs[i] for i in idx]
        dd = sub[0].draft(d) if width > 1 else d.with_tree(1, None)
        ks = np.array([c.k for c in sub], dtype=float)[:, None]
        # a tree verifies its nodes; a chain what its method feeds the target (k + 1, or lookahead's
        # 1 + (W + G) k branches: Fu et al. 2024 §3)
        q = np.array([c.verify_tokens if c.is_tree else float(dd.verify_tokens_per_seq(c.k)) for c in sub],
                     dtype=float)[:, None]
        tps = np.array([c.draft(d).tokens_per_step(c.k) for c in sub])[:, None]
        m = step_arrays(t, dd, ks, batch[None, :], context[None, :], tps, q)
        m = step_metrics(m.tokens_per_step, m.draft_time_s, m.verify_time_s, m.baseline_step_time_s, m.batch,
                         m.overhead_time_s)
        md = m.as_dict()
        for f in FIELDS:
            values[f][idx] = np.broadcast_to(md[f], (len(sub), p))
    for i, c in enumerate(cfgs):
        feasible[i] = np.broadcast_to(fits(t, c.draft(d), c.k, batch, context), (p,))
    return Evaluated(d, cfgs, values, feasible)


def score_configs(values: dict[str, np.ndarray], feasible: np.ndarray, weights: np.ndarray, objective: str,
                  slo: float | None) -> np.ndarray:
    """Objective per configuration (higher is better) over points weighted by `weights` (last axis)."""
    thr = (values["throughput_tok_s"] * weights).sum(-1)
    lat = (values["ms_per_token"] * weights).sum(-1)
    ok = feasible.all(-1)
    if objective == "throughput":
        score = thr
    elif objective == "latency":
        score = -lat
    else:  # throughput subject to the per-token latency SLO; if nothing meets it, the fastest
        assert slo is not None
        score = np.where(lat <= slo, thr, -lat)  # any config meeting the SLO beats every one that misses
    return np.where(ok, score, -np.inf)


TIE = 0.01  # scores within 1% count as a tie, broken towards the smaller configuration (fewer wasted tokens)


def pick_k(score: np.ndarray) -> int:
    """The first (smallest) configuration whose score is within TIE of the best; -1 when nothing fits."""
    best = score.max()
    if not np.isfinite(best):
        return -1
    margin = abs(best) * TIE
    return int(np.flatnonzero(score >= best - margin)[0])


# ---------------------------------------------------------------------------------------------
# plans
# ---------------------------------------------------------------------------------------------


@dataclass
class BucketPlan:
    bucket: Bucket
    draft: str
    method: str
    k: int
    rows: list[dict[str, Any]]  # one per context: the figures `evaluate` gives there
    baseline_rows: list[dict[str, Any]]
    fits: bool
    topk: int = 1
    num_draft_tokens: int | None = None  # tree: draft nodes verified (root excluded); None = chain


@dataclass
class Plan:
    scenario: Scenario
    method: str  # the draft method chosen for the whole load (engines run one method)
    draft_label: str
    buckets: list[BucketPlan]
    policy: list[dict[str, Any]]  # segments over batch: {batch_from, batch_to, k, topk, num_draft_tokens}
    crossover: dict[str, int | None]  # per draft: first batch (past where it pays) where it stops paying
    gain: float  # load-weighted throughput (or latency) gain over plain decoding
    per_draft_gain: dict[str, float]
    arrival: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    band: dict[str, Any] | None = None  # the decision under the acceptance band's low / high cases
    dynamic_profile: dict[str, Any] | None = None  # vLLM dynamic speculative decoding profile
    chain_policy: list[dict[str, Any]] | None = None  # the best chain-only schedule (engines without trees)
    serving: dict[str, Any] | None = None  # objective slo with traffic: the choice by simulation (advise/slo.py)
    pays: dict[str, list[tuple[int, int]]] = field(default_factory=dict)  # per draft: batch ranges where it pays


def bucket_points(buckets: tuple[Bucket, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    batch, ctx, share, owner = [], [], [], []
    for i, b in enumerate(buckets):
        for c, s in b.contexts:
            batch.append(b.batch)
            ctx.append(c)
            share.append(s)
            owner.append(i)
    return np.array(batch, float), np.array(ctx, float), np.array(share), np.array(owner)


def _rows(ev: Evaluated, c: int, idx: np.ndarray, batch: np.ndarray, ctx: np.ndarray, share: np.ndarray
          ) -> list[dict[str, Any]]:
    return [{"batch": int(batch[i]), "context": int(ctx[i]), "share": float(share[i]), **ev.at(c, int(i))}
            for i in idx]


def _grid_scores(t: Target, d: Draft, s: Scenario, grid: np.ndarray,
                 contexts: list[tuple[tuple[int, float], ...]]) -> tuple[np.ndarray, Evaluated, np.ndarray]:
    """Objective score [config, point] of draft d at each grid batch, each point with its own contexts."""
    bb, cc, ww, owner = [], [], [], []
    for j, (b, ctxs) in enumerate(zip(grid, contexts, strict=True)):
        for c, w in ctxs:
            bb.append(b)
            cc.append(c)
            ww.append(w)
            owner.append(j)
    owner_a = np.array(owner)
    ev = evaluate_draft(t, d, s.max_k, np.array(bb, float), np.array(cc, float))
    score = np.stack([score_configs({f: v[:, owner_a == j] for f, v in ev.values.items()},
                                    ev.feasible[:, owner_a == j], np.array(ww)[owner_a == j], s.objective,
                                    s.slo_ms_per_token) for j in range(len(grid))], axis=1)
    return score, ev, owner_a


def monotone_schedule(score: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """The configuration per grid point (batch ascending) that never grows with batch and loses the least.

    Engines schedule speculation by batch size and expect it to shrink with load (vLLM
    num_speculative_tokens_per_batch_size, TensorRT-LLM draft_len_schedule); configurations are
    ordered by verification tokens. Tile steps make the unconstrained best zig-zag by a percent or
    two; dynamic programming over (point, config) picks the non-increasing sequence with the largest
    weighted sum of relative scores (1 = the point's best), with a slight preference for smaller
    configurations. Points where nothing fits in memory get -1.
    """
    n_k, n = score.shape
    best = score.max(axis=0)
    ok = np.isfinite(best)
    with np.errstate(invalid="ignore"):
        rel = 1.0 - (best - score) / np.maximum(np.abs(best), 1e-300) - 1e-4 * np.arange(n_k)[:, None] / max(1, n_k / 8)
    rel = np.where(np.isfinite(score), rel, -1e9)
    idx = np.flatnonzero(ok)
    out = np.full(n, -1)
    if not idx.size:
        return out
    dp = np.zeros((len(idx), n_k))
    arg = np.zeros((len(idx), n_k), dtype=int)
    dp[0] = weight[idx[0]] * rel[:, idx[0]]
    for i in range(1, len(idx)):
        # best predecessor with config' >= config: suffix maximum of the previous row
        prev = dp[i - 1]
        suf_arg = np.array([k + int(np.argmax(prev[k:])) for k in range(n_k)])
        dp[i] = weight[idx[i]] * rel[:, idx[i]] + prev[suf_arg]
        arg[i] = suf_arg
    k = int(np.argmax(dp[-1]))
    for i in range(len(idx) - 1, -1, -1):
        out[idx[i]] = k
        k = arg[i, k]
    return out


def merge_runs(score: np.ndarray, schedule: np.ndarray, tol: float = TIE) -> np.ndarray:
    """Fewer distinct configurations: a run of grid points takes a neighbouring run's configuration when
    that loses at most ``tol`` (relative score) at every point of the run. Engines switch configurations
    by batch band (SGLang: one server per band), so a tree that wins by 0.3% at three batch sizes is
    not worth a band. The schedule stays non-increasing (a run only takes a neighbour's value)."""
    out = schedule.copy()
    changed = True
    while changed:
        changed = False
        runs: list[tuple[int, list[int]]] = []
        for j, c in enumerate(out):
            if runs and runs[-1][0] == c:
                runs[-1][1].append(j)
            else:
                runs.append((c, [j]))
        if len(runs) < 2:
            break
        for r, (c, pts) in enumerate(runs):
            if c < 0:
                continue
            for nb in (r + 1, r - 1):  # prefer the smaller (higher-batch) neighbour
                if not 0 <= nb < len(runs) or runs[nb][0] < 0:
                    continue
                alt = runs[nb][0]
                base = score[c, pts]
                loss = (base - score[alt, pts]) / np.maximum(np.abs(base), 1e-300)
                if np.all(np.isfinite(score[alt, pts])) and np.all(loss <= tol):
                    out[pts] = alt
                    changed = True
                    break
            if changed:
                break
    return out


def _segments(grid: np.ndarray, choice: np.ndarray, configs: list[Config]) -> list[dict[str, Any]]:
    """The schedule as contiguous batch bands: a grid point's configuration holds from its batch up to the
    next point's, so every batch size from 1 to the grid's top belongs to exactly one band (an engine
    config must cover every batch it can see)."""
    segments: list[dict[str, Any]] = []
    for b, c in zip(grid, choice, strict=True):
        cfg = configs[int(c)].as_dict() if c >= 0 else {"k": -1, "topk": 1, "num_draft_tokens": None,
                                                        "verify_tokens": 1}
        if segments and all(segments[-1][key] == cfg[key] for key in cfg):
            segments[-1]["batch_to"] = int(b)
        else:
            if segments:
                segments[-1]["batch_to"] = int(b) - 1
            segments.append({"batch_from": int(b), "batch_to": int(b), **cfg})
    return segments


def batch_ranges(grid: np.ndarray, mask: np.ndarray) -> list[tuple[int, int]]:
    """The grid points where `mask` holds as inclusive batch ranges, each reaching up to the batch before
    the next grid point (the last to the grid's top)."""
    out: list[tuple[int, int]] = []
    for j, b in enumerate(grid):
        if not mask[j]:
            continue
        end = int(grid[j + 1]) - 1 if j + 1 < len(grid) else int(b)
        if out and j > 0 and mask[j - 1]:
            out[-1] = (out[-1][0], end)
        else:
            out.append((int(b), end))
    return out


def _batch_grid(s: Scenario) -> np.ndarray:
    top = max([b.batch for b in s.buckets] + [64]) * 2
    return np.unique(np.concatenate([np.round(np.geomspace(1, top, 48)), [b.batch for b in s.buckets]]).astype(int))


def _pooled(s: Scenario) -> tuple[tuple[int, float], ...]:
    pooled: dict[int, float] = {}
    for b in s.buckets:
        for c, w in b.contexts:
            pooled[c] = pooled.get(c, 0.0) + w * b.weight
    return tuple(sorted(pooled.items()))


def pays_and_crossover(t: Target, d: Draft, s: Scenario) -> tuple[list[tuple[int, int]], int | None]:
    """Where d pays and where it first stops, over the batch grid with contexts pooled over the load:
    (batch ranges where d's best configuration beats plain decoding, the first batch after one where it
    paid at which plain decoding is best; None if it never stops within the grid)."""
    grid = _batch_grid(s)
    score, _, _ = _grid_scores(t, d, s, grid, [_pooled(s)] * len(grid))
    pick = np.array([pick_k(score[:, j]) for j in range(len(grid))])
    pays = batch_ranges(grid, pick > 0)
    after = grid[(pick == 0) & (np.arange(len(grid)) > (np.flatnonzero(pick > 0)[0] if pays else -1))]
    return pays, (int(after[0]) if after.size else None)


def require_fit(s: Scenario, t: Target, batch: np.ndarray, ctx: np.ndarray, labels: list[str]) -> None:
    """SpecsimError (naming the scenario and the load point) unless plain decoding fits in memory at every
    (batch, context): a configuration that does not fit is never planned, and never reported as a speedup."""
    mem = memory_per_gpu(t, make_draft("none", s.model), 0, batch, ctx)
    ok = np.broadcast_to(np.asarray(mem.fits, bool), np.shape(batch))
    if ok.all():
        return
    i = int(np.flatnonzero(~ok)[0])
    total = float(np.broadcast_to(mem.total, np.shape(batch))[i]) / 2**30
    cap = float(np.broadcast_to(mem.capacity, np.shape(batch))[i]) / 2**30
    raise SpecsimError(f"{s.path}: {s.model.name} on {s.tp}x {s.hardware.name} ({s.weight_dtype} weights) does not "
                       f"fit: {total:.1f} GiB needed of {cap:.1f} GiB per GPU at {labels[i]}, even without "
                       "speculation; lower the batch or context, raise tp, or use fp8 weights / KV cache")


@dataclass(frozen=True)
class _Decision:
    """The bucket decisions for a set of drafts: the best draft, its per-bucket configuration, totals."""

    best: int  # index into drafts
    evs: tuple[Evaluated, ...]
    choices: tuple[tuple[int, ...], ...]  # per draft, per bucket: the configuration index
    totals: tuple[float, ...]


def _objective_total(s: Scenario, ev: Evaluated, choice: list[int] | tuple[int, ...], owner: np.ndarray,
                     share: np.ndarray) -> float:
    total = 0.0
    for i, b in enumerate(s.buckets):
        idx = np.flatnonzero(owner == i)
        c = choice[i]
        if s.objective != "latency":
            total += b.weight * float((ev.values["throughput_tok_s"][c, idx] * share[idx]).sum())
        else:
            total -= b.weight * float((ev.values["ms_per_token"][c, idx] * share[idx]).sum())
    return total


def _decide(s: Scenario, t: Target, drafts: list[Draft], batch: np.ndarray, ctx: np.ndarray, share: np.ndarray,
            owner: np.ndarray) -> _Decision:
    evs, choices, totals = [], [], []
    for d in drafts:
        ev = evaluate_draft(t, d, s.max_k, batch, ctx)
        choice = []
        for i in range(len(s.buckets)):
            idx = np.flatnonzero(owner == i)
            sc = score_configs({f: v[:, idx] for f, v in ev.values.items()}, ev.feasible[:, idx], share[idx],
                               s.objective, s.slo_ms_per_token)
            choice.append(max(pick_k(sc), 0))
        evs.append(ev)
        choices.append(tuple(choice))
        totals.append(_objective_total(s, ev, choice, owner, share))
    best = int(np.argmax(totals))
    return _Decision(best, tuple(evs), tuple(choices), tuple(totals))


def _prior_notes(drafts: list[Draft] | tuple[Draft, ...], chosen: Draft | None) -> list[str]:
    """The prior's note wherever a prior decided the recommendation: the chosen (or best losing) draft in
    full, every other prior-based candidate in one line."""
    notes = []
    for d in drafts:
        if not d.acceptance.prior and not d.acceptance.note:
            continue  # measured to the depth planned: nothing to flag
        if chosen is not None and d.label == chosen.label:
            notes.append(f"acceptance of {d.label}: {d.acceptance.note}")
        elif d.acceptance.prior and d.prior is not None:
            notes.append(f"acceptance of {d.label} is a sourced prior ({d.prior.entry_id}), not a measurement; "
                         "measure yours before relying on its comparison")
        elif d.acceptance.note:
            notes.append(f"acceptance of {d.label}: {d.acceptance.note}")
    return notes


def plan(s: Scenario, detail: bool = True) -> Plan:
    """The analytic plan: the draft, k or tree and the policy over load that the objective prefers.
    `detail=False` skips what only the full record shows (crossovers, the acceptance band, vLLM's dynamic
    profile): the report's sensitivity re-plans. (`objective: slo` with serving traffic is then decided by
    simulation: specsim.advise.plan.)"""
    t = target_of(s)
    if s.arrival is not None:
        return _plan_arrival(s, t, detail)
    batch, ctx, share, owner = bucket_points(s.buckets)
    require_fit(s, t, batch, ctx, [f"bucket {s.buckets[int(o)].name} (batch {int(b)}, context {int(c)})"
                                   for b, c, o in zip(batch, ctx, owner, strict=True)])
    none = make_draft("none", s.model)
    base = evaluate_draft(t, none, 0, batch, ctx)
    drafts = [_with_depth(d, s.max_k) for d in s.drafts]  # measured profiles continued by a stated model
    dec = _decide(s, t, drafts, batch, ctx, share, owner)
    base_total = _objective_total(s, base, [0] * len(s.buckets), owner, share)

    def gain(total: float) -> float:
        return total / base_total if s.objective != "latency" else base_total / total

    best = drafts[dec.best]
    ev = dec.evs[dec.best]
    # The deployed policy: one non-increasing schedule over batch for the chosen method. Grid points at
    # a bucket's batch use that bucket's contexts and weigh by its share of the day.
    grid = _batch_grid(s)
    at = {b.batch: i for i, b in enumerate(s.buckets)}
    ctxs = [s.buckets[at[int(g)]].contexts if int(g) in at else _pooled(s) for g in grid]
    score, gev, _ = _grid_scores(t, best, s, grid, ctxs)
    weight = np.array([1.0 + 100.0 * sum(b.weight for b in s.buckets if b.batch == g) for g in grid])
    schedule = merge_runs(score, monotone_schedule(score, weight))
    policy = _segments(grid, schedule, gev.configs)
    # Engines that schedule only a chain length per batch (vLLM's per-batch k and its dynamic profile,
    # TensorRT-LLM's draft_len_schedule) get the best chain schedule beside the tree policy.
    chains = np.array([not c.is_tree for c in gev.configs])
    chain_idx = np.flatnonzero(chains)
    chain_sched = merge_runs(score[chains], monotone_schedule(score[chains], weight))
    chain_policy = _segments(grid, np.where(chain_sched >= 0, chain_idx[np.maximum(chain_sched, 0)], -1),
                             gev.configs)
    choice = []
    for b in s.buckets:
        c = int(schedule[int(np.flatnonzero(grid == b.batch)[0])])
        choice.append(ev.index(gev.configs[c]) if c >= 0 else 0)
    total = _objective_total(s, ev, choice, owner, share)
    buckets = []
    for i, b in enumerate(s.buckets):
        idx = np.flatnonzero(owner == i)
        cfg = ev.configs[choice[i]]
        on = cfg.k > 0
        buckets.append(BucketPlan(b, best.label if on else "none", best.method if on else "none", cfg.k,
                                  _rows(ev, choice[i], idx, batch, ctx, share), _rows(base, 0, idx, batch, ctx, share),
                                  bool(base.feasible[0, idx].all()), cfg.topk if cfg.is_tree else 1,
                                  int(cfg.nodes) if cfg.is_tree and cfg.nodes is not None else None))
    pays_cross = {d.label: pays_and_crossover(t, d, s) for d in drafts} if detail else {}
    crossover = {label: pc[1] for label, pc in pays_cross.items()}
    speculating = any(bp.k for bp in buckets)
    notes = []
    if s.objective == "slo":
        assert s.slo_ms_per_token is not None
        for bp in buckets:
            worst = max(r["ms_per_token"] for r in bp.rows)
            if worst > s.slo_ms_per_token:
                notes.append(f"bucket {bp.bucket.name} misses the SLO ({worst:.1f} > {s.slo_ms_per_token:g} ms/token) "
                             "even with its best configuration: lower its batch (more replicas)")
    if not all(bp.fits for bp in buckets):
        notes.append("some buckets do not fit in memory even without speculation: add GPUs or shorten contexts")
    notes += _prior_notes(drafts, best)
    band = (_band_decision(s, t, drafts, best, choice, batch, ctx, share, owner, base_total, gain(total), speculating)
            if detail else None)
    return Plan(s, best.method if speculating else "none", best.label, buckets, policy, crossover,
                float(gain(total)), {d.label: float(gain(tot)) for d, tot in zip(drafts, dec.totals, strict=True)},
                None, notes, band, _dynamic_profile(t, ev.draft, s, grid, chain_policy) if detail else None,
                chain_policy, pays={label: pc[0] for label, pc in pays_cross.items()})


def _band_decision(s: Scenario, t: Target, drafts: list[Draft], best: Draft, choice: list[int], batch: np.ndarray,
                   ctx: np.ndarray, share: np.ndarray, owner: np.ndarray, base_total: float, central_gain: float,
                   speculating: bool) -> dict[str, Any] | None:
    """The plan under the acceptance band: the chosen policy's gain with low / high acceptance, and what
    the optimiser would choose there. None when no prior is involved (all acceptance measured)."""
    if not any(d.prior is not None for d in drafts):
        return None

    def gain(total: float) -> float:
        return total / base_total if s.objective != "latency" else base_total / total

    out: dict[str, Any] = {"central": {"gain": central_gain, "method": best.method if speculating else "none",
                                       "draft": best.label}}
    robust = True
    for which in ("low", "high"):
        band_drafts = [d.band(which) for d in drafts]
        bi = drafts.index(best)
        ev = evaluate_draft(t, band_drafts[bi], s.max_k, batch, ctx)
        kept = _objective_total(s, ev, choice, owner, share)
        dec = _decide(s, t, band_drafts, batch, ctx, share, owner)
        on = any(dec.evs[dec.best].configs[c].k > 0 for c in dec.choices[dec.best])
        opt_gain = gain(dec.totals[dec.best])
        method = drafts[dec.best].method if on else "none"
        out[which] = {"gain": gain(kept), "best_gain": opt_gain, "method": method, "draft": drafts[dec.best].label,
                      "tau": {d.label: d.band(which).tokens_per_step(4) for d in drafts if d.prior is not None}}
        if method != out["central"]["method"] or (speculating and gain(kept) < 1.0):
            robust = False
    out["robust"] = robust
    out["tau_central"] = {d.label: d.tokens_per_step(4) for d in drafts if d.prior is not None}
    return out


def _dynamic_profile(t: Target, d: Draft, s: Scenario, grid: np.ndarray,
                     chain_policy: list[dict[str, Any]]) -> dict[str, Any] | None:
    """vLLM's dynamic speculative decoding profile (DynamicSpeculativeConfig), written from the model instead
    of its hour-long sweep: `batch_stats` = step latency in ms per batch size and number of drafts (the
    sweep's ITL; at 0 drafts the plain step), `acceptance_rate_per_pos` = unconditional P(draft i accepted)
    (vLLM's per-position convention: mean acceptance length = 1 + their sum), `max_num_speculative_tokens`.
    vLLM's manager picks k per batch by goodput = AL / ITL."""
    if d.method == "none" or d.is_tree:
        return None
    # up to 8 drafts (vLLM's sweep default), and never fewer than the schedule's own largest k
    kmax = max(1, min(s.max_k, 8), *(int(seg["k"]) for seg in chain_policy))
    sizes = sorted({1, 2, 4, 8, 16, 32, 64, 128, 256, *(int(b.batch) for b in s.buckets)} | {int(grid[-1])})
    ctx = float(sum(c * w for c, w in _pooled(s)))
    chain = d.with_tree(1, None)
    ks = np.arange(kmax + 1, dtype=float)[:, None]
    step_ms = step_arrays(t, chain, ks, np.array(sizes, dtype=float)[None, :], ctx, 1.0).step_ms  # one call
    stats = {int(b): {int(k): round(float(step_ms[k, j]), 4) for k in range(kmax + 1)} for j, b in enumerate(sizes)}
    rates = chain.rates(kmax)
    return {"max_num_speculative_tokens": kmax,
            "acceptance_rate_per_pos": [round(float(x), 4) for x in np.cumprod(rates)],
            "batch_stats": stats,
            "context_tokens": round(ctx),
            "source": f"specsim model ({t.engine.name} profile, {s.hardware.name}), acceptance "
                      f"{d.acceptance.source}"}


def solve_concurrency(t: Target, d: Draft, k: int, rate_rps: float, prompt: int, output: int,
                      max_batch: float = 4096.0) -> tuple[float, float] | None:
    """Little's law with speculation in the loop: N = rate x (prefill + output x ms_per_token(N)).

    A request stays in the batch for its prefill and its decode; speculation shortens the decode,
    which lowers N, which changes the step time. g(N) = rate*T(N) - N changes sign once (T grows
    slowly with N); its root is bracketed on a geometric grid of N (one vectorised call), then
    refined by bisection on the exact cost. Returns (N, ms_per_token at N) or None if the load
    cannot be served below max_batch.
    """
    prefill_s = float(forward_time_s(t.hardware, t.model, 1, prompt, prompt / 2, t.tp, t.weight_dtype, t.kv_dtype))
    ctx = prompt + output / 2
    grid = np.geomspace(1.0, max_batch, 128)
    tpot_s = config_metrics(t, d, k, grid, ctx).ms_per_token / 1e3
    g = rate_rps * (prefill_s + output * tpot_s) - grid
    if g[-1] > 0:
        return None
    j = int(np.argmax(g <= 0))
    if j == 0:
        return 1.0, float(tpot_s[0] * 1e3)
    # the bracket spans 6.8% of N: a second vectorised call on 64 points inside it, then linear
    # interpolation of g between the two points around its sign change (g is smooth there), 1e-4 of N
    fine = np.linspace(grid[j - 1], grid[j], 64)
    tpot_f = config_metrics(t, d, k, fine, ctx).ms_per_token / 1e3
    gf = rate_rps * (prefill_s + output * tpot_f) - fine
    i = max(int(np.argmax(gf <= 0)), 1)
    w = gf[i - 1] / (gf[i - 1] - gf[i]) if gf[i - 1] != gf[i] else 1.0
    w = float(np.clip(w, 0.0, 1.0))
    n = float(fine[i - 1] + w * (fine[i] - fine[i - 1]))
    return n, float((tpot_f[i - 1] + w * (tpot_f[i] - tpot_f[i - 1])) * 1e3)  # tpot is smooth in N there


def solve_concurrency_chains(t: Target, d: Draft, ks: Sequence[int], rate_rps: float, prompt: int, output: int,
                             max_batch: float = 4096.0) -> list[tuple[float, float] | None]:
    """`solve_concurrency` for several chain lengths of one draft at once: the same bracket-then-refine
    fixed point, each grid one vectorised `step_arrays` call over (k, N)."""
    prefill_s = float(forward_time_s(t.hardware, t.model, 1, prompt, prompt / 2, t.tp, t.weight_dtype, t.kv_dtype))
    ctx = prompt + output / 2
    kk = np.asarray(ks, dtype=float)[:, None]
    tps = np.array([d.tokens_per_step(int(k)) if k > 0 else 1.0 for k in ks], dtype=float)[:, None]
    grid = np.geomspace(1.0, max_batch, 128)[None, :]
    tpot = np.broadcast_to(step_arrays(t, d, kk, grid, ctx, tps).ms_per_token / 1e3, (len(ks), grid.shape[1]))
    g = rate_rps * (prefill_s + output * tpot) - grid
    j = np.argmax(g <= 0, axis=1)
    lo = grid[0, np.maximum(j - 1, 0)][:, None]
    hi = grid[0, j][:, None]
    fine = lo + (hi - lo) * np.linspace(0.0, 1.0, 64)[None, :]
    tpot_f = np.broadcast_to(step_arrays(t, d, kk, fine, ctx, tps).ms_per_token / 1e3, fine.shape)
    gf = rate_rps * (prefill_s + output * tpot_f) - fine
    out: list[tuple[float, float] | None] = []
    for r in range(len(ks)):
        if g[r, -1] > 0:
            out.append(None)
        elif j[r] == 0:
            out.append((1.0, float(tpot[r, 0] * 1e3)))
        else:
            i = max(int(np.argmax(gf[r] <= 0)), 1)
            w = gf[r, i - 1] / (gf[r, i - 1] - gf[r, i]) if gf[r, i - 1] != gf[r, i] else 1.0
            w = float(np.clip(w, 0.0, 1.0))
            out.append((float(fine[r, i - 1] + w * (fine[r, i] - fine[r, i - 1])),
                        float((tpot_f[r, i - 1] + w * (tpot_f[r, i] - tpot_f[r, i - 1])) * 1e3)))
    return out


def _arrival_candidates(t: Target, d: Draft, max_k: int, batch: float, ctx: float, keep_trees: int = 4
                        ) -> list[Config]:
    """Chains of every k and the few trees fastest per token at a representative batch (solving Little's
    law for every tree shape would cost a fixed point each)."""
    d = _with_depth(d, max_k)
    cfgs = candidate_configs(d, max_k)
    chains = [c for c in cfgs if not c.is_tree]
    trees = [c for c in cfgs if c.is_tree]
    if not trees:
        return chains
    ev = evaluate_draft(t, d, max_k, np.array([batch]), np.array([ctx]), trees)
    ms = np.where(ev.feasible[:, 0], ev.values["ms_per_token"][:, 0], np.inf)
    best = [trees[i] for i in np.argsort(ms)[:keep_trees] if np.isfinite(ms[i])]
    return chains + best


def _arrival_best(s: Scenario, t: Target, drafts: list[Draft], rep_batch: float,
                  only: dict[str, list[Config]] | None = None) -> list[tuple[float, Draft, Config, float]]:
    """(ms/token, draft, configuration, concurrency) for every candidate that serves the rate in memory;
    `only` restricts each draft to given configurations (the band cases re-solve the central finalists)."""
    a = s.arrival
    assert a is not None
    ctx = a.prompt_tokens + a.output_tokens / 2
    results = []
    for d in drafts:
        dd = _with_depth(d, s.max_k)
        cfgs = only.get(d.label, []) if only is not None else _arrival_candidates(t, dd, s.max_k, rep_batch, ctx)
        chains = [c for c in cfgs if not c.is_tree]
        sols = dict(zip((c.k for c in chains), solve_concurrency_chains(
            t, chains[0].draft(dd), [c.k for c in chains], a.rate_rps, a.prompt_tokens, a.output_tokens)
            if chains else [], strict=True))
        for cfg in cfgs:
            dc = cfg.draft(dd)
            sol = (sols[cfg.k] if not cfg.is_tree else
                   solve_concurrency(t, dc, cfg.k, a.rate_rps, a.prompt_tokens, a.output_tokens))
            if sol is None or not bool(fits(t, dc, cfg.k, max(sol[0], 1.0), ctx)):
                continue
            results.append((sol[1], d, cfg, sol[0]))
    return results


def _plan_arrival(s: Scenario, t: Target, detail: bool = True) -> Plan:
    a = s.arrival
    assert a is not None
    none = make_draft("none", s.model)
    ctx = a.prompt_tokens + a.output_tokens / 2
    base = solve_concurrency(t, none, 0, a.rate_rps, a.prompt_tokens, a.output_tokens)
    require_fit(s, t, np.array([1.0 if base is None else max(base[0], 1.0)]), np.array([ctx]),
                [f"{a.rate_rps:g} requests/s (concurrency {1.0 if base is None else base[0]:.0f}, context {ctx:.0f})"])
    if base is None:
        raise SpecsimError(f"{s.path}: {a.rate_rps:g} requests/s exceed what one replica serves even at batch 4096")
    drafts = [_with_depth(d, s.max_k) for d in s.drafts]
    rep = max(1.0, base[0] / 4.0)
    results = _arrival_best(s, t, drafts, rep)
    if not results:
        raise SpecsimError(f"{s.path}: no configuration serves {a.rate_rps:g} requests/s within memory on {s.tp}x "
                           f"{s.hardware.name}: lower the rate, shorten prompts/outputs, raise tp or use fp8")
    lat, d, cfg, n = min(results, key=lambda r: r[0])
    dd = _with_depth(d, s.max_k)
    dc = cfg.draft(dd)
    k = cfg.k
    # The bucket's figures are those at the integer batch nearest the fixed point (what
    # `specsim evaluate --batch` reproduces); the fixed point itself is in `arrival`.
    b = Bucket("arrival", 1.0, max(1, round(n)), ((round(ctx), 1.0),))
    m = config_metrics(t, dc, k, b.batch, round(ctx))
    mb = config_metrics(t, none, 0, max(1, round(base[0])), round(ctx))
    row = {"batch": b.batch, "context": round(ctx), "share": 1.0, **{f: float(m.as_dict()[f]) for f in FIELDS}}
    brow = {"batch": max(1, round(base[0])), "context": round(ctx), "share": 1.0,
            **{f: float(mb.as_dict()[f]) for f in FIELDS}}
    on = k > 0
    bp = BucketPlan(b, d.label if on else "none", d.method if on else "none", k, [row], [brow], True,
                    cfg.topk if cfg.is_tree else 1, int(cfg.nodes) if cfg.is_tree and cfg.nodes is not None else None)
    gain_rate = base[1] / lat
    arrival = {"rate_rps": a.rate_rps, "concurrency": n, "baseline_concurrency": base[0],
               "ms_per_token": lat, "baseline_ms_per_token": base[1],
               "gain_same_rate": gain_rate,  # like with like: the same arrival rate (concurrency follows)
               "speedup_same_batch": float(row["speedup"])}  # like with like: the same batch
    notes = [f"concurrency solved by Little's law: {base[0]:.1f} sequences without speculation, {n:.1f} with; "
             f"the headline compares the same arrival rate ({gain_rate:.2f}x per token); at the same batch "
             f"({b.batch}) speculation is {row['speedup']:.2f}x"]
    notes += _prior_notes(drafts, d)
    band: dict[str, Any] | None = None
    if detail and any(x.prior is not None for x in drafts):
        band = {"central": {"gain": gain_rate, "method": d.method if on else "none", "draft": d.label}}
        robust = True
        # each draft's three best configurations at the central acceptance are re-solved at the band's ends
        finalists: dict[str, list[Config]] = {}
        for _, dr, c_, _ in sorted(results, key=lambda r: r[0]):
            if len(finalists.setdefault(dr.label, [])) < 3:
                finalists[dr.label].append(c_)
        for which in ("low", "high"):
            bd = [x.band(which) for x in drafts]
            kept = solve_concurrency(t, cfg.draft(_with_depth(bd[drafts.index(d)], s.max_k)), k, a.rate_rps,
                                     a.prompt_tokens, a.output_tokens)
            res = _arrival_best(s, t, bd, rep, finalists)
            blat, bdraft, bcfg, _ = min(res, key=lambda r: r[0]) if res else (base[1], none, Config(0), base[0])
            method = bdraft.method if bcfg.k > 0 else "none"
            kept_gain = base[1] / kept[1] if kept is not None else 0.0
            band[which] = {"gain": kept_gain, "best_gain": base[1] / blat, "method": method, "draft": bdraft.label}
            if method != band["central"]["method"] or (on and kept_gain < 1.0):
                robust = False
        band["robust"] = robust
    policy = [{"batch_from": 1, "batch_to": b.batch, **cfg.as_dict()}]
    return Plan(s, d.method if on else "none", d.label, [bp], policy, {}, gain_rate, {}, arrival, notes, band, None,
                [{"batch_from": 1, "batch_to": b.batch, **Config(k).as_dict()}] if not cfg.is_tree else None)
